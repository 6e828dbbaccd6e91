package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// noisy is n samples around center with a relative spread (log-normal, as
// timings are), from a fixed seed.
func noisy(rng *rand.Rand, n int, center, spread float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = center * math.Exp(spread*rng.NormFloat64())
	}
	return out
}

// writeRun writes results as run does and returns the file's path.
func writeRun(t *testing.T, name string, rs []Result) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"date": "2026-12-03T00:00:00Z", "quick": true, "results": rs})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// figureSet is one run of three figures: a latency (a cost, with paired
// baselines), a throughput (a rate) and a memory figure, each scaled by
// the given factors.
func figureSet(rng *rand.Rand, latency, throughput, memory float64) []Result {
	base := noisy(rng, 10, 40, 0.25)
	lat := make([]float64, len(base))
	for i, b := range base {
		lat[i] = b + 30*latency*math.Exp(0.25*rng.NormFloat64())
	}
	return []Result{
		{Figure: "2 proxy latency", Case: "64 B messages, p99", Unit: "µs", Value: median(lat), Baseline: median(base),
			Target: "info", Met: true, Samples: lat, BaselineSamples: base},
		{Figure: "1 proxy throughput", Case: "16 streams", Unit: "B/s", Value: 1e9 * throughput,
			Target: "info", Met: true, Samples: noisy(rng, 8, 1e9*throughput, 0.15)},
		{Figure: "3 connection scale", Case: "1000 idle connections", Unit: "B/conn", Value: 14000 * memory,
			Target: "info", Met: true, Samples: noisy(rng, 4, 14000*memory, 0.05)},
	}
}

// rowOf is the printed line of a case (the first column that names it).
func rowOf(t *testing.T, out, figureCase string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, figureCase+" ") && !strings.Contains(line, figureCase+" (") {
			return line
		}
	}
	t.Fatalf("no row for %q in:\n%s", figureCase, out)
	return ""
}

var pValue = regexp.MustCompile(`p=([0-9.e-]+)`)

func TestCompareAA(t *testing.T) {
	// Two runs of the same build: the same distributions, different noise.
	// Every figure, and every baseline and paired row, is "no change".
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 1))
		old := writeRun(t, "a1.json", figureSet(rng, 1, 1, 1))
		cur := writeRun(t, "a2.json", figureSet(rng, 1, 1, 1))
		var out bytes.Buffer
		if err := compareFiles(old, cur, "", &out); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out.String(), "\n")[3:] {
			if strings.Contains(line, verdictBetter) || strings.Contains(line, verdictWorse) {
				if !strings.HasPrefix(line, "0 better, 0 worse") {
					t.Errorf("seed %d: A/A flagged a change:\n%s", seed, out.String())
					break
				}
			}
		}
		if !strings.Contains(out.String(), "0 better, 0 worse, 3 no change") {
			t.Errorf("seed %d: summary:\n%s", seed, out.String())
		}
	}
}

func TestCompareFlagsShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	old := writeRun(t, "old.json", figureSet(rng, 1, 1, 1))
	// Twice the latency the proxy adds and twice the throughput (better),
	// and half the memory (better).
	cur := writeRun(t, "new.json", figureSet(rng, 2, 2, 0.5))
	var out bytes.Buffer
	if err := compareFiles(old, cur, "", &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, c := range []struct{ row, verdict string }{
		{"64 B messages, p99", verdictWorse},
		{"16 streams", verdictBetter},
		{"1000 idle connections", verdictBetter},
	} {
		row := rowOf(t, text, c.row)
		if !strings.HasSuffix(strings.TrimSpace(row), c.verdict) {
			t.Errorf("%s: want %q:\n%s", c.row, c.verdict, text)
		}
		m := pValue.FindStringSubmatch(row)
		if m == nil {
			t.Fatalf("%s: no p-value printed: %q", c.row, row)
		}
		if p := parseFloat(t, m[1]); p >= compareAlpha {
			t.Errorf("%s: p = %v, want < %v", c.row, p, compareAlpha)
		}
	}
	// The baseline did not move: its row says so.
	if row := rowOf(t, strings.ReplaceAll(text, "p99 (baseline)", "p99-baseline"), "p99-baseline"); !strings.HasSuffix(strings.TrimSpace(row), verdictNoChange) {
		t.Errorf("the unchanged baseline: %q", row)
	}
	if !strings.Contains(text, "(added)") {
		t.Errorf("no paired row for a figure with a baseline per repetition:\n%s", text)
	}
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

func TestCompareEdges(t *testing.T) {
	old := writeRun(t, "old.json", []Result{
		{Figure: "6 time to ready", Case: "2 workers", Unit: "s", Value: 1.1}, // no samples: one value
		{Figure: "8 gone", Case: "x", Unit: "s", Value: 1, Samples: []float64{1, 1, 1}},
	})
	cur := writeRun(t, "new.json", []Result{
		{Figure: "6 time to ready", Case: "2 workers", Unit: "s", Value: 2.2},
		{Figure: "9 new", Case: "y", Unit: "s", Value: 1, Samples: []float64{1, 2, 3}},
	})
	var out bytes.Buffer
	if err := compareFiles(old, cur, "", &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if row := rowOf(t, text, "2 workers"); !strings.Contains(row, verdictUntested) || !strings.Contains(row, "+100.0%") {
		t.Errorf("a figure with one value a side is compared without a test: %q", row)
	}
	for _, want := range []string{"only in " + old + ": 8 gone / x", "only in " + cur + ": 9 new / y"} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in:\n%s", want, text)
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("FIGURE CASE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a, b, want string
	}{
		{bad, cur, "bad.json: not a benchmark's JSON"},
		{filepath.Join(t.TempDir(), "missing.json"), cur, "missing.json"},
		{writeRun(t, "other.json", []Result{{Figure: "1", Case: "z", Value: 1}}), cur, "no figure in common"},
	} {
		err := compareFiles(c.a, c.b, "", &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("compareFiles(%s, %s) = %v, want an error saying %q", filepath.Base(c.a), filepath.Base(c.b), err, c.want)
		}
	}
}

// A shift that is significant within the two runs but no larger than the
// old build's own move between two runs (the machine drifted) is within
// the A/A band; without the second run it is flagged.
func TestCompareAABand(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	run := func(center float64) []Result {
		return []Result{{Figure: "2 proxy latency", Case: "64 B messages, p50", Unit: "µs", Value: center,
			Target: "info", Met: true, Samples: noisy(rng, 10, center, 0.02)}}
	}
	old := writeRun(t, "old.json", run(100))
	cur := writeRun(t, "new.json", run(110))
	again := writeRun(t, "again.json", run(115)) // the old build, run again later
	var without, with bytes.Buffer
	if err := compareFiles(old, cur, "", &without); err != nil {
		t.Fatal(err)
	}
	if err := compareFiles(old, cur, again, &with); err != nil {
		t.Fatal(err)
	}
	if row := rowOf(t, without.String(), "64 B messages, p50"); !strings.HasSuffix(strings.TrimSpace(row), verdictWorse) {
		t.Errorf("without A/A: %q, want %q", row, verdictWorse)
	}
	row := rowOf(t, with.String(), "64 B messages, p50")
	if !strings.HasSuffix(strings.TrimSpace(row), verdictNoise) || !strings.Contains(row, "±") {
		t.Errorf("with A/A: %q, want %q and the band", row, verdictNoise)
	}
	// A change beyond the band is still flagged.
	far := writeRun(t, "far.json", run(200))
	var beyond bytes.Buffer
	if err := compareFiles(old, far, again, &beyond); err != nil {
		t.Fatal(err)
	}
	if row := rowOf(t, beyond.String(), "64 B messages, p50"); !strings.HasSuffix(strings.TrimSpace(row), verdictWorse) {
		t.Errorf("beyond the A/A band: %q, want %q", row, verdictWorse)
	}
}

func TestPairedOnlySideBySide(t *testing.T) {
	s, b := []float64{2, 4}, []float64{1, 2}
	for _, c := range []struct {
		name string
		r    Result
		want []float64
	}{
		{"alternating repetitions", Result{Samples: s, BaselineSamples: b}, []float64{2, 2}},
		{"builds that did not alternate", Result{Samples: s, BaselineSamples: b, Unpaired: true}, nil},
		{"different counts", Result{Samples: s, BaselineSamples: b[:1]}, nil},
		{"one repetition", Result{Samples: s[:1], BaselineSamples: b[:1]}, nil},
	} {
		if got := paired(c.r, true); !slices.Equal(got, c.want) {
			t.Errorf("%s: paired = %v, want %v", c.name, got, c.want)
		}
	}
}
