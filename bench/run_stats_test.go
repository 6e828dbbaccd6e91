package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The runner's peak memory is the highest managed+unmanaged sum of one
// reading, not the sum of the two peaks (here 10+1 at one moment and
// 2+8 at another: 11, not 18), and its recorded parts add up to it.
func TestRunnerPeakMemoryIsPeakOfSum(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	script, err := writeScript(dir)
	if err != nil {
		t.Fatal(err)
	}
	prog := fmt.Sprintf(`import importlib.util, json
spec = importlib.util.spec_from_file_location("runner", %q)
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
s = m.Sampler.__new__(m.Sampler)
s.samples = [{"managed": 10, "unmanaged": 1, "spilled": 0}, {"managed": 2, "unmanaged": 8, "spilled": 3}, {"managed": 1, "unmanaged": 1, "spilled": 0}]
print(json.dumps(s.summary()))`, script)
	out, err := exec.Command(testPython, "-c", prog).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got map[string]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got["peak_memory_bytes"] != 11 || got["peak_managed_bytes"] != 10 || got["peak_unmanaged_bytes"] != 1 || got["peak_spilled_bytes"] != 3 {
		t.Errorf("summary %v; want a peak of 11 (10 managed + 1 unmanaged, read together)", got)
	}
	j := SampleJSON(Sample{Status: StatusOK, WallS: 1, Metrics: got})
	if j.PeakManaged+j.PeakUnmanaged != 11 {
		t.Errorf("recorded peak %d + %d, want 11", j.PeakManaged, j.PeakUnmanaged)
	}
}

func TestFinalStatus(t *testing.T) {
	samples := func(ok, failed int) Outcome {
		var o Outcome
		for range ok {
			o.Samples = append(o.Samples, Sample{Status: StatusOK})
		}
		for range failed {
			o.Samples = append(o.Samples, Sample{Status: StatusError})
		}
		return o
	}
	for _, c := range []struct {
		ok, failed int
		want, msg  string
	}{
		{5, 0, RunDone, ""},
		{12, 1, RunPartial, "1 of 13 samples failed"},
		{3, 10, RunFailed, "10 of 13 samples failed (more than 50%)"},
		{0, 4, RunFailed, "no sample succeeded"},
	} {
		st, msg := finalStatus(samples(c.ok, c.failed))
		if st != c.want || msg != c.msg {
			t.Errorf("%d ok, %d failed: %s %q; want %s %q", c.ok, c.failed, st, msg, c.want, c.msg)
		}
	}
}

// Each round rotates the order of the sets, test by test, so that every
// set runs first equally often.
func TestOrderRotates(t *testing.T) {
	r := &run{sets: []*set{{Env: Env{Label: "A"}}, {Env: Env{Label: "B"}}, {Env: Env{Label: "A2"}}}}
	first := map[string]int{}
	var rounds []string
	for rep := 1; rep <= 3; rep++ {
		for ti := range 2 {
			var labels []string
			for _, s := range r.order(rep, ti) {
				labels = append(labels, s.Label)
			}
			first[labels[0]]++
			rounds = append(rounds, strings.Join(labels, ","))
		}
	}
	if fmt.Sprint(rounds) != "[A,B,A2 B,A2,A B,A2,A A2,A,B A2,A,B A,B,A2]" {
		t.Errorf("orders %v", rounds)
	}
	if first["A"] != 2 || first["B"] != 2 || first["A2"] != 2 {
		t.Errorf("first in each test: %v, want each set twice", first)
	}
}

// The progress line of a failed sample shows its exception, not the
// traceback's head or its last source line.
func TestProgressShowsException(t *testing.T) {
	var buf strings.Builder
	r := &run{cfg: Config{Progress: &buf, Repeat: 1, Now: time.Now}, out: &Outcome{}, sets: []*set{{Env: Env{Label: "A"}}}, sampling: time.Now()}
	tb := "Traceback (most recent call last):\n  File \"/tmp/gateway_bench_runner.py\", line 290, in run_one\n    fn(client, **kwargs)\n  File \"bench_x.py\", line 3, in bench_x\n    raise ValueError(\"boom\")\nValueError: boom"
	r.progress(context.Background(), Sample{Test: "bench_x.py::bench_x", Set: "A", Repeat: 1, Status: StatusError, Error: tb}, 1, 2)
	if out := buf.String(); !strings.Contains(out, "error: ValueError: boom") || strings.Contains(out, "Traceback") || strings.Contains(out, "raise") {
		t.Errorf("progress line %q", out)
	}
}

// An estimate that counts benchmarks without history at the timeout says
// it is a bound until the first pass times them.
func TestEstimateWithoutHistoryIsABound(t *testing.T) {
	e := Estimate{Clusters: 2, Samples: 10, Sampling: 100 * time.Minute, Start: time.Minute, Assumed: 1, Default: 10 * time.Minute, Priced: true, PriceHour: 1, Cost: 3.37}
	if s := e.String(); !strings.Contains(s, "at most ~1h41m0s, at most ~$3.37, until one pass of each benchmark is timed") || !strings.Contains(s, "an upper bound") {
		t.Errorf("estimate %q", s)
	}
	e.Assumed, e.FromHistory = 0, 1
	if s := e.String(); strings.Contains(s, "at most") {
		t.Errorf("an estimate from history %q", s)
	}
}

// Adaptive repeats stop sampling a benchmark once its intervals are
// narrower than the precision, and go on with the others.
func TestUnsettled(t *testing.T) {
	r := &run{cfg: Config{Precision: 0.05}, out: &Outcome{}, sets: []*set{{Env: Env{Label: "A"}}, {Env: Env{Label: "B"}}, {Env: Env{Label: "A2"}}}}
	for i := range 10 {
		for _, set := range []string{"A", "B", "A2"} {
			r.out.Samples = append(r.out.Samples,
				Sample{Test: "tight", Set: set, Status: StatusOK, WallS: 1 + 0.001*float64(i%3)},
				Sample{Test: "loose", Set: set, Status: StatusOK, WallS: 1 + 0.5*float64(i%3)})
		}
	}
	// "failing" has no successful sample of B: it cannot be settled.
	r.out.Samples = append(r.out.Samples, Sample{Test: "failing", Set: "A", Status: StatusOK, WallS: 1}, Sample{Test: "failing", Set: "B", Status: StatusError})
	if got := r.unsettled([]string{"tight", "loose", "failing"}); fmt.Sprint(got) != "[loose failing]" {
		t.Errorf("unsettled %v, want [loose failing]", got)
	}
	r.sets = r.sets[:1] // one set: A's own median
	if got := r.unsettled([]string{"tight", "loose"}); fmt.Sprint(got) != "[loose]" {
		t.Errorf("one set: unsettled %v, want [loose]", got)
	}
}
