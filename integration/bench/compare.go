package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	gwstats "github.com/gatewayhq/gateway/stats"
)

// Comparing two runs (-compare old.json new.json [again.json]): each
// figure's samples in one run against the same figure's in the other, with
// a two-sided Mann–Whitney U test and a bootstrap interval of the change of
// medians. A change counts only when it is significant (p < compareAlpha)
// and the interval leaves zero out; anything else is "no change".
//
// The samples of one run are its repetitions, which share that run's
// machine: drift between runs (other work on a shared machine) is not in
// them. An A/A comparison (the same build run twice: -compare a1.json
// a2.json) shows how far each figure moves with nothing changed; given as
// a third file (a second run of the old build), that A/A change becomes a
// noise band per figure, and a change within it is "no change" too.

const (
	compareAlpha = 0.05
	compareReps  = 4000 // bootstrap resamples
	compareConf  = 0.95
	compareSeed  = 17 // fixed: the same two files always print the same
)

// runFile is what run writes.
type runFile struct {
	Date    string   `json:"date"`
	Quick   bool     `json:"quick"`
	Results []Result `json:"results"`
}

func readRun(path string) (runFile, error) {
	var rf runFile
	b, err := os.ReadFile(path)
	if err != nil {
		return rf, err
	}
	if err := json.Unmarshal(b, &rf); err != nil {
		return rf, fmt.Errorf("%s: not a benchmark's JSON (go run ./integration/bench -out FILE writes one): %w", path, err)
	}
	return rf, nil
}

// change is one figure compared.
type change struct {
	Figure, Case, Unit string
	Old, New           float64 // medians of the samples (the values when there are none)
	NOld, NNew         int     // samples on each side
	Change             float64 // New/Old - 1
	Lo, Hi             float64 // bootstrap interval of Change; NaN without samples
	P                  float64 // Mann–Whitney p; NaN without samples
	// Noise is the A/A band: the larger end, in absolute value, of the
	// bootstrap interval of the old build's change between its two runs;
	// NaN without a second run.
	Noise   float64
	Verdict string
}

// Verdicts.
const (
	verdictBetter   = "better"
	verdictWorse    = "worse"
	verdictNoChange = "no change"
	verdictNoise    = "no change (within A/A)" // significant, but the old build moves as much between runs
	verdictUntested = "not tested"             // fewer than two samples on a side
)

// compareSamples compares one figure's samples; again, when not nil, are
// the old build's from a second run (the A/A band). higherBetter says
// which way is an improvement.
func compareSamples(old, cur, again []float64, higherBetter bool) (c change) {
	c.NOld, c.NNew = len(old), len(cur)
	c.Old, c.New = gwstats.Median(old), gwstats.Median(cur)
	c.Change = c.New/c.Old - 1
	c.Lo, c.Hi, c.P, c.Noise = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if len(old) >= 2 && len(again) >= 2 {
		lo, hi := gwstats.BootstrapDiff(old, again, compareReps, compareConf, compareSeed+1)
		c.Noise = math.Max(math.Abs(lo), math.Abs(hi))
	}
	if len(old) < 2 || len(cur) < 2 {
		c.Verdict = verdictUntested
		return c
	}
	_, p, err := gwstats.MannWhitney(old, cur)
	if err != nil {
		c.Verdict = verdictUntested
		return c
	}
	c.P = p
	c.Lo, c.Hi = gwstats.BootstrapDiff(old, cur, compareReps, compareConf, compareSeed)
	outside := c.Lo > 0 || c.Hi < 0 // the interval leaves zero out
	if p >= compareAlpha || !outside || math.IsNaN(c.Change) {
		c.Verdict = verdictNoChange
		return c
	}
	if math.Abs(c.Change) <= c.Noise { // false when Noise is NaN
		c.Verdict = verdictNoise
		return c
	}
	if (c.Change > 0) == higherBetter {
		c.Verdict = verdictBetter
	} else {
		c.Verdict = verdictWorse
	}
	return c
}

// higherBetter says whether a bigger value of unit is an improvement:
// rates of work are; times, sizes and CPU are costs.
func higherBetter(unit string) bool {
	switch unit {
	case "B/s", "req/s", "msg/s", "clusters/s", "ops/s":
		return true
	}
	return false
}

// samplesOf are a result's samples, or its value alone for runs without.
func samplesOf(s []float64, v float64) []float64 {
	if len(s) > 0 {
		return s
	}
	if v == 0 {
		return nil
	}
	return []float64{v}
}

// paired is, per repetition, the gateway's sample less its baseline's
// (costs) or over it (rates); nil unless both were sampled alike.
func paired(r Result, rate bool) []float64 {
	if r.Unpaired || len(r.Samples) < 2 || len(r.Samples) != len(r.BaselineSamples) {
		return nil
	}
	out := make([]float64, len(r.Samples))
	for i, v := range r.Samples {
		b := r.BaselineSamples[i]
		if rate {
			if b == 0 {
				return nil
			}
			out[i] = v / b
		} else {
			out[i] = v - b
		}
	}
	return out
}

// compareRuns compares every figure present in both runs, in the new
// run's order: the gateway's samples, its baseline's (whose change says
// how different the machine was) and, where each repetition measured
// both back to back, what the gateway adds to (costs) or keeps of (rates)
// its baseline, which cancels drift of the machine between runs. again,
// when not nil, is a second run of the old build.
func compareRuns(old, cur runFile, again *runFile) (changes []change, onlyOld, onlyNew []string) {
	key := func(r Result) string { return r.Figure + " / " + r.Case }
	index := func(rf runFile) map[string]Result {
		m := map[string]Result{}
		for _, r := range rf.Results {
			m[key(r)] = r
		}
		return m
	}
	olds := index(old)
	var agains map[string]Result
	if again != nil {
		agains = index(*again)
	}
	type view struct {
		suffix string
		of     func(Result, bool) []float64
	}
	views := []view{
		{"", func(r Result, _ bool) []float64 { return samplesOf(r.Samples, r.Value) }},
		{" (baseline)", func(r Result, _ bool) []float64 { return samplesOf(r.BaselineSamples, r.Baseline) }},
		{" (added)", paired},
	}
	seen := map[string]bool{}
	for _, n := range cur.Results {
		k := key(n)
		o, ok := olds[k]
		if !ok {
			onlyNew = append(onlyNew, k)
			continue
		}
		seen[k] = true
		better := higherBetter(n.Unit)
		for _, v := range views {
			ov, nv := v.of(o, better), v.of(n, better)
			if len(ov) == 0 || len(nv) == 0 {
				continue
			}
			var av []float64
			if a, ok := agains[k]; ok {
				av = v.of(a, better)
			}
			c := compareSamples(ov, nv, av, better)
			c.Figure, c.Case, c.Unit = n.Figure, n.Case+v.suffix, n.Unit
			if v.suffix == " (added)" && better {
				c.Case, c.Unit = n.Case+" (of baseline)", "x"
			}
			changes = append(changes, c)
		}
	}
	for _, o := range old.Results {
		if !seen[key(o)] {
			onlyOld = append(onlyOld, key(o))
		}
	}
	return changes, onlyOld, onlyNew
}

// compareFiles is -compare: it prints the comparison of two runs' JSON,
// with a second run of the old build (againPath, "" for none) as the A/A
// band.
func compareFiles(oldPath, newPath, againPath string, w io.Writer) error {
	old, err := readRun(oldPath)
	if err != nil {
		return err
	}
	cur, err := readRun(newPath)
	if err != nil {
		return err
	}
	var again *runFile
	if againPath != "" {
		a, err := readRun(againPath)
		if err != nil {
			return err
		}
		again = &a
	}
	changes, onlyOld, onlyNew := compareRuns(old, cur, again)
	if len(changes) == 0 {
		return fmt.Errorf("%s and %s have no figure in common", oldPath, newPath)
	}
	fmt.Fprintf(w, "old: %s (%s%s)\nnew: %s (%s%s)\n", oldPath, old.Date, quickNote(old.Quick), newPath, cur.Date, quickNote(cur.Quick))
	if again != nil {
		fmt.Fprintf(w, "A/A: %s (%s%s), a second run of the old build\n", againPath, again.Date, quickNote(again.Quick))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tCASE\tOLD\tNEW\tCHANGE\t95% INTERVAL\tA/A BAND\tP\tN\tVERDICT")
	counts := map[string]int{}
	for _, c := range changes {
		interval, band, p := "-", "-", "-"
		if !math.IsNaN(c.Lo) {
			interval = fmt.Sprintf("%+.1f%% .. %+.1f%%", 100*c.Lo, 100*c.Hi)
		}
		if !math.IsNaN(c.Noise) {
			band = fmt.Sprintf("±%.1f%%", 100*c.Noise)
		}
		if !math.IsNaN(c.P) {
			p = fmt.Sprintf("%.3g", c.P)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s %s\t%+.1f%%\t%s\t%s\tp=%s\t%d/%d\t%s\n", c.Figure, c.Case, human(c.Old), c.Unit, human(c.New), c.Unit,
			100*c.Change, interval, band, p, c.NOld, c.NNew, c.Verdict)
		if !strings.HasSuffix(c.Case, ")") {
			counts[c.Verdict]++
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d better, %d worse, %d no change, %d within the A/A band, %d not tested (medians of the samples; Mann–Whitney U two-sided, α = %g, and a %g%% bootstrap interval of the change of medians: a change counts when both say so",
		counts[verdictBetter], counts[verdictWorse], counts[verdictNoChange], counts[verdictNoise], counts[verdictUntested], compareAlpha, 100*compareConf)
	if again == nil {
		fmt.Fprintln(w, "; without a second run of the old build, drift of the machine between runs is not in the test)")
	} else {
		fmt.Fprintln(w, " and it exceeds the A/A band)")
	}
	if len(onlyOld) > 0 {
		fmt.Fprintf(w, "only in %s: %s\n", oldPath, strings.Join(onlyOld, "; "))
	}
	if len(onlyNew) > 0 {
		fmt.Fprintf(w, "only in %s: %s\n", newPath, strings.Join(onlyNew, "; "))
	}
	return nil
}

func quickNote(q bool) string {
	if q {
		return ", -quick"
	}
	return ""
}
