package capture

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/gatewayhq/gateway/internal/pyversion"
)

// pylock is the part of a PEP 751 lock file that FromFile reads.
type pylock struct {
	LockVersion    string `toml:"lock-version"`
	RequiresPython string `toml:"requires-python"`
	Packages       []struct {
		Name    string `toml:"name"`
		Version string `toml:"version"`
		Marker  string `toml:"marker"`
	} `toml:"packages"`
}

var rePackagesHeader = regexp.MustCompile(`^\s*\[\[\s*packages\s*\]\]\s*(#.*)?$`)

// parsePylock reads a PEP 751 lock file: lock-version 1.x, requires-python,
// and [[packages]] with name and version. Packages with an environment
// marker, or without a version (directory and VCS sources), are errors.
func parsePylock(fe *fileEnv, path string, data []byte) error {
	var lock pylock
	if _, err := toml.Decode(string(data), &lock); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	// The line of each [[packages]] table, for messages.
	var lines []int
	for i, l := range strings.Split(string(data), "\n") {
		if rePackagesHeader.MatchString(l) {
			lines = append(lines, i+1)
		}
	}
	where := func(i int) string {
		if len(lines) == len(lock.Packages) {
			return fmt.Sprintf("%s:%d", path, lines[i])
		}
		return fmt.Sprintf("%s: packages[%d]", path, i)
	}
	v := strings.TrimSpace(lock.LockVersion)
	if v == "" {
		return fmt.Errorf("%s: no lock-version; not a PEP 751 lock file", path)
	}
	if major, _, _ := strings.Cut(v, "."); major != "1" {
		return fmt.Errorf("%s: lock-version %q is not supported (want 1.x)", path, lock.LockVersion)
	}
	if len(lock.Packages) == 0 {
		return fmt.Errorf("%s: lists no [[packages]]", path)
	}
	for i, p := range lock.Packages {
		name, version := strings.TrimSpace(p.Name), strings.TrimSpace(p.Version)
		switch {
		case name == "":
			return fmt.Errorf("%s: a package has no name", where(i))
		case strings.TrimSpace(p.Marker) != "":
			return fmt.Errorf("%s: package %s has an environment marker (%s), which is not supported; lock one environment (pip lock, or uv pip compile without --universal)", where(i), name, p.Marker)
		case version == "":
			return fmt.Errorf("%s: package %s has no version (a directory or VCS source?); only packages with a version can be installed in an image: remove it, and capture the environment instead to ship local code", where(i), name)
		case !reExactVer.MatchString(version):
			return fmt.Errorf("%s: package %s has version %q, which is not an exact version", where(i), name, version)
		}
		fe.add(name, version, where(i))
	}
	if rp := strings.TrimSpace(lock.RequiresPython); rp != "" {
		if _, err := parseSpecifiers(rp); err != nil {
			return fmt.Errorf("%s: requires-python %q: %v", path, rp, err)
		}
		fe.requiresPython = rp
	}
	return nil
}

// specifier is one clause of a PEP 440 version specifier.
type specifier struct {
	op       string
	release  []int
	wildcard bool // "==3.11.*"
}

var reSpecifier = regexp.MustCompile(`^(~=|===|==|!=|<=|>=|<|>)\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?$`)

// parseSpecifiers reads a specifier such as ">=3.10,<3.13" on release
// versions (no pre-, post- or dev-releases).
func parseSpecifiers(s string) ([]specifier, error) {
	var out []specifier
	for _, clause := range strings.Split(s, ",") {
		m := reSpecifier.FindStringSubmatch(strings.TrimSpace(clause))
		if m == nil {
			return nil, fmt.Errorf("%q is not a version specifier like >=3.10", strings.TrimSpace(clause))
		}
		sp := specifier{op: m[1], wildcard: m[3] != ""}
		if sp.wildcard && sp.op != "==" && sp.op != "!=" {
			return nil, fmt.Errorf("%q: only == and != take a .* suffix", clause)
		}
		if sp.op == "~=" && !strings.Contains(m[2], ".") {
			return nil, fmt.Errorf("%q: ~= needs at least two version parts", clause)
		}
		for _, part := range strings.Split(m[2], ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", clause, err)
			}
			sp.release = append(sp.release, n)
		}
		out = append(out, sp)
	}
	return out, nil
}

func hasPrefix(v, prefix []int) bool {
	if len(v) < len(prefix) {
		v = append(v[:len(v):len(v)], make([]int, len(prefix)-len(v))...)
	}
	return pyversion.CompareRelease(v[:len(prefix)], prefix) == 0
}

// matches reports whether the release version v satisfies the clause.
func (sp specifier) matches(v []int) bool {
	c := pyversion.CompareRelease(v, sp.release)
	switch sp.op {
	case "==", "===":
		if sp.wildcard {
			return hasPrefix(v, sp.release)
		}
		return c == 0
	case "!=":
		if sp.wildcard {
			return !hasPrefix(v, sp.release)
		}
		return c != 0
	case "<=":
		return c <= 0
	case ">=":
		return c >= 0
	case "<":
		return c < 0
	case ">":
		return c > 0
	case "~=":
		return c >= 0 && hasPrefix(v, sp.release[:len(sp.release)-1])
	}
	return false
}

var reRelease = regexp.MustCompile(`^[0-9]+(?:\.[0-9]+)*`)

// checkRequiresPython returns an error when the Python version does not
// satisfy the requires-python specifier.
func checkRequiresPython(spec, python string) error {
	sps, err := parseSpecifiers(spec)
	if err != nil {
		return err
	}
	var v []int
	for _, part := range strings.Split(reRelease.FindString(python), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return fmt.Errorf("python version %q is not a release version", python)
		}
		v = append(v, n)
	}
	for _, sp := range sps {
		if !sp.matches(v) {
			return fmt.Errorf("requires-python %q excludes Python %s", spec, python)
		}
	}
	return nil
}
