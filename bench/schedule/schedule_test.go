package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// clock is a fake clock shared by replicas.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func openStore(t *testing.T, url string, c *clock) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetClock(c.Now)
	return db
}

func testSuite(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench_x.py"), []byte("def bench_x(client):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := schedspec.PackSuite(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func makeSchedule(t *testing.T, db *store.DB, c *clock, cron string, env schedspec.Env) *store.BenchSchedule {
	t.Helper()
	o := schedspec.Options{Envs: []schedspec.Env{env}, Repeat: 3, Workers: 1}
	opts, err := o.Encode()
	if err != nil {
		t.Fatal(err)
	}
	next, err := schedspec.Next(cron, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := &store.BenchSchedule{Owner: "oidc:alice", OwnerName: "alice", Suite: "nightly", SuiteArchive: testSuite(t),
		Envs: []string{env.Name}, Options: opts, Cron: cron, NextRun: next}
	if err := db.CreateBenchSchedule(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// firings records which replica ran which schedule.
type firings struct {
	mu  sync.Mutex
	got []string
}

func (f *firings) run(holder string, block <-chan struct{}) RunFunc {
	return func(ctx context.Context, s *store.BenchSchedule) (string, error) {
		f.mu.Lock()
		f.got = append(f.got, holder+":"+s.ID)
		f.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "", nil
	}
}

func (f *firings) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.got
	f.got = nil
	return out
}

// TestScheduleFiresOnceAcrossReplicas: two replicas on one database, with
// a fake clock, look for due schedules at the same moments. The nightly
// schedule fires once at 02:00, by one of them, not before and not again
// until the next night; a replica started afresh (a restart) finds it in
// the store and fires it the next night; a replica that dies during a run
// leaves its claim to expire and another one runs the firing.
func TestScheduleFiresOnceAcrossReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := &clock{}
		c.Set(time.Date(2026, 12, 3, 1, 59, 0, 0, time.UTC))
		db1, db2 := openStore(t, url, c), openStore(t, url, c)
		sch := makeSchedule(t, db1, c, "0 2 * * *", schedspec.Env{Label: "A", Name: "team"})
		if want := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC); !sch.NextRun.Equal(want) {
			t.Fatalf("next run %s, want %s", sch.NextRun, want)
		}
		f := &firings{}
		r1 := &Scheduler{Store: db1, Holder: "r1", Now: c.Now, Run: f.run("r1", nil)}
		r2 := &Scheduler{Store: db2, Holder: "r2", Now: c.Now, Run: f.run("r2", nil)}
		both := func() int {
			var wg sync.WaitGroup
			var n atomic.Int64
			for _, r := range []*Scheduler{r1, r2} {
				wg.Add(1)
				go func() { defer wg.Done(); n.Add(int64(r.Tick(ctx))) }()
			}
			wg.Wait()
			return int(n.Load())
		}

		c.Add(30 * time.Second) // 01:59:30
		if n := both(); n != 0 {
			t.Fatalf("fired %d times before it was due: %v", n, f.take())
		}
		c.Set(time.Date(2026, 12, 3, 2, 0, 1, 0, time.UTC))
		if n := both(); n != 1 {
			t.Fatalf("fired %d times at 02:00 with two replicas, want once: %v", n, f.take())
		}
		if got := f.take(); len(got) != 1 {
			t.Fatalf("runs %v, want one", got)
		}
		for i := 0; i < 3; i++ {
			c.Add(time.Hour)
			if n := both(); n != 0 {
				t.Fatalf("fired again at %s: %v", c.Now(), f.take())
			}
		}
		got, err := db2.GetBenchSchedule(ctx, sch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC); !got.NextRun.Equal(want) || got.LastRun.IsZero() || got.LeaseHolder != "" {
			t.Fatalf("after the firing: next %s (want %s), last %s, lease %q", got.NextRun, want, got.LastRun, got.LeaseHolder)
		}

		// A restarted replica: a new store handle and scheduler.
		db3 := openStore(t, url, c)
		r3 := &Scheduler{Store: db3, Holder: "r1", Now: c.Now, Run: f.run("r1-restarted", nil)}
		c.Set(time.Date(2026, 12, 4, 2, 0, 2, 0, time.UTC))
		if n := r3.Tick(ctx) + r2.Tick(ctx); n != 1 {
			t.Fatalf("the next night fired %d times: %v", n, f.take())
		}
		if got := f.take(); len(got) != 1 || !strings.HasPrefix(got[0], "r1-restarted:") {
			t.Fatalf("runs %v, want one by the restarted replica", got)
		}

		// A replica that dies during a run: its claim expires, then the
		// other replica runs the firing.
		c.Set(time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC))
		dying, kill := context.WithCancel(ctx)
		block := make(chan struct{})
		rd := &Scheduler{Store: db1, Holder: "r-dies", Now: c.Now, Lease: 5 * time.Minute, Run: f.run("r-dies", block)}
		done := make(chan int)
		go func() { done <- rd.Tick(dying) }()
		deadline := time.Now().Add(10 * time.Second)
		for len(f.take()) == 0 { // wait until it runs (and holds the claim)
			if time.Now().After(deadline) {
				t.Fatal("the dying replica did not start its run")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := r2.Tick(ctx); n != 0 {
			t.Fatalf("the other replica fired while the claim was held: %v", f.take())
		}
		kill() // dies: no completion is recorded
		<-done
		c.Add(6 * time.Minute)
		if n := r2.Tick(ctx); n != 1 {
			t.Fatalf("after the claim expired the other replica fired %d times", n)
		}
		if got := f.take(); len(got) != 1 || !strings.HasPrefix(got[0], "r2:") {
			t.Fatalf("runs %v, want one by r2", got)
		}
	})
}

// TestScheduledRunAlertsOnRegression: after a scheduled run, the check
// compares the environment's latest run with its week of history; one
// test that got 60 % slower is POSTed to the webhook (a loopback server),
// the flat one is not, and a run with no regression posts nothing.
func TestScheduledRunAlertsOnRegression(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := &clock{}
		c.Set(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
		db := openStore(t, url, c)
		const hash = "0123456789abcdef0123456789abcdef"
		env := schedspec.Env{Label: "A", Name: "team", Hash: hash}
		record := func(at time.Time, slow float64) string {
			c.Set(at)
			r := &store.BenchRun{Owner: "oidc:alice", OwnerName: "alice", Suite: "nightly", StartedAt: at,
				Envs: []store.BenchEnv{{Label: "A", Name: "team", Hash: hash}}}
			if err := db.CreateBenchRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			var smp []*store.BenchSample
			for i := 0; i < 5; i++ {
				jitter := float64(i%3) * 0.01
				smp = append(smp,
					&store.BenchSample{Test: "bench_x.py::bench_flat", Env: "A", Repeat: i, WallSeconds: 1 + jitter, Status: store.SampleOK, At: at},
					&store.BenchSample{Test: "bench_x.py::bench_step", Env: "A", Repeat: i, WallSeconds: slow + jitter, Status: store.SampleOK, At: at})
			}
			if err := db.AddBenchSamples(ctx, r.ID, smp); err != nil {
				t.Fatal(err)
			}
			if err := db.FinishBenchRun(ctx, r.ID, store.BenchOK, ""); err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		for d := 1; d <= 4; d++ {
			record(time.Date(2026, 12, d, 2, 0, 0, 0, time.UTC), 1.0)
		}
		var mu sync.Mutex
		var alerts []bench.Alert
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var a bench.Alert
			if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
				t.Errorf("alert body: %v", err)
			}
			mu.Lock()
			alerts = append(alerts, a)
			mu.Unlock()
		}))
		defer hook.Close()

		c.Set(time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC))
		sch := makeSchedule(t, db, c, "0 2 * * *", env)
		var logs bytes.Buffer
		var latest string
		s := &Scheduler{Store: db, Holder: "r1", Now: c.Now, Log: slog.New(slog.NewTextHandler(&logs, nil)),
			Webhook: &bench.Webhook{URL: hook.URL + "/hook/s3cret"},
			Run: func(ctx context.Context, b *store.BenchSchedule) (string, error) {
				latest = record(time.Date(2026, 12, 5, 2, 0, 1, 0, time.UTC), 1.6)
				return latest, nil
			}}
		c.Set(time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC))
		if n := s.Tick(ctx); n != 1 {
			t.Fatalf("fired %d times", n)
		}
		mu.Lock()
		got := alerts
		mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("%d alerts, want 1", len(got))
		}
		a := got[0]
		if a.Kind != "bench_regression" || a.Schedule != sch.ID || a.Run != latest || len(a.Regressions) != 1 {
			t.Fatalf("alert %+v", a)
		}
		r := a.Regressions[0]
		if r.Test != "bench_x.py::bench_step" || r.Change < 0.5 || r.P >= 0.05 || r.Env != "team" {
			t.Errorf("regression %+v, want bench_step about 60 %% slower with p < 0.05", r)
		}
		if strings.Contains(logs.String(), "s3cret") {
			t.Errorf("the webhook URL is in the logs:\n%s", logs.String())
		}

		// The next night is back to 1 s: against a week whose median is
		// still 1 s, no regression and no alert.
		s.Run = func(ctx context.Context, b *store.BenchSchedule) (string, error) {
			return record(time.Date(2026, 12, 6, 2, 0, 1, 0, time.UTC), 1.0), nil
		}
		c.Set(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
		if n := s.Tick(ctx); n != 1 {
			t.Fatalf("fired %d times", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(alerts) != 1 {
			t.Errorf("a night without regression alerted: %+v", alerts[1:])
		}
	})
}
