package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

func TestException(t *testing.T) {
	tb := `Traceback (most recent call last):
  File "/tmp/gateway-bench-1/gateway_bench_runner.py", line 290, in run_one
    fn(client, **kwargs)
  File "/suite/bench_x.py", line 4, in bench_boom
    raise ValueError("boom")
    ^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: boom`
	for _, c := range []struct{ in, want string }{
		{tb, "ValueError: boom"},
		{"error: " + tb, "error: ValueError: boom"},
		// A message over two lines stays whole.
		{tb + "\nsecond line", "ValueError: boom second line"},
		// A chained exception: the last one raised.
		{tb + "\n\nDuring handling of the above exception, another exception occurred:\n\n" + strings.Replace(tb, "ValueError: boom", "KeyError: 'k'", 1), "KeyError: 'k'"},
		// The gateway's own messages: their first line.
		{"cluster c1 FAILED mid-run: the scheduler exited\nlog tail...", "cluster c1 FAILED mid-run: the scheduler exited"},
		{"did not finish within --timeout 10m0s", "did not finish within --timeout 10m0s"},
	} {
		if got := Exception(c.in); got != c.want {
			t.Errorf("Exception(%.40q…) = %q, want %q", c.in, got, c.want)
		}
	}
}

func sample(test, env string, rep int, wall float64) apitype.BenchSampleJSON {
	return apitype.BenchSampleJSON{Test: test, Env: env, Repeat: rep, WallSeconds: wall, Status: "ok"}
}

// Failed samples list each distinct exception once, with its count, the
// most frequent first.
func TestBuildErrorsDeduplicated(t *testing.T) {
	run := apitype.BenchRunJSON{ID: "br-1", Envs: []apitype.BenchEnvJSON{{Label: "A"}}}
	tb := "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\n%s"
	for i := range 4 {
		run.Samples = append(run.Samples, apitype.BenchSampleJSON{Test: "bench_x", Env: "A", Repeat: i, Status: "failed", Error: fmt.Sprintf(tb, "MemoryError: out")})
	}
	run.Samples = append(run.Samples, apitype.BenchSampleJSON{Test: "bench_x", Env: "A", Repeat: 4, Status: "timeout", Error: "timeout: did not finish within --timeout 1s"})
	rep := Build(run, DefaultThreshold)
	got := rep.Tests[0].Errors
	want := []ErrorCount{{"MemoryError: out", 4}, {"timeout: did not finish within --timeout 1s", 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) || rep.Tests[0].Failed != 5 {
		t.Errorf("errors %v (failed %d), want %v", got, rep.Tests[0].Failed, want)
	}
	if p := NewPage(rep, nil); fmt.Sprint(p.Tests[0].Errors) != "[MemoryError: out (4 samples) timeout: did not finish within --timeout 1s (1 sample)]" {
		t.Errorf("page errors %q", p.Tests[0].Errors)
	}
}

// An A/A-only run shows its noise band: it is what --null measures.
func TestBuildAAOnlyShowsBand(t *testing.T) {
	run := apitype.BenchRunJSON{ID: "br-1", Envs: []apitype.BenchEnvJSON{{Label: "A"}, {Label: "A2"}}}
	for i, v := range []float64{1, 1.5, 0.8, 1.2, 1.1} {
		run.Samples = append(run.Samples, sample("bench_x", "A", i, v), sample("bench_x", "A2", i, v*1.05))
	}
	rep := Build(run, DefaultThreshold)
	tr := rep.Tests[0]
	if rep.Candidate != "A2" || tr.Noise == nil || *tr.Noise <= 0 || tr.B == nil || tr.A2 != nil {
		t.Fatalf("A/A-only report: candidate %q, test %+v; want the A/A band measured", rep.Candidate, tr)
	}
	if b := NewPage(rep, nil).Tests[0].Band; !strings.HasPrefix(b, "±") {
		t.Errorf("the page shows the band as %q", b)
	}
}

// The summary and the box plot use medians and quartiles.
func TestBuildMediansAndBoxes(t *testing.T) {
	run := apitype.BenchRunJSON{ID: "br-1", Envs: []apitype.BenchEnvJSON{{Label: "A"}, {Label: "B"}}}
	for i, v := range []float64{1, 2, 3, 4, 10} { // an outlier moves the mean, not the median
		run.Samples = append(run.Samples, sample("bench_x", "A", i, v), sample("bench_x", "B", i, v*2))
	}
	rep := Build(run, DefaultThreshold)
	a := rep.Tests[0].A
	if a.Median != 3 || a.Q1 != 2 || a.Q3 != 4 || a.Min != 1 || a.Max != 10 || a.Mean != 4 {
		t.Errorf("A described as %+v", a)
	}
	if s := Summary(a); s != "3.00s (IQR 2.00s–4.00s, n=5)" {
		t.Errorf("summary %q", s)
	}
	bars := NewPage(rep, nil).Tests[0].Bars
	if len(bars) != 2 {
		t.Fatalf("%d boxes, want 2", len(bars))
	}
	for _, b := range bars {
		// Box from Q3 (top) to Q1, the median inside, whiskers to the
		// extremes, one dot per sample.
		if !(b.ErrY2 < b.Y && b.Y < b.MedianY && b.MedianY < b.Y+b.H && b.Y+b.H < b.ErrY1) || len(b.Dots) != 5 || b.ValueText != Seconds(map[string]float64{"A": 3, "B": 6}[b.Env]) {
			t.Errorf("box %s: %+v", b.Env, b)
		}
	}
}

// The history chart keeps A, A2 and B apart, though A and A2 run the
// same environment.
func TestHistorySeparatesSets(t *testing.T) {
	at := time.Date(2026, 12, 1, 3, 4, 0, 0, time.UTC)
	var pts []apitype.BenchPointJSON
	for _, s := range []struct{ label, name string }{{"A", "base"}, {"A2", "base"}, {"B", "cand"}} {
		pts = append(pts, apitype.BenchPointJSON{BenchSampleJSON: apitype.BenchSampleJSON{RunID: "r1", Env: s.label, Status: "ok", WallSeconds: 1}, EnvName: s.name, RunStartedAt: at})
	}
	h := NewHistory("bench_x", pts)
	var names []string
	for _, s := range h.Series {
		names = append(names, s.Name)
	}
	if fmt.Sprint(names) != "[base (A) base (A2) cand (B)]" {
		t.Errorf("series %v", names)
	}
	if len(h.XTicks) != 1 || h.XTicks[0].Label != "2026-12-01 03:04 UTC" {
		t.Errorf("one run's axis: %+v", h.XTicks)
	}
}
