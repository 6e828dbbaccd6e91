package pyindex

import "testing"

func TestCanonicalVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1.0", "1"},
		{"1.0.0", "1"},
		{"1", "1"},
		{"v1.2.0", "1.2"},
		{"01.02", "1.2"},
		{"1.0-RC1", "1rc1"},
		{"1.0rc-1", "1rc1"},
		{"1.0c1", "1rc1"},
		{"1.0.preview2", "1rc2"},
		{"1.0alpha", "1a0"},
		{"1.0b2", "1b2"},
		{"1.0-1", "1.post1"},
		{"1.0.post", "1.post0"},
		{"1.0-rev3", "1.post3"},
		{"1.0.dev", "1.dev0"},
		{"1.0_DEV_4", "1.dev4"},
		{"0!1.0", "1"},
		{"2!01.2+Ubuntu-1", "2!1.2+ubuntu.1"},
		{"1.0+abc.007", "1+abc.7"},
		{"2.1.0+cpu", "2.1+cpu"},
		{"  1.2.3  ", "1.2.3"},
		{"0", "0"},
		{"0.0", "0"},
		{"1.0a1.post2.dev3", "1a1.post2.dev3"},
	} {
		got, err := CanonicalVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "abc", "1.0+", "1..0", "1.0-beta-x", "1.0/..", "1.0 2"} {
		if got, err := CanonicalVersion(bad); err == nil {
			t.Errorf("CanonicalVersion(%q) = %q, want an error", bad, got)
		}
	}
}

func TestSameVersion(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"1.0", "1.0.0", true},
		{"1.0", "1", true},
		{"1.0rc1", "1.0-RC-1", true},
		{"1.0", "1.0.1", false},
		{"1.0", "1.0+cpu", false},
		{"1.0", "1.0.post0", false},
		{"1.0", "1.0rc1", false},
		{"2023.10", "2023.010", true},
		{"not-pep440", "NOT-PEP440", true},
		{"not-pep440", "1.0", false},
	} {
		if got := SameVersion(tc.a, tc.b); got != tc.want {
			t.Errorf("SameVersion(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFileVersion(t *testing.T) {
	for _, tc := range []struct {
		project, filename, want string
		ok                      bool
	}{
		{"my-pkg", "my_pkg-1.0-py3-none-any.whl", "1.0", true},
		{"My.Pkg", "my_pkg-1.0-1-cp312-cp312-manylinux_2_17_x86_64.whl", "1.0", true},
		{"my-pkg", "my_pkg-1.0.0.tar.gz", "1.0.0", true},
		{"python-dateutil", "python-dateutil-2.8.2.tar.gz", "2.8.2", true},
		{"python-dateutil", "python_dateutil-2.8.2-py2.py3-none-any.whl", "2.8.2", true},
		{"my-pkg", "My-Pkg-1.0.zip", "1.0", true},
		{"my-pkg", "other-1.0-py3-none-any.whl", "", false},
		{"my-pkg", "my_pkg_extra-1.0.tar.gz", "", false},
		{"my-pkg", "my_pkg-1.0-py3.egg", "", false},
		{"my-pkg", "my_pkg-1.0-py3-none.whl", "", false},
		{"my-pkg", "my_pkg-.tar.gz", "", false},
		{"my-pkg", "my_pkg-1.0-x-py3-none-any.whl", "", false}, // build tag must start with a digit
	} {
		got, ok := FileVersion(tc.project, tc.filename)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FileVersion(%q, %q) = %q, %v; want %q, %v", tc.project, tc.filename, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseWheelFilename(t *testing.T) {
	w, err := ParseWheelFilename("numpy-1.26.4-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
	if err != nil {
		t.Fatal(err)
	}
	want := Wheel{Name: "numpy", Version: "1.26.4", Build: "1", Python: "cp312", ABI: "cp312", Platform: "manylinux_2_17_x86_64.manylinux2014_x86_64"}
	if w != want {
		t.Fatalf("got %+v, want %+v", w, want)
	}
	for _, bad := range []string{"numpy-1.26.4.tar.gz", "numpy-1.26.4-cp312.whl", "numpy--cp312-cp312-any.whl", "a-1-2-3-4-5-6.whl"} {
		if _, err := ParseWheelFilename(bad); err == nil {
			t.Errorf("ParseWheelFilename(%q) succeeded", bad)
		}
	}
}

func TestVersions(t *testing.T) {
	files := []File{
		{Filename: "p-1.0-py3-none-any.whl"},
		{Filename: "p-1.0.0.tar.gz"},
		{Filename: "p-2.0-py3-none-any.whl"},
		{Filename: "other-3.0.tar.gz"},
	}
	got := Versions("p", files)
	if len(got) != 2 || got[0] != "1.0" || got[1] != "2.0" {
		t.Fatalf("Versions = %v, want [1.0 2.0]", got)
	}
}
