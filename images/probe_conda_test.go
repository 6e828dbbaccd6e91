package images

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeCondaPrefix runs the real probe with /usr/bin/python3 against a
// directory laid out as a conda prefix (sys.prefix is set to it before the
// probe runs) and checks that conda's packages come with their identity.
func TestProbeCondaPrefix(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the probe test needs %s: %v", python, err)
	}
	run := func(prefix string) Probe {
		t.Helper()
		out, err := exec.Command(python, "-c", "import sys; sys.prefix = sys.argv[1]; exec(sys.argv[2])", prefix, ProbeScript).Output()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		p, err := ParseProbe(out)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := run(t.TempDir())
	if plain.Conda != nil {
		t.Fatalf("a prefix without conda-meta is reported as conda: %+v", plain.Conda)
	}
	var distVersion, cloudpickle string
	for _, p := range plain.Packages {
		switch NormalizeName(p.Name) {
		case "distributed":
			distVersion = p.Version
		case "cloudpickle":
			cloudpickle = p.Version
		}
	}
	if distVersion == "" || cloudpickle == "" {
		t.Fatalf("%s has no distributed or cloudpickle (python3-distributed is part of the test set-up)", python)
	}
	subdir := CondaSubdir(plain.Platform)
	if subdir == "" {
		t.Fatalf("platform %s has no conda subdir", plain.Platform)
	}

	prefix := t.TempDir()
	meta := filepath.Join(prefix, "conda-meta")
	if err := os.Mkdir(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	records := []map[string]any{
		// conda's record of a distribution pip sees too, old-style channel
		// (with the subdir) and no subdir field.
		{"name": "distributed", "version": distVersion, "build": "pyhd8ed1ab_0", "channel": "https://conda.anaconda.org/conda-forge/noarch"},
		{"name": "python_abi", "version": "3.11", "build": "4_cp311", "channel": "https://conda.anaconda.org/conda-forge", "subdir": subdir},
		// A mirror with credentials: they never leave the client.
		{"name": "_libgcc_mutex", "version": "0.1", "build": "conda_forge", "channel": "https://alice:s3cret@mirror.example.org/t/tok-123/forge/" + subdir, "subdir": subdir},
		{"name": "openssl", "version": "3.3.1", "build": "h4bc722e_2", "channel": "pkgs/main", "subdir": subdir},
		// A local build channel and another platform's build: by name and
		// version only.
		{"name": "localpkg", "version": "1.0", "build": "0", "channel": "file:///home/me/conda-bld", "subdir": subdir},
		{"name": "macpkg", "version": "1.0", "build": "0", "channel": "conda-forge", "subdir": "osx-arm64"},
		// pip installed another cloudpickle over conda's: pip's stays.
		{"name": "cloudpickle", "version": "0.0.1", "build": "py_0", "channel": "conda-forge", "subdir": "noarch"},
		{"name": "python", "version": "3.11.9", "build": "h_cpython", "channel": "conda-forge", "subdir": subdir},
	}
	for _, r := range records {
		b, _ := json.Marshal(r)
		name := r["name"].(string) + "-" + r["version"].(string) + "-" + r["build"].(string) + ".json"
		if err := os.WriteFile(filepath.Join(meta, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(meta, "history"), []byte("not json"), 0o644)
	os.WriteFile(filepath.Join(meta, "broken.json"), []byte("{"), 0o644)

	p := run(prefix)
	if p.Conda == nil || p.Conda.Prefix != prefix {
		t.Fatalf("conda = %+v, want prefix %s", p.Conda, prefix)
	}
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), "s3cret") || strings.Contains(string(raw), "tok-123") {
		t.Errorf("the probe's output carries channel credentials: %s", raw)
	}
	spec, err := p.Spec().Normalize()
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	got := map[string]Package{}
	for _, pkg := range spec.Packages {
		got[NormalizeName(pkg.Name)] = pkg
	}
	want := map[string]Package{
		"distributed":   {Name: "distributed", Version: distVersion, Build: "pyhd8ed1ab_0", Channel: "conda-forge", Subdir: "noarch"},
		"python-abi":    {Name: "python_abi", Version: "3.11", Build: "4_cp311", Channel: "conda-forge", Subdir: subdir},
		"-libgcc-mutex": {Name: "_libgcc_mutex", Version: "0.1", Build: "conda_forge", Channel: "https://mirror.example.org/forge", Subdir: subdir},
		"openssl":       {Name: "openssl", Version: "3.3.1", Build: "h4bc722e_2", Channel: "pkgs/main", Subdir: subdir},
		"localpkg":      {Name: "localpkg", Version: "1.0"},
		"macpkg":        {Name: "macpkg", Version: "1.0"},
		"cloudpickle":   {Name: "cloudpickle", Version: cloudpickle},
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("package %s = %+v, want %+v", n, got[n], w)
		}
	}
	if _, ok := got["python"]; ok {
		t.Error("conda's python is listed as a package (the spec's Python says it)")
	}
	// In the order of conda-meta's sorted file names: conda-meta does not
	// record the channels' priority.
	wantChannels := []string{"https://mirror.example.org/forge", "conda-forge", "file:///home/me/conda-bld", "pkgs/main"}
	if strings.Join(spec.Channels, " ") != strings.Join(wantChannels, " ") {
		t.Errorf("channels = %q, want %q", spec.Channels, wantChannels)
	}
}
