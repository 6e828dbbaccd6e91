package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeSuite(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var benchClusterRe = regexp.MustCompile(`\): cluster ([0-9a-f]+)`)

// assertBenchStopped checks that no cluster of the run is active and no
// process of it is left.
func assertBenchStopped(t *testing.T, e *env, out string) {
	t.Helper()
	var list []struct{ Name, Status string }
	e.gwJSON(&list, "list")
	if len(list) != 0 {
		t.Errorf("clusters left active: %+v", list)
	}
	names := benchClusterRe.FindAllStringSubmatch(out, -1)
	if len(names) == 0 {
		t.Fatalf("no cluster named in the run's output:\n%s", out)
	}
	for _, m := range names {
		waitNoMembers(t, m[1])
	}
}

// TestBenchBadInput runs, on the local provider, a suite with a file that
// does not import, a benchmark that raises, one that hangs (on a worker)
// past --timeout, and one that works, as an A/A run: every sample is
// recorded with what happened to it, only what failed fails (the working
// benchmark succeeds in all four samples, also after the hang replaced
// the workers), the command exits non-zero saying how many failed, and
// both clusters are stopped with no process left.
func TestBenchBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		"bench_ok.py":     "def bench_fast(client):\n    assert client.submit(sum, range(10)).result() == 45\n",
		"bench_syntax.py": "def bench_broken(client:\n    pass\n",
		"bench_raise.py":  "def bench_raises(client):\n    raise ValueError('the benchmark broke on purpose')\n",
		"bench_hang.py":   "import time\n\ndef bench_hangs(client):\n    client.submit(time.sleep, 600, pure=False).result()\n",
	})
	out, err := e.gwLong(4*time.Minute, "bench", "run", suite, "--null", "--repeat", "2", "--workers", "1", "--timeout", "4s", "--python", python)
	if err == nil {
		t.Fatalf("a run with failing samples succeeded:\n%s", out)
	}
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		"bench_syntax.py does not import: SyntaxError",
		"error: ValueError: the benchmark broke on purpose",
		"timeout: did not finish within --timeout 4s",
		"replacing the workers of cluster",
		// More than half failed: the run is failed, not ok.
		"10 of 14 samples failed (more than 50%)",
		"Stopped 2 clusters",
		// The final table is the stored report: errors are their
		// exception, once, with a count.
		"bench_raise.py::bench_raises: error: ValueError: the benchmark broke on purpose (4 samples)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, re := range []string{
		`bench_ok.py::bench_fast\s+\S+ \(IQR \S+, n=2\)\s+\S+ \(IQR \S+, n=2\)`,
		`(?m)bench_raise.py::bench_raises\s+–\s+–.*\s4$`,
		`(?m)bench_hang.py::bench_hangs\s+–\s+–.*\s4$`,
		`(?m)bench_syntax.py\s+–\s+–.*\s2$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the summary lacks a line like %s", re)
		}
	}
	assertBenchStopped(t, e, out)

	// A benchmark that kills its own scheduler: the cluster fails mid-run,
	// the sets' later samples are recorded as failed with why, and the run
	// still stops (what is left of) its clusters.
	suite = writeSuite(t, map[string]string{
		"bench_die.py": "import os\n\ndef bench_die(client):\n    client.run_on_scheduler(os._exit, 3)\n",
		"bench_ok.py":  "def bench_fast(client):\n    assert client.submit(sum, range(10)).result() == 45\n",
	})
	logFile := filepath.Join(t.TempDir(), "runner.log")
	out, err = e.gwLong(3*time.Minute, "bench", "run", suite, "--repeat", "2", "--workers", "1", "--timeout", "20s", "--python", python, "--log", logFile)
	if b, err := os.ReadFile(logFile); err == nil {
		t.Logf("runner log:\n%s", b)
	}
	if err == nil {
		t.Fatalf("a run whose cluster failed succeeded:\n%s", out)
	}
	t.Logf("output:\n%s", out)
	if !regexp.MustCompile(`failed: cluster [0-9a-f]+ FAILED mid-run`).MatchString(out) {
		t.Errorf("the output does not say the cluster failed mid-run:\n%s", out)
	}
	assertBenchStopped(t, e, out)
}

// TestBenchInterrupt: Ctrl-C (SIGINT) during a sample stops the run: the
// command exits, the run is recorded as cancelled and its clusters are
// stopped.
func TestBenchInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		"bench_hang.py": "import time\n\ndef bench_hangs(client):\n    client.submit(time.sleep, 600, pure=False).result()\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "bench", "run", suite, "--workers", "1", "--timeout", "10m", "--python", python)
	cmd.Env = e.vars
	var buf syncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(buf.String(), "): cluster ") || len(e.activeClusters()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not start a cluster:\n%s", buf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // into the sample
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	out := buf.String()
	if err == nil {
		t.Errorf("an interrupted run exited 0:\n%s", out)
	}
	if !strings.Contains(out, "Stopped 1 clusters") {
		t.Errorf("the interrupted run did not stop its cluster:\n%s", out)
	}
	assertBenchStopped(t, e, out)
	m := runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	rep := e.gwStdout("bench", "report", m[1], "-o", "json")
	if !bytes.Contains([]byte(rep), []byte(`"cancelled"`)) {
		t.Errorf("the run is not recorded as cancelled:\n%s", rep)
	}
}

func (e *env) activeClusters() []string {
	out, err := e.gw("list", "-o", "json")
	if err != nil {
		return nil
	}
	return regexp.MustCompile(`"name":\s*"([0-9a-f]+)"`).FindAllString(out, -1)
}
