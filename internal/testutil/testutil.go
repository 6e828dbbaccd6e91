// Package testutil holds helpers shared by tests of several packages: a
// clock tests move, and a look at the processes the local provider marks.
package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Clock is a clock a test moves by hand.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// MemberPIDs lists live processes marked as members of the cluster by the
// local provider (GATEWAY_MEMBER=<cluster>/<member> in their environment).
// Zombies are gone for this purpose: they are their parent's to reap.
func MemberPIDs(cluster string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	marker := []byte("GATEWAY_MEMBER=" + cluster + "/")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				continue
			}
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, marker) {
				if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

// EnvRequireSandbox, set to 1 by the test command where it runs as root,
// turns the skips of tests that need root, network namespaces and
// iptables into failures, so that CI cannot pass them by skipping.
const EnvRequireSandbox = "GATEWAY_TEST_REQUIRE_SANDBOX"

// NeedSandbox skips (or, under EnvRequireSandbox, fails) a test that
// needs root and the named tools.
func NeedSandbox(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SandboxMissing(t, "needs root for a network namespace and iptables")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			SandboxMissing(t, "needs "+tool)
		}
	}
}

// SandboxMissing skips the test with why, or fails it under
// EnvRequireSandbox.
func SandboxMissing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequireSandbox) == "1" {
		t.Fatalf("%s (%s=1)", why, EnvRequireSandbox)
	}
	t.Skip(why)
}
