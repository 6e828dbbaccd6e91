package stats

import (
	"errors"
	"math"
	"testing"
)

func near(got, want, rel float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= rel*math.Max(math.Abs(want), 1e-300)
}

func TestMannWhitneyAgainstScipy(t *testing.T) {
	for _, c := range mwCases {
		t.Run(c.name, func(t *testing.T) {
			u, p, err := MannWhitney(c.a, c.b)
			if err != nil {
				t.Fatal(err)
			}
			if u != c.u {
				t.Errorf("U = %v, scipy says %v", u, c.u)
			}
			// The public test uses the exact p when there are no ties and
			// both samples have at most 50 values, as documented.
			want := c.pAs
			if c.pExact >= 0 && len(c.a) <= exactLimit && len(c.b) <= exactLimit {
				want = c.pExact
			}
			if !near(p, want, 1e-9) {
				t.Errorf("p = %.17g, scipy says %.17g", p, want)
			}

			u1, tie := rankU(c.a, c.b)
			big := math.Max(u1, float64(len(c.a)*len(c.b))-u1)
			if pa := math.Min(1, 2*asymptoticSF(big, len(c.a), len(c.b), tie)); !near(pa, c.pAs, 1e-9) {
				t.Errorf("asymptotic p = %.17g, scipy says %.17g", pa, c.pAs)
			}
			if c.pExact >= 0 {
				if pe := math.Min(1, 2*exactSF(int(big), len(c.a), len(c.b))); !near(pe, c.pExact, 1e-9) {
					t.Errorf("exact p = %.17g, scipy says %.17g", pe, c.pExact)
				}
			}
		})
	}
}

func TestMannWhitneySymmetric(t *testing.T) {
	c := mwCases[1]
	u1, p1, _ := MannWhitney(c.a, c.b)
	u2, p2, _ := MannWhitney(c.b, c.a)
	if u1+u2 != float64(len(c.a)*len(c.b)) || p1 != p2 {
		t.Errorf("swapping the samples: U %v+%v, p %v vs %v", u1, u2, p1, p2)
	}
}

func TestMannWhitneyBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []float64
		is   error
	}{
		{"empty a", nil, []float64{1}, ErrTooFewSamples},
		{"empty b", []float64{1}, []float64{}, ErrTooFewSamples},
		{"NaN", []float64{1, math.NaN()}, []float64{2}, nil},
		{"Inf", []float64{1}, []float64{math.Inf(1)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, p, err := MannWhitney(c.a, c.b)
			if err == nil {
				t.Fatalf("no error, p = %v", p)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !math.IsNaN(p) {
				t.Errorf("p = %v on error, want NaN", p)
			}
		})
	}
}

func TestSummaryAgainstNumpy(t *testing.T) {
	for _, c := range summaryCases {
		mean, median, sd := Summary(c.x)
		if !near(mean, c.mean, 1e-12) || !near(median, c.median, 1e-12) || !near(sd, c.sd, 1e-12) {
			t.Errorf("Summary(%v) = %v, %v, %v; numpy says %v, %v, %v", c.x, mean, median, sd, c.mean, c.median, c.sd)
		}
	}
	if m, md, sd := Summary(nil); !math.IsNaN(m) || !math.IsNaN(md) || !math.IsNaN(sd) {
		t.Errorf("Summary(nil) = %v, %v, %v; want NaN", m, md, sd)
	}
}

func TestBootstrapDiff(t *testing.T) {
	a := []float64{1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00}
	slower := []float64{1.50, 1.53, 1.47, 1.52, 1.48, 1.51, 1.49, 1.50}
	same := []float64{1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.03, 0.97}

	lo, hi := BootstrapDiff(a, slower, 2000, 0.95, 1)
	if !(lo <= 0.5 && 0.5 <= hi) || lo <= 0.4 || hi >= 0.6 {
		t.Errorf("50%% slower: interval [%v, %v] should hold 0.5 and be narrow", lo, hi)
	}
	lo, hi = BootstrapDiff(a, same, 2000, 0.95, 1)
	if !(lo <= 0 && 0 <= hi) {
		t.Errorf("same distribution: interval [%v, %v] should hold 0", lo, hi)
	}
	// Deterministic for a seed, different for another.
	l1, h1 := BootstrapDiff(a, same, 500, 0.9, 7)
	l2, h2 := BootstrapDiff(a, same, 500, 0.9, 7)
	if l1 != l2 || h1 != h2 {
		t.Errorf("same seed gave [%v,%v] and [%v,%v]", l1, h1, l2, h2)
	}
	// A wider confidence gives a wider (or equal) interval.
	l3, h3 := BootstrapDiff(a, same, 500, 0.99, 7)
	if l3 > l1 || h3 < h1 {
		t.Errorf("99%% interval [%v,%v] narrower than 90%% [%v,%v]", l3, h3, l1, h1)
	}
	for _, c := range []struct {
		name string
		a, b []float64
		reps int
		conf float64
	}{
		{"empty a", nil, same, 10, 0.95},
		{"no reps", a, same, 0, 0.95},
		{"conf 1", a, same, 10, 1},
		{"median of a zero", []float64{0, 0}, same, 10, 0.95},
	} {
		if lo, hi := BootstrapDiff(c.a, c.b, c.reps, c.conf, 1); !math.IsNaN(lo) || !math.IsNaN(hi) {
			t.Errorf("%s: [%v, %v], want NaN", c.name, lo, hi)
		}
	}
}
