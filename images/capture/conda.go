package capture

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gatewayhq/gateway/images"
	"gopkg.in/yaml.v3"
)

// reCondaName is a conda package name (conda allows a leading "_", as in
// _libgcc_mutex).
var reCondaName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// reCondaBuild is an exact conda build string.
var reCondaBuild = regexp.MustCompile(`^[A-Za-z0-9_.+]{1,128}$`)

const condaAdvice = "pin every package to one version (name=version or name=version=build), as `conda env export` writes them"

// parseConda reads a conda environment file: channels, and dependencies
// "name=version", "name==version", "name=version=build" or "name version
// build" (a "channel::" prefix adds the channel), python=3.11 for the
// Python version, and a nested "pip:" list of requirements lines.
func parseConda(fe *fileEnv, path string, data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if len(root.Content) == 0 {
		return fmt.Errorf("%s: empty file; want a conda environment (channels, dependencies)", path)
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: want a conda environment (a mapping with channels and dependencies)", path, doc.Line)
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", path, n.Line) }
	var deps *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		key, val := doc.Content[i], doc.Content[i+1]
		switch key.Value {
		case "channels":
			if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
				continue
			}
			if val.Kind != yaml.SequenceNode {
				return fmt.Errorf("%s: channels must be a list", at(val))
			}
			for _, c := range val.Content {
				if c.Kind != yaml.ScalarNode || strings.TrimSpace(c.Value) == "" {
					return fmt.Errorf("%s: a channel must be a name", at(c))
				}
				fe.channels = appendNew(fe.channels, strings.TrimSpace(c.Value))
			}
		case "dependencies":
			deps = val
		}
	}
	if deps == nil || deps.Kind == yaml.ScalarNode && deps.Tag == "!!null" {
		return fmt.Errorf("%s: lists no dependencies", path)
	}
	if deps.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s: dependencies must be a list", at(deps))
	}
	reqs := &reqParser{fe: fe}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	reqs.stack = []string{abs}
	for _, d := range deps.Content {
		switch d.Kind {
		case yaml.ScalarNode:
			if err := condaDep(fe, d.Value, at(d)); err != nil {
				return err
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(d.Content); i += 2 {
				key, val := d.Content[i], d.Content[i+1]
				if key.Value != "pip" {
					return fmt.Errorf("%s: unsupported dependency entry %q (only a pip: list)", at(key), key.Value)
				}
				if val.Kind != yaml.SequenceNode {
					return fmt.Errorf("%s: pip: must be a list of requirements", at(val))
				}
				for _, r := range val.Content {
					if r.Kind != yaml.ScalarNode {
						return fmt.Errorf("%s: a pip requirement must be a string", at(r))
					}
					if err := reqs.line(r.Value, filepath.Dir(path), at(r)); err != nil {
						return err
					}
				}
			}
		default:
			return fmt.Errorf("%s: a dependency must be a string or a pip: list", at(d))
		}
	}
	return nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// condaDep reads one conda dependency.
func condaDep(fe *fileEnv, dep, where string) error {
	spec := strings.TrimSpace(dep)
	var channel string
	if i := strings.LastIndex(spec, "::"); i >= 0 {
		ch := strings.TrimSpace(spec[:i])
		if ch == "" {
			return fmt.Errorf("%s: %q has an empty channel", where, dep)
		}
		fe.channels = appendNew(fe.channels, ch)
		channel = ch
		spec = strings.TrimSpace(spec[i+2:])
	}
	var name, version, build string
	if f := strings.Fields(spec); len(f) > 1 && !strings.ContainsAny(spec, "=<>!~") {
		// "name version [build]"
		name, version = f[0], f[1]
		if len(f) > 3 {
			return fmt.Errorf("%s: %q is not a package (name version build)", where, dep)
		}
		if len(f) == 3 {
			build = f[2]
		}
	} else {
		i := strings.IndexAny(spec, "=<>!~[ ")
		if i < 0 {
			i = len(spec)
		}
		name = spec[:i]
		rest := strings.TrimSpace(spec[i:])
		switch {
		case rest == "":
		case strings.HasPrefix(rest, "=="):
			version, build, _ = strings.Cut(strings.TrimSpace(rest[2:]), "=")
		case strings.HasPrefix(rest, "="):
			version, build, _ = strings.Cut(strings.TrimSpace(rest[1:]), "=")
		default:
			return fmt.Errorf("%s: %q is not pinned to one version; %s", where, dep, condaAdvice)
		}
		version = strings.TrimSpace(version)
	}
	if !reCondaName.MatchString(name) {
		return fmt.Errorf("%s: %q is not a package (name=version)", where, dep)
	}
	if version == "" {
		switch strings.ToLower(name) {
		case "python":
			fe.notes = append(fe.notes, fmt.Sprintf("%s: python has no version; the Python version comes from the interpreter", where))
			return nil
		case "pip":
			fe.notes = append(fe.notes, fmt.Sprintf("%s: pip has no version; left out", where))
			return nil
		}
		return fmt.Errorf("%s: %q has no version; %s", where, dep, condaAdvice)
	}
	if !reExactVer.MatchString(version) {
		return fmt.Errorf("%s: %q is not pinned to one version; %s", where, dep, condaAdvice)
	}
	if strings.EqualFold(name, "python") {
		v, err := images.NormalizePython(version)
		if err != nil {
			return fmt.Errorf("%s: python version %q is not a version like 3.12", where, version)
		}
		if fe.python != "" && fe.python != v {
			return fmt.Errorf("%s: python %s conflicts with python %s at %s", where, v, fe.python, fe.pyWhere)
		}
		fe.python, fe.pyWhere = v, where
		return nil
	}
	// The exact build lets the image take the very package conda installed
	// from the channel; a wildcard build pins only the version.
	build = strings.TrimSpace(build)
	if build == "" || strings.Contains(build, "*") {
		fe.add(name, version, where)
		return nil
	}
	if !reCondaBuild.MatchString(build) {
		return fmt.Errorf("%s: %q has build %q, which is not a conda build string (letters, digits, '_', '.', '+')", where, dep, build)
	}
	if channel != "" {
		if _, err := images.NormalizeChannel(channel); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	fe.pins = append(fe.pins, pin{name: name, version: version, where: where, build: build, channel: channel})
	return nil
}
