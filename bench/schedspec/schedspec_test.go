package schedspec

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	at := time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC)
	tests := []struct {
		expr    string
		want    time.Time
		wantErr string
	}{
		{"0 2 * * *", time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC), ""},
		{"30 1 * * *", time.Date(2026, 12, 4, 1, 30, 0, 0, time.UTC), ""}, // strictly after
		{"@hourly", time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC), ""},
		{"0 2 * *", time.Time{}, "five fields"},
		{"61 2 * * *", time.Time{}, "five fields"},
		{"0 0 30 2 *", time.Time{}, "never fires"},
	}
	for _, tc := range tests {
		got, err := Next(tc.expr, at)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Next(%q): %v, want an error with %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("Next(%q) = %s, %v; want %s", tc.expr, got, err, tc.want)
		}
	}
}

func TestPackSuiteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"bench_a.py": "def bench_a(client): pass\n", "helpers.py": "X = 1\n", "notes.txt": "not sent"}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "other.txt")); err != nil {
		t.Fatal(err)
	}
	a, err := PackSuite(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SuiteFiles(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["bench_a.py"]) != files["bench_a.py"] || string(got["helpers.py"]) != files["helpers.py"] {
		t.Fatalf("round trip: %v", got)
	}
	parent := t.TempDir()
	out, err := WriteSuite(a, parent, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(out) != "nightly" || !strings.HasPrefix(out, parent) {
		t.Errorf("suite written to %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(out, "bench_a.py")); err != nil || string(b) != files["bench_a.py"] {
		t.Errorf("written file: %q %v", b, err)
	}
}

func TestPackSuiteRefuses(t *testing.T) {
	t.Run("symlinked python file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, "bench_x.py")); err != nil {
			t.Fatal(err)
		}
		if _, err := PackSuite(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("PackSuite: %v", err)
		}
	})
	t.Run("no benchmark file", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "x.py"), []byte("pass"), 0o644)
		if _, err := PackSuite(dir); err == nil || !strings.Contains(err.Error(), "no bench_*.py") {
			t.Errorf("PackSuite: %v", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "bench_x.py"), bytes.Repeat([]byte("#"), MaxSuiteBytes+1), 0o644)
		if _, err := PackSuite(dir); err == nil || !strings.Contains(err.Error(), "small suites") {
			t.Errorf("PackSuite: %v", err)
		}
	})
}

// Archives that PackSuite never makes are refused whatever they claim.
func TestSuiteFilesRefusesHostileArchives(t *testing.T) {
	mk := func(entries map[string][]byte) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for n, b := range entries {
			w, err := zw.Create(n)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(b)
		}
		zw.Close()
		return buf.Bytes()
	}
	ok := []byte("def bench_x(c): pass")
	tests := map[string][]byte{
		"parent path":   mk(map[string][]byte{"bench_x.py": ok, "../evil.py": ok}),
		"absolute path": mk(map[string][]byte{"/tmp/bench_x.py": ok}),
		"subdirectory":  mk(map[string][]byte{"pkg/bench_x.py": ok}),
		"not python":    mk(map[string][]byte{"bench_x.py": ok, "run.sh": ok}),
		"zip bomb":      mk(map[string][]byte{"bench_x.py": bytes.Repeat([]byte{'#'}, MaxSuiteBytes+10)}),
		"no benchmark":  mk(map[string][]byte{"helpers.py": ok}),
		"not a zip":     []byte("PK not really"),
	}
	for name, a := range tests {
		if _, err := SuiteFiles(a); !errors.Is(err, ErrBadSuite) {
			t.Errorf("%s: %v, want ErrBadSuite", name, err)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	good := Options{Envs: []Env{{Label: "A", Name: "team"}}, Repeat: 5, Workers: 2}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	bad := []func(o *Options){
		func(o *Options) { o.Envs = nil },
		func(o *Options) { o.Envs = append(o.Envs, Env{Name: "b"}, Env{Name: "c"}) },
		func(o *Options) { o.Repeat = 0 },
		func(o *Options) { o.Workers = 0 },
		func(o *Options) { o.Select = "(" },
		func(o *Options) { o.Timeout = "soon" },
		func(o *Options) { o.Threshold = -1 },
		func(o *Options) { o.Envs[0].Name = "" },
	}
	for i, f := range bad {
		o := good
		o.Envs = append([]Env(nil), good.Envs...)
		f(&o)
		if err := o.Check(); err == nil {
			t.Errorf("case %d: %+v accepted", i, o)
		}
	}
}
