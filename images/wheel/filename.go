// Package wheel installs Python wheels into container image layers the way
// pip would, as deterministic tars, and picks the wheel whose tags fit an
// image (PEP 427, PEP 425, PEP 600).
package wheel

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrBadWheel is wrapped by every refusal of a wheel; the message names the
// wheel file.
var ErrBadWheel = errors.New("bad wheel")

// Tag is one PEP 425 compatibility tag, lower case.
type Tag struct{ Python, ABI, Platform string }

func (t Tag) String() string { return t.Python + "-" + t.ABI + "-" + t.Platform }

// Filename is a parsed wheel file name (PEP 427):
// name-version(-build)?-pyver-abi-plat.whl, with compressed tag sets
// (py2.py3, manylinux_2_17_x86_64.manylinux2014_x86_64) expanded.
type Filename struct {
	Name, Version, Build string
	Tags                 []Tag
}

var (
	// Names in wheel file names have '-' escaped to '_' (PEP 427).
	fnNameRe = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?$`)
	// PEP 440's permissive pattern (packaging.version.VERSION_PATTERN),
	// without '-' separators, which a wheel file name cannot hold.
	versionRe = regexp.MustCompile(`(?i)^v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*` +
		`(?:[._]?(?:a|b|c|rc|alpha|beta|pre|preview)[._]?[0-9]*)?` +
		`(?:_[0-9]+|[._]?(?:post|rev|r)[._]?[0-9]*)?` +
		`(?:[._]?dev[._]?[0-9]*)?` +
		`(?:\+[a-z0-9]+(?:[._][a-z0-9]+)*)?$`)
	buildRe   = regexp.MustCompile(`^[0-9][A-Za-z0-9_.]*$`)
	tagPartRe = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// PEP 508 project names, as METADATA's Name holds them.
	projectNameRe = regexp.MustCompile(`^(?i)[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$`)
	canonRe       = regexp.MustCompile(`[-_.]+`)
)

// canonicalName is PEP 503's normalised project name.
func canonicalName(s string) string { return canonRe.ReplaceAllString(strings.ToLower(s), "-") }

// ParseFilename parses a wheel file name (no directory part).
func ParseFilename(fn string) (Filename, error) {
	bad := func(format string, a ...any) (Filename, error) {
		return Filename{}, fmt.Errorf("%w %q: %s", ErrBadWheel, fn, fmt.Sprintf(format, a...))
	}
	if strings.ContainsAny(fn, "/\\") {
		return bad("a wheel file name has no directory part")
	}
	stem, ok := strings.CutSuffix(fn, ".whl")
	if !ok {
		return bad("not a wheel file name (no .whl suffix)")
	}
	parts := strings.Split(stem, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return bad("a wheel file name is name-version(-build)?-python-abi-platform.whl")
	}
	f := Filename{Name: parts[0], Version: parts[1]}
	if !fnNameRe.MatchString(f.Name) {
		return bad("invalid project name %q", f.Name)
	}
	if !versionRe.MatchString(f.Version) {
		return bad("invalid version %q", f.Version)
	}
	if len(parts) == 6 {
		f.Build = parts[2]
		if !buildRe.MatchString(f.Build) {
			return bad("invalid build tag %q (it must start with a digit)", f.Build)
		}
	}
	n := len(parts)
	var sets [3][]string
	for i, s := range parts[n-3:] {
		for _, p := range strings.Split(s, ".") {
			if !tagPartRe.MatchString(p) {
				return bad("invalid tag %q", s)
			}
			sets[i] = append(sets[i], strings.ToLower(p))
		}
	}
	seen := map[Tag]bool{}
	for _, py := range sets[0] {
		for _, abi := range sets[1] {
			for _, plat := range sets[2] {
				t := Tag{py, abi, plat}
				if !seen[t] {
					seen[t] = true
					f.Tags = append(f.Tags, t)
				}
			}
		}
	}
	return f, nil
}
