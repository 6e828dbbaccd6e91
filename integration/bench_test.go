package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBenchmarkRuns runs the benchmark (go run ./integration/bench) in its
// quick mode and checks that it measures every figure with a baseline or a
// target, so that the command in docs/performance.md keeps working. Whether the
// targets are met is the benchmark's to say, not this test's: timing
// targets do not belong in tests on a shared machine.
func TestBenchmarkRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the benchmark's quick mode takes about a minute")
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command("go", "run", "./integration/bench", "-quick", "-out", out)
	cmd.Dir = ".."
	cmd.Env = filterEnv(os.Environ())
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./integration/bench -quick: %v\n%s", err, text)
	}
	var got struct {
		Results []struct {
			Figure, Case, Target string
			Value, Baseline      float64
			Samples              []float64 `json:"samples"`
			BaselineSamples      []float64 `json:"baseline_samples"`
		} `json:"results"`
		Errors []string `json:"errors"`
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) > 0 {
		t.Errorf("figures that could not be measured: %v", got.Errors)
	}
	var figures []string
	for _, r := range got.Results {
		figures = append(figures, strings.SplitN(r.Figure, " ", 2)[0])
		if r.Target == "" || (r.Value == 0 && r.Baseline == 0) {
			t.Errorf("%s / %s has no value or no target: %+v", r.Figure, r.Case, r)
		}
		// -compare tests a figure on its repetitions: without them it can
		// only print the two values.
		if len(r.Samples) < 2 || (r.Baseline != 0 && len(r.BaselineSamples) < 2) {
			t.Errorf("%s / %s keeps %d samples and %d of its baseline, want at least 2 of each measured", r.Figure, r.Case, len(r.Samples), len(r.BaselineSamples))
		}
	}
	for _, want := range []string{"1", "2", "3", "4", "5", "6", "7"} {
		if !slices.Contains(figures, want) {
			t.Errorf("figure %s is missing from the results:\n%s", want, text)
		}
	}
	for _, col := range []string{"FIGURE", "BASELINE", "RATIO", "TARGET"} {
		if !strings.Contains(string(text), col) {
			t.Errorf("the printed table has no %s column:\n%s", col, text)
		}
	}
}
