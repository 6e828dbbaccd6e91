package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/images/capture"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/internal/testpypi"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestConsoleEnvBench: the console's environments and benchmarks
// sections in Chromium against a real `gateway dev` on the docker
// provider, which builds environments with the layers builder from a
// package index into a registry, both on loopback (as
// TestLayersEnvironmentCluster does). The user builds their environment
// from the environments page, uploading its spec (an empty form first:
// it says what to give). The index holds the build's one wheel until
// the build's page shows it waiting, so that the page, and the list open
// in another tab, are seen to follow the build to its end without a
// reload; the list and the page
// say which layers the push reused and uploaded, and who may run the
// image before and after an admin publishes it. Then an A/B benchmark
// run, recorded through the API as the runner records one, has its
// report in the page: bars with error bars and the history, colored by
// the console's styles. Every page passes axe-core, and the browser
// refuses nothing by the CSP.
func TestConsoleEnvBench(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	pool := testdocker.Pool(t)
	image := testdocker.DaskImage(t)
	rootfs := testdocker.Rootfs(t)

	host, base := layersRegistry(t)

	// The index answers what it has at once, but a wheel's download only
	// once the test lets it go.
	gwWheel := testpypi.Wheel{Name: "gwconsole", Version: "1.0", Files: map[string]string{"gwconsole/__init__.py": "VALUE = 42\n"}}
	fn, data := gwWheel.Build()
	ix, stopIndex := testpypi.Serve(map[string][]byte{fn: data})
	t.Cleanup(stopIndex)
	fetching, release := make(chan struct{}), make(chan struct{})
	var fetchOnce, releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files/") {
			fetchOnce.Do(func() { close(fetching) })
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		ix.ServeHTTP(w, r)
	}))
	t.Cleanup(gated.Close)

	// The user's environment: the image's Python with gwconsole on its
	// path, which the base lacks.
	userPython, _ := wheelPython(t, rootfs, fn, data)
	id := fmt.Sprintf("gw-cenv-%d", time.Now().UnixNano()%1_000_000_000)
	e := newEnv(t, "GATEWAY_CONFIG="+layersConfig(t, id, image, host, gated.URL+"/simple/", base))
	t.Cleanup(func() { removeContainers(t, pool, id) })
	e.startGateway()

	// The user's environment as `gateway env build --no-code` sends it:
	// its spec, which the user uploads on the environments page.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, err := capture.Capture(ctx, capture.Options{Python: userPython})
	if err != nil {
		t.Fatal(err)
	}
	hash, err := env.Spec.Hash()
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if raw, err := json.Marshal(env.Spec); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(specFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	g := &browserGateway{e: e, chromium: chromium}
	b := newBrowser(t, chromium)
	csp := watchCSP(t, b)
	// Signed in from the section's own page, which is back after.
	g.consoleSignIn(t, b, "/environments", "dev")
	if p := b.page(); p.H1 != "Environments" || !strings.Contains(p.Text, "Published environments") || !strings.Contains(p.Text, "You have asked for no environment yet") {
		t.Fatalf("environments: %q\n%s", p.H1, p.Text)
	}
	checkAccessibility(t, b, "the environments list, with its build form")
	// Nothing given: the form says what to give, and builds nothing.
	status := b.click("build with nothing given", chromedp.CSS(`form.build-form button[type=submit]`))
	if alert := evalString(t, b, `(document.querySelector("p.error[role=alert]") || {}).innerText || ""`); status != http.StatusBadRequest ||
		!strings.Contains(alert, "no environment given: choose a file") {
		t.Fatalf("an empty form: HTTP %d, %q", status, alert)
	}
	checkAccessibility(t, b, "the build form, saying what to fix")

	// The list, open in another tab, follows the user's builds.
	list := b.tab(t)
	list.open("the list in another tab", e.url+"/environments")
	list.markNoReload()

	// The spec uploaded: the build starts, and its page follows it; it
	// waits for its wheel until the test lets it go.
	b.must("choose the spec file", chromedp.SetUploadFiles(chromedp.CSS(`#env-file`), []string{specFile}))
	status = b.click("build", chromedp.CSS(`form.build-form button[type=submit]`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.H1, hash[:16]) || !strings.Contains(p.Text, "Build started") {
		t.Fatalf("after Build: HTTP %d: %q at %s\n%s\n--- gateway log:\n%s", status, p.H1, p.URL, p.Text, e.gwLog.String())
	}
	select {
	case <-fetching:
	case <-time.After(testutil.HangBound):
		t.Fatalf("the build never fetched its wheel:\n%s", e.gwLog.String())
	}
	waitText(t, b, "the build's step, live", "#build ol.steps", "fetching 1 wheel")
	if state := evalString(t, b, `document.querySelector("#build [data-state]").dataset.state`); state != "building" {
		t.Fatalf("the build page shows a build %q", state)
	}
	checkAccessibility(t, b, "a running build's page")
	list.waitFor(t, "the new build on the list, live", `((document.querySelector('tr[data-build="`+hash+`"]') || {}).innerText || "").includes("building")`)
	list.expectNoReload(t, "the list")

	letGo()
	waitText(t, b, "the build's end on its page", "#build [data-state]", "ready")
	waitText(t, b, "the build's log to its end", "#build pre.logs", "is ready")
	follow := evalString(t, b, `(() => { const el = document.getElementById("build");
		return [el.dataset.updated || "", el.querySelector(".layers").innerText, performance.getEntriesByType("navigation").length].join(" | ") })()`)
	if !regexp.MustCompile(`^\d+ \| \d+ reused \([^)]*\), 1 uploaded \([^)]*\) of \d+ \| 1$`).MatchString(follow) {
		t.Errorf("the page followed the build: %q (want the stream's update time, the pushed layers, one navigation)", follow)
	}
	b.snapshot("the build, ready")
	checkAccessibility(t, b, "a ready build's page")
	list.waitFor(t, "the build ready on the list, live", `((document.querySelector('tr[data-build="`+hash+`"]') || {}).innerText || "").includes("1 uploaded")`)
	list.expectNoReload(t, "the list")
	checkAccessibility(t, list, "the environments list, live")

	// Published by an admin, it is everyone's.
	e.userEnv(t, "admin").gwOK("admin", "env", "publish", "console-team", "--env", hash, "--description", "the team's")
	b.open("the list after publishing", e.url+"/environments")
	row := evalString(t, b, `document.querySelector('tr[data-build="`+hash+`"]').innerText`)
	published := evalString(t, b, `(document.querySelector('tr[data-published="console-team"]') || {}).innerText || ""`)
	if !strings.Contains(row, "ready") || !strings.Contains(row, "everyone (published as console-team)") || !regexp.MustCompile(`1 uploaded`).MatchString(row) ||
		!strings.Contains(published, "the team's") {
		t.Errorf("after publishing: the build %q, the published row %q", row, published)
	}
	checkAccessibility(t, b, "the environments list, published")

	// Benchmarks: two nights of the base, then an A/B run in which
	// bench_slow is five times slower on the candidate.
	c, err := client.New(e.url, e.token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	baseEnv := apitype.BenchEnvJSON{Label: "A", Name: "base", Hash: hash, Packages: map[string]string{"dask": "2024.8.0"}}
	cand := apitype.BenchEnvJSON{Label: "B", Name: "candidate", Hash: strings.Repeat("b", 64), Packages: map[string]string{"dask": "2024.9.0"}}
	around := func(n int, mid float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = mid * (1 + 0.01*float64(i-n/2))
		}
		return out
	}
	record := func(envs []apitype.BenchEnvJSON, times map[string]map[string][]float64) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := c.CreateBenchRun(ctx, apitype.BenchRunJSON{Suite: "console-demo", Envs: envs, Shape: json.RawMessage(`{"workers":1}`),
			Options: json.RawMessage(`{"repeat":5}`)})
		if err != nil {
			t.Fatal(err)
		}
		var samples []apitype.BenchSampleJSON
		for test, byEnv := range times {
			for env, vals := range byEnv {
				for i, v := range vals {
					samples = append(samples, apitype.BenchSampleJSON{Test: test, Env: env, Repeat: i, WallSeconds: v, Status: "ok", PeakManaged: 1 << 27})
				}
			}
		}
		if err := c.AddBenchSamples(ctx, run.ID, samples); err != nil {
			t.Fatal(err)
		}
		if _, err := c.FinishBenchRun(ctx, run.ID, "ok", ""); err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	for range 2 {
		record([]apitype.BenchEnvJSON{baseEnv}, map[string]map[string][]float64{"bench_slow": {"A": around(5, 1)}, "bench_same": {"A": around(5, 2)}})
	}
	ab := record([]apitype.BenchEnvJSON{baseEnv, cand}, map[string]map[string][]float64{
		"bench_slow": {"A": around(5, 1), "B": around(5, 5)}, "bench_same": {"A": around(5, 2), "B": around(5, 2)}})

	status = b.click("open Benchmarks", chromedp.CSS(`nav a[href="/benchmarks"]`))
	if p := b.page(); status != http.StatusOK || p.H1 != "Benchmarks" || strings.Count(p.Text, "console-demo") != 3 || !strings.Contains(p.Text, "A base, B candidate") {
		t.Fatalf("benchmarks: HTTP %d: %q\n%s", status, p.H1, p.Text)
	}
	checkAccessibility(t, b, "the benchmarks list")
	status = b.click("open the A/B run", chromedp.CSS(`a[href="/benchmarks/runs/`+ab+`"]`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.H1, ab) {
		t.Fatalf("the run's page: HTTP %d: %q\n%s", status, p.H1, p.Text)
	}
	type chart struct {
		Test              string
		Bars, Errorbars   int
		BarHeights        []float64
		Fills             []string
		Series            []string
		SeriesPoints      []int
		SeriesStroke      []string
		Verdict           string
		HistoryLinkTarget string
	}
	rctx, rcancel := context.WithTimeout(b.ctx, stepTimeout)
	defer rcancel()
	got, err := chromedp.Run(rctx, chromedp.Evaluate[[]chart](`[...document.querySelectorAll("section.test")].map(s => ({
		Test: s.dataset.test,
		Bars: s.querySelectorAll("svg.bars rect.box").length,
		Errorbars: s.querySelectorAll("svg.bars line.whisker:not(.cap)").length,
		BarHeights: [...s.querySelectorAll("svg.bars rect.box")].map(r => r.getBBox().height),
		Fills: [...s.querySelectorAll("svg.bars rect.box")].map(r => getComputedStyle(r).fill),
		Series: [...s.querySelectorAll("svg.history polyline.series")].map(p => p.dataset.env),
		SeriesPoints: [...s.querySelectorAll("svg.history polyline.series")].map(p => p.points.numberOfItems),
		SeriesStroke: [...s.querySelectorAll("svg.history polyline.series")].map(p => getComputedStyle(p).stroke),
		Verdict: s.querySelector("h2 .verdict").innerText,
		HistoryLinkTarget: (s.querySelector("a[href^='/benchmarks/history']") || {}).href || "",
	}))`))
	b.snapshot("the run's report read")
	if err != nil || len(got) != 2 {
		t.Fatalf("the report's sections: %+v, %v", got, err)
	}
	want := map[string]string{"bench_slow": "slower", "bench_same": "no significant change"}
	for _, s := range got {
		if s.Verdict != want[s.Test] || s.Bars != 2 || s.Errorbars != 2 {
			t.Errorf("%s: verdict %q, %d boxes, %d whiskers; want %q, 2, 2", s.Test, s.Verdict, s.Bars, s.Errorbars, want[s.Test])
		}
		for i, h := range s.BarHeights {
			if h <= 1 {
				t.Errorf("%s: bar %d is %v px high", s.Test, i, h)
			}
		}
		// Colored by console.css (the CSP allows no other style).
		if fmt.Sprint(s.Fills) != "[rgb(78, 121, 167) rgb(225, 87, 89)]" || fmt.Sprint(s.SeriesStroke) != "[rgb(78, 121, 167) rgb(225, 87, 89)]" {
			t.Errorf("%s: bars filled %v, lines stroked %v", s.Test, s.Fills, s.SeriesStroke)
		}
		if fmt.Sprint(s.Series) != "[base (A) candidate (B)]" || fmt.Sprint(s.SeriesPoints) != "[3 1]" {
			t.Errorf("%s: history series %v with %v points, want [base (A) candidate (B)] with [3 1]", s.Test, s.Series, s.SeriesPoints)
		}
		if !strings.HasSuffix(s.HistoryLinkTarget, "/benchmarks/history?test="+s.Test) {
			t.Errorf("%s: history link %q", s.Test, s.HistoryLinkTarget)
		}
	}
	checkAccessibility(t, b, "the run's report")

	// A benchmark's history, from the report.
	status = b.click("open bench_slow's history", chromedp.CSS(`section[data-test="bench_slow"] a[href^="/benchmarks/history"]`))
	p := b.page()
	rows := evalString(t, b, `String(document.querySelectorAll("table.history tbody tr").length) + " " + document.querySelectorAll("svg.history polyline.series").length`)
	if status != http.StatusOK || !strings.Contains(p.H1, "bench_slow") || rows != "20 2" {
		t.Errorf("history: HTTP %d: %q, rows and lines %q\n%s", status, p.H1, rows, p.Text)
	}
	checkAccessibility(t, b, "a benchmark's history")
	csp.check(t)
}
