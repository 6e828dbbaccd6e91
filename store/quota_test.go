package store_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

var errFull = errors.New("full")

// admitAtMost admits while the owner has fewer than limit live clusters.
func admitAtMost(limit int) store.AdmitFunc {
	return func(live store.Usage, _ store.Totals) error {
		if live.Clusters >= limit {
			return fmt.Errorf("%w: %d live", errFull, live.Clusters)
		}
		return nil
	}
}

// TestAdmitClusterConcurrent: 200 concurrent admissions of one owner,
// spread over three handles on one database (as three gateway replicas
// would be), against a limit of 5: exactly 5 are admitted.
func TestAdmitClusterConcurrent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		var dbs []*store.DB
		for range 3 {
			db, _ := openTestDB(t, url)
			db.SetMaxOpenConns(8) // requests queue for connections, as in a gateway
			dbs = append(dbs, db)
		}
		// Another owner's clusters must not count.
		for i := range 3 {
			mustCreate(t, dbs[0], newCluster(fmt.Sprintf("other-%d", i), "bob"))
		}
		const n, limit = 200, 5
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = dbs[i%3].AdmitCluster(ctx, newCluster(fmt.Sprintf("c-%03d", i), "alice"), time.Time{}, admitAtMost(limit))
			}()
		}
		close(start)
		wg.Wait()
		admitted, refused := 0, 0
		for i, err := range errs {
			switch {
			case err == nil:
				admitted++
			case errors.Is(err, errFull):
				refused++
			default:
				t.Errorf("request %d: %v, want admission or the admit func's own error", i, err)
			}
		}
		live, err := dbs[1].ListClusters(ctx, store.Filter{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if admitted != limit || refused != n-limit || len(live) != limit {
			t.Fatalf("admitted %d, refused %d, stored %d; want %d, %d, %d", admitted, refused, len(live), limit, n-limit, limit)
		}
	})
}

// TestAdmitSeesOnlyLiveClusters: stopping and stopped clusters leave room.
func TestAdmitSeesOnlyLiveClusters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		for i, st := range []store.Status{store.Running, store.Stopping, store.Stopped, store.Failed, store.Pending} {
			c := newCluster(fmt.Sprintf("s-%d", i), "alice")
			c.Status = st
			mustCreate(t, db, c)
		}
		var seen store.Usage
		err := db.AdmitCluster(ctx, newCluster("new", "alice"), time.Time{}, func(live store.Usage, _ store.Totals) error {
			seen = live
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if seen.Clusters != 2 {
			t.Errorf("admit saw %d live clusters, want the RUNNING and PENDING ones only (2)", seen.Clusters)
		}
	})
}

// TestUpdateOwnedSerialisesGrowth: concurrent growth of two clusters of
// one owner, each allowed only while the owner's total stays within 10
// workers, never exceeds it.
func TestUpdateOwnedSerialisesGrowth(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		db2, _ := openTestDB(t, url)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// Workers of one vCPU each, schedulers of none: the others' vCPUs
		// are their workers.
		for _, name := range []string{"a", "b"} {
			c := newCluster(name, "alice")
			c.Shape = `{"worker":{"vcpus":1,"memory_gib":1},"scheduler":{"vcpus":0,"memory_gib":0}}`
			mustCreate(t, db, c)
		}
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name, h := "a", db
				if i%2 == 1 {
					name, h = "b", db2
				}
				_, err := h.UpdateOwned(ctx, name, time.Time{}, func(c *store.Cluster, others store.Usage, _ store.Totals) (store.Event, error) {
					if others.Clusters != 1 {
						return store.Event{}, fmt.Errorf("others hold %d clusters, want 1 (not the cluster itself)", others.Clusters)
					}
					total := c.DesiredWorkers + 1 + int(others.VCPUs)
					if total > 10 {
						return store.Event{}, errFull
					}
					c.DesiredWorkers++
					return store.Event{}, nil
				})
				if err != nil && !errors.Is(err, errFull) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		a, b := mustGet(t, db, "a"), mustGet(t, db, "b")
		if a.DesiredWorkers+b.DesiredWorkers != 10 {
			t.Errorf("a %d + b %d workers, want exactly 10", a.DesiredWorkers, b.DesiredWorkers)
		}
		if _, err := db.UpdateOwned(ctx, "missing", time.Time{}, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdateOwned(missing) = %v, want ErrNotFound", err)
		}
	})
}

// TestLedger: starts and stops are written once, sizes are copied to the
// stop, closing a cluster closes every open member, and intervals are
// clipped to the window asked for.
func TestLedger(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		c := newCluster("l1", "alice")
		c.OwnerName = "ann"
		mustCreate(t, db, c)
		t0 := clk.Now()
		start := func(members ...string) store.Event {
			var es []store.LedgerEntry
			for _, m := range members {
				es = append(es, store.LedgerEntry{Member: m, Kind: store.LedgerStart, VCPUs: 2, MemoryGiB: 4, GPUs: 1, GPUType: "t4", PriceHour: 0.5})
			}
			return store.Event{Ledger: es}
		}
		update := func(ev store.Event) {
			t.Helper()
			if _, err := db.UpdateCluster(ctx, "l1", func(*store.Cluster) (store.Event, error) { return ev, nil }); err != nil {
				t.Fatal(err)
			}
		}
		update(start("scheduler", "worker-0", "worker-1"))
		clk.Advance(time.Hour)
		update(start("worker-0")) // repeated after a crash: no second start
		if err := db.RecordLedger(ctx, "l1", store.LedgerEntry{Member: "worker-1", Kind: store.LedgerStop}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
		// A second stop (a retry) changes nothing.
		if err := db.RecordLedger(ctx, "l1", store.LedgerEntry{Member: "worker-1", Kind: store.LedgerStop}); err != nil {
			t.Fatal(err)
		}
		// A stop for a member never started records nothing.
		if err := db.RecordLedger(ctx, "l1", store.LedgerEntry{Member: "worker-9", Kind: store.LedgerStop}); err != nil {
			t.Fatal(err)
		}
		open, err := db.OpenMembers(ctx, "l1")
		if err != nil {
			t.Fatal(err)
		}
		if len(open) != 2 || !open["scheduler"].Equal(t0) || !open["worker-0"].Equal(t0) {
			t.Errorf("open members %v, want scheduler and worker-0 since %v", open, t0)
		}
		update(store.Event{CloseLedger: true})
		clk.Advance(time.Hour)
		update(store.Event{CloseLedger: true}) // again: nothing left to close

		ivs, err := db.Intervals(ctx, store.LedgerFilter{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var got store.Totals
		hours := map[string]float64{}
		for _, iv := range ivs {
			got.Add(iv)
			hours[iv.Member] = iv.Stop.Sub(iv.Start).Hours()
			if iv.Open || iv.OwnerName != "ann" || iv.GPUType != "t4" {
				t.Errorf("interval %+v: want closed, owner name ann, t4", iv)
			}
		}
		if len(ivs) != 3 || hours["scheduler"] != 2 || hours["worker-0"] != 2 || hours["worker-1"] != 1 {
			t.Fatalf("intervals %v (hours %v), want scheduler 2h, worker-0 2h, worker-1 1h", ivs, hours)
		}
		if got.VCPUSeconds != 2*5*3600 || got.GPUSecondsByType["t4"] != 5*3600 || math.Abs(got.Cost-2.5) > 1e-9 {
			t.Errorf("totals %+v, want 10 vCPU-hours, 5 t4 GPU-hours, 2.5 USD", got)
		}

		// Clipped to a window: the second hour only.
		win, err := db.Intervals(ctx, store.LedgerFilter{OwnerName: "ann", Since: t0.Add(time.Hour), Until: t0.Add(90 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		var sec float64
		for _, iv := range win {
			sec += iv.Seconds()
		}
		if len(win) != 2 || sec != 3600 {
			t.Errorf("window intervals %+v (%gs), want scheduler and worker-0, 30 minutes each", win, sec)
		}
		// By cluster names: only theirs.
		named, err := db.Intervals(ctx, store.LedgerFilter{Owner: "alice", Clusters: []string{"l1", "other"}})
		if err != nil || len(named) != 3 {
			t.Errorf("intervals of l1 and other: %d, %v; want l1's 3", len(named), err)
		}
		if none, err := db.Intervals(ctx, store.LedgerFilter{Owner: "alice", Clusters: []string{"other"}}); err != nil || len(none) != 0 {
			t.Errorf("intervals of another cluster: %v, %v; want none", none, err)
		}
		if _, err := db.Intervals(ctx, store.LedgerFilter{Owner: "alice", Clusters: make([]string, store.MaxLedgerClusters+1)}); err == nil {
			t.Error("more names than MaxLedgerClusters: no error")
		}
		// Someone else's usage is not in alice's.
		other, err := db.Intervals(ctx, store.LedgerFilter{Owner: "bob"})
		if err != nil || len(other) != 0 {
			t.Errorf("bob's intervals %v, %v; want none", other, err)
		}
		if err := db.RecordLedger(ctx, "nope", store.LedgerEntry{Member: "w", Kind: store.LedgerStop}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RecordLedger(unknown cluster) = %v, want ErrNotFound", err)
		}
	})
}

// TestOpenIntervalCountsUntilNow: a member still running counts up to the
// end of the window, and admission sees it in the month's totals.
func TestOpenIntervalCountsUntilNow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		mustCreate(t, db, newCluster("run", "alice"))
		if _, err := db.UpdateCluster(ctx, "run", func(*store.Cluster) (store.Event, error) {
			return store.Event{Ledger: []store.LedgerEntry{{Member: "worker-0", Kind: store.LedgerStart, VCPUs: 4}}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		monthStart := clk.Now().Add(-time.Minute)
		clk.Advance(30 * time.Minute)
		var month store.Totals
		err := db.AdmitCluster(ctx, newCluster("next", "alice"), monthStart, func(_ store.Usage, m store.Totals) error {
			month = m
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if month.VCPUSeconds != 4*1800 {
			t.Errorf("month totals %+v, want 2 vCPU-hours (4 vCPUs for 30 minutes)", month)
		}
	})
}

// TestQuotaRowsAndAudit: every change is audited with before and after,
// in the transaction of the change; a refused change records nothing.
func TestQuotaRowsAndAudit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		by := store.Actor{ID: "oidc:admin-1", Name: "admin"}
		set := func(v string) store.QuotaChange {
			return func(string, bool) (string, error) { return v, nil }
		}
		if _, _, err := db.UpdateQuota(ctx, "user:dev", by, "quota.set", set(`{"max_clusters":1}`)); err != nil {
			t.Fatal(err)
		}
		before, after, err := db.UpdateQuota(ctx, "user:dev", by, "quota.set", func(old string, exists bool) (string, error) {
			if !exists || old != `{"max_clusters":1}` {
				t.Errorf("change saw %q, %v; want the stored entry", old, exists)
			}
			return `{"max_clusters":2}`, nil
		})
		if err != nil || before != `{"max_clusters":1}` || after != `{"max_clusters":2}` {
			t.Fatalf("UpdateQuota = %q, %q, %v", before, after, err)
		}
		if _, _, err := db.UpdateQuota(ctx, "user:dev", by, "quota.set", func(string, bool) (string, error) {
			return "", errFull
		}); !errors.Is(err, errFull) {
			t.Fatalf("refused change = %v, want its error", err)
		}
		if _, _, err := db.UpdateQuota(ctx, "group:x", by, "quota.unset", set("")); err != nil {
			t.Fatal(err) // deleting nothing: no change, no audit
		}
		if _, _, err := db.UpdateQuota(ctx, "user:dev", by, "quota.unset", set("")); err != nil {
			t.Fatal(err)
		}
		rows, err := db.QuotaEntries(ctx)
		if err != nil || len(rows) != 0 {
			t.Fatalf("entries after unset: %v, %v; want none", rows, err)
		}
		log, err := db.AuditLog(ctx, store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ action, before, after string }{
			{"quota.unset", `{"max_clusters":2}`, ""},
			{"quota.set", `{"max_clusters":1}`, `{"max_clusters":2}`},
			{"quota.set", "", `{"max_clusters":1}`},
		}
		if len(log) != len(want) {
			t.Fatalf("audit log has %d entries, want %d: %+v", len(log), len(want), log)
		}
		for i, w := range want {
			e := log[i]
			if e.Action != w.action || e.Before != w.before || e.After != w.after || e.Actor != "admin" || e.ActorID != "oidc:admin-1" || e.Target != "user:dev" {
				t.Errorf("audit[%d] = %+v, want %s %q -> %q by admin on user:dev", i, e, w.action, w.before, w.after)
			}
		}
		if got, _ := db.AuditLog(ctx, store.AuditFilter{Limit: 1}); len(got) != 1 || got[0].Action != "quota.unset" {
			t.Errorf("AuditLog(limit 1) = %+v, want the newest entry", got)
		}
		if got, _ := db.AuditLog(ctx, store.AuditFilter{Target: "user:nobody"}); len(got) != 0 {
			t.Errorf("AuditLog(target user:nobody) = %+v, want none", got)
		}
	})
}

// TestUpdateQuotaConcurrentFirstSets: two first sets of one subject at
// once both take effect, and the audit log chains them.
func TestUpdateQuotaConcurrentFirstSets(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		db2, _ := openTestDB(t, url)
		ctx := context.Background()
		by := store.Actor{Name: "admin"}
		add := func(key string) store.QuotaChange {
			return func(old string, exists bool) (string, error) {
				time.Sleep(20 * time.Millisecond) // widen the window
				if !exists {
					return `{"` + key + `":1}`, nil
				}
				return old[:len(old)-1] + `,"` + key + `":1}`, nil
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, h := range []*store.DB{db, db2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = h.UpdateQuota(ctx, "group:x", by, "quota.set", add(fmt.Sprintf("k%d", i)))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		rows, err := db.QuotaEntries(ctx)
		if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Limits, `"k0":1`) || !strings.Contains(rows[0].Limits, `"k1":1`) {
			t.Fatalf("stored %+v, %v; want both sets", rows, err)
		}
		log, _ := db.AuditLog(ctx, store.AuditFilter{})
		if len(log) != 2 || log[1].Before != "" || log[0].Before != log[1].After {
			t.Errorf("audit %+v: want the second change's before to be the first's after", log)
		}
	})
}

// TestAdmitUnderRepeatableRead: a database whose default isolation is
// REPEATABLE READ still admits exactly up to the limit.
func TestAdmitUnderRepeatableRead(t *testing.T) {
	for _, s := range testdb.URLs(t) {
		if s.Name != "postgres" {
			continue
		}
		// pgx passes unknown URL parameters to the server as settings.
		// Three handles, as three replicas: each process serialises its own
		// admissions, the database orders the processes.
		var dbs []*store.DB
		for range 3 {
			db, _ := openTestDB(t, s.URL+"&default_transaction_isolation=repeatable%20read")
			dbs = append(dbs, db)
		}
		db := dbs[0]
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = dbs[i%3].AdmitCluster(ctx, newCluster(fmt.Sprintf("rr-%02d", i), "alice"), time.Time{}, admitAtMost(5))
			}()
		}
		wg.Wait()
		live, err := db.ListClusters(ctx, store.Filter{Owner: "alice"})
		if err != nil || len(live) != 5 {
			t.Fatalf("%d clusters admitted (%v); want 5", len(live), err)
		}
	}
}
