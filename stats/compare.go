package stats

import (
	"math"
	"sort"
	"time"
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
}

// Finding is the check of one test: its latest run against the runs of
// the window before it.
type Finding struct {
	Test           string
	Run            string // the latest run
	At             time.Time
	Baseline       int // values in the window before the latest run
	Latest         int // values of the latest run
	BaselineMedian float64
	LatestMedian   float64
	Change         float64 // LatestMedian/BaselineMedian − 1
	P              float64
	Regressed      bool
	Reason         string // why not checked, when it was not
}

// FindRegressions checks each test's latest run (the one that started
// last) against the values of the other runs that started within window
// before it. A test regressed when its median grew by at least threshold
// (0.10 is 10 %) and the two-sided Mann–Whitney p is below alpha. A test
// with fewer than 3 values on either side is reported, not flagged.
// Findings are sorted by test name.
func FindRegressions(obs []Obs, window time.Duration, threshold, alpha float64) []Finding {
	byTest := map[string][]Obs{}
	for _, o := range obs {
		if math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
			continue
		}
		byTest[o.Test] = append(byTest[o.Test], o)
	}
	tests := make([]string, 0, len(byTest))
	for t := range byTest {
		tests = append(tests, t)
	}
	sort.Strings(tests)
	var out []Finding
	for _, t := range tests {
		os := byTest[t]
		latest := os[0]
		for _, o := range os[1:] {
			if o.At.After(latest.At) || (o.At.Equal(latest.At) && o.Run > latest.Run) {
				latest = o
			}
		}
		var base, last []float64
		for _, o := range os {
			switch {
			case o.Run == latest.Run:
				last = append(last, o.Value)
			case !o.At.After(latest.At) && latest.At.Sub(o.At) <= window:
				base = append(base, o.Value)
			}
		}
		f := Finding{Test: t, Run: latest.Run, At: latest.At, Baseline: len(base), Latest: len(last),
			BaselineMedian: Median(base), LatestMedian: Median(last), Change: math.NaN(), P: math.NaN()}
		if len(base) < 3 || len(last) < 3 {
			f.Reason = "fewer than 3 samples on a side"
			out = append(out, f)
			continue
		}
		if f.BaselineMedian > 0 {
			f.Change = f.LatestMedian/f.BaselineMedian - 1
		}
		_, f.P, _ = MannWhitney(base, last)
		f.Regressed = f.Change >= threshold && f.P < alpha
		out = append(out, f)
	}
	return out
}
