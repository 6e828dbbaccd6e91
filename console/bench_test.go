package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// The benchmarks section reads the real store (tc.db), where the API
// keeps results and schedules.

// benchRun stores a finished run of owner's with the given wall times by
// test and label; a negative time is a failed sample.
func benchRun(t *testing.T, db *store.DB, owner string, at time.Time, envs []store.BenchEnv, times map[string]map[string][]float64) string {
	t.Helper()
	ctx := context.Background()
	run := &store.BenchRun{Owner: owner, OwnerName: owner, Suite: "demo", Envs: envs, StartedAt: at, Provider: "docker", Region: "local",
		Shape: `{"workers":2}`, Options: `{"repeat":5,"null":true}`, GatewayVersion: "test"}
	if err := db.CreateBenchRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var batch []*store.BenchSample
	for test, byEnv := range times {
		for env, vals := range byEnv {
			for i, v := range vals {
				s := &store.BenchSample{Test: test, Env: env, Repeat: i, WallSeconds: v, Status: store.SampleOK, At: at.Add(time.Minute), PeakManaged: 1 << 28}
				if v < 0 {
					s.WallSeconds, s.Status, s.Error = 0, store.SampleFailed, "ZeroDivisionError: division by zero"
				}
				batch = append(batch, s)
			}
		}
	}
	if err := db.AddBenchSamples(ctx, run.ID, batch); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishBenchRun(ctx, run.ID, store.BenchOK, ""); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

var (
	envBase = store.BenchEnv{Label: "A", Name: "base", Hash: strings.Repeat("a", 64), Packages: map[string]string{"dask": "2024.8.0"}}
	envCand = store.BenchEnv{Label: "B", Name: "candidate", Hash: strings.Repeat("b", 64), Packages: map[string]string{"dask": "2024.9.0"}}
)

// benchFixture is alice's history (two nights of A), her A/B run in
// which bench_slow is five times slower on B, her schedule, and bob's
// run and schedule.
type benchFixture struct {
	tc                    *testConsole
	abRun, bobRun         string
	aliceSched, bobSched  string
	aliceSchedLastRunTime time.Time
}

// newBenchFixture serves the benchmarks section over the store (as wrap
// makes it), and the environments section over envs when given.
func newBenchFixture(t *testing.T, envs *fakeEnvs, wrap ...func(BenchStore) BenchStore) *benchFixture {
	t.Helper()
	fx := &benchFixture{}
	fx.tc = newTestConsole(t, newFakeClusters(), func(tc *testConsole) {
		if envs != nil {
			tc.console.SetEnvs(envs)
		}
		var b BenchStore = tc.db
		for _, w := range wrap {
			b = w(b)
		}
		if err := tc.console.SetBench(b); err != nil {
			t.Fatal(err)
		}
	})
	db := fx.tc.db
	now := time.Now().Add(-time.Hour)
	around := func(n int, mid float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = mid * (1 + 0.01*float64(i-n/2))
		}
		return out
	}
	for d := 2; d >= 1; d-- {
		benchRun(t, db, "alice", now.Add(-time.Duration(d)*24*time.Hour), []store.BenchEnv{envBase}, map[string]map[string][]float64{
			"bench_slow": {"A": around(5, 1)}, "bench_same": {"A": around(5, 2)}})
	}
	fx.abRun = benchRun(t, db, "alice", now, []store.BenchEnv{envBase, envCand}, map[string]map[string][]float64{
		"bench_slow": {"A": around(5, 1), "B": around(5, 5)}, "bench_same": {"A": around(5, 2), "B": around(5, 2)},
		"bench_broken": {"A": around(3, 1), "B": {-1, -1, 1}}})
	fx.bobRun = benchRun(t, db, "bob", now, []store.BenchEnv{envBase}, map[string]map[string][]float64{"bench_bobs": {"A": around(3, 1)}})
	ctx := context.Background()
	for _, sc := range []*store.BenchSchedule{
		{Owner: "alice", OwnerName: "alice", Suite: "nightly-suite", Envs: []string{"base", "candidate"}, Cron: "0 3 * * *",
			NextRun: now.Add(24 * time.Hour), LastRun: now, LastRunID: fx.abRun, LastError: "the last run had a failed sample"},
		{Owner: "bob", OwnerName: "bob", Suite: "bobs-suite", Envs: []string{"base"}, Cron: "0 4 * * *", NextRun: now.Add(24 * time.Hour)},
	} {
		if err := db.CreateBenchSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
		if sc.Owner == "alice" {
			fx.aliceSched = sc.ID
		} else {
			fx.bobSched = sc.ID
		}
	}
	return fx
}

// expect checks an answer's status and what its body has and has not.
func expect(t *testing.T, a answer, status int, want, absent []string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("%d, want %d:\n%s", a.Status, status, a.Body)
	}
	for _, w := range want {
		if !strings.Contains(a.Body, w) {
			t.Errorf("lacks %q", w)
		}
	}
	for _, w := range absent {
		if strings.Contains(a.Body, w) {
			t.Errorf("shows %q", w)
		}
	}
	if t.Failed() {
		t.Log(a.Body)
	}
}

func TestBenchmarksPage(t *testing.T) {
	fx := newBenchFixture(t, nil)
	for _, tt := range []struct {
		name         string
		user         *auth.User
		want, absent []string
	}{
		{"alice", alice, []string{`href="/benchmarks/runs/` + fx.abRun + `"`, "A base, B candidate", "demo", `href="/benchmarks/history?test=bench_slow"`,
			`href="/benchmarks/history?test=bench_broken"`, "nightly-suite", "0 3 * * *", "base, candidate", "the last run had a failed sample",
			`action="/benchmarks/schedules/` + fx.aliceSched + `/delete"`},
			[]string{fx.bobRun, "bench_bobs", "bobs-suite", fx.bobSched}},
		{"read-only alice: no controls", aliceRO, []string{fx.abRun, "nightly-suite"}, []string{`action="/benchmarks/schedules/`}},
		{"bob", bob, []string{fx.bobRun, "bobs-suite"}, []string{fx.abRun, "nightly-suite", "bench_slow"}},
		{"carol, who ran nothing", &auth.User{ID: "carol", Name: "carol"}, []string{"You have run no benchmark yet.", "No schedule of yours."}, []string{"demo"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, fx.tc.browser(tt.user).get("/benchmarks"), http.StatusOK, tt.want, tt.absent)
		})
	}
}

// A run's page is the report gateway bench report --html draws: the
// comparison and, per test, box plots with every sample and the history, as
// SVG the page's styles color.
func TestBenchRunPage(t *testing.T) {
	fx := newBenchFixture(t, nil)
	a := fx.tc.browser(alice).get("/benchmarks/runs/" + fx.abRun)
	expect(t, a, http.StatusOK, []string{"Benchmark report <code>" + fx.abRun, `<table id="summary">`, `<tr data-test="bench_slow">`,
		`<svg class="bars"`, `<rect class="box" data-env="A"`, `<rect class="box" data-env="B"`, `class="whisker"`, `class="median"`, `<svg class="history"`,
		`<polyline class="series" data-env="base (A)"`, `data-series="1"`, `class="verdict slower"`, "ZeroDivisionError: division by zero",
		`href="/benchmarks/history?test=bench_slow"`, "dask 2024.9.0", `<a href="/benchmarks" aria-current="page">`}, nil)
	// Three tests, and bench_slow's history: base over three runs, the
	// candidate over one.
	if n := strings.Count(a.Body, `<section class="test"`); n != 3 {
		t.Errorf("%d test sections, want 3", n)
	}
	slow := a.Body[strings.Index(a.Body, `<section class="test" id="test-`):]
	slow = slow[strings.Index(slow, `data-test="bench_slow"`):]
	slow = slow[:strings.Index(slow, "</section>")]
	pts := regexp.MustCompile(`<polyline class="series" data-env="([^"]+)" points="([^"]*)"`).FindAllStringSubmatch(slow, -1)
	if len(pts) != 2 || pts[0][1] != "base (A)" || len(strings.Fields(pts[0][2])) != 3 || pts[1][1] != "candidate (B)" || len(strings.Fields(pts[1][2])) != 1 {
		t.Errorf("bench_slow's history lines: %q", pts)
	}

	for _, tt := range []struct {
		name string
		user *auth.User
		path string
	}{
		{"another user's run", bob, "/benchmarks/runs/" + fx.abRun},
		{"alice opens bob's", alice, "/benchmarks/runs/" + fx.bobRun},
		{"no such run", alice, "/benchmarks/runs/br-0000000000000000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := fx.tc.browser(tt.user).get(tt.path)
			expect(t, a, http.StatusNotFound, []string{"not found"}, []string{"<svg", "bench_slow", "bench_bobs"})
		})
	}
}

func TestBenchHistoryPage(t *testing.T) {
	fx := newBenchFixture(t, nil)
	a := fx.tc.browser(alice).get("/benchmarks/history?test=bench_slow")
	expect(t, a, http.StatusOK, []string{"History of <code>bench_slow</code>", `<svg class="history"`, `data-env="base (A)"`, `data-env="candidate (B)"`,
		"Every sample, newest first", "base (A)", "candidate (B)", `href="/benchmarks/runs/` + fx.abRun + `"`, "256.0 MiB", "(20 samples)"}, nil)
	if n := strings.Count(a.Body, "<tr>") - 1; n != 20 {
		t.Errorf("%d rows, want 20 (2 nights of 5, the A/B run's 10)", n)
	}
	for _, tt := range []struct {
		name         string
		user         *auth.User
		path         string
		status       int
		want, absent []string
	}{
		{"failed samples", alice, "/benchmarks/history?test=bench_broken", http.StatusOK, []string{"status-failed", "ZeroDivisionError"}, nil},
		{"bob's view of alice's test", bob, "/benchmarks/history?test=bench_slow", http.StatusOK, []string{"No sample of this benchmark of yours"}, []string{"<svg class=\"history\"", fx.abRun}},
		{"no test named", alice, "/benchmarks/history", http.StatusBadRequest, []string{"Which benchmark?"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, fx.tc.browser(tt.user).get(tt.path), tt.status, tt.want, tt.absent)
		})
	}
}

func TestDeleteSchedule(t *testing.T) {
	for _, tt := range []struct {
		name      string
		user      *auth.User
		sched     func(*benchFixture) string
		header    map[string]string
		status    int
		where     string
		text      string
		aliceLeft int // alice's schedules after
	}{
		{name: "her own", user: alice, sched: func(fx *benchFixture) string { return fx.aliceSched }, status: http.StatusSeeOther, where: "/benchmarks?msg=Schedule+bs-"},
		{name: "another user's", user: bob, sched: func(fx *benchFixture) string { return fx.aliceSched }, status: http.StatusNotFound, text: "No schedule", aliceLeft: 1},
		{name: "no such schedule", user: alice, sched: func(*benchFixture) string { return "bs-nope" }, status: http.StatusNotFound, text: "No schedule bs-nope of yours", aliceLeft: 1},
		{name: "read-only", user: aliceRO, sched: func(fx *benchFixture) string { return fx.aliceSched }, status: http.StatusForbidden, text: "read-only", aliceLeft: 1},
		{name: "cross-site", user: alice, sched: func(fx *benchFixture) string { return fx.aliceSched },
			header: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, status: http.StatusForbidden, text: "did not come from the gateway", aliceLeft: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newBenchFixture(t, nil)
			a := fx.tc.browser(tt.user).do("POST", "/benchmarks/schedules/"+tt.sched(fx)+"/delete", url.Values{}, tt.header)
			if a.Status != tt.status || !strings.HasPrefix(a.Header.Get("Location"), tt.where) || !strings.Contains(a.Body, tt.text) {
				t.Fatalf("%d at %q, want %d at %q with %q:\n%s", a.Status, a.Header.Get("Location"), tt.status, tt.where, tt.text, a.Body)
			}
			left, err := fx.tc.db.ListBenchSchedules(context.Background(), "alice")
			if err != nil || len(left) != tt.aliceLeft {
				t.Fatalf("alice's schedules after: %d, %v; want %d", len(left), err, tt.aliceLeft)
			}
			if bobs, _ := fx.tc.db.ListBenchSchedules(context.Background(), "bob"); len(bobs) != 1 {
				t.Fatalf("bob's schedules after: %d", len(bobs))
			}
		})
	}
}

// failingBench fails one method of the store.
type failingBench struct {
	BenchStore
	method string
	err    error
}

func (f failingBench) fail(m string) error {
	if f.method == m {
		return f.err
	}
	return nil
}

func (f failingBench) GetBenchRun(ctx context.Context, id string) (*store.BenchRun, error) {
	if err := f.fail("GetBenchRun"); err != nil {
		return nil, err
	}
	return f.BenchStore.GetBenchRun(ctx, id)
}

func (f failingBench) ListBenchRuns(ctx context.Context, fl store.BenchRunFilter) ([]*store.BenchRun, error) {
	if err := f.fail("ListBenchRuns"); err != nil {
		return nil, err
	}
	return f.BenchStore.ListBenchRuns(ctx, fl)
}

func (f failingBench) BenchSamples(ctx context.Context, id string) ([]store.BenchSample, error) {
	if err := f.fail("BenchSamples"); err != nil {
		return nil, err
	}
	return f.BenchStore.BenchSamples(ctx, id)
}

func (f failingBench) BenchHistory(ctx context.Context, fl store.BenchHistoryFilter) ([]store.BenchPoint, error) {
	if err := f.fail("BenchHistory"); err != nil {
		return nil, err
	}
	return f.BenchStore.BenchHistory(ctx, fl)
}

func (f failingBench) ListBenchSchedules(ctx context.Context, owner string) ([]*store.BenchSchedule, error) {
	if err := f.fail("ListBenchSchedules"); err != nil {
		return nil, err
	}
	return f.BenchStore.ListBenchSchedules(ctx, owner)
}

func (f failingBench) DeleteBenchSchedule(ctx context.Context, id, owner string) error {
	if err := f.fail("DeleteBenchSchedule"); err != nil {
		return err
	}
	return f.BenchStore.DeleteBenchSchedule(ctx, id, owner)
}

// What the store cannot answer is the API's answer, on a page, without
// its details.
func TestBenchmarksErrors(t *testing.T) {
	down := errors.New("disk on fire")
	for _, tt := range []struct {
		method, path string
		post         bool
	}{
		{"ListBenchRuns", "/benchmarks", false},
		{"ListBenchSchedules", "/benchmarks", false},
		{"GetBenchRun", "/benchmarks/runs/{run}", false},
		{"BenchSamples", "/benchmarks/runs/{run}", false},
		{"BenchHistory", "/benchmarks/runs/{run}", false},
		{"BenchHistory", "/benchmarks/history?test=bench_slow", false},
		{"DeleteBenchSchedule", "/benchmarks/schedules/{sched}/delete", true},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			fx := newBenchFixture(t, nil, func(b BenchStore) BenchStore { return failingBench{BenchStore: b, method: tt.method, err: down} })
			path := strings.NewReplacer("{run}", fx.abRun, "{sched}", fx.aliceSched).Replace(tt.path)
			b := fx.tc.browser(alice)
			a := b.get(path)
			if tt.post {
				a = b.post(path, url.Values{})
			}
			expect(t, a, http.StatusInternalServerError, []string{"internal error"}, []string{"disk on fire"})
		})
	}
}

// What users control is rendered as text: benchmark and suite names,
// environment names and packages, sample errors, schedules.
func TestBenchmarksHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	tc := newTestConsole(t, newFakeClusters(), func(tc *testConsole) {
		if err := tc.console.SetBench(tc.db); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	run := &store.BenchRun{Owner: "alice", OwnerName: evil, Suite: evil, Provider: evil, Region: evil, GatewayVersion: evil,
		Shape: `{"x":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`, Options: `{}`,
		Envs: []store.BenchEnv{{Label: "A", Name: evil, Hash: evil, Packages: map[string]string{evil: evil}}, {Label: "B", Name: evil + "2"}}}
	if err := tc.db.CreateBenchRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var samples []*store.BenchSample
	for i := range 3 {
		samples = append(samples, &store.BenchSample{Test: evil, Env: "A", Repeat: i, WallSeconds: 1, Status: store.SampleOK},
			&store.BenchSample{Test: evil, Env: "B", Repeat: i, Status: store.SampleFailed, Error: evil + "\n</pre><script>alert(1)</script>"})
	}
	if err := tc.db.AddBenchSamples(ctx, run.ID, samples); err != nil {
		t.Fatal(err)
	}
	if err := tc.db.FinishBenchRun(ctx, run.ID, store.BenchFailed, evil); err != nil {
		t.Fatal(err)
	}
	if err := tc.db.CreateBenchSchedule(ctx, &store.BenchSchedule{Owner: "alice", Suite: evil, Envs: []string{evil}, Cron: "0 3 * * *",
		NextRun: time.Now().Add(time.Hour), LastRunID: run.ID, LastError: evil}); err != nil {
		t.Fatal(err)
	}
	b := tc.browser(&auth.User{ID: "alice", Name: evil})
	for _, path := range []string{"/benchmarks", "/benchmarks/runs/" + run.ID, "/benchmarks/history?test=" + url.QueryEscape(evil)} {
		expectEscaped(t, path, b.get(path))
	}
	// A test's name in a link is the query's, escaped as one.
	if a := b.get("/benchmarks"); !strings.Contains(a.Body, `href="/benchmarks/history?test=%3cimg%20src%3dx%20onerror%3dalert%281%29%3e%22%27"`) {
		t.Errorf("the history link does not escape the name:\n%s", a.Body)
	}
}

// The sections' pages, charts included, keep to the CSP: no inline
// script or style, no style attributes, no event handlers.
func TestEnvBenchPagesKeepToTheCSP(t *testing.T) {
	fx := newBenchFixture(t, envFixture())
	inline := regexp.MustCompile(`(?i)<script>|<style|\sstyle=|\son[a-z]+=`)
	for _, path := range []string{"/environments", "/environments/" + hashReady, "/benchmarks", "/benchmarks/runs/" + fx.abRun, "/benchmarks/history?test=bench_slow"} {
		a := fx.tc.browser(alice).get(path)
		if a.Status != http.StatusOK || !strings.Contains(a.Header.Get("Content-Security-Policy"), "style-src 'self'") {
			t.Fatalf("%s: %d %v", path, a.Status, a.Header)
		}
		if m := inline.FindString(a.Body); m != "" {
			t.Errorf("%s has %q", path, m)
		}
		if !strings.Contains(a.Body, `<a href="/environments"`) || !strings.Contains(a.Body, `<a href="/benchmarks"`) {
			t.Errorf("%s's navigation lacks a section", path)
		}
	}
}
