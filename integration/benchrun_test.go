package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"

	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/internal/testpypi"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// The A/B suite: three small benchmarks whose time is mostly a fixed
// sleep on a worker (so that their noise is a few percent), one of which
// calls a package whose version 2.0 is five times slower than 1.0.
var benchSuiteFiles = map[string]string{
	"bench_work.py": `import time


def _sleep_then(n, s):
    time.sleep(s)
    return sum(range(n))


def bench_sum(client):
    assert client.submit(_sleep_then, 1000, 0.3, pure=False).result() == 499500


def bench_map(client):
    client.gather(client.map(_sleep_then, [100] * 3, [0.1] * 3, pure=False))
`,
	"bench_pkg.py": `def _work():
    import gwslow
    return gwslow.work()


def bench_gwslow(client):
    assert client.submit(_work, pure=False).result() == "done"
`,
}

func gwslowWheel(version string, seconds float64) (string, []byte) {
	return testpypi.Wheel{Name: "gwslow", Version: version, Files: map[string]string{
		"gwslow/__init__.py": fmt.Sprintf("import time\n__version__ = %q\n\ndef work():\n    time.sleep(%v)\n    return 'done'\n", version, seconds),
	}}.Build()
}

// benchPython writes an interpreter for --env: the test image's Python
// under chroot, with site on its PYTHONPATH. Arguments that are paths
// inside rootfs (the runner's script, the suite, TLS files: the CLI's
// TMPDIR is inside rootfs) are rewritten to the chroot's view.
func benchPython(t *testing.T, rootfs, dir, site string) string {
	t.Helper()
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		testutil.Missing(t, testutil.EnvRequireSandbox, fmt.Sprintf("no chroot: %v", err))
	}
	script := fmt.Sprintf(`#!/bin/sh
R=%[1]q
n=$#
for a in "$@"; do
  case "$a" in "$R"/*) a="${a#"$R"}";; esac
  set -- "$@" "$a"
done
shift $n
exec %[2]s "$R" /usr/bin/env PYTHONPATH=%[3]s /usr/bin/python3 "$@"
`, rootfs, chroot, site)
	p := filepath.Join(dir, "python3")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// gwLong runs the CLI with a longer bound than gw's, for bench runs.
func (e *env) gwLong(within time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var runIDRe = regexp.MustCompile(`Run (br-[0-9a-f]+) `)

// TestBenchABDocker is an A/B test of two environments on the docker
// provider, built by the gateway from a package index on loopback: A has
// gwslow 1.0, B gwslow 2.0, fifteen times slower: a margin over what a
// loaded machine adds to each sample (0.26 s in a CI dry run, under which
// a fivefold sleep measured 1.75x). The run interleaves A, B and a second
// A (--null) on three identical clusters; the report finds
// bench_gwslow slower with p < 0.05 and no change in the other two. An
// A/A run of the same suite flags nothing. No cluster or container is
// left behind.
func TestBenchABDocker(t *testing.T) {
	t.Parallel()
	pool := testdocker.Pool(t)
	image := testdocker.DaskImage(t)
	rootfs := testdocker.Rootfs(t)

	fa, wa := gwslowWheel("1.0", 0.1)
	fb, wb := gwslowWheel("2.0", 1.5)
	ix := testpypi.NewIndex(t, map[string][]byte{fa: wa, fb: wb})

	scratch, err := os.MkdirTemp(filepath.Join(rootfs, "tmp"), "gwbench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(scratch) })
	inRoot := func(p string) string { return strings.TrimPrefix(p, rootfs) }
	var pythons []string
	for _, w := range []struct {
		name string
		data []byte
	}{{fa, wa}, {fb, wb}} {
		dir := filepath.Join(scratch, strings.TrimSuffix(w.name, ".whl"))
		site := filepath.Join(dir, "site")
		unpackWheel(t, w.name, w.data, site)
		pythons = append(pythons, benchPython(t, rootfs, dir, inRoot(site)))
	}
	suite := filepath.Join(scratch, "suite")
	if err := os.MkdirAll(suite, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, body := range benchSuiteFiles {
		if err := os.WriteFile(filepath.Join(suite, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(scratch, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}

	id := fmt.Sprintf("gw-test-%d", time.Now().UnixNano()%1_000_000_000)
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	doc := fmt.Sprintf(`provider: docker
gateway_id: %s
providers:
  docker:
    image: %s
images:
  pip_index_url: %s
  bases:
    - python: "3.11"
      image: %s
`, id, image, ix.URL, image)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "GATEWAY_CONFIG="+cfg, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms", "TMPDIR="+tmp)
	t.Cleanup(func() { removeContainers(t, pool, id) })
	e.startGateway()

	start := time.Now()
	out, err := e.gwLong(6*time.Minute, "bench", "run", suite, "--env", pythons[0], "--env", pythons[1], "--null", "--python", python,
		"--repeat", "6", "--workers", "1", "--timeout", "60s")
	if err != nil {
		t.Fatalf("bench run: %v\n%s\n--- gateway log:\n%s", err, out, e.gwLog.String())
	}
	t.Logf("A/B run took %s:\n%s", time.Since(start).Round(time.Second), out)
	m := runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	assertNoBenchLeaks(t, e, pool, id)
	verdicts := benchVerdicts(t, e, m[1])
	t.Logf("A/B verdicts: %+v", verdicts)
	for test, v := range verdicts {
		switch {
		case strings.Contains(test, "bench_gwslow"):
			if v.Verdict != "slower" || !(v.P < 0.05) || v.Change < 1 {
				t.Errorf("%s: %+v, want slower with p < 0.05 and more than 2x", test, v)
			}
		default:
			if v.Verdict == "slower" || v.Verdict == "faster" {
				t.Errorf("%s: %+v, want no significant change", test, v)
			}
		}
	}
	if len(verdicts) != 3 {
		t.Errorf("the report has %d tests, want 3: %+v", len(verdicts), verdicts)
	}

	// Each sample carries the scheduler's metrics, not only wall time.
	var hist []struct {
		Env           string  `json:"env"`
		Status        string  `json:"status"`
		WallSeconds   float64 `json:"wall_seconds"`
		PeakUnmanaged int64   `json:"peak_unmanaged"`
		AvgUnmanaged  int64   `json:"avg_unmanaged"`
		CPUSeconds    float64 `json:"cpu_seconds"`
	}
	e.gwJSON(&hist, "bench", "history", "bench_work.py::bench_sum")
	if len(hist) != 18 {
		t.Errorf("history has %d samples of bench_sum, want 18 (6 repeats x A, B, A2)", len(hist))
	}
	cpu := 0.0
	for _, h := range hist {
		// A sleeping task may use less CPU than the clock tick: CPU
		// seconds are checked over all samples.
		if h.Status != "ok" || h.WallSeconds < 0.3 || h.PeakUnmanaged <= 0 || h.AvgUnmanaged <= 0 || h.CPUSeconds < 0 {
			t.Errorf("sample without its metrics: %+v", h)
			break
		}
		cpu += h.CPUSeconds
	}
	if cpu <= 0 {
		t.Errorf("no worker CPU seconds recorded in %d samples", len(hist))
	}

	// An environment that cannot be built (a package with no wheel in the
	// index): its samples are recorded as failed with why, A still runs,
	// and the command fails.
	reqs := filepath.Join(scratch, "requirements.txt")
	if err := os.WriteFile(reqs, []byte("dask==2022.12.1+dfsg\ndistributed==2022.12.1+ds.1\ngwmissing==9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = e.gwLong(3*time.Minute, "bench", "run", suite, "--env", pythons[0], "--env", reqs, "--python", python,
		"--repeat", "1", "--workers", "1", "-k", "bench_sum")
	if err == nil {
		t.Fatalf("a run with an environment that cannot be built succeeded:\n%s", out)
	}
	t.Logf("run with an environment that cannot be built:\n%s", out)
	for _, want := range []string{"environment B (", "cannot run:", "gwmissing==9.9", "B repeat 1/1 bench_work.py::bench_sum  failed:", "1 of 2 samples did not succeed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The final table is the stored report: A's column has its one
	// sample, B's none.
	if !regexp.MustCompile(`bench_work\.py::bench_sum\s+[0-9.]+[mµ]?s \(IQR [^)]*, n=1\)\s+–`).MatchString(out) {
		t.Errorf("A did not run:\n%s", out)
	}
	assertNoBenchLeaks(t, e, pool, id)

	// A/A: the same environment twice, as two sets: nothing is flagged.
	// Its client runs in the clusters (--in-cluster), started by the
	// image's launcher with the gateway's preload: no Python here.
	out, err = e.gwLong(4*time.Minute, "bench", "run", suite, "--env", pythons[0], "--null", "--in-cluster", "--repeat", "6", "--workers", "1")
	if err != nil {
		t.Fatalf("bench run --null --in-cluster: %v\n%s\n--- gateway log:\n%s", err, out, e.gwLog.String())
	}
	if !strings.Contains(out, "3 benchmarks found in the suite next to the scheduler") || strings.Contains(out, "failed") {
		t.Errorf("the A/A run in the clusters:\n%s", out)
	}
	m = runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	assertNoBenchLeaks(t, e, pool, id)
	aa := benchVerdicts(t, e, m[1])
	t.Logf("A/A verdicts: %+v", aa)
	for test, v := range aa {
		if v.Verdict == "slower" || v.Verdict == "faster" {
			t.Errorf("A/A flagged %s: %+v", test, v)
		}
	}
}

// assertNoBenchLeaks checks that a run left no active cluster and no
// running container.
func assertNoBenchLeaks(t *testing.T, e *env, pool *dockertest.Pool, gatewayID string) {
	t.Helper()
	var list []struct{ Name, Status string }
	e.gwJSON(&list, "list")
	if len(list) != 0 {
		t.Errorf("clusters left active after the run: %+v", list)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		running := 0
		for _, c := range containersOf(t, pool, gatewayID) {
			if c.State == "running" {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d containers still running after the run", running)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type benchVerdict struct {
	Verdict string
	P       float64
	Change  float64
}

// benchVerdicts reads a run's report as JSON: each test's verdict of B
// against A (or of A2 against A in an A/A run).
func benchVerdicts(t *testing.T, e *env, run string) map[string]benchVerdict {
	t.Helper()
	var rep json.RawMessage
	e.gwJSON(&rep, "bench", "report", run)
	return parseVerdicts(t, rep)
}

func parseVerdicts(t *testing.T, raw []byte) map[string]benchVerdict {
	t.Helper()
	var rep struct {
		Tests []struct {
			Test    string   `json:"test"`
			Verdict string   `json:"verdict"`
			P       *float64 `json:"p"`
			Change  *float64 `json:"change"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	out := map[string]benchVerdict{}
	for _, x := range rep.Tests {
		v := benchVerdict{Verdict: x.Verdict, P: 1, Change: 0}
		if x.P != nil {
			v.P = *x.P
		}
		if x.Change != nil {
			v.Change = *x.Change
		}
		out[x.Test] = v
	}
	return out
}
