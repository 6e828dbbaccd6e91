package images

import (
	"bytes"
	"compress/zlib"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// ProbeScript is a Python program (standard library only) that prints one
// JSON document describing the environment it runs in; ParseProbe reads it.
// It runs on clients (the capture behind `new-cluster --env auto`) and
// inside images (what an image really contains).
//
//go:embed scripts/probe.py
var ProbeScript string

//go:embed scripts/launcher.py
var launcherScript string

//go:embed scripts/bench_preload.py
var benchPreload string

// LauncherScript starts a Dask scheduler or worker after checking the
// versions in the ExpectEnv variable against what is installed; see
// LauncherCommand. A scheduler starts with BenchPreload. Both travel
// compressed together (a NUL apart: neither has one), which shares the
// compressor's dictionary between them: EC2's user data, which carries
// the launcher, has 16 KiB.
var LauncherScript = "import base64, zlib\nBENCH_PRELOAD, LAUNCHER = zlib.decompress(base64.b64decode(" +
	pyString(deflated(BenchPreload+"\x00"+stripComments(launcherScript))) + ")).decode().split(\"\\0\")\n" +
	"exec(compile(LAUNCHER, \"gateway-launcher\", \"exec\"))\n"

// BenchPreload is the text of the scheduler preload every backend starts
// schedulers with ("dask scheduler --preload <file>"): the door through
// which the gateway's scheduled benchmarks run their client in the
// cluster (see bench.Agent), and the stream of counts the gateway watches
// each running cluster's health with (scheduler/watch.go). Comment lines
// are left out of both.
var BenchPreload = stripComments(benchPreload)

// stripComments drops a Python script's whole-line comments.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// deflated is s zlib-compressed, in base64.
func deflated(s string) string {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestCompression) // a valid level
	_, _ = w.Write([]byte(s))                             // a bytes.Buffer takes all
	_ = w.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// pyString is s as a Python string literal: a JSON string is one.
func pyString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// ExpectEnv is the environment variable that carries the client's versions
// (ExpectedVersions, as JSON) to the launcher.
const ExpectEnv = "GATEWAY_ENV_EXPECT"

// MismatchMarker starts the line the launcher prints before its table when
// the member's software differs from the client's; the table follows it.
const MismatchMarker = "gateway: environment mismatch"

// MismatchExitCode is the launcher's exit status on a mismatch.
const MismatchExitCode = 97

// LauncherCommand returns the command that checks the environment and then
// runs "python -m dask <args>" (args start with "scheduler" or "worker").
func LauncherCommand(python string, args ...string) []string {
	return append([]string{python, "-c", LauncherScript}, args...)
}

// ExpectedVersions returns the versions the launcher checks, by key of
// CheckedPackages(spec.GPU): the major.minor Python version, and each
// package's version ("" when the client does not have it).
func ExpectedVersions(spec Spec) map[string]string {
	v := versions(spec)
	out := make(map[string]string)
	for _, key := range CheckedPackages(spec.GPU) {
		if key == PythonKey {
			out[key] = python(spec.Python)
			continue
		}
		out[key] = lookup(v, NormalizeName(key))
	}
	return out
}

// ExpectValue returns ExpectedVersions(spec) as the ExpectEnv value.
func ExpectValue(spec Spec) string {
	b, _ := json.Marshal(ExpectedVersions(spec)) // a map of strings always encodes
	return string(b)
}

// MismatchIn finds the launcher's mismatch report in a member's log or exit
// reason and returns it (the marker line and the table), or false.
func MismatchIn(text string) (string, bool) {
	i := strings.Index(text, MismatchMarker)
	if i < 0 {
		return "", false
	}
	lines := strings.Split(text[i:], "\n")
	out := []string{lines[0]}
	for _, l := range lines[1:] {
		// Table rows follow the marker; a member name prefix ("[worker-1] ")
		// from a log reader is kept off.
		if _, rest, ok := strings.Cut(l, "] "); ok && strings.HasPrefix(l, "[") {
			l = rest
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "gateway") || strings.Contains(l, "Traceback") {
			break
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), true
}

// Probe is what ProbeScript reports.
type Probe struct {
	Python         string         `json:"python"`
	Implementation string         `json:"implementation"`
	Executable     string         `json:"executable"`
	Platform       string         `json:"platform"`
	Packages       []ProbePackage `json:"packages"`
	Conda          *ProbeConda    `json:"conda"`
	GPUPackages    []string       `json:"gpu_packages"`
}

// ProbePackage is one installed distribution as ProbeScript sees it.
type ProbePackage struct {
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Editable bool     `json:"editable"`
	Location string   `json:"location"`  // the source directory of an editable install
	TopLevel []string `json:"top_level"` // import names, when the distribution records them
}

// ProbeConda is the conda environment ProbeScript found, if any.
type ProbeConda struct {
	Prefix   string `json:"prefix"`
	Packages []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Build   string `json:"build"`
		Channel string `json:"channel"` // a name ("conda-forge", "pkgs/main") or a URL without credentials
		Subdir  string `json:"subdir"`
	} `json:"packages"`
	Channels []string `json:"channels"`
}

// ParseProbe reads ProbeScript's output. Lines before the JSON document
// (a sitecustomize that prints) are skipped.
func ParseProbe(out []byte) (Probe, error) {
	var p Probe
	s := strings.TrimSpace(string(out))
	if i := strings.LastIndex(s, "\n{"); i >= 0 {
		s = s[i+1:]
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Probe{}, fmt.Errorf("environment probe printed no JSON document (%.200q): %w", s, err)
	}
	if p.Python == "" {
		return Probe{}, fmt.Errorf("environment probe reported no Python version")
	}
	return p, nil
}

// Spec returns the probed environment as a Spec: every distribution that is
// not an editable install (those are user code, not packages), pinned to its
// version, and conda's packages (with their channels) when the probe ran in
// a conda environment. A conda package carries its conda identity (build,
// channel, subdir) when these can be used for a Linux image of the probed
// platform; a distribution pip and conda both report at one version is one
// package with conda's identity, while one pip installed over conda's stays
// a pip package. GPU is set when GPU packages are installed. The result is
// not normalised.
func (p Probe) Spec() Spec {
	s := Spec{Python: p.Python, Platform: p.Platform, GPU: len(p.GPUPackages) > 0}
	seen := map[string]bool{}
	for _, pkg := range p.Packages {
		if pkg.Editable || pkg.Name == "" || pkg.Version == "" {
			continue
		}
		n := NormalizeName(pkg.Name)
		if seen[n] {
			continue
		}
		seen[n] = true
		s.Packages = append(s.Packages, Package{Name: pkg.Name, Version: pkg.Version})
	}
	if p.Conda != nil {
		s.Channels = append(s.Channels, p.Conda.Channels...)
		subdir := CondaSubdir(p.Platform)
		for _, pkg := range p.Conda.Packages {
			n := NormalizeName(pkg.Name)
			if n == "" || pkg.Version == "" || n == "python" {
				continue
			}
			cp := Package{Name: pkg.Name, Version: pkg.Version}
			ch, err := NormalizeChannel(pkg.Channel)
			if pkg.Build != "" && ch != "" && err == nil && (pkg.Subdir == subdir || pkg.Subdir == SubdirNoarch) && subdir != "" {
				id := Package{Name: pkg.Name, Version: pkg.Version, Build: pkg.Build, Channel: ch, Subdir: pkg.Subdir}
				if _, err := normalizeConda(id, pkg.Version, p.Platform); err == nil {
					cp = id
				}
			}
			if seen[n] {
				// pip reports it too: the same version is conda's (its record
				// says which build); another version is pip's, installed over.
				if cp.Conda() {
					for i := range s.Packages {
						if NormalizeName(s.Packages[i].Name) == n && s.Packages[i].Version == cp.Version {
							s.Packages[i] = cp
						}
					}
				}
				continue
			}
			seen[n] = true
			s.Packages = append(s.Packages, cp)
		}
	}
	return s
}
