package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealGoTest runs go test -json on a module made here (a test that
// passes and prints a figure and chatter, one that skips, one that fails,
// and a package whose test binary dies) and checks what reaches the log.
func TestRealGoTest(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"a/a_test.go": `package a

import (
	"fmt"
	"testing"
)

func TestPasses(t *testing.T) {
	t.Log("chatter nobody needs")
	fmt.Println("more chatter")
	fmt.Println("figure: crash points tried: 55, lost: 0")
}

func TestSkips(t *testing.T) { t.Skip("needs a Docker engine") }

func TestFails(t *testing.T) {
	fmt.Println("what led up to it")
	t.Error("it broke")
}
`,
		"b/b_test.go": `package b

import (
	"os"
	"testing"
)

func TestDies(t *testing.T) {
	t.Log("about to die")
	os.Exit(3)
}
`,
		"c/c_test.go": `package c

import "testing"

func TestFine(t *testing.T) {}
`,
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.Output() // it fails: two packages do
	var out bytes.Buffer
	f := &filter{out: &out, held: map[key][]string{}}
	if err := f.run(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	log := out.String()
	for _, want := range []string{
		"figure: crash points tried: 55, lost: 0",
		"--- SKIP: TestSkips", "needs a Docker engine",
		"--- FAIL: TestFails", "what led up to it", "it broke",
		"about to die", // the test that never ended
		"FAIL\texample.com/m/a", "FAIL\texample.com/m/b",
		"ok  \texample.com/m/c",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, unwanted := range []string{"chatter nobody needs", "more chatter", "=== RUN", "--- PASS"} {
		if strings.Contains(log, unwanted) {
			t.Errorf("log has %q from a passing test:\n%s", unwanted, log)
		}
	}
	if !f.failed {
		t.Error("failures not noted: the command would exit 0")
	}
}

// TestPassingRunExitsZero: only passes, and lines that are not events
// (a build error of an older go) go through as they are.
func TestPassingRunExitsZero(t *testing.T) {
	in := strings.Join([]string{
		`# example.com/m/x`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    figure: outage 3.1 s\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}`,
		`{"Action":"pass","Package":"p"}`,
	}, "\n")
	var out bytes.Buffer
	f := &filter{out: &out, held: map[key][]string{}}
	if err := f.run(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if want := "# example.com/m/x\nfigure: outage 3.1 s\nok  \tp\t0.1s\n"; out.String() != want || f.failed {
		t.Errorf("log %q (failed %v), want %q", out.String(), f.failed, want)
	}
}
