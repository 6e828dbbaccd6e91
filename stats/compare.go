package stats

import (
	"fmt"
	"math"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Verdicts of a comparison.
const (
	Faster   = "faster"
	Slower   = "slower"
	NoChange = "no significant change"
	TooNoisy = "too noisy to tell"
)

// CompareOptions tune Compare. Zero fields take the defaults.
type CompareOptions struct {
	Alpha     float64 // significance level of the Mann–Whitney test; 0.05
	Threshold float64 // relative change that matters (0.10 is 10 %); 0.10
	Reps      int     // bootstrap replicates; 2000
	Conf      float64 // bootstrap confidence; 0.95
	Seed      uint64  // bootstrap seed (reports are reproducible)
	MinN      int     // fewest values on each side for a verdict; 3
}

func (o CompareOptions) withDefaults() CompareOptions {
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.Threshold <= 0 {
		o.Threshold = 0.10
	}
	if o.Reps <= 0 {
		o.Reps = 2000
	}
	if o.Conf <= 0 || o.Conf >= 1 {
		o.Conf = 0.95
	}
	if o.MinN <= 0 {
		o.MinN = 3
	}
	return o
}

// Described is the summary of one sample.
type Described struct {
	N                int
	Mean, Median, SD float64
}

// Describe summarises x.
func Describe(x []float64) Described {
	m, md, sd := Summary(x)
	return Described{N: len(x), Mean: m, Median: md, SD: sd}
}

// Comparison is one test's A against B.
type Comparison struct {
	A, B Described
	// Change is median(B)/median(A) − 1: +0.5 is 50 % slower.
	Change float64
	P      float64 // two-sided Mann–Whitney p of A against B
	Lo, Hi float64 // bootstrap interval of Change
	// Noise is the A/A band: the largest absolute end of the bootstrap
	// interval of median(A2)/median(A) − 1. NaN when no A/A was measured.
	Noise   float64
	Verdict string
	Reason  string // why that verdict, in words
}

// Compare compares a test's baseline a with candidate b, given its A/A
// set a2 (nil when not measured). A change must be both significant and
// large enough to matter. The verdict rule, in order:
//
//  1. fewer than MinN values on either side: too noisy to tell;
//  2. p < Alpha and |Change| > max(Noise, Threshold): slower (Change > 0)
//     or faster;
//  3. p < Alpha and |Change| ≤ Noise: too noisy to tell (A against
//     itself moves as much);
//  4. p < Alpha and |Change| ≤ Threshold: no significant change (real,
//     perhaps, but smaller than what matters);
//  5. p ≥ Alpha and a measured Noise wider than Threshold: too noisy to
//     tell (the test cannot see a change of the size that matters);
//  6. otherwise: no significant change.
//
// Without A/A the band is taken as zero: rules 3 and 5 never apply.
func Compare(a, b, a2 []float64, o CompareOptions) Comparison {
	o = o.withDefaults()
	c := Comparison{A: Describe(a), B: Describe(b), Change: math.NaN(), P: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Noise: math.NaN()}
	if len(a2) >= o.MinN && len(a) >= o.MinN {
		lo, hi := BootstrapDiff(a, a2, o.Reps, o.Conf, o.Seed+1)
		c.Noise = math.Max(math.Abs(lo), math.Abs(hi))
	}
	if len(a) > 0 && len(b) > 0 && c.A.Median != 0 {
		c.Change = c.B.Median/c.A.Median - 1
		c.Lo, c.Hi = BootstrapDiff(a, b, o.Reps, o.Conf, o.Seed)
	}
	if len(a) > 0 && len(b) > 0 {
		_, c.P, _ = MannWhitney(a, b)
	}
	noise := c.Noise
	if math.IsNaN(noise) {
		noise = 0
	}
	switch {
	case len(a) < o.MinN || len(b) < o.MinN || math.IsNaN(c.Change) || math.IsNaN(c.P):
		c.Verdict, c.Reason = TooNoisy, "too few successful samples"
	case c.P < o.Alpha && math.Abs(c.Change) > math.Max(noise, o.Threshold):
		c.Verdict, c.Reason = Slower, "p < α and the change exceeds the threshold and the A/A band"
		if c.Change < 0 {
			c.Verdict = Faster
		}
	case c.P < o.Alpha && math.Abs(c.Change) <= noise:
		c.Verdict, c.Reason = TooNoisy, "significant, but within the A/A band"
	case c.P < o.Alpha:
		c.Verdict, c.Reason = NoChange, "significant, but smaller than the threshold"
	case noise > o.Threshold:
		c.Verdict, c.Reason = TooNoisy, "the A/A band is wider than the threshold"
	default:
		c.Verdict, c.Reason = NoChange, "p ≥ α"
	}
	return c
}

// Obs is one successful sample of a test in a run, for regression checks.
type Obs struct {
	Test  string
	Run   string
	At    time.Time // the run's start
	Value float64   // wall seconds
	// Set is the sample's set in its run (A, B, A2). A run that measured
	// the environment twice (A and A2, --null) gives a within-run A/A
	// pair; "" counts as one set.
	Set string
}

// Methods of a regression check: how the run-to-run spread was found.
const (
	MethodHistory = "history" // the spread of the earlier runs' medians
	MethodAA      = "aa"      // the within-run A/A of runs that measured one
)

// minHistoryRuns is how many earlier runs the spread is estimated from
// (two degrees of freedom at least); with fewer, only a within-run A/A
// gives one.
const minHistoryRuns = 3

// Finding is the check of one test: its latest run against the runs of
// the window before it. Each run counts as one observation (its median):
// samples within a run share its host, cache and neighbours, so they are
// not independent of each other, and run-to-run drift is the largest
// noise there is.
type Finding struct {
	Test           string
	Run            string // the latest run
	At             time.Time
	Baseline       int     // values of the earlier runs in the window
	BaselineRuns   int     // earlier runs in the window
	Latest         int     // values of the latest run
	BaselineMedian float64 // geometric mean of the earlier runs' medians
	LatestMedian   float64 // the latest run's median
	Change         float64 // LatestMedian/BaselineMedian − 1
	// Spread is the run-to-run standard deviation of log(median), from
	// Method: the earlier runs' medians, or the within-run A/A pairs.
	Spread    float64
	Method    string
	DF        int     // its degrees of freedom
	P         float64 // one-sided: the chance of a latest run this slow
	Regressed bool
	Reason    string // why not checked, when it was not
}

// MethodText says in words how a finding's spread was estimated.
func (f Finding) MethodText() string {
	switch f.Method {
	case MethodHistory:
		return fmt.Sprintf("each run one observation (its median); run-to-run spread ±%.1f%% from the %d earlier runs' medians; one-sided t-test of the latest run against them", 100*math.Expm1(f.Spread), f.BaselineRuns)
	case MethodAA:
		return fmt.Sprintf("each run one observation (its median); run-to-run spread ±%.1f%% from the within-run A/A of %d runs (fewer than %d earlier runs); one-sided t-test", 100*math.Expm1(f.Spread), f.DF, minHistoryRuns)
	}
	return ""
}

// FindRegressions checks each test's latest run (the one that started
// last) against the other runs that started within window before it,
// run against runs: each run is one observation, the log of its median.
// The spread between runs is the standard deviation of the earlier runs'
// log-medians when there are at least 3 of them (MethodHistory), else
// the within-run A/A pairs of the window's runs (MethodAA: half the
// mean squared log-difference of A and A2). The latest run regressed
// when it is at least threshold (0.10 is 10 %) slower than the
// geometric mean of the earlier runs and a one-sided Student t
// prediction test (t = (x − ȳ)/(s·√(1+1/k))) gives p < alpha. A test
// whose spread cannot be estimated is reported, not flagged. Findings
// are sorted by test name.
func FindRegressions(obs []Obs, window time.Duration, threshold, alpha float64) []Finding {
	byTest := map[string][]Obs{}
	for _, o := range obs {
		if math.IsNaN(o.Value) || math.IsInf(o.Value, 0) || o.Value <= 0 {
			continue
		}
		byTest[o.Test] = append(byTest[o.Test], o)
	}
	tests := make([]string, 0, len(byTest))
	for t := range byTest {
		tests = append(tests, t)
	}
	sort.Strings(tests)
	out := make([]Finding, 0, len(tests))
	for _, t := range tests {
		out = append(out, checkTest(t, byTest[t], window, threshold, alpha))
	}
	return out
}

// runObs is one run of a test: its values by set.
type runObs struct {
	id   string
	at   time.Time
	main []float64 // the set checked (every set but A2)
	aa   []float64 // A2, when the run measured one
}

func checkTest(test string, os []Obs, window time.Duration, threshold, alpha float64) Finding {
	latest := os[0]
	for _, o := range os[1:] {
		if o.At.After(latest.At) || (o.At.Equal(latest.At) && o.Run > latest.Run) {
			latest = o
		}
	}
	runs := map[string]*runObs{}
	var order []string
	for _, o := range os {
		if o.Run != latest.Run && (o.At.After(latest.At) || latest.At.Sub(o.At) > window) {
			continue
		}
		r := runs[o.Run]
		if r == nil {
			r = &runObs{id: o.Run, at: o.At}
			runs[o.Run] = r
			order = append(order, o.Run)
		}
		if o.Set == "A2" {
			r.aa = append(r.aa, o.Value)
		} else {
			r.main = append(r.main, o.Value)
		}
	}
	last := runs[latest.Run]
	f := Finding{Test: test, Run: latest.Run, At: latest.At, Latest: len(last.main), LatestMedian: Median(last.main),
		BaselineMedian: math.NaN(), Change: math.NaN(), P: math.NaN(), Spread: math.NaN()}
	var base []float64 // log-medians of the earlier runs
	var aaSq float64
	aaN := 0
	for _, id := range order {
		r := runs[id]
		if len(r.main) > 0 && len(r.aa) > 0 {
			d := math.Log(Median(r.aa)) - math.Log(Median(r.main))
			aaSq += d * d
			aaN++
		}
		if id == latest.Run || len(r.main) == 0 {
			continue
		}
		base = append(base, math.Log(Median(r.main)))
		f.Baseline += len(r.main)
	}
	f.BaselineRuns = len(base)
	if len(base) > 0 {
		f.BaselineMedian = math.Exp(stat.Mean(base, nil))
	}
	switch {
	case len(last.main) == 0:
		f.Reason = "the latest run has no successful sample of it"
		return f
	case len(base) == 0:
		f.Reason = "no earlier run in the window"
		return f
	case len(base) >= minHistoryRuns:
		f.Method, f.DF = MethodHistory, len(base)-1
		f.Spread = stat.StdDev(base, nil)
	case aaN > 0:
		// A and A2 each carry the run's noise: their difference has twice
		// its variance.
		f.Method, f.DF = MethodAA, aaN
		f.Spread = math.Sqrt(aaSq / float64(2*aaN))
	default:
		f.Reason = fmt.Sprintf("%d earlier run(s) in the window and no within-run A/A (--null): the run-to-run spread cannot be estimated (it needs %d earlier runs)", len(base), minHistoryRuns)
		return f
	}
	f.Change = f.LatestMedian/f.BaselineMedian - 1
	diff := math.Log(f.LatestMedian) - stat.Mean(base, nil)
	scale := f.Spread * math.Sqrt(1+1/float64(len(base)))
	switch {
	case scale > 0:
		f.P = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(f.DF)}.Survival(diff / scale)
	case diff > 0:
		f.P = 0 // no spread at all: any slowdown stands out
	default:
		f.P = 1
	}
	f.Regressed = f.Change >= threshold && f.P < alpha
	return f
}
