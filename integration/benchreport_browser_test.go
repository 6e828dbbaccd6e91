package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// benchCore is the part of the scheduling core the results API never
// calls.
type benchCore struct{ api.Core }

func (benchCore) Limits() scheduler.Limits { return scheduler.Limits{} }

// TestBrowserBenchReport: the HTML report that `gateway bench report
// --html` writes, opened from disk in Chromium with no gateway running,
// draws for each test a box plot per set (quartiles, median, whiskers,
// every sample) and a history line per set (A, A2 and B apart) dated on
// its axis, shows each verdict, fits its summary table in the page, and
// loads nothing from anywhere. A screenshot of each step is kept when it fails.
func TestBrowserBenchReport(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	bin := gatewayBinary(t)
	ctx := context.Background()

	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := api.New(api.Config{Version: "browser-test"}, benchCore{}, auth.NewStaticTokens(map[string]auth.User{"ann-token-00000000": {Name: "ann"}}), nil, nil)
	srv.SetBench(st)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	// Five nights of baseline history, then an A/B/A2 run in which
	// bench_slow is five times slower on B.
	r := rand.New(rand.NewPCG(5, 6))
	around := func(n int, mid float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = mid * (1 + 0.04*(2*r.Float64()-1))
		}
		return out
	}
	base := store.BenchEnv{Label: "A", Name: "base", Hash: strings.Repeat("a", 64), Packages: map[string]string{"dask": "2024.8.0"}}
	cand := store.BenchEnv{Label: "B", Name: "candidate", Hash: strings.Repeat("b", 64), Packages: map[string]string{"dask": "2024.9.0"}}
	aa := store.BenchEnv{Label: "A2", Name: "base", Hash: base.Hash}
	record := func(at time.Time, envs []store.BenchEnv, times map[string]map[string][]float64) string {
		run := &store.BenchRun{Owner: "ann", OwnerName: "ann", Suite: "demo", Envs: envs, StartedAt: at, Provider: "docker", Region: "local",
			Shape: `{"workers":2}`, Options: `{"repeat":5,"null":true}`}
		if err := st.CreateBenchRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		var batch []*store.BenchSample
		for test, byEnv := range times {
			for env, vals := range byEnv {
				for i, v := range vals {
					batch = append(batch, &store.BenchSample{Test: test, Env: env, Repeat: i, WallSeconds: v, Status: store.SampleOK, At: at.Add(time.Minute)})
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
	now := time.Now().Add(-time.Hour)
	for d := 5; d >= 1; d-- {
		record(now.Add(-time.Duration(d)*24*time.Hour), []store.BenchEnv{base}, map[string]map[string][]float64{
			"bench_slow": {"A": around(5, 1)}, "bench_same": {"A": around(5, 2)}, "bench_map": {"A": around(5, 0.5)},
		})
	}
	id := record(now, []store.BenchEnv{base, cand, aa}, map[string]map[string][]float64{
		"bench_slow": {"A": around(5, 1), "B": around(5, 5), "A2": around(5, 1)},
		"bench_same": {"A": around(5, 2), "B": around(5, 2), "A2": around(5, 2)},
		"bench_map":  {"A": around(5, 0.5), "B": around(5, 0.5), "A2": around(5, 0.5)},
	})

	report := filepath.Join(t.TempDir(), "report.html")
	cmd := exec.Command(bin, "bench", "report", id, "--html", report, "--gateway", hs.URL, "--token", "ann-token-00000000")
	cmd.Env = append(filterEnv(cmd.Environ()), "XDG_CONFIG_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gateway bench report: %v\n%s", err, out)
	}
	hs.Close() // the report needs nothing once written

	b := newBrowser(t, chromium)
	b.must("open the report", chromedp.Navigate("file://"+report), chromedp.WaitVisible(`svg.bars`))

	type chart struct {
		Test            string
		Bars, Errorbars int
		BarHeights      []float64
		Medians         int
		Series          []string
		SeriesPoints    []int
		XTicks          []string
		Verdict         string
	}
	type shown struct {
		Title     string
		Sections  []chart
		Summary   int
		Resources int
		// The summary table's right edge and the page's width.
		SummaryRight, PageWidth float64
	}
	ctx2, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	got, err := chromedp.Run(ctx2, chromedp.Evaluate[shown](`({
		Title: document.title,
		Summary: document.querySelectorAll("#summary tr[data-test]").length,
		Resources: performance.getEntriesByType("resource").length,
		SummaryRight: document.querySelector("#summary").getBoundingClientRect().right,
		PageWidth: document.documentElement.clientWidth,
		Sections: [...document.querySelectorAll("section.test")].map(s => ({
			Test: s.dataset.test,
			Bars: s.querySelectorAll("svg.bars rect.box").length,
			Errorbars: s.querySelectorAll("svg.bars line.whisker:not(.cap)").length,
			BarHeights: [...s.querySelectorAll("svg.bars rect.box")].map(r => r.getBBox().height),
			Medians: s.querySelectorAll("svg.bars line.median").length,
			Series: [...s.querySelectorAll("svg.history polyline.series")].map(p => p.dataset.env),
			XTicks: [...s.querySelectorAll("svg.history text.xtick")].map(x => x.textContent),
			SeriesPoints: [...s.querySelectorAll("svg.history polyline.series")].map(p => p.points.numberOfItems),
			Verdict: s.querySelector("h2 .verdict").innerText,
		})),
	})`))
	b.snapshot("charts read")
	if err != nil {
		t.Fatalf("reading the report: %v", err)
	}
	if !strings.Contains(got.Title, id) || got.Summary != 3 || len(got.Sections) != 3 {
		t.Fatalf("report shows %+v", got)
	}
	if got.SummaryRight > got.PageWidth {
		t.Errorf("the summary table reaches %.0f px in a page %.0f px wide", got.SummaryRight, got.PageWidth)
	}
	if got.Resources != 0 {
		t.Errorf("the report loaded %d resources; it must be self-contained", got.Resources)
	}
	want := map[string]string{"bench_slow": "slower", "bench_same": "no significant change", "bench_map": "no significant change"}
	for _, s := range got.Sections {
		if s.Verdict != want[s.Test] {
			t.Errorf("%s: verdict %q, want %q", s.Test, s.Verdict, want[s.Test])
		}
		if s.Bars != 3 || s.Errorbars != 3 || s.Medians != 3 {
			t.Errorf("%s: %d boxes, %d whiskers and %d medians, want 3 each (A, B, A2)", s.Test, s.Bars, s.Errorbars, s.Medians)
		}
		for i, h := range s.BarHeights {
			if h <= 1 {
				t.Errorf("%s: box %d is %v px high", s.Test, i, h)
			}
		}
		// base as A: 5 nights + the A/B run; base as A2 and the
		// candidate: that run only.
		if fmt.Sprint(s.Series) != "[base (A) base (A2) candidate (B)]" || fmt.Sprint(s.SeriesPoints) != "[6 1 1]" {
			t.Errorf("%s: history series %v with %v points, want [base (A) base (A2) candidate (B)] with [6 1 1]", s.Test, s.Series, s.SeriesPoints)
		}
		// Dated to the minute: the first night, the middle and the run.
		if len(s.XTicks) != 3 || s.XTicks[0] != now.Add(-5*24*time.Hour).UTC().Format("2006-01-02 15:04 MST") || s.XTicks[2] != now.UTC().Format("2006-01-02 15:04 MST") {
			t.Errorf("%s: history axis %q", s.Test, s.XTicks)
		}
	}
	if t.Failed() {
		b.snapshot("failed")
	}
}
