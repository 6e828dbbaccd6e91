// Package stats holds the statistics that compare benchmark samples: a
// Mann–Whitney U test, a bootstrap interval of the relative change of
// medians, and summaries. Means, standard deviations, quantiles and the
// normal distribution come from gonum; the Mann–Whitney test (gonum has
// none) is written here and tested against scipy's values.
package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// ErrTooFewSamples is returned when a sample is empty.
var ErrTooFewSamples = errors.New("stats: each sample needs at least one value")

// exactLimit bounds the sample sizes for which the exact null distribution
// of U is computed: the table grows as n1·n2 per row, and beyond this the
// normal approximation is as good as exact for p-values a report prints.
const exactLimit = 50

// MannWhitney is the two-sided Mann–Whitney U test (exact p for small samples without ties, normal approximation with tie and continuity correction otherwise).
//
// u is the statistic of a, as scipy.stats.mannwhitneyu reports it: the
// number of pairs (a_i, b_j) with a_i > b_j, ties counting one half.
// The exact distribution is used when there are no ties and both samples
// have at most 50 values; otherwise the normal approximation with the tie
// correction of the variance and a continuity correction of 0.5.
func MannWhitney(a, b []float64) (u, p float64, err error) {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN(), math.NaN(), ErrTooFewSamples
	}
	for _, v := range a {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return math.NaN(), math.NaN(), fmt.Errorf("stats: sample a holds %v; only finite values can be ranked", v)
		}
	}
	for _, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return math.NaN(), math.NaN(), fmt.Errorf("stats: sample b holds %v; only finite values can be ranked", v)
		}
	}
	u1, tieTerm := rankU(a, b)
	n1, n2 := len(a), len(b)
	u2 := float64(n1*n2) - u1
	big := math.Max(u1, u2)
	if tieTerm == 0 && n1 <= exactLimit && n2 <= exactLimit {
		p = 2 * exactSF(int(math.Round(big)), n1, n2)
	} else {
		p = 2 * asymptoticSF(big, n1, n2, tieTerm)
	}
	return u1, math.Min(1, math.Max(0, p)), nil
}

// rankU returns U of a from the midranks of the pooled samples, and the
// tie term Σ(t³−t) over groups of equal values.
func rankU(a, b []float64) (u1, tieTerm float64) {
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int { return cmpFloat(x.v, y.v) })
	var r1 float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		t := float64(j - i)
		mid := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].fromA {
				r1 += mid
			}
		}
		tieTerm += t*t*t - t
		i = j
	}
	n1 := float64(len(a))
	return r1 - n1*(n1+1)/2, tieTerm
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// exactSF is P(U >= k) under the null hypothesis for samples of sizes m
// and n without ties. It builds the distribution of U with the recurrence
// P(m,n,k) = m/(m+n)·P(m−1,n,k−n) + n/(m+n)·P(m,n−1,k), whose terms are
// all positive, so no precision is lost to cancellation.
func exactSF(k, m, n int) float64 {
	if k <= 0 {
		return 1
	}
	if k > m*n {
		return 0
	}
	// prev[j] is the distribution of U for sizes (i−1, j); cur for (i, j).
	prev := make([][]float64, n+1)
	for j := range prev {
		prev[j] = []float64{1} // i = 0: U is 0
	}
	for i := 1; i <= m; i++ {
		cur := make([][]float64, n+1)
		cur[0] = []float64{1} // j = 0: U is 0
		for j := 1; j <= n; j++ {
			d := make([]float64, i*j+1)
			wa := float64(i) / float64(i+j)
			wb := float64(j) / float64(i+j)
			// The largest of the pooled values is from a (prob i/(i+j)):
			// it beats all j values of b, adding j to U.
			for kk, v := range prev[j] {
				d[kk+j] += wa * v
			}
			for kk, v := range cur[j-1] {
				d[kk] += wb * v
			}
			cur[j] = d
		}
		prev = cur
	}
	dist := prev[n]
	var sf float64
	for kk := k; kk < len(dist); kk++ {
		sf += dist[kk]
	}
	return sf
}

// asymptoticSF is P(U >= u) by the normal approximation, with the variance
// corrected for ties and a continuity correction of one half.
func asymptoticSF(u float64, n1, n2 int, tieTerm float64) float64 {
	n := float64(n1 + n2)
	mu := float64(n1*n2) / 2
	variance := float64(n1*n2) / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 {
		return 1 // every value equal: no evidence either way
	}
	z := (u - mu - 0.5) / math.Sqrt(variance)
	return distuv.UnitNormal.Survival(z)
}

// BootstrapDiff is a percentile bootstrap CI (conf e.g. 0.95) of the relative change of medians (median(b)/median(a) - 1), deterministic for a seed.
//
// Each of reps replicates resamples a and b with replacement; replicates
// whose median of a is zero are skipped. It returns NaN, NaN when a or b
// is empty, reps < 1, conf is not in (0, 1), or no replicate was usable.
func BootstrapDiff(a, b []float64, reps int, conf float64, seed uint64) (lo, hi float64) {
	if len(a) == 0 || len(b) == 0 || reps < 1 || !(conf > 0 && conf < 1) {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ra := make([]float64, len(a))
	rb := make([]float64, len(b))
	diffs := make([]float64, 0, reps)
	for range reps {
		for i := range ra {
			ra[i] = a[rng.IntN(len(a))]
		}
		for i := range rb {
			rb[i] = b[rng.IntN(len(b))]
		}
		ma := Median(ra)
		if ma == 0 {
			continue
		}
		diffs = append(diffs, Median(rb)/ma-1)
	}
	if len(diffs) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(diffs)
	alpha := (1 - conf) / 2
	return stat.Quantile(alpha, stat.Empirical, diffs, nil), stat.Quantile(1-alpha, stat.Empirical, diffs, nil)
}

// Summary returns the mean, the median and the sample standard deviation
// (n−1 in the denominator; 0 for a single value). All are NaN for no values.
func Summary(x []float64) (mean, median, sd float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	mean, sd = stat.MeanStdDev(x, nil)
	if len(x) == 1 {
		sd = 0
	}
	return mean, Median(x), sd
}

// Median is the middle value, or the mean of the two middle values of an
// even count (as numpy.median); NaN for no values. x is not modified.
func Median(x []float64) float64 {
	n := len(x)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// HalfWidth is the precision of a comparison so far: half the width of
// the bootstrap interval (conf) of median(b)/median(a) − 1, or, with no
// b, of median(a*)/median(a) − 1 over resamples a* of a (how well a's
// own median is known). NaN when it cannot be computed (fewer than 2
// values on a side).
func HalfWidth(a, b []float64, reps int, conf float64, seed uint64) float64 {
	if len(a) < 2 || (b != nil && len(b) < 2) {
		return math.NaN()
	}
	if b != nil {
		lo, hi := BootstrapDiff(a, b, reps, conf, seed)
		return (hi - lo) / 2
	}
	m := Median(a)
	if m == 0 || reps < 1 || !(conf > 0 && conf < 1) {
		return math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	r := make([]float64, len(a))
	diffs := make([]float64, 0, reps)
	for range reps {
		for i := range r {
			r[i] = a[rng.IntN(len(a))]
		}
		diffs = append(diffs, Median(r)/m-1)
	}
	slices.Sort(diffs)
	alpha := (1 - conf) / 2
	return (stat.Quantile(1-alpha, stat.Empirical, diffs, nil) - stat.Quantile(alpha, stat.Empirical, diffs, nil)) / 2
}
