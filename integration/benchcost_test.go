package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchMaxCost runs gateway bench run against a real gateway whose
// clusters are priced (pricing.vcpu_hour: a 1-worker local cluster costs
// $36/h, a cent a second). The estimate is made before any cluster starts
// (price x clusters x (the start + each sample at its history's
// time, or at --timeout without history)): a run over --max-cost is
// refused with the estimate and how it was made, and no cluster is
// requested. A run within it shows the time and cost left on each
// progress line. With history the same run fits; when its benchmark then
// turns out slower than its history, the in-run check stops it (spent so
// far plus what is left over the limit), records it failed, skips the
// rest, and stops its cluster.
func TestBenchMaxCost(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfg, []byte("pricing:\n  vcpu_hour: 36\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "GATEWAY_CONFIG="+cfg)
	e.startGateway()
	// The benchmark's time is the client's own sleep, set per command.
	suite := filepath.Join(t.TempDir(), "costsuite")
	if err := os.MkdirAll(suite, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(suite, "bench_c.py"), []byte(`import os
import time


def bench_nap(client):
    time.sleep(float(os.environ.get("GWB_SLEEP", "0.2")))
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(sleep string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, e.bin, append([]string{"bench", "run", suite, "--workers", "1", "--timeout", "60s", "--python", python}, args...)...)
		cmd.Env = append(append([]string{}, e.vars...), "GWB_SLEEP="+sleep)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// No history: 2 samples at --timeout 60s + 20 s to start (the local
	// backend's typical time) = 2m20s = $1.40.
	out, err := run("0.2", "--repeat", "2", "--max-cost", "0.50")
	if err == nil {
		t.Fatalf("a run estimated over --max-cost was accepted:\n%s", out)
	}
	for _, want := range []string{"refused by --max-cost", "estimated at $1.40", "more than --max-cost $0.50", "nothing was started",
		"1 cluster x $36/h", "20s to start (typical of local until the suite has history)",
		"at --timeout 1m0s each, an upper bound: the suite has no history yet", "--timeout closer"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(e.gwLog.String(), "cluster requested") {
		t.Errorf("a cluster was requested for a refused run:\n%s", e.gwLog.String())
	}

	// Within the limit: the estimate, then the time and cost left per sample.
	out, err = run("0.2", "--repeat", "3", "--max-cost", "5")
	if err != nil {
		t.Fatalf("bench run within --max-cost: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Estimate: at most ~3m20s, at most ~$2.00, until one pass of each benchmark is timed: 1 cluster x $36/h") {
		t.Errorf("no up-front estimate in:\n%s", out)
	}
	lines := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "[") && strings.Contains(l, "bench_c.py::bench_nap") {
			lines++
			if !strings.Contains(l, " left, ~$") {
				t.Errorf("a progress line without the time and cost left: %q", l)
			}
		}
	}
	if lines != 3 {
		t.Errorf("%d progress lines, want 3:\n%s", lines, out)
	}
	assertBenchStopped(t, e, out)

	// With history (~0.2 s a sample, and the start the last run took, a
	// few seconds) 60 repeats fit: 60 x 0.2 s + ~5 s = ~$0.17. At 2 s a
	// sample they would cost ~$1.25: after the first sample the measured
	// pace makes spent + left exceed $1.
	out, err = run("2", "--repeat", "60", "--max-cost", "1")
	if err == nil {
		t.Fatalf("a run over --max-cost by its measured pace was not stopped:\n%s", out)
	}
	if !strings.Contains(out, "from the suite's history") || !strings.Contains(out, "to start (as the suite's last 1 run took)") ||
		strings.Contains(out, "nothing was started") {
		t.Errorf("the run was not estimated from its history:\n%s", out)
	}
	if !strings.Contains(out, "Stopping: ") || !strings.Contains(out, "exceed --max-cost $1.00") {
		t.Errorf("the run did not stop on --max-cost:\n%s", out)
	}
	m := runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	var rep struct {
		Run struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"run"`
	}
	e.gwJSON(&rep, "bench", "report", m[1])
	if rep.Run.Status != "failed" || !strings.Contains(rep.Run.Error, "--max-cost") {
		t.Errorf("the stopped run is recorded as %+v, want failed with --max-cost", rep.Run)
	}
	var hist []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Run    string `json:"run_id"`
	}
	e.gwJSON(&hist, "bench", "history", "bench_c.py::bench_nap")
	ok, skipped := 0, 0
	for _, h := range hist {
		if h.Run != m[1] {
			continue
		}
		switch {
		case h.Status == "ok":
			ok++
		case strings.Contains(h.Error, "the run stopped before it"):
			skipped++
		}
	}
	if ok < 1 || ok > 5 || ok+skipped != 60 {
		t.Errorf("the stopped run has %d ok and %d skipped samples, want a few ok and the rest of 60 skipped", ok, skipped)
	}
	assertBenchStopped(t, e, out)
}
