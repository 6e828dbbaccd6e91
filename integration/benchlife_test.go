package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// storedToken is the dev login's ID token in the CLI's credentials file.
func (e *env) storedToken(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.home, "config", "gateway", "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Gateways map[string]struct {
			Token string `json:"token"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, g := range c.Gateways {
		return g.Token
	}
	return ""
}

// runStatus is a run's recorded status and error.
func (e *env) runStatus(t *testing.T, run string) (status, msg string) {
	t.Helper()
	var rep struct {
		Run struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"run"`
	}
	e.gwJSON(&rep, "bench", "report", run)
	return rep.Run.Status, rep.Run.Error
}

// TestBenchRunOutlivesItsLogin: on the local provider, with dev tokens
// that last 10 s and a run lease of 4 s, an A/A run that lasts longer
// than its token renews it (every sample is recorded, the run is ok, the
// renewed token is saved); a run whose client is killed has its cluster
// stopped by the gateway within the lease and is recorded as failed.
func TestBenchRunOutlivesItsLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_AUTH_DEV_TOKEN_LIFETIME=10s", "GATEWAY_BENCH_RUN_LEASE=4s")
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		"bench_tiny.py": "import time\n\ndef bench_sleep(client):\n    time.sleep(1)\n",
	})
	first := e.storedToken(t)
	out, err := e.gwLong(5*time.Minute, "bench", "run", suite, "--null", "--repeat", "8", "--workers", "1", "--timeout", "1m", "--python", python)
	if err != nil {
		t.Fatalf("the run failed: %v\n%s", err, out)
	}
	if strings.Contains(out, "could not") || !strings.Contains(out, "[16/16]") {
		t.Errorf("the run lost samples:\n%s", out)
	}
	if e.storedToken(t) == first {
		t.Errorf("the login was not renewed over a run longer than its token:\n%s", out)
	}
	m := runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	if st, msg := e.runStatus(t, m[1]); st != "ok" {
		t.Errorf("the run is %s (%s), want ok", st, msg)
	}

	// A client killed mid-run: the gateway stops its cluster.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "bench", "run", suite, "--repeat", "200", "--workers", "1", "--timeout", "1m", "--python", python)
	cmd.Env = e.vars
	var buf syncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(buf.String(), "repeat 2/200") {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not take samples:\n%s", buf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cluster := strings.Fields(strings.SplitN(buf.String(), "): cluster ", 2)[1])[0]
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNoMembers(t, cluster)
	killed := regexp.MustCompile(`Run (br-[0-9a-f]+):`).FindStringSubmatch(buf.String())
	if killed == nil {
		t.Fatalf("no run id in:\n%s", buf.String())
	}
	if st, msg := e.runStatus(t, killed[1]); st != "failed" || !strings.Contains(msg, "client stopped reporting") {
		t.Errorf("the killed run is %s (%s), want failed by the gateway", st, msg)
	}
}
