package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func newBenchRun(owner string) *store.BenchRun {
	return &store.BenchRun{
		Owner: owner, OwnerName: owner + "-name", Suite: "smoke",
		Envs: []store.BenchEnv{
			{Label: "A", Name: "base", Hash: strings.Repeat("a", 64), Image: "reg/env:a", Packages: map[string]string{"dask": "2024.1.0"}},
			{Label: "B", Name: "cand", Hash: strings.Repeat("b", 64), Image: "reg/env:b", Packages: map[string]string{"dask": "2024.2.0"}},
		},
		Tests:          []string{"bench_sum", "bench_shuffle"},
		Shape:          `{"workers":2,"worker_cpus":1}`,
		Provider:       "docker",
		Region:         "local",
		GatewayVersion: "v1.2.3",
		Options:        `{"repeat":3}`,
	}
}

// TestBenchRunLifecycle: a run is created with its environments and
// tests, takes samples of every status while running (adding new tests,
// replacing a retried sample), reads back field for field, finishes once,
// and then takes no more samples.
func TestBenchRunLifecycle(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		r := newBenchRun("u1")
		if err := db.CreateBenchRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.ID, "br-") || r.Status != store.BenchRunning || !r.StartedAt.Equal(clk.Now()) {
			t.Fatalf("created run: id %q status %q started %v", r.ID, r.Status, r.StartedAt)
		}
		dup := newBenchRun("u1")
		dup.ID = r.ID
		if err := db.CreateBenchRun(ctx, dup); !errors.Is(err, store.ErrExists) {
			t.Fatalf("same id twice: %v, want ErrExists", err)
		}

		samples := []store.BenchSample{
			{RunID: r.ID, Test: "bench_sum", Env: "A", Repeat: 0, WallSeconds: 1.25, PeakManaged: 1 << 30, PeakUnmanaged: 2 << 20,
				AvgManaged: 1 << 29, AvgUnmanaged: 1 << 20, Spilled: 4096, Transferred: 1 << 25, CPUSeconds: 2.5, Status: store.SampleOK},
			{RunID: r.ID, Test: "bench_sum", Env: "B", Repeat: 0, WallSeconds: 0.5, Status: store.SampleFailed, Error: "ValueError: boom\x00"},
			{RunID: r.ID, Test: "bench_new", Env: "A", Repeat: 0, WallSeconds: 600, Status: store.SampleTimeout, Error: "timed out after 10m"},
		}
		for i := range samples {
			clk.Advance(time.Second)
			if err := db.AddBenchSample(ctx, &samples[i]); err != nil {
				t.Fatalf("sample %d: %v", i, err)
			}
		}
		// A retried sample replaces the first.
		retry := samples[0]
		retry.WallSeconds = 1.5
		if err := db.AddBenchSample(ctx, &retry); err != nil {
			t.Fatal(err)
		}
		samples[0] = retry

		got, err := db.GetBenchRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "u1" || got.OwnerName != "u1-name" || got.Suite != "smoke" || got.Shape != r.Shape || got.Provider != "docker" ||
			got.Region != "local" || got.GatewayVersion != "v1.2.3" || got.Options != r.Options || len(got.Envs) != 2 ||
			got.Env("B").Packages["dask"] != "2024.2.0" || got.Env("A").Hash != strings.Repeat("a", 64) || got.Env("A2") != nil {
			t.Fatalf("read back: %+v", got)
		}
		if want := "bench_new,bench_shuffle,bench_sum"; strings.Join(got.Tests, ",") != want {
			t.Errorf("tests %v, want %s", got.Tests, want)
		}
		ss, err := db.BenchSamples(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 3 {
			t.Fatalf("%d samples, want 3: %+v", len(ss), ss)
		}
		// Ordered by test, env, repeat.
		want := []store.BenchSample{samples[2], samples[0], samples[1]}
		want[2].Error = "ValueError: boom\uFFFD" // NUL is not storable text
		for i := range want {
			g, w := ss[i], want[i]
			if !g.At.Equal(w.At) {
				t.Errorf("sample %d at %v, want %v", i, g.At, w.At)
			}
			g.At, w.At = time.Time{}, time.Time{}
			if g != w {
				t.Errorf("sample %d:\n got %+v\nwant %+v", i, g, w)
			}
		}

		clk.Advance(time.Minute)
		if err := db.FinishBenchRun(ctx, r.ID, store.BenchOK, ""); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishBenchRun(ctx, r.ID, store.BenchFailed, "again"); !errors.Is(err, store.ErrBenchFinished) || !strings.Contains(err.Error(), "already finished") {
			t.Errorf("second finish: %v", err)
		}
		got, _ = db.GetBenchRun(ctx, r.ID)
		if got.Status != store.BenchOK || !got.FinishedAt.Equal(clk.Now()) {
			t.Errorf("finished run: %s at %v", got.Status, got.FinishedAt)
		}
		late := store.BenchSample{RunID: r.ID, Test: "bench_sum", Env: "A", Repeat: 1, Status: store.SampleOK}
		if err := db.AddBenchSample(ctx, &late); !errors.Is(err, store.ErrBenchFinished) || !strings.Contains(err.Error(), "only be added while it runs") {
			t.Errorf("sample after finish: %v", err)
		}
	})
}

// TestBenchBadInput: every refusal says what is wrong and stores nothing.
func TestBenchBadInput(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		for _, c := range []struct {
			name string
			edit func(*store.BenchRun)
			want string
		}{
			{"no owner", func(r *store.BenchRun) { r.Owner = "" }, "needs an owner"},
			{"no envs", func(r *store.BenchRun) { r.Envs = nil }, "at least one environment"},
			{"bad label", func(r *store.BenchRun) { r.Envs[1].Label = "C" }, `label "C"`},
			{"label twice", func(r *store.BenchRun) { r.Envs[1].Label = "A" }, "given twice"},
			{"shape not JSON", func(r *store.BenchRun) { r.Shape = "2 workers" }, "shape must be a JSON object"},
			{"empty test name", func(r *store.BenchRun) { r.Tests = []string{""} }, "no name"},
			{"long test name", func(r *store.BenchRun) { r.Tests = []string{strings.Repeat("t", 513)} }, "test name is 513 bytes long; at most 512"},
			{"long suite name", func(r *store.BenchRun) { r.Suite = strings.Repeat("s", 600) }, "suite name is 600 bytes long"},
			{"many packages", func(r *store.BenchRun) {
				for i := range 201 {
					r.Envs[0].Packages[fmt.Sprint("p", i)] = "1"
				}
			}, "at most 200 key ones"},
		} {
			r := newBenchRun("u1")
			c.edit(r)
			if err := db.CreateBenchRun(ctx, r); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, store.ErrBenchInvalid) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
			}
		}
		if runs, err := db.ListBenchRuns(ctx, store.BenchRunFilter{}); err != nil || len(runs) != 0 {
			t.Fatalf("refused runs left %d rows (%v)", len(runs), err)
		}

		r := newBenchRun("u1")
		if err := db.CreateBenchRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			s    store.BenchSample
			want string
			is   error
		}{
			{"unknown run", store.BenchSample{RunID: "br-nope", Test: "t", Env: "A", Status: "ok"}, "br-nope", store.ErrNotFound},
			{"no test", store.BenchSample{RunID: r.ID, Env: "A", Status: "ok"}, "no test name", store.ErrBenchInvalid},
			{"bad env", store.BenchSample{RunID: r.ID, Test: "t", Env: "C", Status: "ok"}, `environment "C"`, store.ErrBenchInvalid},
			{"env not in run", store.BenchSample{RunID: r.ID, Test: "t", Env: "A2", Status: "ok"}, "has no environment A2", store.ErrBenchInvalid},
			{"bad status", store.BenchSample{RunID: r.ID, Test: "t", Env: "A", Status: "great"}, `status "great"`, store.ErrBenchInvalid},
			{"negative repeat", store.BenchSample{RunID: r.ID, Test: "t", Env: "A", Status: "ok", Repeat: -1}, "negative", store.ErrBenchInvalid},
			{"negative time", store.BenchSample{RunID: r.ID, Test: "t", Env: "A", Status: "ok", WallSeconds: -1}, "not negative", store.ErrBenchInvalid},
			{"negative bytes", store.BenchSample{RunID: r.ID, Test: "t", Env: "A", Status: "ok", Spilled: -1}, "not be negative", store.ErrBenchInvalid},
		} {
			err := db.AddBenchSample(ctx, &c.s)
			if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
			}
		}
		// A batch with one bad sample stores none of it.
		batch := []*store.BenchSample{
			{Test: "bench_sum", Env: "A", Status: "ok", WallSeconds: 1},
			{Test: "bench_batch", Env: "B", Status: "ok", WallSeconds: 1},
			{Test: "bench_sum", Env: "A2", Status: "ok", WallSeconds: 1},
		}
		if err := db.AddBenchSamples(ctx, r.ID, batch); !errors.Is(err, store.ErrBenchInvalid) {
			t.Errorf("batch with a bad sample: %v", err)
		}
		if ss, _ := db.BenchSamples(ctx, r.ID); len(ss) != 0 {
			t.Errorf("refused samples stored: %+v", ss)
		}
		if got, _ := db.GetBenchRun(ctx, r.ID); len(got.Tests) != 2 {
			t.Errorf("refused samples added tests: %v", got.Tests)
		}
		if err := db.FinishBenchRun(ctx, r.ID, "done", ""); err == nil || !strings.Contains(err.Error(), `status "done"`) {
			t.Errorf("bad finish status: %v", err)
		}
		// A long error keeps its end, where the traceback says what failed.
		long := store.BenchSample{RunID: r.ID, Test: "t", Env: "A", Status: store.SampleFailed, Error: strings.Repeat("x", 100<<10) + "ValueError: the end"}
		if err := db.AddBenchSample(ctx, &long); err != nil {
			t.Fatal(err)
		}
		if ss, _ := db.BenchSamples(ctx, r.ID); len(ss) != 1 || len(ss[0].Error) > 17<<10 || !strings.HasSuffix(ss[0].Error, "ValueError: the end") {
			t.Errorf("long error stored as %d bytes", len(ss[0].Error))
		}
		if err := db.FinishBenchRun(ctx, "br-nope", store.BenchOK, ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("finish unknown run: %v", err)
		}
		// A run whose samples partly failed says so.
		if err := db.FinishBenchRun(ctx, r.ID, store.BenchPartial, "1 of 3 samples failed"); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.GetBenchRun(ctx, r.ID); got.Status != store.BenchPartial || got.Error != "1 of 3 samples failed" {
			t.Errorf("partial run stored as %s %q", got.Status, got.Error)
		}
	})
}

// TestBenchHistory: history joins samples with their run's environment,
// filters by owner, test, environment name, hash or hash prefix, and time,
// and returns the newest Limit oldest first.
func TestBenchHistory(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		var ids []string
		for i, owner := range []string{"u1", "u1", "u2"} {
			r := newBenchRun(owner)
			if i == 1 {
				r.Envs = r.Envs[:1]
				r.Envs[0].Name, r.Envs[0].Hash = "other", strings.Repeat("c", 64)
			}
			if err := db.CreateBenchRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
			for rep := range 2 {
				for _, e := range r.Envs {
					clk.Advance(time.Minute)
					s := store.BenchSample{RunID: r.ID, Test: "bench_sum", Env: e.Label, Repeat: rep, WallSeconds: float64(10*i + rep), Status: store.SampleOK}
					if err := db.AddBenchSample(ctx, &s); err != nil {
						t.Fatal(err)
					}
				}
			}
			clk.Advance(time.Hour)
		}
		count := func(f store.BenchHistoryFilter) []store.BenchPoint {
			t.Helper()
			ps, err := db.BenchHistory(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			return ps
		}
		for _, c := range []struct {
			name string
			f    store.BenchHistoryFilter
			want int
		}{
			{"all", store.BenchHistoryFilter{}, 10},
			{"owner", store.BenchHistoryFilter{Owner: "u1"}, 6},
			{"env name", store.BenchHistoryFilter{Owner: "u1", Env: "base"}, 2},
			{"env hash", store.BenchHistoryFilter{Env: strings.Repeat("b", 64)}, 4},
			{"hash prefix", store.BenchHistoryFilter{Env: "cccccccc"}, 2},
			{"short prefix is not a prefix", store.BenchHistoryFilter{Env: "ccc"}, 0},
			{"test", store.BenchHistoryFilter{Test: "bench_other"}, 0},
			{"limit", store.BenchHistoryFilter{Limit: 3}, 3},
			{"since", store.BenchHistoryFilter{Since: clk.Now().Add(-time.Hour - 4*time.Minute)}, 4},
		} {
			if got := count(c.f); len(got) != c.want {
				t.Errorf("%s: %d points, want %d", c.name, len(got), c.want)
			}
		}
		ps := count(store.BenchHistoryFilter{Owner: "u1", Env: "cand"})
		if len(ps) != 2 || ps[0].Repeat != 0 || ps[1].Repeat != 1 || ps[0].EnvName != "cand" || ps[0].EnvHash != strings.Repeat("b", 64) ||
			ps[0].Suite != "smoke" || ps[0].Owner != "u1" || ps[0].RunID != ids[0] || ps[0].At.After(ps[1].At) {
			t.Errorf("u1's cand history: %+v", ps)
		}
		last := count(store.BenchHistoryFilter{Limit: 1})
		if len(last) != 1 || last[0].RunID != ids[2] || last[0].Repeat != 1 || last[0].Env != "B" {
			t.Errorf("newest point: %+v", last)
		}
		runs, err := db.ListBenchRuns(ctx, store.BenchRunFilter{Owner: "u1"})
		if err != nil || len(runs) != 2 || runs[0].ID != ids[1] || len(runs[0].Envs) != 1 {
			t.Errorf("u1's runs newest first: %v %+v", err, runs)
		}
		if runs, _ := db.ListBenchRuns(ctx, store.BenchRunFilter{Limit: 1}); len(runs) != 1 || runs[0].ID != ids[2] {
			t.Errorf("limit 1: %+v", runs)
		}
	})
}

// TestBenchSchedules: CRUD keeps every field; a due schedule is claimed
// by exactly one of many replicas claiming at once; a completed firing
// moves next_run and frees the lease; a lease that expires lets another
// replica take it, and the first holder's completion is then refused.
func TestBenchSchedules(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		next := clk.Now().Add(time.Hour)
		b := &store.BenchSchedule{Owner: "u1", OwnerName: "ann", OwnerGroups: []string{"team"}, Suite: "nightly",
			SuiteArchive: []byte{0, 1, 2, 0xff}, Envs: []string{"prod"}, Options: `{"repeat":5}`, Cron: "0 2 * * *", NextRun: next}
		if err := db.CreateBenchSchedule(ctx, b); err != nil {
			t.Fatal(err)
		}
		other := &store.BenchSchedule{Owner: "u2", Suite: "s", Envs: []string{"e"}, Cron: "@daily", NextRun: next.Add(time.Hour)}
		if err := db.CreateBenchSchedule(ctx, other); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []*store.BenchSchedule{
			{Owner: "u1", Suite: "s", Envs: []string{"e"}, NextRun: next},
			{Owner: "u1", Suite: "s", Cron: "@daily", NextRun: next},
			{Owner: "u1", Suite: "s", Envs: []string{"e"}, Cron: "@daily"},
		} {
			if err := db.CreateBenchSchedule(ctx, bad); err == nil {
				t.Errorf("schedule %+v accepted", bad)
			}
		}
		got, err := db.GetBenchSchedule(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.OwnerName != "ann" || got.OwnerGroups[0] != "team" || string(got.SuiteArchive) != string(b.SuiteArchive) ||
			got.Envs[0] != "prod" || got.Options != b.Options || got.Cron != b.Cron || !got.NextRun.Equal(next) {
			t.Errorf("read back: %+v", got)
		}
		if l, _ := db.ListBenchSchedules(ctx, "u1"); len(l) != 1 {
			t.Errorf("u1's schedules: %d", len(l))
		}
		if l, _ := db.ListBenchSchedules(ctx, ""); len(l) != 2 {
			t.Errorf("all schedules: %d", len(l))
		}

		if due, err := db.ClaimDueSchedules(ctx, clk.Now(), "r1", time.Minute); err != nil || len(due) != 0 {
			t.Fatalf("nothing due yet: %v %v", due, err)
		}
		now := clk.Advance(time.Hour)
		// Eight replicas claim at once: exactly one wins.
		var mu sync.Mutex
		wins := map[string]int{}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := fmt.Sprintf("r%d", i)
				due, err := db.ClaimDueSchedules(ctx, now, holder, 10*time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, d := range due {
					if d.ID != b.ID || d.LeaseHolder != holder {
						t.Errorf("claimed %+v", d)
					}
					wins[holder]++
				}
			}()
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("winners %v, want exactly one", wins)
		}
		var holder string
		for h := range wins {
			holder = h
		}
		if ok, err := db.RenewBenchScheduleLease(ctx, b.ID, "someone", now, time.Hour); err != nil || ok {
			t.Errorf("renewal by a non-holder: %v %v", ok, err)
		}
		// The lease expires (the holder died); another replica takes it.
		now = clk.Advance(11 * time.Minute)
		due, err := db.ClaimDueSchedules(ctx, now, "r-late", 10*time.Minute)
		if err != nil || len(due) != 1 || due[0].ID != b.ID {
			t.Fatalf("claim after expiry: %+v %v", due, err)
		}
		if ok, err := db.CompleteBenchSchedule(ctx, b.ID, holder, now, "br-x", "", now.Add(24*time.Hour)); err != nil || ok {
			t.Errorf("completion by the expired holder: %v %v", ok, err)
		}
		if ok, err := db.CompleteBenchSchedule(ctx, b.ID, "r-late", now, "br-1", "", now.Add(24*time.Hour)); err != nil || !ok {
			t.Fatalf("completion: %v %v", ok, err)
		}
		got, _ = db.GetBenchSchedule(ctx, b.ID)
		if got.LastRunID != "br-1" || !got.LastRun.Equal(now) || !got.NextRun.Equal(now.Add(24*time.Hour)) || got.LeaseHolder != "" {
			t.Errorf("after completion: %+v", got)
		}
		if due, _ := db.ClaimDueSchedules(ctx, now, "r1", time.Minute); len(due) != 0 {
			t.Errorf("claimed again before its next run: %+v", due)
		}

		if err := db.DeleteBenchSchedule(ctx, b.ID, "u2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete by another owner: %v", err)
		}
		if err := db.DeleteBenchSchedule(ctx, b.ID, "u1"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetBenchSchedule(ctx, b.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after delete: %v", err)
		}
		if err := db.DeleteBenchSchedule(ctx, other.ID, ""); err != nil {
			t.Errorf("admin delete: %v", err)
		}
	})
}
