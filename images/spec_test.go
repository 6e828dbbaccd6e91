package images

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var codeDigest = DigestOf([]byte("user code zip"))

func sampleSpec() Spec {
	return Spec{
		Python:   "3.12.4",
		Platform: "linux/amd64",
		Packages: []Package{
			{Name: "pandas", Version: "2.2.2"},
			{Name: "Dask", Version: "2024.8.0"},
			{Name: "distributed", Version: "2024.8.0"},
			{Name: "numpy", Version: "2.0.1"},
			{Name: "cloudpickle", Version: "3.0.0"},
			{Name: "msgpack", Version: "1.0.8"},
			{Name: "typing_extensions", Version: "4.12.2"},
		},
		Channels: []string{"conda-forge"},
		Code:     []CodePart{{Name: "mylib", Digest: codeDigest}},
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   Spec
		want Spec
	}{{
		name: "names are PEP 503 normalised and sorted, python cut to major.minor, platform alias",
		in: Spec{Python: " 3.11.9 ", Platform: "Linux/x86_64", GPU: true, Packages: []Package{
			{Name: "Zope.Interface", Version: "6.4"},
			{Name: "typing__extensions", Version: " 4.12.2 "},
			{Name: "A-_.b", Version: "1.0"},
		}},
		want: Spec{Python: "3.11", Platform: "linux/amd64", GPU: true, Packages: []Package{
			{Name: "a-b", Version: "1.0"},
			{Name: "typing-extensions", Version: "4.12.2"},
			{Name: "zope-interface", Version: "6.4"},
		}},
	}, {
		name: "repeats with the same version are dropped",
		in: Spec{Python: "3.12", Platform: "linux/arm64", Packages: []Package{
			{Name: "msgpack", Version: "1.0.8"}, {Name: "MsgPack", Version: "1.0.8"},
		}},
		want: Spec{Python: "3.12", Platform: "linux/arm64", Packages: []Package{{Name: "msgpack", Version: "1.0.8"}}},
	}, {
		name: "conda names, local versions, channels keep order without repeats, code sorted",
		in: Spec{Python: "3.10", Platform: "linux/aarch64",
			Packages: []Package{{Name: "_openmp_mutex", Version: "4.5"}, {Name: "torch", Version: "2.3.1+cu121"}, {Name: "pkg", Version: "1!2.0.post1"}},
			Channels: []string{"pytorch", "conda-forge/", "pytorch"},
			Code:     []CodePart{{Name: "b", Digest: codeDigest}, {Name: "a", Digest: strings.ToUpper(codeDigest)}, {Name: "b", Digest: codeDigest}},
		},
		want: Spec{Python: "3.10", Platform: "linux/arm64",
			Packages: []Package{{Name: "-openmp-mutex", Version: "4.5"}, {Name: "pkg", Version: "1!2.0.post1"}, {Name: "torch", Version: "2.3.1+cu121"}},
			Channels: []string{"pytorch", "conda-forge"},
			Code:     []CodePart{{Name: "a", Digest: codeDigest}, {Name: "b", Digest: codeDigest}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Packages == nil {
				tt.want.Packages = []Package{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Normalize() =\n%+v\nwant\n%+v", got, tt.want)
			}
			again, err := got.Normalize()
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("Normalize is not idempotent: %+v, %v", again, err)
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	ok := func(f func(*Spec)) Spec { s := sampleSpec(); f(&s); return s }
	tests := []struct {
		name string
		in   Spec
		want []string // substrings of the error
	}{
		{"bad python", ok(func(s *Spec) { s.Python = "3" }), []string{`python version "3"`}},
		{"empty python", ok(func(s *Spec) { s.Python = "" }), []string{"python version"}},
		{"bad platform", ok(func(s *Spec) { s.Platform = "windows/amd64" }), []string{`platform "windows/amd64"`}},
		{"empty version", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "toolz", Version: " "}) }), []string{`"toolz" has an empty version`}},
		{"specifier", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "toolz", Version: ">=0.12"}) }), []string{`"toolz"`, `">=0.12"`, "not an exact version"}},
		{"wildcard", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "toolz", Version: "0.12.*"}) }), []string{"not an exact version"}},
		{"empty name", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Version: "1.0"}) }), []string{"empty name"}},
		{"bad name", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "foo bar", Version: "1.0"}) }), []string{`"foo bar" is not valid`}},
		{"separators only", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "-_.", Version: "1.0"}) }), []string{"not valid"}},
		{"conflicting duplicate", ok(func(s *Spec) { s.Packages = append(s.Packages, Package{Name: "NumPy", Version: "1.26.4"}) }), []string{`"numpy"`, `"2.0.1"`, `"1.26.4"`, "different versions"}},
		{"bad digest", ok(func(s *Spec) { s.Code = []CodePart{{Name: "x", Digest: "md5:abc"}} }), []string{`code part "x"`, "md5:abc"}},
		{"bad code name", ok(func(s *Spec) { s.Code = []CodePart{{Name: "../x", Digest: codeDigest}} }), []string{`code part name "../x"`}},
		{"conflicting code", ok(func(s *Spec) { s.Code = append(s.Code, CodePart{Name: "mylib", Digest: DigestOf(nil)}) }), []string{`"mylib" is listed twice`}},
		{"empty channel", ok(func(s *Spec) { s.Channels = []string{""} }), []string{"empty conda channel"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.in.Normalize()
			if err == nil {
				t.Fatal("Normalize() succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("error %v does not wrap ErrInvalidSpec", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := tt.in.Hash(); err == nil {
				t.Error("Hash() succeeded on an invalid spec")
			}
		})
	}
}

// TestPinnedHash pins the canonical document and hash of one spec. If this
// test fails, every image tag changes: bump CanonicalVersion instead of
// editing the expected values.
func TestPinnedHash(t *testing.T) {
	s := sampleSpec()
	const wantDoc = `{"v":1,"python":"3.12","platform":"linux/amd64","gpu":false,` +
		`"packages":[["cloudpickle","3.0.0"],["dask","2024.8.0"],["distributed","2024.8.0"],["msgpack","1.0.8"],["numpy","2.0.1"],["pandas","2.2.2"],["typing-extensions","4.12.2"]],` +
		`"channels":["conda-forge"],"code":[["mylib","sha256:be7deff255625a7346d33696b959aeff34cfd870cfd2e855f1fb1819a7fac978"]]}`
	doc, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != wantDoc {
		t.Errorf("Canonical() =\n%s\nwant\n%s", doc, wantDoc)
	}
	const wantHash = "9cafe9698c26dd786a174c5c94893ab89d55380c7d91c196ac489b56ae79108c"
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if h != wantHash {
		t.Errorf("Hash() = %s, want %s", h, wantHash)
	}
	tag, err := s.Tag()
	if err != nil {
		t.Fatal(err)
	}
	if want := "env-" + wantHash[:16]; tag != want {
		t.Errorf("Tag() = %s, want %s", tag, want)
	}
}

func TestHashIgnoresOrderAndSpelling(t *testing.T) {
	a := sampleSpec()
	b := sampleSpec()
	b.Python = "3.12"
	b.Packages = nil
	for i := len(a.Packages) - 1; i >= 0; i-- {
		p := a.Packages[i]
		b.Packages = append(b.Packages, Package{Name: strings.ToUpper(p.Name), Version: " " + p.Version})
	}
	b.Packages = append(b.Packages, Package{Name: "typing.extensions", Version: "4.12.2"})
	ha, err := a.Hash()
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if ha != hb {
		t.Errorf("equivalent specs hash differently: %s, %s", ha, hb)
	}
	c := sampleSpec()
	c.GPU = true
	if hc, _ := c.Hash(); hc == ha {
		t.Error("GPU does not change the hash")
	}
	d := sampleSpec()
	d.Channels = []string{"defaults", "conda-forge"}
	e := sampleSpec()
	e.Channels = []string{"conda-forge", "defaults"}
	if hd, _ := d.Hash(); hd == func() string { h, _ := e.Hash(); return h }() {
		t.Error("channel priority order does not change the hash")
	}
}

func TestParseCanonicalRoundTrip(t *testing.T) {
	s := sampleSpec()
	doc, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCanonical(doc)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Normalize()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCanonical(Canonical()) = %+v, want %+v", got, want)
	}
	for _, bad := range []string{`{"v":2,"python":"3.12","platform":"linux/amd64"}`, `{"v":1,"extra":1}`, `nope`} {
		if _, err := ParseCanonical([]byte(bad)); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("ParseCanonical(%s) = %v, want ErrInvalidSpec", bad, err)
		}
	}
}

// TestPinnedHashPipOnly pins a pip-only spec's document and hash, computed
// before conda packages gained a build, channel and subdir: specs without
// conda packages must keep their hashes (and so their image tags).
func TestPinnedHashPipOnly(t *testing.T) {
	s := Spec{Python: "3.11.9", Platform: "linux/x86_64", Packages: []Package{
		{Name: "Dask", Version: "2024.8.0"}, {Name: "distributed", Version: "2024.8.0"},
		{Name: "_libgcc_mutex", Version: "0.1"}, {Name: "python_abi", Version: "3.11"},
	}}
	const wantDoc = `{"v":1,"python":"3.11","platform":"linux/amd64","gpu":false,"packages":[["-libgcc-mutex","0.1"],["dask","2024.8.0"],["distributed","2024.8.0"],["python-abi","3.11"]],"channels":[],"code":[]}`
	const wantHash = "0d42b1328ebfff40e7ec9f6fc4acc44c61a31a1762f6735d348d61fdd58cea6e"
	doc, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != wantDoc {
		t.Errorf("Canonical() =\n%s\nwant\n%s", doc, wantDoc)
	}
	if h, _ := s.Hash(); h != wantHash {
		t.Errorf("Hash() = %s, want %s", h, wantHash)
	}
}

func condaSpec() Spec {
	return Spec{
		Python:   "3.12",
		Platform: "linux/amd64",
		Packages: []Package{
			{Name: "distributed", Version: "2024.8.0"},
			{Name: "python_abi", Version: "3.12", Build: "5_cp312", Channel: "conda-forge", Subdir: "linux-64"},
			{Name: "numpy", Version: "2.0.1", Build: "py312h1234567_0", Channel: "https://conda.example.org/forge/", Subdir: "linux-64"},
			// pip sees numpy too: conda's record wins.
			{Name: "NumPy", Version: "2.0.1"},
			{Name: "tzdata", Version: "2024a", Build: "h0c530f3_0", Subdir: "noarch"},
		},
		Channels: []string{"conda-forge"},
	}
}

func TestCondaPackagesCanonical(t *testing.T) {
	s := condaSpec()
	const wantDoc = `{"v":1,"python":"3.12","platform":"linux/amd64","gpu":false,"packages":[` +
		`["distributed","2024.8.0"],["numpy","2.0.1","py312h1234567_0","https://conda.example.org/forge","linux-64"],` +
		`["python_abi","3.12","5_cp312","conda-forge","linux-64"],["tzdata","2024a","h0c530f3_0","","noarch"]],"channels":["conda-forge"],"code":[]}`
	doc, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != wantDoc {
		t.Errorf("Canonical() =\n%s\nwant\n%s", doc, wantDoc)
	}
	got, err := ParseCanonical(doc)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Normalize()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCanonical(Canonical()) = %+v, want %+v", got, want)
	}
	// The build is part of the environment.
	other := condaSpec()
	other.Packages[1].Build = "5_cp312_other"
	h1, _ := s.Hash()
	if h2, _ := other.Hash(); h1 == h2 {
		t.Error("a different conda build does not change the hash")
	}
	for _, bad := range []string{
		`{"v":1,"python":"3.12","platform":"linux/amd64","gpu":false,"packages":[["numpy","2.0.1","b"]],"channels":[],"code":[]}`,
		`{"v":1,"python":"3.12","platform":"linux/amd64","gpu":false,"packages":[["numpy","2.0.1","b c","",""]],"channels":[],"code":[]}`,
	} {
		if _, err := ParseCanonical([]byte(bad)); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("ParseCanonical(%s) = %v, want ErrInvalidSpec", bad, err)
		}
	}
}

func TestCondaPackageErrors(t *testing.T) {
	tests := []struct {
		name    string
		pkgs    []Package
		want    string
		notWant string
	}{
		{"bad build", []Package{{Name: "numpy", Version: "1", Build: "py312-h1"}}, `conda package "numpy" has build "py312-h1"`, ""},
		{"build too long", []Package{{Name: "numpy", Version: "1", Build: strings.Repeat("a", 129)}}, `is not a conda build string`, ""},
		{"channel without build", []Package{{Name: "numpy", Version: "1", Channel: "conda-forge"}}, `package "numpy" has a conda channel or subdir but no build`, ""},
		{"subdir without build", []Package{{Name: "numpy", Version: "1", Subdir: "noarch"}}, `has a conda channel or subdir but no build`, ""},
		{"bad subdir", []Package{{Name: "numpy", Version: "1", Build: "0", Subdir: "osx-arm64"}}, `conda package "numpy" has subdir "osx-arm64"; want linux-64, linux-aarch64 or noarch`, ""},
		{"subdir for another platform", []Package{{Name: "numpy", Version: "1", Build: "0", Subdir: "linux-aarch64"}}, `conda package "numpy" is for linux-aarch64, but the environment's platform linux/amd64 needs linux-64 or noarch`, ""},
		{"bad conda name", []Package{{Name: "numpy!", Version: "1", Build: "0"}}, `package name "numpy!" is not valid`, ""},
		{"channel with password", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "https://alice:s3cret@conda.example.org/forge"}}, "carries credentials", "s3cret"},
		{"channel with token", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "https://conda.anaconda.org/t/tok-123/forge"}}, "carries credentials", "tok-123"},
		{"channel name with token", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "t/tok-123/forge"}}, "carries credentials", "tok-123"},
		{"channel with query", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "https://conda.example.org/forge?x=1"}}, `is neither a channel name`, ""},
		{"channel ftp", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "ftp://conda.example.org/forge"}}, `is neither a channel name`, ""},
		{"channel traversal", []Package{{Name: "numpy", Version: "1", Build: "0", Channel: "forge/../x"}}, `is neither a channel name`, ""},
		{"two builds", []Package{{Name: "numpy", Version: "1", Build: "a"}, {Name: "numpy", Version: "1", Build: "b"}}, `conda package "numpy" 1 is listed twice with different builds: a (any channel) and b (any channel)`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Spec{Python: "3.12", Platform: "linux/amd64", Packages: tt.pkgs}
			_, err := s.Normalize()
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Normalize() = %v, want an ErrInvalidSpec containing %q", err, tt.want)
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("error %q repeats a credential", err)
			}
		})
	}
	// The spec's channel list refuses credentials too, without repeating them.
	s := Spec{Python: "3.12", Platform: "linux/amd64", Channels: []string{"https://bob:hunter2@conda.example.org/c"}}
	if _, err := s.Normalize(); !errors.Is(err, ErrInvalidSpec) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Normalize() = %v, want ErrInvalidSpec without the password", err)
	}
}
