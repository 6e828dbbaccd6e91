package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// noisy returns n values around mid with a relative spread of cv, from a
// fixed seed.
func noisy(seed uint64, n int, mid, cv float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = mid * (1 + cv*r.NormFloat64())
	}
	return out
}

func TestCompareVerdicts(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, b, a2 []float64
		want     string
		reason   string
	}{
		{"5x slower", noisy(1, 8, 1, 0.03), noisy(2, 8, 5, 0.03), nil, Slower, "exceeds"},
		{"twice as fast", noisy(3, 8, 1, 0.03), noisy(4, 8, 0.5, 0.03), noisy(5, 8, 1, 0.03), Faster, "exceeds"},
		{"same", noisy(6, 8, 1, 0.03), noisy(7, 8, 1, 0.03), noisy(8, 8, 1, 0.03), NoChange, "p ≥ α"},
		{"same, no A/A", noisy(9, 8, 1, 0.03), noisy(10, 8, 1, 0.03), nil, NoChange, "p ≥ α"},
		{"too few", []float64{1, 1.1}, []float64{2, 2.1, 2.2}, nil, TooNoisy, "too few"},
		// A 15% shift that is significant but smaller than what A shows
		// against itself.
		{"within A/A band", []float64{1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99},
			[]float64{1.15, 1.16, 1.14, 1.17, 1.13, 1.15, 1.16, 1.14},
			[]float64{1.30, 1.35, 1.28, 1.33, 1.31, 1.29, 1.34, 1.32}, TooNoisy, "within the A/A band"},
		// A 5 % shift: significant, but under the 10 % threshold.
		{"small but significant", noisy(14, 8, 1, 0.005), noisy(15, 8, 1.05, 0.005), nil, NoChange, "smaller than the threshold"},
		// ±30 % noise: nothing significant, and A/A says it could not see 10 %.
		{"noisy test", noisy(11, 6, 1, 0.3), noisy(12, 6, 1, 0.3), noisy(13, 6, 1, 0.3), TooNoisy, "wider than the threshold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Compare(c.a, c.b, c.a2, CompareOptions{Seed: 42})
			if got.Verdict != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("verdict %q (%s), want %q; change %.3f p %.4g interval [%.3f, %.3f] noise %.3f",
					got.Verdict, got.Reason, c.want, got.Change, got.P, got.Lo, got.Hi, got.Noise)
			}
		})
	}
}

func TestCompareFigures(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5}
	b := []float64{2, 4, 6, 8, 10}
	c := Compare(a, b, nil, CompareOptions{})
	if c.A.Median != 3 || c.B.Median != 6 || c.Change != 1 {
		t.Errorf("medians %v, %v change %v; want 3, 6, 1", c.A.Median, c.B.Median, c.Change)
	}
	if !math.IsNaN(c.Noise) {
		t.Errorf("noise %v without A/A, want NaN", c.Noise)
	}
	if !(c.Lo <= c.Change && c.Change <= c.Hi) {
		t.Errorf("interval [%v, %v] misses the change %v", c.Lo, c.Hi, c.Change)
	}
}

func TestFindRegressions(t *testing.T) {
	day := 24 * time.Hour
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	var obs []Obs
	// Nightly runs over 10 days, 5 samples each. "step" is 1 s until the
	// last night, then 1.5 s; "flat" scatters ±20 % around 2 s every
	// night, the last included; "fast" gets faster.
	for d := range 10 {
		run := "r" + string(rune('a'+d))
		at := start.Add(time.Duration(d) * day)
		step := 1.0
		fast := 3.0
		if d == 9 {
			step, fast = 1.5, 2.0
		}
		for i, v := range noisy(uint64(100+d), 5, step, 0.02) {
			obs = append(obs, Obs{Test: "step", Run: run, At: at, Value: v}, Obs{Test: "fast", Run: run, At: at, Value: noisy(uint64(200+d), 5, fast, 0.02)[i]})
		}
		for _, v := range noisy(uint64(300+d), 5, 2, 0.2) {
			obs = append(obs, Obs{Test: "flat", Run: run, At: at, Value: v})
		}
	}
	obs = append(obs, Obs{Test: "new", Run: "rj", At: start.Add(9 * day), Value: 1})
	got := FindRegressions(obs, 7*day, 0.10, 0.05)
	want := map[string]bool{"fast": false, "flat": false, "new": false, "step": true}
	if len(got) != len(want) {
		t.Fatalf("%d findings, want %d: %+v", len(got), len(want), got)
	}
	for _, f := range got {
		if f.Regressed != want[f.Test] {
			t.Errorf("%s: regressed %v, want %v (%+v)", f.Test, f.Regressed, want[f.Test], f)
		}
		if f.Run != "rj" {
			t.Errorf("%s: latest run %s, want rj", f.Test, f.Run)
		}
	}
	step := got[3]
	if step.Test != "step" || step.Baseline != 35 || step.BaselineRuns != 7 || step.Latest != 5 || math.Abs(step.Change-0.5) > 0.05 || step.P >= 0.001 ||
		step.Method != MethodHistory || step.DF != 6 {
		t.Errorf("step: %+v; want 7 nights × 5 values of baseline, 5 latest, change ≈ +50%%, p < 0.001, spread from the 7 runs' history", step)
	}
	if !strings.Contains(step.MethodText(), "7 earlier runs") {
		t.Errorf("method text %q does not say where the spread came from", step.MethodText())
	}
	if got[2].Reason == "" || got[2].Test != "new" {
		t.Errorf("a test with one value should say why it was not checked: %+v", got[2])
	}
}
