package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/store"
)

// benchGateway is an API server over a real SQLite store with users ann
// and bob and the admin root.
func benchGateway(t *testing.T) (*testGateway, *store.DB) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	who := tokens{
		"root": {ID: "id-root", Name: "root", Admin: true},
		"ann":  {ID: "id-ann", Name: "ann"},
		"bob":  {ID: "id-bob", Name: "bob"},
	}
	s := api.New(api.Config{Version: "test"}, &core{}, who, nil, nil)
	s.SetBench(st)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL}, st
}

// storeRun stores a finished run of ann's with the given wall times per
// test and label (failed samples are given as negative times).
func storeRun(t *testing.T, st *store.DB, at time.Time, envs []store.BenchEnv, times map[string]map[string][]float64) string {
	t.Helper()
	ctx := context.Background()
	run := &store.BenchRun{Owner: "id-ann", OwnerName: "ann", Suite: "demo", Envs: envs, StartedAt: at, Provider: "docker",
		Region: "local", Shape: `{"workers":2,"worker_cpus":1,"worker_memory":"2 GiB"}`, GatewayVersion: "test", Options: `{"repeat":6,"null":true}`}
	if err := st.CreateBenchRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var batch []*store.BenchSample
	for test, byEnv := range times {
		for env, vals := range byEnv {
			for i, v := range vals {
				s := &store.BenchSample{Test: test, Env: env, Repeat: i, WallSeconds: v, Status: store.SampleOK, At: at.Add(time.Minute),
					PeakManaged: 1 << 28, Spilled: 1 << 20, Transferred: 3 << 20, CPUSeconds: 2 * v}
				if v < 0 {
					s.WallSeconds, s.CPUSeconds, s.Status, s.Error = 0, 0, store.SampleFailed, "ZeroDivisionError: division by zero <script>alert(1)</script>"
				}
				batch = append(batch, s)
			}
		}
	}
	if err := st.AddBenchSamples(ctx, run.ID, batch); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishBenchRun(ctx, run.ID, store.BenchOK, ""); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func around(r *rand.Rand, n int, mid, cv float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mid * (1 + cv*(2*r.Float64()-1))
	}
	return out
}

var (
	envA  = store.BenchEnv{Label: "A", Name: "base", Hash: strings.Repeat("a", 64), Packages: map[string]string{"dask": "2024.8.0", "python": "3.11"}}
	envB  = store.BenchEnv{Label: "B", Name: "candidate", Hash: strings.Repeat("b", 64), Packages: map[string]string{"dask": "2024.9.0", "python": "3.11"}}
	envA2 = store.BenchEnv{Label: "A2", Name: "base", Hash: strings.Repeat("a", 64)}
)

// abRun stores three earlier runs of base (history) and an A/B/A2 run in
// which bench_slow is 5× slower on B, bench_same is unchanged, and
// bench_broken fails on B; it returns the A/B run's id.
func abRun(t *testing.T, st *store.DB) string {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Now().Add(-time.Hour).Truncate(time.Second)
	for d := 3; d >= 1; d-- {
		storeRun(t, st, now.Add(-time.Duration(d)*24*time.Hour), []store.BenchEnv{envA}, map[string]map[string][]float64{
			"bench_slow": {"A": around(r, 6, 1, 0.03)}, "bench_same": {"A": around(r, 6, 2, 0.03)},
		})
	}
	return storeRun(t, st, now, []store.BenchEnv{envA, envB, envA2}, map[string]map[string][]float64{
		"bench_slow":   {"A": around(r, 6, 1, 0.03), "B": around(r, 6, 5, 0.03), "A2": around(r, 6, 1, 0.03)},
		"bench_same":   {"A": around(r, 6, 2, 0.03), "B": around(r, 6, 2, 0.03), "A2": around(r, 6, 2, 0.03)},
		"bench_broken": {"A": around(r, 6, 1, 0.03), "B": {-1, -1, -1, -1, -1, 1}, "A2": around(r, 6, 1, 0.03)},
	})
}

// TestBenchReportCLI: the report gives each test its figures and verdict
// (5× slower is "slower" with p < 0.05; unchanged is "no significant
// change"; a test that failed on B is "too noisy to tell" and shows its
// error), as text, JSON and a self-contained HTML file; another user
// cannot read it.
func TestBenchReportCLI(t *testing.T) {
	tg, st := benchGateway(t)
	id := abRun(t, st)

	out := tg.mustRun(t, "ann", "bench", "report", id)
	for _, want := range []string{"Run " + id + ": suite demo, ok", "A  base aaaaaaaaaaaa dask 2024.8.0, python 3.11", "B  candidate",
		"ZeroDivisionError: division by zero", "Threshold 10%.", "Verdict: a change of medians must be significant"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "bench_") {
			lines[f[0]] = l
		}
	}
	for test, verdict := range map[string]string{"bench_slow": "slower", "bench_same": "no significant change", "bench_broken": "too noisy to tell"} {
		if !strings.Contains(lines[test], verdict) {
			t.Errorf("%s: want %q in %q", test, verdict, lines[test])
		}
	}

	var rep report.Report
	if err := json.Unmarshal([]byte(tg.mustRun(t, "ann", "bench", "report", id, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Candidate != "B" || len(rep.Tests) != 3 {
		t.Fatalf("json report: %+v", rep)
	}
	for _, tr := range rep.Tests {
		switch tr.Test {
		case "bench_slow":
			if tr.Verdict != "slower" || tr.P == nil || *tr.P >= 0.05 || *tr.Change < 3 || tr.Noise == nil || tr.A.N != 6 || tr.B.N != 6 {
				t.Errorf("bench_slow: %+v", tr)
			}
		case "bench_broken":
			if tr.Failed != 5 || len(tr.Errors) != 1 || tr.B.N != 1 {
				t.Errorf("bench_broken: failed %d errors %v", tr.Failed, tr.Errors)
			}
		}
	}

	html := filepath.Join(t.TempDir(), "report.html")
	tg.mustRun(t, "ann", "bench", "report", id, "--html", html)
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{`<svg class="bars"`, `class="box" data-env="B"`, `class="whisker"`, `class="median"`, `<svg class="history"`, `class="series" data-env="base (A)"`,
		`class="verdict slower"`, "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML report lacks %s", want)
		}
	}
	// Self-contained: nothing is loaded from anywhere, and user text is escaped.
	for _, bad := range []string{"http://", "https://", "<script", "src=", "@import", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("HTML report contains %q", bad)
		}
	}

	if _, err := tg.run(t, "bob", "bench", "report", id); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("bob reading ann's run: %v", err)
	}
	if _, err := tg.run(t, "root", "bench", "report", id); err != nil {
		t.Errorf("admin reading ann's run: %v", err)
	}
	if _, err := tg.run(t, "ann", "bench", "report", id, "--threshold", "lots"); err == nil || !strings.Contains(err.Error(), "--threshold") {
		t.Errorf("bad threshold: %v", err)
	}
	if _, err := tg.run(t, "ann", "bench", "report", id, "--html", filepath.Join(t.TempDir(), "no", "such", "dir", "r.html")); err == nil || !strings.Contains(err.Error(), "--html") {
		t.Errorf("unwritable --html: %v", err)
	}
}

// TestBenchHistoryCLI: history prints every sample of a test as a table,
// CSV or JSON, filtered by environment, and refuses bad flags.
func TestBenchHistoryCLI(t *testing.T) {
	tg, st := benchGateway(t)
	abRun(t, st)

	out := tg.mustRun(t, "ann", "bench", "history", "bench_slow")
	if got := strings.Count(out, "\n"); got != 1+3*6+3*6 {
		t.Errorf("history of bench_slow: %d lines, want header + 36:\n%s", got, out)
	}
	if !strings.Contains(out, "candidate (B)") || !strings.Contains(out, "256.0 MiB") {
		t.Errorf("history table:\n%s", out)
	}
	rows, err := csv.NewReader(strings.NewReader(tg.mustRun(t, "ann", "bench", "history", "bench_slow", "--env", "candidate", "-o", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || rows[0][0] != "run_started_at" || rows[1][5] != "B" || rows[1][6] != "candidate" || rows[1][9] != "ok" {
		t.Errorf("csv: %v", rows)
	}
	// Repeats count from 1, as a run's progress counts them.
	var reps []string
	for _, row := range rows[1:] {
		reps = append(reps, row[8])
	}
	if sort.Strings(reps); fmt.Sprint(reps) != "[1 2 3 4 5 6]" {
		t.Errorf("repeats %v, want 1 to 6", reps)
	}
	var pts []apitype.BenchPointJSON
	if err := json.Unmarshal([]byte(tg.mustRun(t, "ann", "bench", "history", "bench_slow", "--env", "aaaaaaaa", "-o", "json")), &pts); err != nil {
		t.Fatal(err)
	}
	if len(pts) != 30 { // 4 runs of A and 1 of A2, by hash prefix
		t.Errorf("json history by hash prefix: %d points", len(pts))
	}
	if out := tg.mustRun(t, "bob", "bench", "history", "bench_slow"); !strings.Contains(out, "no samples of bench_slow") {
		t.Errorf("bob sees: %s", out)
	}
	// A short name: the one test id it ends; one that ends two is refused
	// naming both.
	storeRun(t, st, time.Now().Add(-time.Minute), []store.BenchEnv{envA}, map[string]map[string][]float64{
		"io.py::bench_shuffle": {"A": {1, 2}}, "a.py::bench_dup": {"A": {1}}, "b.py::bench_dup": {"A": {1}},
	})
	if out := tg.mustRun(t, "ann", "bench", "history", "bench_shuffle"); strings.Count(out, "\n") != 3 {
		t.Errorf("history of a short name: want header + 2 samples:\n%s", out)
	}
	if _, err := tg.run(t, "ann", "bench", "history", "bench_dup"); err == nil || !strings.Contains(err.Error(), "a.py::bench_dup, b.py::bench_dup") {
		t.Errorf("an ambiguous short name: %v", err)
	}
	for _, c := range [][]string{
		{"bench", "history", "bench_slow", "-o", "xml"},
		{"bench", "history", "bench_slow", "--since", "yesterday"},
		{"bench", "history"},
	} {
		if _, err := tg.run(t, "ann", c...); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
}

// TestBenchCheckCLI: check exits non-zero listing a regression with its
// p-value and size when the latest nightly run stepped up, and zero when
// the history is noisy but flat.
func TestBenchCheckCLI(t *testing.T) {
	tg, st := benchGateway(t)
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Now().Add(-9 * 24 * time.Hour)
	nightly := store.BenchEnv{Label: "A", Name: "nightly", Hash: strings.Repeat("c", 64)}
	flat := store.BenchEnv{Label: "A", Name: "flat", Hash: strings.Repeat("d", 64)}
	for d := range 9 {
		at := start.Add(time.Duration(d) * 24 * time.Hour)
		step := 1.0
		if d == 8 {
			step = 1.5
		}
		storeRun(t, st, at, []store.BenchEnv{nightly}, map[string]map[string][]float64{
			"bench_step": {"A": around(r, 5, step, 0.02)}, "bench_steady": {"A": around(r, 5, 3, 0.02)},
		})
		storeRun(t, st, at, []store.BenchEnv{flat}, map[string]map[string][]float64{"bench_noisy": {"A": around(r, 5, 2, 0.3)}})
	}
	out, err := tg.run(t, "ann", "bench", "check", "--env", "nightly", "--window", "7d", "--threshold", "10%")
	if !errors.Is(err, errRegressions) || !strings.Contains(err.Error(), "bench_step +") || !strings.Contains(err.Error(), "p=") {
		t.Fatalf("check of a step: %v\n%s", err, out)
	}
	if !strings.Contains(out, "REGRESSION") || !strings.Contains(out, "1 regression(s) on nightly") || strings.Count(out, "REGRESSION") != 1 {
		t.Errorf("check output:\n%s", out)
	}
	if out, err := tg.run(t, "ann", "bench", "check", "--env", "flat"); err != nil || !strings.Contains(out, "0 regression(s)") {
		t.Errorf("check of a noisy flat series: %v\n%s", err, out)
	}
	if out, err := tg.run(t, "ann", "bench", "check", "--env", "nightly", "--threshold", "60%"); err != nil {
		t.Errorf("a threshold above the step: %v\n%s", err, out)
	}
	if out, err := tg.run(t, "bob", "bench", "check", "--env", "nightly"); err != nil || !strings.Contains(out, "no results on nightly") {
		t.Errorf("bob's check: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "check"}, "--env is required"},
		{[]string{"bench", "check", "--env", "nightly", "--window", "week"}, "--window"},
		{[]string{"bench", "check", "--env", "nightly", "--threshold", "0"}, "--threshold"},
	} {
		if _, err := tg.run(t, "ann", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestMatchTestName(t *testing.T) {
	ids := []string{"array.py::bench_sum", "array.py::bench_sum[n=1]", "array.py::bench_sum[n=2]", "sub/x.py::bench_io", "y.py::bench_io", "bench_plain"}
	for _, c := range []struct{ name, want, err string }{
		{"bench_sum", "array.py::bench_sum", ""},
		{"array.py::bench_sum", "array.py::bench_sum", ""},
		{"bench_sum[n=2]", "array.py::bench_sum[n=2]", ""},
		{"x.py::bench_io", "sub/x.py::bench_io", ""},
		{"bench_plain", "bench_plain", ""},
		{"um", "um", ""}, // ends no id after a boundary: as given
		{"bench_io", "", "bench_io names 2 benchmarks: sub/x.py::bench_io, y.py::bench_io; give one of them in full"},
	} {
		got, err := matchTestName(c.name, ids)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("matchTestName(%q) = %q, %v; want %q, %q", c.name, got, err, c.want, c.err)
		}
	}
}

type storedRun struct {
	run apitype.BenchRunJSON
	err error
}

func (s storedRun) BenchRun(context.Context, string) (apitype.BenchRunJSON, error) {
	return s.run, s.err
}

// The table at the end of a run is the stored report: when the store kept
// fewer samples than the command saw (some could not be recorded), it
// shows the store's n, as gateway bench report does.
func TestBenchOutcomePrintsStoredReport(t *testing.T) {
	out := bench.Outcome{RunID: "br-1", Status: bench.RunDone}
	for i := range 5 {
		out.Samples = append(out.Samples, bench.Sample{Test: "bench_x", Set: "A", Repeat: i + 1, Status: bench.StatusOK, WallS: 1})
	}
	stored := apitype.BenchRunJSON{ID: "br-1", Suite: "s", Status: "partial", Envs: []apitype.BenchEnvJSON{{Label: "A", Name: "base"}}}
	for i := range 2 {
		stored.Samples = append(stored.Samples, apitype.BenchSampleJSON{Test: "bench_x", Env: "A", Repeat: i, WallSeconds: 1, Status: "ok"})
	}
	var b strings.Builder
	if err := printBenchOutcome(context.Background(), &b, false, storedRun{run: stored}, out); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	_ = printReport(&want, report.Build(stored, report.DefaultThreshold))
	if !strings.HasPrefix(b.String(), want.String()) || !strings.Contains(b.String(), "n=2") || strings.Contains(b.String(), "n=5") ||
		!strings.Contains(b.String(), "Run br-1 partial.") {
		t.Errorf("printed:\n%s\nwant the stored report:\n%s", b.String(), want.String())
	}
	b.Reset()
	if err := printBenchOutcome(context.Background(), &b, false, storedRun{err: errors.New("gateway unreachable")}, out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "could not be read (gateway unreachable)") {
		t.Errorf("fallback:\n%s", b.String())
	}
}

// Adaptive repeats' flags are checked before anything starts.
func TestBenchRunPrecisionFlags(t *testing.T) {
	tg, _ := benchGateway(t)
	suite := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-repeat", "9"}, "give --precision too"},
		{[]string{"--precision", "lots"}, "--precision"},
		{[]string{"--precision", "5%", "--repeat", "10", "--max-repeat", "3"}, "--max-repeat 3: give 10 (--repeat) to 1000"},
	} {
		if _, err := tg.run(t, "ann", append([]string{"bench", "run", suite}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
