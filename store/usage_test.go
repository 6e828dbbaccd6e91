package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

const (
	shapeCPU = `{"provider":"local","worker":{"vcpus":0.25,"memory_gib":0.5},"scheduler":{"vcpus":1,"memory_gib":3.75}}`
	shapeGPU = `{"provider":"ec2","worker":{"vcpus":4,"memory_gib":16,"gpus":1,"gpu_type":"t4"},"scheduler":{"vcpus":2,"memory_gib":8,"gpus":2,"gpu_type":"a10g"}}`
)

func shapedCluster(name, owner, shape string, workers int) *store.Cluster {
	c := newCluster(name, owner)
	c.Shape, c.DesiredWorkers = shape, workers
	return c
}

// checkUsage asserts that the owner's summary equals a count of the
// owner's live clusters, and equals want.
func checkUsage(t *testing.T, db *store.DB, owner string, want store.Usage) {
	t.Helper()
	ctx := context.Background()
	got, err := db.OwnerUsage(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	count, err := db.CountUsage(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, count) {
		t.Fatalf("summary of %s %+v, recount %+v", owner, got, count)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("usage of %s %+v, want %+v", owner, got, want)
	}
}

func setStatus(t *testing.T, db *store.DB, name string, st store.Status) {
	t.Helper()
	if _, err := db.UpdateCluster(context.Background(), name, func(c *store.Cluster) (store.Event, error) {
		c.Status = st
		return store.Event{}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUsageSummaryFollowsClusters: the per-owner summary equals a recount
// of the owner's live clusters after creates, scales, starts, stops, a
// crash (FAILED) and a refused admission, and counts another owner apart.
func TestUsageSummaryFollowsClusters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		checkUsage(t, db, "alice", store.Usage{})

		mustCreate(t, db, shapedCluster("a1", "alice", shapeCPU, 2))
		mustCreate(t, db, shapedCluster("a2", "alice", shapeGPU, 3))
		mustCreate(t, db, shapedCluster("b1", "bob", shapeCPU, 1))
		mustCreate(t, db, newCluster("a3", "alice")) // no shape: counts as a cluster holding nothing
		// a1: 1 + 2×0.25 vCPUs, 3.75 + 2×0.5 GiB; a2: 2 + 3×4, 8 + 3×16, GPUs 2 a10g + 3 t4.
		all := store.Usage{Clusters: 3, VCPUs: 1.5 + 14, MemoryGiB: 4.75 + 56, GPUs: 5, GPUsByType: map[string]int{"a10g": 2, "t4": 3}}
		checkUsage(t, db, "alice", all)
		checkUsage(t, db, "bob", store.Usage{Clusters: 1, VCPUs: 1.25, MemoryGiB: 4.25})

		// Scale a2 to 1 worker, through an owned update (growth's path).
		if _, err := db.UpdateOwned(ctx, "a2", time.Time{}, func(c *store.Cluster, others store.Usage, _ store.Totals) (store.Event, error) {
			if want := (store.Usage{Clusters: 2, VCPUs: 1.5, MemoryGiB: 4.75}); !reflect.DeepEqual(others, want) {
				return store.Event{}, fmt.Errorf("others %+v, want %+v", others, want)
			}
			c.DesiredWorkers = 1
			return store.Event{Kind: "scale"}, nil
		}); err != nil {
			t.Fatal(err)
		}
		checkUsage(t, db, "alice", store.Usage{Clusters: 3, VCPUs: 1.5 + 6, MemoryGiB: 4.75 + 24, GPUs: 3, GPUsByType: map[string]int{"a10g": 2, "t4": 1}})

		setStatus(t, db, "a2", store.Starting)
		setStatus(t, db, "a2", store.Running)
		setStatus(t, db, "a2", store.Stopping) // on its way out: no longer counted
		checkUsage(t, db, "alice", store.Usage{Clusters: 2, VCPUs: 1.5, MemoryGiB: 4.75})
		setStatus(t, db, "a2", store.Stopped)
		setStatus(t, db, "a1", store.Failed) // a crash
		checkUsage(t, db, "alice", store.Usage{Clusters: 1})

		// A refused admission and a failed update change nothing.
		errNo := errors.New("no")
		if err := db.AdmitCluster(ctx, shapedCluster("a4", "alice", shapeGPU, 9), time.Time{}, func(store.Usage, store.Totals) error { return errNo }); !errors.Is(err, errNo) {
			t.Fatalf("refused admission = %v, want its error", err)
		}
		if _, err := db.UpdateCluster(ctx, "a3", func(c *store.Cluster) (store.Event, error) {
			c.DesiredWorkers = 50
			return store.Event{}, errNo
		}); !errors.Is(err, errNo) {
			t.Fatalf("failed update = %v, want its error", err)
		}
		checkUsage(t, db, "alice", store.Usage{Clusters: 1})
		checkUsage(t, db, "bob", store.Usage{Clusters: 1, VCPUs: 1.25, MemoryGiB: 4.25})

		// A rebuild from the clusters table agrees.
		if err := db.RecountUsage(ctx); err != nil {
			t.Fatal(err)
		}
		checkUsage(t, db, "alice", store.Usage{Clusters: 1})
		checkUsage(t, db, "bob", store.Usage{Clusters: 1, VCPUs: 1.25, MemoryGiB: 4.25})
	})
}

// TestUsageSummaryConcurrent: many writers on two handles (two replicas,
// or one process's requests and its reconcile loop) leave the summary
// equal to a recount.
func TestUsageSummaryConcurrent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		db2, _ := openTestDB(t, url)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const n = 24
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := []*store.DB{db, db2}[i%2]
				shape := []string{shapeCPU, shapeGPU}[i%2]
				name := fmt.Sprintf("c%02d", i)
				if err := h.AdmitCluster(ctx, shapedCluster(name, "alice", shape, i%4), time.Time{}, func(store.Usage, store.Totals) error { return nil }); err != nil {
					t.Error(err)
					return
				}
				for _, st := range []store.Status{store.Running, store.Stopping, store.Stopped}[:i%4] {
					if _, err := h.UpdateOwned(ctx, name, time.Time{}, func(c *store.Cluster, _ store.Usage, _ store.Totals) (store.Event, error) {
						c.Status = st
						c.DesiredWorkers++
						return store.Event{}, nil
					}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want, err := db.CountUsage(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if want.Clusters != n/2 { // those with i%4 of 2 and 3 are stopping or stopped
			t.Fatalf("recount says %d live, want %d", want.Clusters, n/2)
		}
		checkUsage(t, db, "alice", want)
		checkUsage(t, db2, "alice", want)
	})
}

// TestClustersGeneration: the generation moves with every write to the
// owner's clusters, from any handle, and not with another owner's.
func TestClustersGeneration(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		db2, _ := openTestDB(t, url)
		ctx := context.Background()
		gen := func(h *store.DB, owner string) int64 {
			t.Helper()
			g, err := h.ClustersGeneration(ctx, owner)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		if g := gen(db, "alice"); g != 0 {
			t.Fatalf("generation of an owner without clusters = %d, want 0", g)
		}
		mustCreate(t, db, newCluster("g1", "alice"))
		g1 := gen(db, "alice")
		mustCreate(t, db, newCluster("h1", "bob"))
		if gen(db, "alice") != g1 {
			t.Fatal("another owner's cluster moved alice's generation")
		}
		// A change that does not alter what quotas count (a phase) still
		// moves it: lists show it.
		if _, err := db2.UpdateCluster(ctx, "g1", func(c *store.Cluster) (store.Event, error) {
			c.Phase = "starting the scheduler"
			return store.Event{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		g2 := gen(db, "alice")
		if g2 <= g1 {
			t.Fatalf("generation %d after a change by another handle, was %d", g2, g1)
		}
		// An update that changes nothing writes nothing.
		if _, err := db.UpdateCluster(ctx, "g1", func(c *store.Cluster) (store.Event, error) { return store.Event{}, nil }); err != nil {
			t.Fatal(err)
		}
		if gen(db2, "alice") != g2 {
			t.Fatal("an update that changed nothing moved the generation")
		}
	})
}

// TestUsageMigrationCountsExisting: a database made before the summary
// existed gets it filled from its clusters when the migration runs.
func TestUsageMigrationCountsExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, shapedCluster("m1", "alice", shapeGPU, 2))
	mustCreate(t, db, shapedCluster("m2", "alice", shapeCPU, 1))
	setStatus(t, db, "m2", store.Stopped)
	want, err := db.CountUsage(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Back to the schema before the summary.
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE owner_usage`, `DROP TABLE owner_gpu_usage`, `DELETE FROM schema_migrations WHERE version = '0012_owner_usage'`} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err = store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkUsage(t, db, "alice", want)
	if g, err := db.ClustersGeneration(ctx, "alice"); err != nil || g == 0 {
		t.Fatalf("generation after the migration = %d, %v; want > 0", g, err)
	}
}

// TestCloseKeepsAcceptedWrites: Close during a stream of writes from 8
// goroutines (SQLite) lets the writes already queued finish; every write
// that reported success is in the database when it is opened again, and
// writes after Close fail rather than vanish.
func TestCloseKeepsAcceptedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var landed []string
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				name := fmt.Sprintf("w%d-%03d", w, i)
				if err := db.CreateCluster(ctx, newCluster(name, "alice")); err != nil {
					return // closed
				}
				mu.Lock()
				landed = append(landed, name)
				mu.Unlock()
				if i == 0 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range 8 {
		<-started
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := db.CreateCluster(ctx, newCluster("late", "alice")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	db, err = store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range landed {
		if _, err := db.GetCluster(ctx, name); err != nil {
			t.Fatalf("%s reported written but: %v", name, err)
		}
	}
	checkUsage(t, db, "alice", store.Usage{Clusters: len(landed)})
}

// TestConcurrentWritesAllLand: 8 writers at once on one SQLite handle
// (the API's admissions and stops, the reconcile loop) all succeed, each
// write is kept, and an error in one reaches its caller and lets the
// others through.
func TestConcurrentWritesAllLand(t *testing.T) {
	db, _ := openTestDB(t, "sqlite://"+filepath.Join(t.TempDir(), "w.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreate(t, db, newCluster("shared", "alice"))
	errOdd := errors.New("refused")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("w%d-%02d", w, i)
				if err := db.AdmitCluster(ctx, newCluster(name, fmt.Sprintf("u%d", w)), time.Time{}, func(store.Usage, store.Totals) error { return nil }); err != nil {
					t.Error(err)
					return
				}
				_, err := db.UpdateCluster(ctx, "shared", func(c *store.Cluster) (store.Event, error) {
					if i%2 == 1 {
						return store.Event{}, errOdd
					}
					c.DesiredWorkers++
					return store.Event{Kind: "scale"}, nil
				})
				if (i%2 == 1) != errors.Is(err, errOdd) || (err != nil && !errors.Is(err, errOdd)) {
					t.Errorf("update %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := mustGet(t, db, "shared").DesiredWorkers; got != writers*((each+1)/2) {
		t.Fatalf("shared has %d workers, want %d (every accepted write kept)", got, writers*((each+1)/2))
	}
	for w := range writers {
		u, err := db.OwnerUsage(ctx, fmt.Sprintf("u%d", w))
		if err != nil || u.Clusters != each {
			t.Fatalf("u%d holds %+v (%v), want %d clusters", w, u, err, each)
		}
	}
}

// TestAdmissionMonthTotals: the month totals an admission sees (summed
// by the database) equal the sum of the ledger's intervals over the same
// window: closed and open intervals, ones that began before the month,
// GPUs of two types, and another owner's left out.
func TestAdmissionMonthTotals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		ledger := func(cluster string, entries ...store.LedgerEntry) {
			t.Helper()
			if err := db.RecordLedger(ctx, cluster, entries...); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(t, db, shapedCluster("t1", "alice", shapeGPU, 1))
		mustCreate(t, db, shapedCluster("t2", "alice", shapeCPU, 1))
		mustCreate(t, db, shapedCluster("o1", "bob", shapeCPU, 1))
		ledger("t1", store.LedgerEntry{Member: "scheduler", Kind: store.LedgerStart, VCPUs: 2, MemoryGiB: 8, GPUs: 2, GPUType: "a10g", PriceHour: 1.5})
		ledger("o1", store.LedgerEntry{Member: "scheduler", Kind: store.LedgerStart, VCPUs: 64, MemoryGiB: 64})
		clk.Advance(90 * time.Minute)
		monthStart := clk.Now() // the first interval began before the window
		ledger("t1", store.LedgerEntry{Member: "worker-0", Kind: store.LedgerStart, VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "t4", PriceHour: 0.5})
		ledger("t2", store.LedgerEntry{Member: "scheduler", Kind: store.LedgerStart, VCPUs: 0.25, MemoryGiB: 0.5})
		clk.Advance(1234 * time.Millisecond)
		ledger("t1", store.LedgerEntry{Member: "worker-0", Kind: store.LedgerStop})
		clk.Advance(47 * time.Minute)

		var got store.Totals
		if err := db.AdmitCluster(ctx, newCluster("t3", "alice"), monthStart, func(_ store.Usage, month store.Totals) error {
			got = month
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ivs, err := db.Intervals(ctx, store.LedgerFilter{Owner: "alice", Since: monthStart, Until: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		var want store.Totals
		for _, i := range ivs {
			want.Add(i)
		}
		if want.VCPUSeconds == 0 || want.GPUSeconds == 0 || len(want.GPUSecondsByType) != 2 {
			t.Fatalf("the ledger holds too little to compare: %+v", want)
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
		ok := near(got.VCPUSeconds, want.VCPUSeconds) && near(got.MemoryGiBSeconds, want.MemoryGiBSeconds) &&
			near(got.GPUSeconds, want.GPUSeconds) && near(got.Cost, want.Cost) && len(got.GPUSecondsByType) == len(want.GPUSecondsByType)
		for typ, v := range want.GPUSecondsByType {
			ok = ok && near(got.GPUSecondsByType[typ], v)
		}
		if !ok {
			t.Fatalf("admission's month totals %+v, the intervals sum to %+v", got, want)
		}
	})
}

// TestUsageRecountedAtStart: a summary that drifted from the clusters (a
// replica of an older version wrote clusters without keeping it) is
// counted again when the store opens.
func TestUsageRecountedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drift.db")
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, shapedCluster("d1", "alice", shapeGPU, 1))
	want, err := db.CountUsage(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE owner_usage SET clusters = 7, vcpu_milli = 1, gpus = 0`, `DELETE FROM owner_gpu_usage`} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err = store.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkUsage(t, db, "alice", want)
}
