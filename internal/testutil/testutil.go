// Package testutil holds helpers shared by tests of several packages: a
// clock tests move, a look at the processes the local provider marks, a
// sandbox of network and mount namespaces for boot scripts, a member's
// dashboard served over TLS, and the bound after which a wait is a hang.
package testutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
)

// Clock is a clock a test moves by hand, or by sleeping on it: Sleep and
// Pass move it to the sleep's end at once (simulated time), so a test can
// check call counts against time without waiting.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
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

// Sleep moves the clock on by d (if positive) at once, records d for
// Sleeps, and returns ctx's error. It has the shape of a retry's sleep.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	return c.sleep(ctx, d, true)
}

// Pass is Sleep without the record: for waits a test does not count
// (a rate budget's, say), told apart from the ones it does.
func (c *Clock) Pass(ctx context.Context, d time.Duration) error {
	return c.sleep(ctx, d, false)
}

func (c *Clock) sleep(ctx context.Context, d time.Duration, record bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if record {
		c.sleeps = append(c.sleeps, d)
	}
	if d > 0 {
		c.t = c.t.Add(d)
	}
	return ctx.Err()
}

// Sleeps is a copy of the durations given to Sleep so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Callers starts callers goroutines at once, each making up to most calls
// of call (given the caller's number, from 0), and waits for them all. When
// bound is positive a caller stops early once bound of the clock's time
// has passed since Callers began, so a test driving a rate limit on
// simulated time is bounded in count as well as in time. A call's error
// fails t and ends that caller. Callers returns the clock's time that
// passed and how many calls succeeded.
func (c *Clock) Callers(t testing.TB, callers, most int, bound time.Duration, call func(caller int) error) (elapsed time.Duration, calls int) {
	t.Helper()
	start := c.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range most {
				if bound > 0 && c.Now().Sub(start) >= bound {
					return
				}
				if err := call(i); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				calls++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return c.Now().Sub(start), calls
}

// StuckAndStarting plays the core's passes over two clusters on the
// clock: three polls of a stuck one (as fast as anything lets them) for
// each poll of a starting one, until window of the clock's time has passed
// or after rounds rounds. It returns the clock's time that passed, the
// longest a poll of the starting cluster waited, and how many it made. A
// poll's error fails t.
func (c *Clock) StuckAndStarting(t testing.TB, window time.Duration, rounds int, stuck, starting func() error) (elapsed, longest time.Duration, polls int) {
	t.Helper()
	start := c.Now()
	for range rounds {
		if c.Now().Sub(start) >= window {
			break
		}
		for range 3 {
			if err := stuck(); err != nil {
				t.Fatal(err)
			}
		}
		at := c.Now()
		if err := starting(); err != nil {
			t.Fatal(err)
		}
		longest = max(longest, c.Now().Sub(at))
		polls++
	}
	return c.Now().Sub(start), longest, polls
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
// EnvRequireSandbox (or CI=true).
func SandboxMissing(t testing.TB, why string) {
	t.Helper()
	Missing(t, EnvRequireSandbox, why)
}

// EnvRequirePython, set to 1 by the test command (scripts/setup.sh has
// installed them), turns the skips of tests that need Debian's
// /usr/bin/python3 with distributed or aiohttp into failures.
const EnvRequirePython = "GATEWAY_TEST_REQUIRE_PYTHON"

// Missing skips the test for a missing tool or privilege, saying why, or
// fails it when the require variable is 1 or CI=true: what CI installs
// must run there, since a skipped test is never a pass.
func Missing(t testing.TB, require, why string) {
	t.Helper()
	switch {
	case os.Getenv(require) == "1":
		t.Fatalf("%s (%s=1)", why, require)
	case os.Getenv("CI") == "true":
		t.Fatalf("%s (CI=true)", why)
	}
	t.Skip(why)
}

// RunSandbox writes files (paths relative to a fresh directory that has a
// bin folder; all written executable) and runs the run.sh among them with
// bash in a network and mount namespace of its own, with SANDBOX naming the
// directory, for at most timeout. It skips (or fails, see SandboxMissing)
// where no namespace can be made, fails the test when run.sh fails, and
// returns a reader of the directory's files for what the run left there.
func RunSandbox(t testing.TB, timeout time.Duration, files map[string]string) (read func(name string) string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--mount", "--fork", "bash", filepath.Join(dir, "run.sh"))
	cmd.Env = append(os.Environ(), "SANDBOX="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "Operation not permitted") || strings.Contains(string(out), "unshare failed") {
			SandboxMissing(t, "no network namespace here: "+string(out))
		}
		t.Fatalf("sandbox: %v\n%s", err, out)
	}
	return func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// ClusterCert is a certificate and key for cluster, valid for an hour from
// now, as the gateway makes them.
func ClusterCert(t testing.TB, cluster string) pki.Pair {
	t.Helper()
	pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// ServeTLS serves h over TLS with cert on an IPv4 loopback port, as a
// member serves its dashboard with its cluster's certificate (Dask's
// dashboard.tls settings), until the test ends. Handshakes the client
// refuses are not logged: tests make them on purpose.
func ServeTLS(t testing.TB, cert pki.Pair, h http.Handler) *httptest.Server {
	t.Helper()
	kp, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = ln
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{kp}}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// TCPPair connects two ends over loopback TCP.
func TCPPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	b := <-accepted
	if b == nil {
		a.Close()
		return nil, nil, errors.New("accept failed")
	}
	return a, b, nil
}

// MustTCPPair returns the two ends of a loopback TCP connection.
func MustTCPPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, b, err := TCPPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// HangBound is how long a test waits for what should happen at once
// before calling it hung. Speed is the benchmark's to judge: a loaded
// 2-core machine under -race is slow by seconds now and then, so this is
// generous, and still far below go test's timeout so that the failure
// names what hung instead of dumping every goroutine.
const HangBound = 2 * time.Minute

// Returns runs f and waits until it returns, failing the test when it has
// not after HangBound; it returns how long f took, for a test that checks
// a lower bound (a grace honoured). f runs on a goroutine of its own: it
// reports with t.Error, not t.Fatal.
func Returns(tb testing.TB, what string, f func()) time.Duration {
	tb.Helper()
	return returnsWithin(tb, HangBound, what, f)
}

func returnsWithin(tb testing.TB, bound time.Duration, what string, f func()) time.Duration {
	tb.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return time.Since(start)
	case <-time.After(bound):
		tb.Fatalf("%s has not returned after %s: it hangs", what, bound)
		return 0
	}
}
