package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestCheckDashboard runs the check against Debian's real python3 and
// distributed (2022.12: bokeh >= 2.4.2, <= 2.4.3). Debian has no bokeh, so
// the plain interpreter is the "cannot" case; for the others a stand-in
// bokeh package with only a version goes first on PYTHONPATH.
func TestCheckDashboard(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, "no /usr/bin/python3 (apt-get install python3-distributed)")
	}
	stub := func(version string) []string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "bokeh"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bokeh", "__init__.py"), []byte("__version__ = \""+version+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return append(os.Environ(), "PYTHONPATH="+dir)
	}
	cases := []struct {
		name    string
		env     []string
		ok      bool
		problem []string
	}{
		{"no bokeh (Debian)", append(os.Environ(), "PYTHONPATH="), false,
			[]string{"cluster dashboards will not work", "without bokeh", "bokeh >=2.4.2,<=2.4.3", python + " -m pip install", "'bokeh>=2.4.2,<=2.4.3'"}},
		{"bokeh in range", stub("2.4.3"), true, nil},
		{"bokeh too new", stub("3.1.0"), false, []string{"with bokeh 3.1.0", "'bokeh>=2.4.2,<=2.4.3'"}},
		{"bokeh too old", stub("2.3.0"), false, []string{"with bokeh 2.3.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := CheckDashboard(context.Background(), python, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Checked || s.OK != tc.ok || s.Distributed == "" {
				t.Fatalf("got %+v, want checked, OK %v", s, tc.ok)
			}
			if strings.Contains(s.Problem, "\n") {
				t.Errorf("problem is more than one line: %q", s.Problem)
			}
			if tc.ok != (s.Problem == "") {
				t.Errorf("OK %v with problem %q", s.OK, s.Problem)
			}
			for _, w := range tc.problem {
				if !strings.Contains(s.Problem, w) {
					t.Errorf("problem %q does not say %q", s.Problem, w)
				}
			}
		})
	}
}

// An interpreter without distributed is not this check's business: the
// clusters fail with their own message, and the dashboard check says nothing.
func TestCheckDashboardWithoutDistributed(t *testing.T) {
	py := filepath.Join(t.TempDir(), "python")
	// A shim standing in for an interpreter whose distributed is missing.
	if err := os.WriteFile(py, []byte("#!/bin/sh\necho '{\"error\": \"cannot import distributed: No module named distributed\", \"managed\": false}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := CheckDashboard(context.Background(), py, nil)
	if err != nil || s.Checked || s.Problem != "" {
		t.Fatalf("got %+v, %v; want unchecked and silent", s, err)
	}
	if _, err := CheckDashboard(context.Background(), filepath.Join(t.TempDir(), "nope"), nil); err == nil {
		t.Error("a missing interpreter gave no error")
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"2.4.2", "2.4.2", 0}, {"2.4.3", "2.4.2", 1}, {"2.4", "2.4.0", 0}, {"3.0.0rc1", "2.4.3", 1}, {"2.10.0", "2.9.9", 1}, {"2.4.1", "2.4.2", -1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
