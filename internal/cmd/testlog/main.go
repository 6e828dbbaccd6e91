// Command testlog reads `go test -json` on standard input and writes the
// log a person reads: each package's result line, every skipped test with
// its reason, the whole output of every failed test and package, and, of
// the tests that passed, only their figures (lines starting "figure: ").
// go test's own plain output hides everything a passing test prints, so
// the crash and outage tests' figures would never reach the CI log; -v
// would bury them under every test's chatter.
//
// At the end it writes the 15 slowest top-level tests and every package's
// time, slowest first, so that the next test to make CI slow is seen in
// the log that made it slow, not found later by hand.
//
// It exits 1 when any test, package or build failed, so that a pipeline
// fails even without pipefail.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// FigurePrefix starts a line a passing test prints for the log.
const FigurePrefix = "figure: "

// slowest is how many tests the closing timings list.
const slowest = 15

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string  // build-output and build-fail
	Elapsed    float64 // seconds, on pass, fail and skip
}

type key struct{ pkg, test string }

// timing is how long one test or package ran.
type timing struct {
	key
	seconds float64
}

// filter holds each test's output until the test ends.
type filter struct {
	out    io.Writer
	held   map[key][]string
	failed bool
	// tests and packages are the timings of what ended, for the summary.
	tests, packages []timing
}

func main() {
	f := &filter{out: os.Stdout, held: map[key][]string{}}
	if err := f.run(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(2)
	}
	if f.failed {
		os.Exit(1)
	}
}

func (f *filter) run(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			// Not an event (a build error from an older go, say): as it is.
			fmt.Fprintln(f.out, line)
			continue
		}
		f.event(e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// Tests that never ended (the binary died under them): all they said.
	for k, lines := range f.held {
		if len(lines) > 0 {
			fmt.Fprintf(f.out, "--- %s %s did not finish; its output:\n", k.pkg, k.test)
			f.print(lines)
		}
	}
	f.timings()
	return nil
}

// timings writes the slowest top-level tests and each package's time.
// Subtests are left out: their time is already in their parent's, and a
// parent with many quick subtests is the slow thing to look at.
// A parallel test's time excludes its wait for the serial ones to finish.
func (f *filter) timings() {
	if len(f.tests) == 0 && len(f.packages) == 0 {
		return
	}
	bySeconds := func(ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool {
			if ts[i].seconds != ts[j].seconds {
				return ts[i].seconds > ts[j].seconds
			}
			return ts[i].pkg+" "+ts[i].test < ts[j].pkg+" "+ts[j].test
		})
	}
	bySeconds(f.tests)
	bySeconds(f.packages)
	n := min(slowest, len(f.tests))
	fmt.Fprintf(f.out, "\nslowest %d tests:\n", n)
	for _, t := range f.tests[:n] {
		fmt.Fprintf(f.out, "%9.1f s  %s  %s\n", t.seconds, t.test, t.pkg)
	}
	fmt.Fprintf(f.out, "packages (%d):\n", len(f.packages))
	for _, p := range f.packages {
		fmt.Fprintf(f.out, "%9.1f s  %s\n", p.seconds, p.pkg)
	}
}

// timed notes how long a test or package ran. A package's skip is one
// with no tests ("[no test files]"): nothing ran, nothing to list.
func (f *filter) timed(e event) {
	t := timing{key{e.Package, e.Test}, e.Elapsed}
	switch {
	case e.Test == "":
		if e.Action != "skip" {
			f.packages = append(f.packages, t)
		}
	case !strings.Contains(e.Test, "/"):
		f.tests = append(f.tests, t)
	}
}

func (f *filter) event(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "pass", "fail", "skip":
		f.timed(e)
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(f.out, e.Output)
	case "build-fail":
		f.failed = true
	case "output":
		f.held[k] = append(f.held[k], e.Output)
	case "pass":
		if e.Test == "" {
			f.packageDone(k, false)
			return
		}
		for _, l := range f.held[k] {
			if s := strings.TrimLeft(l, " "); strings.HasPrefix(s, FigurePrefix) {
				fmt.Fprint(f.out, s)
			}
		}
		delete(f.held, k)
	case "skip":
		if e.Test == "" {
			f.packageDone(k, false)
			return
		}
		f.print(f.held[k]) // "--- SKIP: TestX" and its reason
		delete(f.held, k)
	case "fail":
		f.failed = true
		if e.Test == "" {
			f.packageDone(k, true)
			return
		}
		f.print(f.held[k])
		delete(f.held, k)
	}
}

// packageDone writes a package's result line, and when it failed
// everything it printed outside its tests (a panic, a timeout's stacks)
// and the output of its tests that never ended.
func (f *filter) packageDone(k key, failed bool) {
	lines := f.held[k]
	delete(f.held, k)
	if failed {
		for tk, tl := range f.held {
			if tk.pkg == k.pkg {
				fmt.Fprintf(f.out, "--- %s did not finish; its output:\n", tk.test)
				f.print(tl)
				delete(f.held, tk)
			}
		}
		f.print(lines)
		return
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") || strings.HasPrefix(l, "---") || strings.HasPrefix(l, FigurePrefix) {
			fmt.Fprint(f.out, l)
		}
	}
}

// print writes lines, without go test's "=== RUN" and the like: the
// "--- FAIL" or "--- SKIP" line names the test.
func (f *filter) print(lines []string) {
	for _, l := range lines {
		if !strings.HasPrefix(l, "=== ") {
			fmt.Fprint(f.out, l)
		}
	}
}
