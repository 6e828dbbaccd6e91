package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The tests below check the statistics against known truth: synthetic
// samples with a chosen effect and chosen noise (within a run, and
// between runs: a host, cache or neighbour that makes a whole run
// faster or slower), over many seeds, so that the false-positive and
// false-negative rates are measured rather than assumed. The seeds are
// fixed: the rates are the same on every run of the tests.

// world draws benchmark samples: a run's drift multiplies every sample of
// the run (all its sets, which are interleaved), each sample has its own
// noise, and effect multiplies the candidate's samples.
type world struct {
	rng           *rand.Rand
	within, runSD float64 // log-normal sds: sample to sample, run to run
}

func newWorld(seed uint64, within, runSD float64) *world {
	return &world{rng: rand.New(rand.NewPCG(seed, 0x5eed)), within: within, runSD: runSD}
}

// run is one run's drift factor.
func (w *world) run() float64 { return math.Exp(w.runSD * w.rng.NormFloat64()) }

// samples are n samples of a benchmark of 1 s in a run with drift d,
// slowed by effect (0.3 is 30 % slower).
func (w *world) samples(n int, d, effect float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = d * (1 + effect) * math.Exp(w.within*w.rng.NormFloat64())
	}
	return out
}

// margin is how far above p an observed rate over n trials may be by
// chance (three standard errors).
func margin(p float64, n int) float64 { return 3 * math.Sqrt(p*(1-p)/float64(n)) }

// truthSeeds is how many worlds each rate is measured over: the rates'
// standard error is then under 1 %; checkSeeds (the run-level check is
// cheap) brings it to 0.5 %.
const (
	truthSeeds = 600
	checkSeeds = 2000
)

func TestTruthCompareFalsePositives(t *testing.T) {
	// A/B of identical software: any verdict of faster or slower is a
	// false positive. Between-run drift hits both sets alike (they are
	// interleaved), so it must not matter.
	for _, c := range []struct {
		name      string
		threshold float64 // tiny: the test alone decides
		within    float64
		n         int
	}{
		{"test alone, 5% noise, n=5", 1e-9, 0.05, 5},
		{"test alone, 20% noise, n=10", 1e-9, 0.20, 10},
		{"10% threshold, 20% noise, n=10", 0.10, 0.20, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			fp := 0
			for seed := range uint64(truthSeeds) {
				w := newWorld(seed, c.within, 0.15)
				d := w.run()
				cmp := Compare(w.samples(c.n, d, 0), w.samples(c.n, d, 0), nil, CompareOptions{Threshold: c.threshold, Reps: 200, Seed: seed})
				if cmp.Verdict == Faster || cmp.Verdict == Slower {
					fp++
				}
			}
			rate := float64(fp) / truthSeeds
			if rate > 0.05+margin(0.05, truthSeeds) {
				t.Errorf("A/A false-positive rate %.3f over %d seeds, want at most α = 0.05", rate, truthSeeds)
			}
			t.Logf("false-positive rate %.3f", rate)
		})
	}
}

func TestTruthCompareFalseNegatives(t *testing.T) {
	for _, c := range []struct {
		effect, within float64
		n              int
		want           string
	}{
		{0.30, 0.05, 10, Slower},
		{-0.30, 0.05, 10, Faster},
		{1.00, 0.20, 10, Slower},
	} {
		t.Run(fmt.Sprintf("%+.0f%% at %.0f%% noise", c.effect*100, c.within*100), func(t *testing.T) {
			miss := 0
			for seed := range uint64(truthSeeds) {
				w := newWorld(seed, c.within, 0.15)
				d := w.run()
				cmp := Compare(w.samples(c.n, d, 0), w.samples(c.n, d, c.effect), nil, CompareOptions{Reps: 200, Seed: seed})
				if cmp.Verdict != c.want {
					miss++
				}
			}
			if rate := float64(miss) / truthSeeds; rate > 0.05 {
				t.Errorf("missed a %+.0f%% change in %.1f%% of %d seeds, want at most 5%%", c.effect*100, rate*100, truthSeeds)
			}
		})
	}
}

// history is k earlier runs and a latest one, n samples each, a day
// apart, with the latest slowed by effect; aa adds an A2 set to each run.
func history(w *world, k, n int, effect float64, aa bool) []Obs {
	start := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	var obs []Obs
	for r := 0; r <= k; r++ {
		d := w.run()
		e := 0.0
		if r == k {
			e = effect
		}
		id := fmt.Sprintf("r%02d", r)
		at := start.Add(time.Duration(r) * 24 * time.Hour)
		for _, v := range w.samples(n, d, e) {
			obs = append(obs, Obs{Test: "t", Run: id, At: at, Value: v, Set: "A"})
		}
		if aa {
			for _, v := range w.samples(n, d, e) {
				obs = append(obs, Obs{Test: "t", Run: id, At: at, Value: v, Set: "A2"})
			}
		}
	}
	return obs
}

// pooledRegressed is the check as it was: every sample an independent
// observation, the latest run's against the earlier runs'.
func pooledRegressed(obs []Obs, threshold, alpha float64) bool {
	var base, last []float64
	for _, o := range obs {
		if o.Set == "A2" {
			continue
		}
		if o.Run == obs[len(obs)-1].Run {
			last = append(last, o.Value)
		} else {
			base = append(base, o.Value)
		}
	}
	_, p, _ := MannWhitney(base, last)
	return Median(last)/Median(base)-1 >= threshold && p < alpha
}

func TestTruthCheckFalsePositivesWithDrift(t *testing.T) {
	// Identical software, runs that drift ±10 % from one to the next,
	// 3 % noise within a run: the latest run is no slower.
	const window = 30 * 24 * time.Hour
	for _, threshold := range []float64{1e-9, 0.10} {
		t.Run(fmt.Sprintf("threshold %g", threshold), func(t *testing.T) {
			fp, pooled := 0, 0
			for seed := range uint64(checkSeeds) {
				obs := history(newWorld(seed, 0.03, 0.10), 8, 5, 0, false)
				f := FindRegressions(obs, window, threshold, 0.05)
				if len(f) != 1 || f[0].Method != MethodHistory {
					t.Fatalf("findings %+v, want one checked against its history", f)
				}
				if f[0].Regressed {
					fp++
				}
				if threshold < 0.01 && pooledRegressed(obs, threshold, 0.05) {
					pooled++
				}
			}
			rate, old := float64(fp)/checkSeeds, float64(pooled)/checkSeeds
			if rate > 0.05+margin(0.05, checkSeeds) {
				t.Errorf("false-positive rate %.3f over %d seeds, want at most α = 0.05", rate, checkSeeds)
			}
			// The fixture holds real drift: pooling the samples (the old
			// check) is fooled by it, several times as often as α.
			if threshold < 0.01 && old < 3*0.05 {
				t.Errorf("pooled samples flagged %.3f of the runs: the drift in the fixture is too small to tell the methods apart", old)
			}
			t.Logf("false-positive rate %.3f (pooled samples, without a threshold: %.3f)", rate, old)
		})
	}
}

func TestTruthCheckFindsRegressions(t *testing.T) {
	const window = 30 * 24 * time.Hour
	miss := 0
	for seed := range uint64(checkSeeds) {
		f := FindRegressions(history(newWorld(seed, 0.03, 0.08), 8, 5, 0.5, false), window, 0.10, 0.05)
		if !f[0].Regressed {
			miss++
		}
	}
	if rate := float64(miss) / checkSeeds; rate > 0.10 {
		t.Errorf("missed a +50%% regression (8%% drift between runs) in %.1f%% of %d seeds, want at most 10%%", rate*100, checkSeeds)
	}
}

func TestTruthCheckWithinRunAA(t *testing.T) {
	// One earlier run: the spread comes from the runs' own A/A. It sees
	// no drift between runs (the method says so), so this world has none.
	const window = 30 * 24 * time.Hour
	fp, miss := 0, 0
	for seed := range uint64(checkSeeds) {
		f := FindRegressions(history(newWorld(seed, 0.05, 0), 1, 10, 0, true), window, 1e-9, 0.05)
		if f[0].Method != MethodAA || f[0].DF != 2 {
			t.Fatalf("finding %+v, want the spread from the A/A of 2 runs", f[0])
		}
		if f[0].Regressed {
			fp++
		}
		g := FindRegressions(history(newWorld(seed, 0.05, 0), 1, 10, 0.5, true), window, 0.10, 0.05)
		if !g[0].Regressed {
			miss++
		}
	}
	if rate := float64(fp) / checkSeeds; rate > 0.05+margin(0.05, checkSeeds) {
		t.Errorf("false-positive rate %.3f with the A/A's spread, want at most α = 0.05", rate)
	}
	if rate := float64(miss) / checkSeeds; rate > 0.10 {
		t.Errorf("missed a +50%% regression in %.1f%% of seeds with the A/A's spread, want at most 10%%", rate*100)
	}
}

func TestTruthAdaptiveRepeatsReachNoChange(t *testing.T) {
	// An unaffected benchmark with 10 % noise, measured with an A/A set:
	// at 5 repeats its A/A band is wider than the 10 % threshold, so the
	// verdict is "too noisy to tell"; sampling until the intervals are
	// narrower than 4 % (at most 60 repeats) gets "no significant change".
	const precision, maxN, worlds = 0.04, 60, 50
	fixed, adaptive := 0, 0
	for seed := range uint64(worlds) {
		w := newWorld(seed, 0.10, 0.10)
		d := w.run()
		a, b, a2 := w.samples(5, d, 0), w.samples(5, d, 0), w.samples(5, d, 0)
		if Compare(a, b, a2, CompareOptions{Reps: 200, Seed: seed}).Verdict == NoChange {
			fixed++
		}
		// Five rounds at a time, as a run checks after each round past
		// --repeat.
		for len(a) < maxN && (HalfWidth(a, b, 100, 0.95, seed) > precision || HalfWidth(a, a2, 100, 0.95, seed) > precision) {
			a, b, a2 = append(a, w.samples(5, d, 0)...), append(b, w.samples(5, d, 0)...), append(a2, w.samples(5, d, 0)...)
		}
		if Compare(a, b, a2, CompareOptions{Reps: 200, Seed: seed}).Verdict == NoChange {
			adaptive++
		}
	}
	if fixed > worlds/2 || adaptive < worlds*8/10 {
		t.Errorf("no change called in %d of %d at 5 repeats and %d sampling to ±%.0f%%; want under half, then at least 80%%", fixed, worlds, adaptive, precision*100)
	}
	t.Logf("no change: %d/%d at 5 repeats, %d adaptive", fixed, worlds, adaptive)
}

func TestHalfWidth(t *testing.T) {
	if !math.IsNaN(HalfWidth([]float64{1}, nil, 100, 0.95, 1)) || !math.IsNaN(HalfWidth([]float64{1, 2}, []float64{1}, 100, 0.95, 1)) {
		t.Error("a half-width from fewer than 2 values")
	}
	if hw := HalfWidth([]float64{1, 1, 1, 1}, nil, 100, 0.95, 1); hw != 0 {
		t.Errorf("equal values: half-width %v, want 0", hw)
	}
	narrow := HalfWidth(noisy(1, 40, 1, 0.01), nil, 500, 0.95, 1)
	wide := HalfWidth(noisy(1, 40, 1, 0.2), nil, 500, 0.95, 1)
	if !(narrow < 0.01 && wide > narrow*5) {
		t.Errorf("half-widths %v (1%% noise) and %v (20%% noise)", narrow, wide)
	}
}
