package integration

import (
	"strings"
	"testing"
	"time"
)

// TestBenchConfigSets: on the local provider, which runs no images, an
// A/B run of one environment whose B differs by a Dask config value
// (read by one benchmark's task, on the worker, through dask.config)
// flags that benchmark slower and not the other, and the report names
// what differs between the sets.
func TestBenchConfigSets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		"bench_cfg.py": `import time

def bench_configured(client):
    def work():
        import dask, time
        time.sleep(float(dask.config.get("benchsets.delay", 0)))
        return 1
    client.submit(work, pure=False).result()

def bench_plain(client):
    def work():
        import time
        time.sleep(0.05)
        return 1
    client.submit(work, pure=False).result()
`,
	})
	start := time.Now()
	out, err := e.gwLong(5*time.Minute, "bench", "run", suite, "--repeat", "6", "--workers", "1", "--timeout", "1m", "--python", python,
		"--b-dask-config", "benchsets.delay=0.5")
	t.Logf("the run took %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("the run failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "auto + benchsets.delay=0.5") {
		t.Errorf("the run does not name set B's configuration:\n%s", out)
	}
	m := runIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	v := benchVerdicts(t, e, m[1])
	if got := v["bench_cfg.py::bench_configured"].Verdict; got != "slower" {
		t.Errorf("bench_configured: %q, want slower (%+v)\n%s", got, v, out)
	}
	if got := v["bench_cfg.py::bench_plain"].Verdict; got == "slower" || got == "faster" {
		t.Errorf("bench_plain: %q, want no change flagged (%+v)\n%s", got, v, out)
	}
	text, err := e.gw("bench", "report", m[1])
	if err != nil || !strings.Contains(text, "auto + benchsets.delay=0.5") {
		t.Errorf("the stored report does not name set B's configuration (%v):\n%s", err, text)
	}

	// Refused before anything starts: a reserved variable, and two sets
	// that do not differ.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--b-env-var", "LD_PRELOAD=/tmp/x.so"}, "LD_PRELOAD is reserved"},
		{[]string{"--b-dask-config", "distributed.comm.timeouts.connect=1s"}, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT is reserved"},
		{[]string{"--a-env-var", "X=1", "--b-env-var", "X=1"}, "sets A and B are the same"},
	} {
		out, err := e.gwLong(time.Minute, append([]string{"bench", "run", suite, "--python", python}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: err %v, want %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}
