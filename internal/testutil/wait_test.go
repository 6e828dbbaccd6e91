package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that notes how a helper ended the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own, as the testing package
// runs a test, so that Fatalf and Skip can end it.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

// TestMissing: a missing tool skips the test, unless its require
// variable or CI=true says the test must run; then it fails, saying why.
func TestMissing(t *testing.T) {
	const why = "no /usr/bin/python3"
	for _, tc := range []struct {
		name, require, ci string
		fatal             string // "" for a skip
	}{
		{"skips by default", "", "", ""},
		{"fails when required", "1", "", why + " (" + EnvRequirePython + "=1)"},
		{"fails in CI", "", "true", why + " (CI=true)"},
		{"skips when the variable says 0", "0", "false", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRequirePython, tc.require)
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			r.run(func(tb testing.TB) { Missing(tb, EnvRequirePython, why) })
			switch {
			case tc.fatal != "" && (r.fatal != tc.fatal || r.skip != ""):
				t.Errorf("failed with %q, skipped with %q; want to fail with %q", r.fatal, r.skip, tc.fatal)
			case tc.fatal == "" && (r.skip != why || r.fatal != ""):
				t.Errorf("failed with %q, skipped with %q; want to skip with %q", r.fatal, r.skip, why)
			}
		})
	}
	t.Run("the sandbox's skips too", func(t *testing.T) {
		t.Setenv(EnvRequireSandbox, "")
		t.Setenv("CI", "true")
		r := &recorder{TB: t}
		r.run(func(tb testing.TB) { SandboxMissing(tb, "needs iptables") })
		if r.fatal != "needs iptables (CI=true)" {
			t.Errorf("SandboxMissing in CI: failed with %q, skipped with %q", r.fatal, r.skip)
		}
	})
}

// TestReturns: what returns is timed; what hangs fails the test once
// the bound has passed, naming what hung.
func TestReturns(t *testing.T) {
	r := &recorder{TB: t}
	var took time.Duration
	r.run(func(tb testing.TB) {
		took = returnsWithin(tb, time.Minute, "a short sleep", func() { time.Sleep(20 * time.Millisecond) })
	})
	if r.fatal != "" || took < 20*time.Millisecond {
		t.Errorf("a sleep of 20ms: took %s, failed with %q", took, r.fatal)
	}

	release := make(chan struct{})
	defer close(release)
	r = &recorder{TB: t}
	r.run(func(tb testing.TB) { returnsWithin(tb, 50*time.Millisecond, "the stuck call", func() { <-release }) })
	if !strings.Contains(r.fatal, "the stuck call has not returned after 50ms") {
		t.Errorf("a call that hangs failed with %q", r.fatal)
	}
}
