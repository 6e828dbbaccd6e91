package pyindex

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	reNameSeparators = regexp.MustCompile(`[-_.]+`)
	// reProjectName is a PEP 503 normalised name; anything else (a "/", a
	// "%") must not reach a URL path.
	reProjectName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,198}[a-z0-9])?$`)
	// rePEP440 is packaging's VERSION_PATTERN (PEP 440, appendix B).
	rePEP440 = regexp.MustCompile(`(?i)^v?` +
		`(?:(?P<epoch>[0-9]+)!)?` +
		`(?P<release>[0-9]+(?:\.[0-9]+)*)` +
		`(?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?` +
		`(?:(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?` +
		`(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?` +
		`(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)
	// reWheelBuild is a wheel's optional build tag: it starts with a digit.
	reWheelBuild = regexp.MustCompile(`^[0-9][A-Za-z0-9_.]*$`)
)

// NormalizeName returns the PEP 503 normalised form of a project name:
// lower-cased, every run of "-", "_" and "." replaced by one "-".
func NormalizeName(name string) string {
	return reNameSeparators.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "-")
}

// CanonicalVersion returns the PEP 440 normalised form of v, with trailing
// zeros of the release dropped ("1.0.0" -> "1", "1.0-RC1" -> "1rc1",
// "1.0.post" -> "1.post0", "2!01.2+Ubuntu-1" -> "2!1.2+ubuntu.1"), so two
// spellings of one version give one string. An error means v is not a PEP
// 440 version.
func CanonicalVersion(v string) (string, error) {
	m := rePEP440.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", fmt.Errorf("%q is not a PEP 440 version", v)
	}
	g := func(name string) string { return m[rePEP440.SubexpIndex(name)] }
	var b strings.Builder
	if e := trimZeros(g("epoch")); g("epoch") != "" && e != "0" {
		b.WriteString(e + "!")
	}
	parts := strings.Split(g("release"), ".")
	for i := range parts {
		parts[i] = trimZeros(parts[i])
	}
	for len(parts) > 1 && parts[len(parts)-1] == "0" {
		parts = parts[:len(parts)-1]
	}
	b.WriteString(strings.Join(parts, "."))
	if l := strings.ToLower(g("pre_l")); l != "" {
		switch l {
		case "alpha":
			l = "a"
		case "beta":
			l = "b"
		case "c", "pre", "preview":
			l = "rc"
		}
		b.WriteString(l + trimZeros(g("pre_n")))
	}
	if n := g("post_n1"); n != "" {
		b.WriteString(".post" + trimZeros(n))
	} else if g("post_l") != "" {
		b.WriteString(".post" + trimZeros(g("post_n2")))
	}
	if g("dev_l") != "" {
		b.WriteString(".dev" + trimZeros(g("dev_n")))
	}
	if l := g("local"); l != "" {
		segs := reNameSeparators.Split(strings.ToLower(l), -1)
		for i, s := range segs {
			if isDigits(s) {
				segs[i] = trimZeros(s) // numeric local parts compare as numbers
			}
		}
		b.WriteString("+" + strings.Join(segs, "."))
	}
	return b.String(), nil
}

// SameVersion reports whether a and b are one version under PEP 440
// normalisation ("1.0" and "1.0.0", "1.0rc1" and "1.0-RC-1"). Local labels
// count: "1.0" and "1.0+cpu" differ, because a pin taken from an installed
// environment names exactly what was installed. Strings that are not PEP 440
// versions are compared case-insensitively.
func SameVersion(a, b string) bool {
	ca, errA := CanonicalVersion(a)
	cb, errB := CanonicalVersion(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
	}
	return ca == cb
}

func trimZeros(n string) string {
	n = strings.TrimLeft(n, "0")
	if n == "" {
		return "0"
	}
	return n
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Wheel is a wheel's file name taken apart (PEP 427):
// {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl. The tags are
// kept as written, each possibly a "."-separated set ("py2.py3").
type Wheel struct {
	Name, Version, Build  string
	Python, ABI, Platform string
}

// ParseWheelFilename takes a wheel's file name apart.
func ParseWheelFilename(filename string) (Wheel, error) {
	stem, ok := strings.CutSuffix(filename, ".whl")
	if !ok {
		return Wheel{}, fmt.Errorf("%q is not a wheel file name (no .whl)", filename)
	}
	p := strings.Split(stem, "-")
	var w Wheel
	switch len(p) {
	case 5:
		w = Wheel{Name: p[0], Version: p[1], Python: p[2], ABI: p[3], Platform: p[4]}
	case 6:
		if !reWheelBuild.MatchString(p[2]) {
			return Wheel{}, fmt.Errorf("%q is not a wheel file name: build tag %q does not start with a digit", filename, p[2])
		}
		w = Wheel{Name: p[0], Version: p[1], Build: p[2], Python: p[3], ABI: p[4], Platform: p[5]}
	default:
		return Wheel{}, fmt.Errorf("%q is not a wheel file name: want name-version[-build]-python-abi-platform.whl", filename)
	}
	for _, s := range []string{w.Name, w.Version, w.Python, w.ABI, w.Platform} {
		if s == "" {
			return Wheel{}, fmt.Errorf("%q is not a wheel file name: an empty part", filename)
		}
	}
	return w, nil
}

// sdistExts are the source distribution suffixes an index may list (pip
// still reads the legacy ones).
var sdistExts = []string{".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz", ".tar"}

// FileVersion returns the version a distribution file of project carries in
// its name: for a wheel, the part after the name; for an sdist
// (name-version.tar.gz, .zip, ...), what follows the "-" that ends a name
// equal to project under PEP 503 normalisation (legacy sdists keep the
// hyphens of their name: "python-dateutil-2.8.2.tar.gz"). ok is false for a
// file of another kind or project.
func FileVersion(project, filename string) (version string, ok bool) {
	want := NormalizeName(project)
	if strings.HasSuffix(filename, ".whl") {
		w, err := ParseWheelFilename(filename)
		if err != nil || NormalizeName(w.Name) != want {
			return "", false
		}
		return w.Version, true
	}
	for _, ext := range sdistExts {
		stem, found := strings.CutSuffix(filename, ext)
		if !found {
			continue
		}
		for i := 0; i < len(stem); i++ {
			if stem[i] == '-' && NormalizeName(stem[:i]) == want && i+1 < len(stem) {
				return stem[i+1:], true
			}
		}
		return "", false
	}
	return "", false
}

// IsWheel reports whether f is a wheel (by its file name).
func (f File) IsWheel() bool { return strings.HasSuffix(f.Filename, ".whl") }

// Versions returns the distinct versions among a project's files, in the
// order the index lists them (the first spelling of each), for messages
// saying what the index has.
func Versions(project string, files []File) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		v, ok := FileVersion(project, f.Filename)
		if !ok {
			continue
		}
		key, err := CanonicalVersion(v)
		if err != nil {
			key = strings.ToLower(v)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, v)
		}
	}
	return out
}
