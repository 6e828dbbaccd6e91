package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/testutil"
)

const testPython = "/usr/bin/python3"

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(testPython); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, "no "+testPython+" (apt-get install python3-distributed)")
	}
}

// TestListSuite lists a suite with Debian's Python: parametrised
// benchmarks (decorator, attribute) expand into one id per combination,
// helpers and imported functions are not benchmarks, and a file that does
// not import is an error of its own while the others are still listed.
func TestListSuite(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	files := map[string]string{
		"bench_a.py": `import gateway_bench
from os.path import join as bench_imported


@gateway_bench.parametrize("n", [1, 2])
@gateway_bench.parametrize("kind", ["x"])
def bench_sum(client, n, kind):
    pass


def bench_attr(client, size):
    pass


bench_attr.params = {"size": [10]}


def bench_plain(client):
    pass


def helper(client):
    pass
`,
		"bench_bad.py":   "def bench_x(client:\n",
		"bench_raise.py": "raise RuntimeError('import-time failure')\n",
		"other.py":       "def bench_not_in_a_bench_file(client): pass\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := List(context.Background(), testPython, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"bench_a.py::bench_attr[size=10]",
		"bench_a.py::bench_plain",
		"bench_a.py::bench_sum[kind=x,n=1]",
		"bench_a.py::bench_sum[kind=x,n=2]",
	}
	if !reflect.DeepEqual(l.Benchmarks, want) {
		t.Errorf("benchmarks %q, want %q", l.Benchmarks, want)
	}
	if len(l.Errors) != 2 {
		t.Fatalf("errors %+v, want two", l.Errors)
	}
	for _, e := range l.Errors {
		switch e.File {
		case "bench_bad.py":
			if !strings.Contains(e.Error, "SyntaxError") || !strings.Contains(e.Error, "line 1") {
				t.Errorf("bench_bad.py: %s", e.Error)
			}
		case "bench_raise.py":
			if !strings.Contains(e.Error, "RuntimeError: import-time failure") {
				t.Errorf("bench_raise.py: %s", e.Error)
			}
		default:
			t.Errorf("unexpected error for %s", e.File)
		}
	}
	if l.Versions["python"] == "" {
		t.Errorf("no Python version: %v", l.Versions)
	}
}

// A Python that does not exist is an error naming it.
// TestListNoDistributed: a Python without Dask's client is refused when
// the suite is listed, before any cluster starts.
func TestListNoDistributed(t *testing.T) {
	dir := t.TempDir()
	// Debian's Python without its site directories: no distributed.
	python := filepath.Join(dir, "python3")
	if err := os.WriteFile(python, []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "suite")
	if err := os.MkdirAll(suite, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(suite, "bench_a.py"), []byte("def bench_a(client):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := List(context.Background(), python, suite)
	if !errors.Is(err, ErrNoDask) || !strings.Contains(err.Error(), python) {
		t.Fatalf("List with a Python without distributed: %v", err)
	}
	if v, err := CheckPython(context.Background(), python); !errors.Is(err, ErrNoDask) || !strings.Contains(err.Error(), python) {
		t.Fatalf("CheckPython with a Python without distributed: %q %v", v, err)
	}
	if v, err := CheckPython(context.Background(), "/usr/bin/python3"); err != nil || v == "" {
		t.Fatalf("CheckPython(/usr/bin/python3): %q %v", v, err)
	}
	if _, err := CheckPython(context.Background(), filepath.Join(dir, "nonexistent")); err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("CheckPython of a missing interpreter: %v", err)
	}
}

func TestListNoPython(t *testing.T) {
	_, err := List(context.Background(), "/nonexistent/python3", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Fatalf("List: %v", err)
	}
}
