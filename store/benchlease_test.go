package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// TestBenchRunLease: a running run's client renews its lease and records
// its clusters; a run whose lease lapsed is listed with them, one without
// a lease or still renewed is not, and a finished run refuses renewal.
func TestBenchRunLease(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		live, dead, legacy := newBenchRun("u1"), newBenchRun("u2"), newBenchRun("u1")
		for _, r := range []*store.BenchRun{live, dead, legacy} {
			if err := db.CreateBenchRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		now := clk.Now()
		if err := db.RenewBenchRun(ctx, dead.ID, now.Add(time.Minute), []string{"c-a"}); err != nil {
			t.Fatal(err)
		}
		if err := db.RenewBenchRun(ctx, dead.ID, now.Add(time.Minute), []string{"c-b", "c-a", "c-b"}); err != nil {
			t.Fatal(err)
		}
		if err := db.RenewBenchRun(ctx, live.ID, now.Add(time.Minute), []string{"c-live"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.LapsedBenchRuns(ctx, now, 0); len(got) != 0 {
			t.Fatalf("before any lease ran out: %+v", got)
		}
		clk.Advance(50 * time.Second)
		if err := db.RenewBenchRun(ctx, live.ID, clk.Now().Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		clk.Advance(20 * time.Second)
		got, err := db.LapsedBenchRuns(ctx, clk.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != dead.ID || got[0].Owner != "u2" || !slices.Equal(got[0].Clusters, []string{"c-a", "c-b"}) ||
			!got[0].LeaseExpires.Equal(now.Add(time.Minute)) {
			t.Fatalf("lapsed runs: %+v, want %s with c-a and c-b", got, dead.ID)
		}
		if c, err := db.BenchRunClusters(ctx, live.ID); err != nil || !slices.Equal(c, []string{"c-live"}) {
			t.Fatalf("live run's clusters: %v %v", c, err)
		}
		if err := db.FinishBenchRun(ctx, dead.ID, store.BenchFailed, "its client went away"); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.LapsedBenchRuns(ctx, clk.Now(), 0); len(got) != 0 {
			t.Fatalf("a finished run is not lapsed: %+v", got)
		}
		if err := db.RenewBenchRun(ctx, dead.ID, clk.Now().Add(time.Minute), nil); !errors.Is(err, store.ErrBenchFinished) {
			t.Fatalf("renewing a finished run: %v, want ErrBenchFinished", err)
		}
		if err := db.RenewBenchRun(ctx, "br-0000000000000000", clk.Now(), nil); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("renewing an unknown run: %v, want ErrNotFound", err)
		}
		for name, clusters := range map[string][]string{
			"empty name": {""},
			"too many":   manyNames(40),
			"too long":   {strings.Repeat("c", 600)},
		} {
			if err := db.RenewBenchRun(ctx, live.ID, clk.Now(), clusters); !errors.Is(err, store.ErrBenchInvalid) {
				t.Errorf("%s: %v, want ErrBenchInvalid", name, err)
			}
		}
	})
}

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "c-" + strings.Repeat("x", i+1)
	}
	return out
}

// TestBenchBaselineLeavesOutDeadRuns: a regression check's history
// (Baseline) has no sample of a run that is still running or failed
// (its client went away); plain history keeps them.
func TestBenchBaselineLeavesOutDeadRuns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		runs := map[string]*store.BenchRun{}
		for _, st := range []string{store.BenchOK, store.BenchFailed, store.BenchRunning, store.BenchCancelled} {
			r := newBenchRun("u1")
			if err := db.CreateBenchRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			if err := db.AddBenchSample(ctx, &store.BenchSample{RunID: r.ID, Test: "bench_sum", Env: "A", WallSeconds: 1, Status: store.SampleOK}); err != nil {
				t.Fatal(err)
			}
			if st != store.BenchRunning {
				if err := db.FinishBenchRun(ctx, r.ID, st, ""); err != nil {
					t.Fatal(err)
				}
			}
			runs[st] = r
		}
		runsOf := func(f store.BenchHistoryFilter) []string {
			pts, err := db.BenchHistory(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range pts {
				out = append(out, p.RunID)
			}
			return out
		}
		all := runsOf(store.BenchHistoryFilter{Owner: "u1", Test: "bench_sum"})
		base := runsOf(store.BenchHistoryFilter{Owner: "u1", Test: "bench_sum", Baseline: true})
		if len(all) != 4 {
			t.Errorf("history: %v, want the 4 runs", all)
		}
		if !slices.Equal(base, []string{runs[store.BenchOK].ID, runs[store.BenchCancelled].ID}) {
			t.Errorf("baseline: %v, want the ok and cancelled runs only", base)
		}
	})
}
