package main

import (
	"bytes"
	"fmt"
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
		// TestDies never ended, so it has no time; its package has.
		"slowest 4 tests:\n", "  TestFails  example.com/m/a\n", "  TestFine  example.com/m/c\n",
		"packages (3):\n", "  example.com/m/a\n", "  example.com/m/b\n", "  example.com/m/c\n",
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
	want := "# example.com/m/x\nfigure: outage 3.1 s\nok  \tp\t0.1s\n" +
		"\nslowest 1 tests:\n      0.0 s  TestA  p\npackages (1):\n      0.0 s  p\n"
	if out.String() != want || f.failed {
		t.Errorf("log %q (failed %v), want %q", out.String(), f.failed, want)
	}
}

// TestTimings: the summary lists the 15 slowest top-level tests, slowest
// first, with their package, and every package that ran with its time;
// subtests (already in their parent's time) and packages without tests
// are not listed, and a failed or skipped test counts like a passed one.
func TestTimings(t *testing.T) {
	var in []string
	ev := func(action, pkg, test string, elapsed float64) {
		in = append(in, fmt.Sprintf(`{"Action":%q,"Package":%q,"Test":%q,"Elapsed":%g}`, action, pkg, test, elapsed))
	}
	// 20 tests in two packages, test i taking i seconds; TestT19 fails,
	// TestT18 skips, and TestT3 has a subtest of 500 s.
	for i := 1; i <= 20; i++ {
		pkg, action := "ex/a", "pass"
		if i%2 == 0 {
			pkg = "ex/b"
		}
		switch i {
		case 19:
			action = "fail"
		case 18:
			action = "skip"
		case 3:
			ev("pass", pkg, "TestT3/long", 500)
		}
		ev(action, pkg, fmt.Sprintf("TestT%d", i), float64(i))
	}
	ev("fail", "ex/a", "", 1234.5)
	ev("pass", "ex/b", "", 99.25)
	ev("skip", "ex/none", "", 0) // [no test files]
	ev("pass", "ex/c", "", 0.5)

	var out bytes.Buffer
	f := &filter{out: &out, held: map[key][]string{}}
	if err := f.run(strings.NewReader(strings.Join(in, "\n"))); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("\nslowest 15 tests:\n")
	for i := 20; i >= 6; i-- {
		pkg := "ex/a"
		if i%2 == 0 {
			pkg = "ex/b"
		}
		fmt.Fprintf(&want, "%9.1f s  TestT%d  %s\n", float64(i), i, pkg)
	}
	want.WriteString("packages (3):\n   1234.5 s  ex/a\n     99.2 s  ex/b\n      0.5 s  ex/c\n")
	if out.String() != want.String() {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want.String())
	}
}

// TestNoTimingsWithoutTests: input with no test or package results (go
// test failed to start) gets no empty summary.
func TestNoTimingsWithoutTests(t *testing.T) {
	var out bytes.Buffer
	f := &filter{out: &out, held: map[key][]string{}}
	if err := f.run(strings.NewReader("go: no Go files in /x\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "go: no Go files in /x\n" {
		t.Errorf("log %q, want only the line read", got)
	}
}
