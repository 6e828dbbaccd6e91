package server

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// stops records the clusters the sweeper stops, by owner.
type stops struct {
	mu  sync.Mutex
	got []string
}

func (s *stops) Stop(_ context.Context, owner, name, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, owner+"/"+name)
	return nil
}

// TestBenchSweepFailsLapsedRuns: a run whose client stopped renewing is
// failed, says why, and has each of its clusters stopped as its owner;
// a run still renewed is left alone; a second sweep does nothing.
func TestBenchSweepFailsLapsedRuns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		now := time.Now()
		clock := func() time.Time { return now }
		mk := func(owner string, clusters ...string) string {
			r := &store.BenchRun{Owner: owner, Suite: "s", Envs: []store.BenchEnv{{Label: "A", Name: "auto"}}}
			if err := db.CreateBenchRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := db.RenewBenchRun(ctx, r.ID, now.Add(time.Minute), clusters); err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		dead, live := mk("alice", "c1", "c2"), mk("bob", "c3")
		st := &stops{}
		sw := &benchSweeper{store: db, clusters: st, lease: time.Minute, now: clock, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if n := sw.sweep(ctx); n != 0 || len(st.got) != 0 {
			t.Fatalf("before the lease ran out: %d failed, stopped %v", n, st.got)
		}
		now = now.Add(2 * time.Minute)
		if err := db.RenewBenchRun(ctx, live, now.Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if n := sw.sweep(ctx); n != 1 {
			t.Fatalf("swept %d runs, want 1", n)
		}
		if !slices.Equal(st.got, []string{"alice/c1", "alice/c2"}) {
			t.Errorf("stopped %v, want alice's c1 and c2", st.got)
		}
		r, err := db.GetBenchRun(ctx, dead)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.BenchFailed || !strings.Contains(r.Error, "client stopped reporting") {
			t.Errorf("dead run: %s %q, want failed saying its client went away", r.Status, r.Error)
		}
		if r, _ := db.GetBenchRun(ctx, live); r.Status != store.BenchRunning {
			t.Errorf("live run: %s, want running", r.Status)
		}
		if n := sw.sweep(ctx); n != 0 || len(st.got) != 2 {
			t.Errorf("second sweep: %d failed, stopped %v", n, st.got)
		}
	})
}
