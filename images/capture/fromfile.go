package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gatewayhq/gateway/images"
)

// Supported describes the environment files FromFile reads.
const Supported = "a pinned requirements file (requirements*.txt, as `pip freeze` writes it), " +
	"a conda environment file (environment.yml or *.yaml, as `conda env export` writes it), " +
	"or a PEP 751 lock file (pylock.toml or pylock.<name>.toml)"

// pin is one pinned package of an environment file.
type pin struct {
	name    string // as written
	version string
	where   string // "file:line"
	// build and channel are a conda package's exact build and its
	// "channel::" (environment.yml's name=version=build).
	build, channel string
}

// fileEnv is what an environment file says.
type fileEnv struct {
	pins     []pin
	channels []string
	python   string // "" when the file does not say
	pyWhere  string
	// requiresPython is a PEP 440 specifier the interpreter must satisfy
	// (pylock.toml's requires-python).
	requiresPython string
	notes          []string
	// local says the file is on this machine: its includes (-r FILE) are
	// read from beside it. A file that came from elsewhere (FromData) has
	// none to read here, and must not name this machine's files.
	local bool
}

func (f *fileEnv) add(name, version, where string) {
	f.pins = append(f.pins, pin{name: name, version: version, where: where})
}

// FromFile reads an environment file (see Supported; the kind is told by the
// file's name) and returns its environment. Every package must be pinned to
// one version; errors name the file and, where possible, the line. The
// Python version comes from the file when it says (environment.yml's
// python=3.11), else from inspecting opts.Python; the platform from
// opts.Platform, else from the inspected interpreter. An environment file
// carries no editable installs: the only code part is Options.Dir's local
// modules.
func FromFile(ctx context.Context, path string, opts Options) (_ Env, err error) {
	defer func() {
		// Every error names the file.
		if err != nil && !strings.Contains(err.Error(), path) {
			err = fmt.Errorf("%s: %w", path, err)
		}
	}()
	set, err := checkOptions(opts)
	if err != nil {
		return Env{}, err
	}
	parse, err := fileKind(path)
	if err != nil {
		return Env{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Env{}, fmt.Errorf("environment file %s: %w", path, err)
	}
	fe, pkgs, err := readEnvFile(parse, path, data, true)
	if err != nil {
		return Env{}, err
	}

	env := Env{Notes: fe.notes}
	spec := images.Spec{Packages: pkgs, Channels: fe.channels, Platform: set.platform}
	if fe.python == "" || set.platform == "" {
		probe, interp, err := runProbe(ctx, opts.Python, opts.Env)
		switch {
		case err == nil:
			env.Interpreter = interp
			if fe.python == "" {
				spec.Python = probe.Python
				env.Notes = append(env.Notes, fmt.Sprintf("Python %s from %s (%s does not say)", probe.Python, interp, path))
			} else if a, b := pythonMinor(fe.python), pythonMinor(probe.Python); a != b {
				env.Notes = append(env.Notes, fmt.Sprintf("%s says Python %s; the Python at %s is %s; the image has %s", fe.pyWhere, a, interp, b, a))
			}
			if spec.Platform == "" {
				if err := setPlatform(&spec, &env, probe.Platform, interp); err != nil {
					return Env{}, err
				}
			}
			if fe.requiresPython != "" {
				if err := checkRequiresPython(fe.requiresPython, probe.Python); err != nil {
					return Env{}, fmt.Errorf("%s: %v, the version of the Python at %s; pass --python with a matching interpreter", path, err, interp)
				}
			}
		case fe.python == "":
			return Env{}, fmt.Errorf("%s does not say which Python version the environment has, and inspecting an interpreter for it failed: %w", path, err)
		case opts.Python != "" || !errors.Is(err, ErrNoInterpreter):
			return Env{}, err
		default:
			spec.Platform = images.PlatformAMD64
			env.Notes = append(env.Notes, fmt.Sprintf("no Python interpreter to tell the platform; the image is for %s", spec.Platform))
		}
	}
	if fe.python != "" {
		spec.Python = fe.python
	}

	setGPU(&spec, &env, set.gpu)
	if err := finish(&env, spec, nil, opts.Dir, set.maxBytes); err != nil {
		return Env{}, err
	}
	return env, nil
}

// FromData reads an environment file's contents, of the kind its name
// tells (as FromFile), without inspecting an interpreter: for a server
// given the file by a browser, which has no Python of the user's to ask.
// The Python version comes from the file when it says, else from python
// ("" then is an error saying to give it); the platform is platform, else
// linux/amd64. It has no code part. Errors name the file as name.
func FromData(name string, data []byte, python, platform string) (_ Env, err error) {
	defer func() {
		if err != nil && !strings.Contains(err.Error(), name) {
			err = fmt.Errorf("%s: %w", name, err)
		}
	}()
	set, err := checkOptions(Options{Platform: platform})
	if err != nil {
		return Env{}, err
	}
	if set.platform == "" {
		set.platform = images.PlatformAMD64
	}
	parse, err := fileKind(name)
	if err != nil {
		return Env{}, err
	}
	fe, pkgs, err := readEnvFile(parse, name, data, false)
	if err != nil {
		return Env{}, err
	}
	env := Env{Notes: fe.notes}
	spec := images.Spec{Packages: pkgs, Channels: fe.channels, Platform: set.platform, Python: fe.python}
	switch python = strings.TrimSpace(python); {
	case fe.python != "":
		if python != "" && pythonMinor(python) != pythonMinor(fe.python) {
			env.Notes = append(env.Notes, fmt.Sprintf("%s says Python %s: the image has it, not %s", fe.pyWhere, pythonMinor(fe.python), python))
		}
	case python == "":
		return Env{}, fmt.Errorf("%s does not say which Python version the environment has: give it (3.12, say)", name)
	default:
		if _, err := images.NormalizePython(python); err != nil {
			return Env{}, err
		}
		spec.Python = python
	}
	if fe.requiresPython != "" {
		if err := checkRequiresPython(fe.requiresPython, spec.Python); err != nil {
			return Env{}, fmt.Errorf("%s: %v", name, err)
		}
	}
	setGPU(&spec, &env, set.gpu)
	if err := finish(&env, spec, nil, "", set.maxBytes); err != nil {
		return Env{}, err
	}
	return env, nil
}

// readEnvFile parses an environment file's data: its packages, each
// pinned once, which must include Dask distributed. local: the file is on
// this machine (fileEnv.local).
func readEnvFile(parse func(*fileEnv, string, []byte) error, path string, data []byte, local bool) (*fileEnv, []images.Package, error) {
	fe := &fileEnv{local: local}
	if err := parse(fe, path, data); err != nil {
		return nil, nil, err
	}
	pkgs, err := uniquePins(fe.pins)
	if err != nil {
		return nil, nil, err
	}
	if !slices.ContainsFunc(pkgs, func(p images.Package) bool { return images.NormalizeName(p.Name) == "distributed" }) {
		return nil, nil, fmt.Errorf("%s does not list Dask distributed; the cluster needs it, pinned to the version your Dask client runs", path)
	}
	return fe, pkgs, nil
}

// setGPU sets whether the image has a GPU runtime, by the setting gpu
// (checkOptions'): "auto" asks for one when the environment has GPU
// packages, and notes which.
func setGPU(spec *images.Spec, env *Env, gpu string) {
	switch gpu {
	case "yes":
		spec.GPU = true
	case "auto":
		var found []string
		for _, p := range spec.Packages {
			if isGPUPackage(p.Name) {
				found = append(found, p.Name)
			}
		}
		if spec.GPU = len(found) > 0; spec.GPU {
			env.Notes = append(env.Notes, "GPU image: the environment has GPU packages "+strings.Join(found, ", "))
		}
	}
}

// fileKind returns the parser for an environment file, by its name.
func fileKind(path string) (func(*fileEnv, string, []byte) error, error) {
	base := strings.ToLower(filepath.Base(path))
	switch {
	case base == "pylock.toml" || strings.HasPrefix(base, "pylock.") && strings.HasSuffix(base, ".toml"):
		return parsePylock, nil
	case strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".yaml"):
		return parseConda, nil
	case strings.HasSuffix(base, ".txt"):
		return parseRequirementsFile, nil
	}
	return nil, fmt.Errorf("%s: unknown kind of environment file; use %s", path, Supported)
}

// uniquePins returns the pins as packages, one per name; the same name
// pinned to two versions is an error naming both places.
func uniquePins(pins []pin) ([]images.Package, error) {
	first := map[string]pin{}
	var out []images.Package
	for _, p := range pins {
		n := images.NormalizeName(p.name)
		if prev, ok := first[n]; ok {
			if prev.version != p.version {
				return nil, fmt.Errorf("%s: %s %s conflicts with %s %s at %s", p.where, p.name, p.version, prev.name, prev.version, prev.where)
			}
			if p.build != "" && prev.build != "" && p.build != prev.build {
				return nil, fmt.Errorf("%s: %s %s build %s conflicts with build %s at %s", p.where, p.name, p.version, p.build, prev.build, prev.where)
			}
			continue
		}
		first[n] = p
		out = append(out, images.Package{Name: p.name, Version: p.version, Build: p.build, Channel: p.channel})
	}
	return out, nil
}

func pythonMinor(v string) string {
	if n, err := images.NormalizePython(v); err == nil {
		return n
	}
	return v
}

// gpuPrefixes are the names of GPU packages, as images.ProbeScript has
// them, plus conda's CUDA toolkit.
var gpuPrefixes = []string{"cupy", "cudf", "rapids", "nvidia-", "cuda-python", "dask-cuda", "cudatoolkit"}

func isGPUPackage(name string) bool {
	n := strings.ToLower(name)
	return slices.ContainsFunc(gpuPrefixes, func(p string) bool { return strings.HasPrefix(n, p) })
}

var (
	// reComment is pip's: a comment starts at "#" at the start of a line or
	// after white space.
	reComment = regexp.MustCompile(`(^|\s+)#.*$`)
	// reRequirement is a name with optional extras, and the rest.
	reRequirement = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*(.*)$`)
	reExactVer    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.!+_-]*$`)
)

const pinAdvice = "pin every package to one version with ==, as `pip freeze` or `pip list --format=freeze` writes them"

// reqParser reads requirements files and lines.
type reqParser struct {
	fe    *fileEnv
	stack []string // the files being read, for include cycles
}

func parseRequirementsFile(fe *fileEnv, path string, data []byte) error {
	p := &reqParser{fe: fe}
	return p.file(path, data)
}

// file reads one requirements file (its lines, joined at a final "\").
func (p *reqParser) file(path string, data []byte) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p.stack = append(p.stack, abs)
	defer func() { p.stack = p.stack[:len(p.stack)-1] }()

	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		line := lines[i]
		for strings.HasSuffix(line, `\`) && !strings.HasPrefix(strings.TrimSpace(line), "#") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + lines[i]
		}
		line = strings.TrimSuffix(line, `\`)
		if err := p.line(line, filepath.Dir(path), fmt.Sprintf("%s:%d", path, start+1)); err != nil {
			return err
		}
	}
	return nil
}

// line reads one logical requirements line; dir is where includes are
// relative to, where is "file:line".
func (p *reqParser) line(line, dir, where string) error {
	line = strings.TrimSpace(reComment.ReplaceAllString(line, ""))
	if line == "" {
		return nil
	}
	if strings.HasPrefix(line, "-") {
		opt, value := splitOption(line)
		switch opt {
		case "-r", "--requirement":
			if value == "" {
				return fmt.Errorf("%s: %s needs a file name", where, opt)
			}
			if !p.fe.local {
				return fmt.Errorf("%s: %s %s includes another file, which the gateway cannot read: put its lines in place of this one", where, opt, value)
			}
			if strings.Contains(value, "://") {
				return fmt.Errorf("%s: including %s: only local files can be included", where, value)
			}
			inc := value
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(dir, inc)
			}
			if abs, err := filepath.Abs(inc); err == nil && slices.Contains(p.stack, abs) {
				return fmt.Errorf("%s: including %s: an include cycle (%s -> %s)", where, value, strings.Join(p.stack, " -> "), abs)
			}
			data, err := os.ReadFile(inc)
			if err != nil {
				return fmt.Errorf("%s: including %s: %w", where, value, err)
			}
			return p.file(inc, data)
		case "-e", "--editable":
			return fmt.Errorf("%s: %q is an editable install, which an environment file cannot carry; %s (or capture the environment itself, which ships editable installs as code)", where, line, pinAdvice)
		case "-c", "--constraint":
			p.fe.notes = append(p.fe.notes, fmt.Sprintf("%s: ignored constraints file %s (constraints install nothing)", where, value))
		default:
			p.fe.notes = append(p.fe.notes, fmt.Sprintf("%s: ignored option %s", where, opt))
		}
		return nil
	}
	// Per-requirement options (--hash=sha256:...) follow the requirement.
	if i := strings.Index(line, " --"); i >= 0 {
		line = strings.TrimSpace(line[:i])
	} else if i := strings.Index(line, "\t--"); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	if i := strings.Index(line, ";"); i >= 0 {
		return fmt.Errorf("%s: %q has an environment marker (%s), which is not supported; list the packages of one environment, as `pip freeze` writes them", where, line, strings.TrimSpace(line[i+1:]))
	}
	if strings.Contains(line, "://") || strings.Contains(line, "@") || strings.HasPrefix(line, ".") || strings.HasPrefix(line, "/") {
		return fmt.Errorf("%s: %q is a URL or a path, not a pinned version; %s", where, line, pinAdvice)
	}
	m := reRequirement.FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("%s: %q is not a requirement (name==version)", where, line)
	}
	name, spec := m[1], strings.TrimSpace(m[3])
	var version string
	switch {
	case spec == "":
		return fmt.Errorf("%s: %q has no version; %s", where, line, pinAdvice)
	case strings.HasPrefix(spec, "==="):
		version = strings.TrimSpace(spec[3:])
	case strings.HasPrefix(spec, "=="):
		version = strings.TrimSpace(spec[2:])
	}
	if version == "" || !reExactVer.MatchString(version) {
		return fmt.Errorf("%s: %q is not pinned to one version; %s", where, line, pinAdvice)
	}
	p.fe.add(name, version, where)
	return nil
}

// splitOption splits "-r file", "-rfile", "--requirement=file" and
// "--requirement file" into the option and its value.
func splitOption(line string) (opt, value string) {
	if strings.HasPrefix(line, "--") {
		end := strings.IndexAny(line, "= \t")
		if end < 0 {
			return line, ""
		}
		return line[:end], strings.TrimSpace(strings.TrimLeft(line[end:], "= \t"))
	}
	opt = line[:min(2, len(line))]
	return opt, strings.TrimSpace(line[len(opt):])
}
