// Package images builds, names and finds the container images that carry a
// client's Python environment, so that a cluster's scheduler and workers run
// the same software as the client that asked for them.
//
// An environment is described by a Spec. Specs are content-addressed: the
// normalised Spec is serialised to a canonical JSON document (see
// Spec.Canonical for the exact format), its SHA-256 is the environment's
// hash, and the image tag is "env-" followed by the first 16 hex digits of
// that hash. The same environment therefore always maps to the same tag, and
// whether an image already exists is one registry request (Lookup).
package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// CanonicalVersion is the version of the canonical JSON format, recorded in
// every document as "v". Changing the format means changing this number, and
// every hash with it.
const CanonicalVersion = 1

// Supported platforms.
const (
	PlatformAMD64 = "linux/amd64"
	PlatformARM64 = "linux/arm64"
)

// Spec describes a client's Python environment.
type Spec struct {
	// Python is the interpreter's version, "major.minor" ("3.12"). Normalize
	// also accepts "3.12.4" or "3.12.4rc1" and keeps "3.12".
	Python string `json:"python"`
	// Platform is "linux/amd64" or "linux/arm64" ("x86_64" and "aarch64" are
	// accepted as aliases).
	Platform string `json:"platform"`
	// GPU is whether the environment needs a GPU (CUDA) runtime.
	GPU bool `json:"gpu"`
	// Packages are the installed distributions (from importlib.metadata /
	// pip, or conda), each pinned to one exact version.
	Packages []Package `json:"packages"`
	// Channels are the conda channels, in priority order (the order is part
	// of the environment, so Normalize keeps it and only drops repeats).
	Channels []string `json:"channels,omitempty"`
	// Code are the user-code parts (uploaded zip files), each named by its
	// content digest.
	Code []CodePart `json:"code,omitempty"`
}

// Package is one installed distribution.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Build, Channel and Subdir are a conda package's identity, set only for
	// packages conda installed: the exact build string ("py312h1234567_0"),
	// the channel it came from (a name such as "conda-forge", or a URL
	// without credentials; "" means the spec's Channels in priority order)
	// and the repodata subdir ("linux-64", "linux-aarch64" or "noarch"; ""
	// means the platform's, then noarch). A package with a Build keeps its
	// conda name as written (lower-cased), since conda names such as
	// python_abi are looked up verbatim in repodata.json.
	Build   string `json:"build,omitempty"`
	Channel string `json:"channel,omitempty"`
	Subdir  string `json:"subdir,omitempty"`
}

// Conda reports whether the package was installed by conda (has a build).
func (p Package) Conda() bool { return p.Build != "" }

// Conda subdirs a Linux image can use.
const (
	SubdirLinux64      = "linux-64"
	SubdirLinuxAArch64 = "linux-aarch64"
	SubdirNoarch       = "noarch"
)

// CondaSubdir returns the conda subdir of a platform ("linux/amd64" ->
// "linux-64"), or "".
func CondaSubdir(platform string) string {
	switch platformAlias[strings.ToLower(strings.TrimSpace(platform))] {
	case PlatformAMD64:
		return SubdirLinux64
	case PlatformARM64:
		return SubdirLinuxAArch64
	}
	return ""
}

// CodePart is one part of the user's code: a zip file, identified by name and
// by the digest of its bytes ("sha256:<64 lower-case hex digits>").
type CodePart struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Errors returned (wrapped) by Normalize.
var (
	ErrInvalidSpec = errors.New("invalid environment spec")
	// ErrUnavailable is wrapped by errors of a service a build needs (the
	// package index, a registry) that cannot be reached: the same request
	// may succeed later (503).
	ErrUnavailable = errors.New("a service the environment needs cannot be reached")
)

var (
	reName        = regexp.MustCompile(`^[a-z0-9._-]+$`)
	reSeparators  = regexp.MustCompile(`[-_.]+`)
	reVersion     = regexp.MustCompile(`^[a-z0-9][a-z0-9.!+_-]*$`)
	rePython      = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.\d+)?(?:[a-z0-9+.]*)?$`)
	reDigest      = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	reCodePart    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	reCondaName   = regexp.MustCompile(`^[a-z0-9_][a-z0-9._-]{0,127}$`)
	reCondaBuild  = regexp.MustCompile(`^[A-Za-z0-9_.+]{1,128}$`)
	reChannelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$`)
	platformAlias = map[string]string{
		"linux/amd64":    PlatformAMD64,
		"linux/x86_64":   PlatformAMD64,
		"linux/arm64":    PlatformARM64,
		"linux/aarch64":  PlatformARM64,
		"linux/arm64/v8": PlatformARM64,
	}
)

// NormalizeName returns the PEP 503 normalised form of a distribution name:
// lower-cased, with every run of "-", "_" and "." replaced by one "-".
func NormalizeName(name string) string {
	return reSeparators.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "-")
}

// NormalizePython returns the "major.minor" form of a Python version
// ("3.12.4" -> "3.12"), or an error.
func NormalizePython(v string) (string, error) {
	m := rePython.FindStringSubmatch(strings.ToLower(strings.TrimSpace(v)))
	if m == nil {
		return "", fmt.Errorf("%w: python version %q is not major.minor (like 3.12)", ErrInvalidSpec, v)
	}
	return m[1] + "." + m[2], nil
}

// Normalize returns the spec's normal form, or an error saying what is wrong
// with it: package names are PEP 503 normalised and sorted, repeats are
// dropped (the same name with two different versions is an error naming
// both), versions are trimmed and must be exact pins (no empty versions, no
// specifiers such as ">=1.0", no wildcards), the Python version is cut to
// major.minor, the platform is one of the supported ones, channels keep their
// priority order without repeats, and code parts are sorted by name with
// valid sha256 digests.
func (s Spec) Normalize() (Spec, error) {
	var out Spec
	var err error
	if out.Python, err = NormalizePython(s.Python); err != nil {
		return Spec{}, err
	}
	p, ok := platformAlias[strings.ToLower(strings.TrimSpace(s.Platform))]
	if !ok {
		return Spec{}, fmt.Errorf("%w: platform %q is not one of %s, %s", ErrInvalidSpec, s.Platform, PlatformAMD64, PlatformARM64)
	}
	out.Platform = p
	out.GPU = s.GPU

	if err := s.checkCaps(); err != nil {
		return Spec{}, err
	}
	byName := make(map[string]Package, len(s.Packages))
	for _, pkg := range s.Packages {
		raw := strings.TrimSpace(pkg.Name)
		if raw == "" {
			return Spec{}, errEmptyName(pkg)
		}
		if err := checkPackageLens(pkg); err != nil {
			return Spec{}, err
		}
		if !reName.MatchString(strings.ToLower(raw)) || strings.Trim(raw, "-_.") == "" {
			return Spec{}, fmt.Errorf("%w: package name %q is not valid (letters, digits, '-', '_', '.')", ErrInvalidSpec, pkg.Name)
		}
		name := NormalizeName(raw)
		version := strings.TrimSpace(pkg.Version)
		if version == "" {
			return Spec{}, fmt.Errorf("%w: package %q has an empty version", ErrInvalidSpec, pkg.Name)
		}
		if !reVersion.MatchString(strings.ToLower(version)) {
			return Spec{}, fmt.Errorf("%w: package %q has version %q, which is not an exact version", ErrInvalidSpec, pkg.Name, pkg.Version)
		}
		np := Package{Name: name, Version: version}
		if pkg.Build != "" || pkg.Channel != "" || pkg.Subdir != "" {
			if np, err = normalizeConda(pkg, version, out.Platform); err != nil {
				return Spec{}, err
			}
		}
		if prev, dup := byName[name]; dup {
			if prev.Version != version {
				return Spec{}, fmt.Errorf("%w: package %q is listed twice with different versions: %q and %q", ErrInvalidSpec, name, prev.Version, version)
			}
			switch {
			case np.Conda() && prev.Conda() && np != prev:
				return Spec{}, fmt.Errorf("%w: conda package %q %s is listed twice with different builds: %s (%s) and %s (%s)",
					ErrInvalidSpec, np.Name, version, prev.Build, orAny(prev.Channel), np.Build, orAny(np.Channel))
			case np.Conda() && !prev.Conda():
				// The same distribution seen by pip and by conda: conda's
				// record says exactly which build it is.
				byName[name] = np
			}
			continue
		}
		byName[name] = np
	}
	out.Packages = make([]Package, 0, len(byName))
	for _, pkg := range byName {
		out.Packages = append(out.Packages, pkg)
	}
	// Sorted by normalised name, which is unique; a conda package's name is
	// kept as conda writes it.
	slices.SortFunc(out.Packages, func(a, b Package) int { return strings.Compare(NormalizeName(a.Name), NormalizeName(b.Name)) })

	seen := make(map[string]bool, len(s.Channels))
	for _, c := range s.Channels {
		c = strings.TrimRight(strings.TrimSpace(c), "/")
		if c == "" {
			return Spec{}, fmt.Errorf("%w: empty conda channel", ErrInvalidSpec)
		}
		if strings.ContainsAny(c, " \t\r\n") {
			return Spec{}, fmt.Errorf("%w: conda channel %q contains white space", ErrInvalidSpec, c)
		}
		if channelHasCredentials(c) {
			return Spec{}, fmt.Errorf("%w: a conda channel URL carries credentials (user:password@ or a /t/<token>/ path); give the channel by name and configure its URL and credentials in images.conda_channels", ErrInvalidSpec)
		}
		if !seen[c] {
			seen[c] = true
			out.Channels = append(out.Channels, c)
		}
	}

	codes := make(map[string]CodePart, len(s.Code))
	for _, cp := range s.Code {
		name := strings.TrimSpace(cp.Name)
		if !reCodePart.MatchString(name) {
			return Spec{}, fmt.Errorf("%w: code part name %q is not valid (letters, digits, '-', '_', '.', not starting with a separator)", ErrInvalidSpec, cp.Name)
		}
		digest := strings.ToLower(strings.TrimSpace(cp.Digest))
		if !reDigest.MatchString(digest) {
			return Spec{}, fmt.Errorf("%w: code part %q has digest %q, want sha256:<64 hex digits>", ErrInvalidSpec, cp.Name, cp.Digest)
		}
		if prev, dup := codes[name]; dup {
			if prev.Digest != digest {
				return Spec{}, fmt.Errorf("%w: code part %q is listed twice with different digests: %s and %s", ErrInvalidSpec, name, prev.Digest, digest)
			}
			continue
		}
		codes[name] = CodePart{Name: name, Digest: digest}
	}
	for _, cp := range codes {
		out.Code = append(out.Code, cp)
	}
	slices.SortFunc(out.Code, func(a, b CodePart) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// normalizeConda checks a conda package's identity and returns the package
// with its conda name (lower-cased, not PEP 503 normalised).
func normalizeConda(pkg Package, version, platform string) (Package, error) {
	name := strings.ToLower(strings.TrimSpace(pkg.Name))
	if !reCondaName.MatchString(name) {
		return Package{}, fmt.Errorf("%w: conda package name %q is not valid (lower-case letters, digits, '-', '_', '.', at most 128)", ErrInvalidSpec, pkg.Name)
	}
	build := strings.TrimSpace(pkg.Build)
	if build == "" {
		return Package{}, fmt.Errorf("%w: package %q has a conda channel or subdir but no build; give its exact build (name=version=build, as `conda list` shows it)", ErrInvalidSpec, name)
	}
	if !reCondaBuild.MatchString(build) {
		return Package{}, fmt.Errorf("%w: conda package %q has build %q, which is not a conda build string (letters, digits, '_', '.', '+', at most 128)", ErrInvalidSpec, name, pkg.Build)
	}
	channel, err := NormalizeChannel(pkg.Channel)
	if err != nil {
		return Package{}, fmt.Errorf("conda package %q: %w", name, err)
	}
	subdir := strings.TrimSpace(pkg.Subdir)
	switch subdir {
	case "", SubdirNoarch:
	case SubdirLinux64, SubdirLinuxAArch64:
		if want := CondaSubdir(platform); subdir != want {
			return Package{}, fmt.Errorf("%w: conda package %q is for %s, but the environment's platform %s needs %s or noarch", ErrInvalidSpec, name, subdir, platform, want)
		}
	default:
		return Package{}, fmt.Errorf("%w: conda package %q has subdir %q; want %s, %s or %s", ErrInvalidSpec, name, pkg.Subdir, SubdirLinux64, SubdirLinuxAArch64, SubdirNoarch)
	}
	return Package{Name: name, Version: version, Build: build, Channel: channel, Subdir: subdir}, nil
}

// NormalizeChannel checks a conda channel as a package records it: "" (none
// said), a name ("conda-forge", "pkgs/main") or an http(s) URL without
// credentials, query or fragment. The trailing "/" is dropped. Errors never
// repeat a URL that carries credentials.
func NormalizeChannel(ch string) (string, error) {
	c := strings.TrimRight(strings.TrimSpace(ch), "/")
	if channelHasCredentials(c) {
		return "", fmt.Errorf("%w: a conda channel URL carries credentials (user:password@ or a /t/<token>/ path); give the channel by name and configure its URL and credentials in images.conda_channels", ErrInvalidSpec)
	}
	if c == "" || reChannelName.MatchString(c) && !strings.Contains(c, "..") {
		return c, nil
	}
	u, err := url.Parse(c)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		strings.ContainsAny(c, " \t\r\n") || strings.Contains(u.Path, "..") || len(c) > 512 {
		return "", fmt.Errorf("%w: conda channel %q is neither a channel name (like conda-forge) nor an http(s) URL without query", ErrInvalidSpec, c)
	}
	return c, nil
}

// channelHasCredentials reports whether a channel string carries a user or
// password (scheme://user:pw@host) or an anaconda.org token (/t/<token>/).
func channelHasCredentials(c string) bool {
	if u, err := url.Parse(c); err == nil && u.User != nil {
		return true
	}
	if i := strings.Index(c, "://"); i >= 0 {
		host, _, _ := strings.Cut(c[i+3:], "/")
		if strings.Contains(host, "@") {
			return true
		}
	}
	return strings.HasPrefix(c, "t/") || strings.Contains(c+"/", "/t/")
}

func orAny(ch string) string {
	if ch == "" {
		return "any channel"
	}
	return ch
}

// canonical is the canonical document. Field order is the order written.
type canonical struct {
	V        int    `json:"v"`
	Python   string `json:"python"`
	Platform string `json:"platform"`
	GPU      bool   `json:"gpu"`
	// Packages are [name, version] for pip packages, and [name, version,
	// build, channel, subdir] for conda packages.
	Packages [][]string  `json:"packages"`
	Channels []string    `json:"channels"`
	Code     [][2]string `json:"code"`
}

// Canonical returns the canonical JSON document of the normalised spec, the
// input of Hash. The format (version 1) is one line of compact JSON, UTF-8,
// no trailing newline, no HTML escaping, with exactly these keys in this
// order:
//
//	{"v":1,"python":"3.12","platform":"linux/amd64","gpu":false,
//	 "packages":[["dask","2024.8.0"],["numpy","2.0.1"],
//	             ["python_abi","3.12","5_cp312","conda-forge","linux-64"]],
//	 "channels":["conda-forge"],
//	 "code":[["mylib","sha256:…"]]}
//
// "packages" is sorted by normalised name; a pip package is [name, version]
// and a conda package (one with a build) is [name, version, build, channel,
// subdir], so a spec without conda packages has the same document as before
// conda packages existed. "code" is sorted by name, "channels" is in
// priority order; empty lists are written as [] (never null).
func (s Spec) Canonical() ([]byte, error) {
	n, err := s.Normalize()
	if err != nil {
		return nil, err
	}
	c := canonical{
		V:        CanonicalVersion,
		Python:   n.Python,
		Platform: n.Platform,
		GPU:      n.GPU,
		Packages: make([][]string, 0, len(n.Packages)),
		Channels: make([]string, 0, len(n.Channels)),
		Code:     make([][2]string, 0, len(n.Code)),
	}
	for _, p := range n.Packages {
		if p.Conda() {
			c.Packages = append(c.Packages, []string{p.Name, p.Version, p.Build, p.Channel, p.Subdir})
			continue
		}
		c.Packages = append(c.Packages, []string{p.Name, p.Version})
	}
	c.Channels = append(c.Channels, n.Channels...)
	for _, cp := range n.Code {
		c.Code = append(c.Code, [2]string{cp.Name, cp.Digest})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ParseCanonical reads a canonical document (as recorded in an image label)
// back into a normalised Spec.
func ParseCanonical(b []byte) (Spec, error) {
	var c canonical
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Spec{}, fmt.Errorf("%w: canonical document: %v", ErrInvalidSpec, err)
	}
	if c.V != CanonicalVersion {
		return Spec{}, fmt.Errorf("%w: canonical document has version %d, want %d", ErrInvalidSpec, c.V, CanonicalVersion)
	}
	s := Spec{Python: c.Python, Platform: c.Platform, GPU: c.GPU, Channels: c.Channels}
	for _, p := range c.Packages {
		switch len(p) {
		case 2:
			s.Packages = append(s.Packages, Package{Name: p[0], Version: p[1]})
		case 5:
			s.Packages = append(s.Packages, Package{Name: p[0], Version: p[1], Build: p[2], Channel: p[3], Subdir: p[4]})
		default:
			return Spec{}, fmt.Errorf("%w: canonical document: a package has %d fields, want 2 (pip) or 5 (conda)", ErrInvalidSpec, len(p))
		}
	}
	for _, cp := range c.Code {
		s.Code = append(s.Code, CodePart{Name: cp[0], Digest: cp[1]})
	}
	return s.Normalize()
}

// Hash returns the lower-case hex SHA-256 of the spec's canonical document.
func (s Spec) Hash() (string, error) {
	b, err := s.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Tag returns the image tag of the spec: "env-" and the first 16 hex digits
// of its hash.
func (s Spec) Tag() (string, error) {
	h, err := s.Hash()
	if err != nil {
		return "", err
	}
	return TagForHash(h), nil
}

// TagForHash returns the image tag for a spec hash.
func TagForHash(hash string) string {
	if len(hash) > 16 {
		hash = hash[:16]
	}
	return "env-" + hash
}

// DigestOf returns the "sha256:<hex>" digest of a code part's bytes, the form
// CodePart.Digest takes.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DigestOfReader is DigestOf of what r reads, read in small pieces.
func DigestOfReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
