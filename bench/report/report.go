// Package report compares a benchmark run's environments test by test
// and draws its charts: what `gateway bench report` prints (text, JSON
// and a self-contained HTML file) and what the console's run page shows,
// from one computation and one template (Template), so that the two
// never disagree.
//
// It works on the API's types (apitype): the CLI reads a run over the
// API, and the console and the API turn stored runs into them with
// RunOf and PointOf.
package report

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/stats"
)

// Described is the summary of one environment's successful samples:
// the median and quartiles (what verdicts and charts use), and the mean
// and standard deviation.
type Described struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	SD     float64 `json:"sd"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// ErrorCount is one distinct error of a test's failed samples (its
// exception, for a Python traceback) and how many samples failed so.
type ErrorCount struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// Test is one test's comparison in a report.
type Test struct {
	Test    string       `json:"test"`
	Verdict string       `json:"verdict"` // faster, slower, no significant change, too noisy to tell; "" with one environment
	Reason  string       `json:"reason"`
	P       *float64     `json:"p"`
	Change  *float64     `json:"change"` // median(B)/median(A) − 1
	Lo      *float64     `json:"lo"`     // bootstrap 95 % interval of change
	Hi      *float64     `json:"hi"`
	Noise   *float64     `json:"noise"` // A/A band; null when not measured
	A       *Described   `json:"a"`
	B       *Described   `json:"b"`
	A2      *Described   `json:"a2"`
	Failed  int          `json:"failed"`           // samples that failed or timed out
	Errors  []ErrorCount `json:"errors,omitempty"` // their distinct errors (the exception), with counts, most frequent first

	values map[string][]float64 // ok wall times by label, for the charts
}

// Report is a run's comparison (gateway bench report -o json).
type Report struct {
	Run       apitype.BenchRunJSON `json:"run"`
	Baseline  string               `json:"baseline"`  // the label compared against: A
	Candidate string               `json:"candidate"` // B, or A2 for an A/A-only run, or ""
	Threshold float64              `json:"threshold"`
	Alpha     float64              `json:"alpha"`
	Tests     []Test               `json:"tests"`
}

// DefaultThreshold is the smallest relative change that counts unless
// the reader asks for another.
const DefaultThreshold = 0.10

// Rule says how a verdict is reached.
const Rule = `Verdict: a change of medians must be significant (Mann–Whitney p < 0.05) and larger than
both the threshold and the A/A band to count as faster or slower. p < 0.05 with
a change inside the A/A band, or too few successful samples (< 3 a side), or no
significant change while the A/A band is wider than the threshold: too noisy to
tell. Otherwise: no significant change.`

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func describe(x []float64) *Described {
	d := stats.Describe(x)
	if d.N == 0 {
		return nil
	}
	sd := d.SD
	if math.IsNaN(sd) {
		sd = 0
	}
	s := slices.Sorted(slices.Values(x))
	return &Described{N: d.N, Mean: d.Mean, Median: d.Median, SD: sd, Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), Min: s[0], Max: s[len(s)-1]}
}

// quantile of sorted values, interpolated linearly between them (as
// numpy.quantile's default).
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}

// maxErrors is how many distinct errors a test lists.
const maxErrors = 5

// Exception is what a failure says went wrong, in one line: for a
// Python traceback its exception (the lines after the last frame, not
// the "Traceback (most recent call last)" head), else the message's first
// line (the gateway's own messages say what failed first). A status
// prefix ("error: ") is kept.
func Exception(msg string) string {
	msg = strings.TrimSpace(msg)
	i := strings.LastIndex(msg, "Traceback (most recent call last):")
	if i < 0 {
		first, _, _ := strings.Cut(msg, "\n")
		return strings.TrimSpace(first)
	}
	prefix := strings.TrimSpace(msg[:i])
	if j := strings.LastIndexByte(prefix, '\n'); j >= 0 {
		prefix = strings.TrimSpace(prefix[j+1:]) // a chained exception's head is dropped with its frames
	}
	lines := strings.Split(msg[i:], "\n")
	last := 0 // the header, or the last frame or source line (indented)
	for k, l := range lines {
		if k == 0 || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			last = k
		}
	}
	exc := strings.TrimSpace(strings.Join(lines[last+1:], " "))
	if exc == "" {
		exc = strings.TrimSpace(lines[last])
	}
	if prefix != "" && strings.HasSuffix(prefix, ":") && len(prefix) < 40 {
		return prefix + " " + exc
	}
	return exc
}

// Build compares a run's environments test by test: A against B, with A2
// as the A/A set; a run of A and A2 only compares A with A2. The run's
// samples are left out of the report's copy of it.
func Build(run apitype.BenchRunJSON, threshold float64) Report {
	has := map[string]bool{}
	for _, e := range run.Envs {
		has[e.Label] = true
	}
	rep := Report{Run: run, Baseline: "A", Threshold: threshold, Alpha: 0.05, Tests: []Test{}}
	switch {
	case has["B"]:
		rep.Candidate = "B"
	case has["A2"]:
		rep.Candidate = "A2"
	}
	rep.Run.Samples = nil
	byTest := map[string]*Test{}
	var names []string
	for _, s := range run.Samples {
		t := byTest[s.Test]
		if t == nil {
			t = &Test{Test: s.Test, values: map[string][]float64{}}
			byTest[s.Test] = t
			names = append(names, s.Test)
		}
		if s.Status != "ok" {
			t.Failed++
			msg := s.Status
			if s.Error != "" {
				msg = Shorten(Exception(s.Error), 200)
			}
			t.addError(msg)
			continue
		}
		t.values[s.Env] = append(t.values[s.Env], s.WallSeconds)
	}
	sort.Strings(names)
	for _, name := range names {
		t := byTest[name]
		slices.SortStableFunc(t.Errors, func(x, y ErrorCount) int { return y.Count - x.Count })
		a, b, a2 := t.values["A"], t.values[rep.Candidate], t.values["A2"]
		t.A, t.A2 = describe(a), describe(a2)
		if rep.Candidate == "A2" {
			// An A/A-only run: A2 is the candidate, and the comparison's
			// interval is the A/A band itself.
			t.A2 = nil
		}
		if rep.Candidate != "" {
			h := fnv.New64a()
			h.Write([]byte(name))
			c := stats.Compare(a, b, a2, stats.CompareOptions{Threshold: threshold, Alpha: rep.Alpha, Seed: h.Sum64()})
			t.B = describe(b)
			t.Verdict, t.Reason = c.Verdict, c.Reason
			t.P, t.Change, t.Lo, t.Hi, t.Noise = ptr(c.P), ptr(c.Change), ptr(c.Lo), ptr(c.Hi), ptr(c.Noise)
		} else {
			t.Reason = "one environment: nothing to compare"
		}
		rep.Tests = append(rep.Tests, *t)
	}
	return rep
}

// addError counts a failed sample's error: the same exception is listed
// once, with how many samples it failed.
func (t *Test) addError(msg string) {
	for i := range t.Errors {
		if t.Errors[i].Error == msg {
			t.Errors[i].Count++
			return
		}
	}
	if len(t.Errors) < maxErrors {
		t.Errors = append(t.Errors, ErrorCount{Error: msg, Count: 1})
	}
}

// String is an error with how many samples failed so: "boom (3 samples)".
func (e ErrorCount) String() string {
	if e.Count == 1 {
		return e.Error + " (1 sample)"
	}
	return fmt.Sprintf("%s (%d samples)", e.Error, e.Count)
}

// Shorten folds s's white space and cuts it to n characters.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Seconds is a wall time as reports show it: 250ms, 1.25s, 130s.
func Seconds(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	case s < 100:
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}

// Bytes is a size in IEC units: 512 B, 1.5 KiB, 256.0 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Pct is a relative change as a signed percentage; – when unknown.
func Pct(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", *v*100)
}

// PValue is a p-value to four places; – when unknown.
func PValue(v *float64) string {
	if v == nil {
		return "–"
	}
	if *v < 0.0001 {
		return "<0.0001"
	}
	return fmt.Sprintf("%.4f", *v)
}

// Band is the A/A noise band; "not measured" without one.
func Band(v *float64) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprintf("±%.1f%%", *v*100)
}

// Summary is an environment's samples in one line: the median, the
// interquartile range and n (verdicts compare medians).
func Summary(d *Described) string {
	if d == nil {
		return "–"
	}
	return fmt.Sprintf("%s (IQR %s–%s, n=%d)", Seconds(d.Median), Seconds(d.Q1), Seconds(d.Q3), d.N)
}

// Packages lists key package versions by name: "dask 2024.8.0, numpy 2.0".
func Packages(p map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, k+" "+p[k])
	}
	return strings.Join(parts, ", ")
}

// VerdictClass is a verdict's class in the HTML (faster, slower, same,
// noisy, or none), which the styles color.
func VerdictClass(v string) string {
	switch v {
	case stats.Faster:
		return "faster"
	case stats.Slower:
		return "slower"
	case stats.NoChange:
		return "same"
	case stats.TooNoisy:
		return "noisy"
	}
	return "none"
}
