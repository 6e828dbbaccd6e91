package store_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// TestLeases: a replica takes a free lease, renews its own, cannot take
// another's while it lasts, and takes it over once it has lapsed; a
// released lease is free at once.
func TestLeases(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, clk := openTestDB(t, url)
		mustCreate(t, db, newCluster("c1", "ann"))
		const ttl = 10 * time.Second
		acquire := func(holder string, want bool) {
			t.Helper()
			got, err := db.AcquireLease(ctx, "c1", holder, ttl)
			if err != nil || got != want {
				t.Fatalf("AcquireLease(%s) = %v, %v; want %v", holder, got, err, want)
			}
		}
		acquire("a", true)
		acquire("a", true) // renewal
		acquire("b", false)
		clk.Advance(ttl + time.Second)
		acquire("b", true) // a's lapsed: b takes over
		acquire("a", false)
		if err := db.ReleaseLease(ctx, "c1", "a"); err != nil { // not a's: no effect
			t.Fatal(err)
		}
		acquire("a", false)
		if err := db.ReleaseLease(ctx, "c1", "b"); err != nil {
			t.Fatal(err)
		}
		acquire("a", true)
	})
}

// TestRenewLeases: one statement renews every active cluster the replica
// holds and nothing else: not another replica's, not a lease taken over
// from it, not a stopped cluster's. Renewed leases keep others out past
// the first expiry; leases it stops renewing pass to another replica.
func TestRenewLeases(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, clk := openTestDB(t, url)
		const ttl = 10 * time.Second
		for _, n := range []string{"a1", "a2", "a3", "b1", "free", "gone"} {
			mustCreate(t, db, newCluster(n, "ann"))
		}
		take := func(cluster, holder string) bool {
			t.Helper()
			ok, err := db.AcquireLease(ctx, cluster, holder, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		for _, n := range []string{"a1", "a2", "a3", "gone"} {
			take(n, "a")
		}
		take("b1", "b")
		if _, err := db.UpdateCluster(ctx, "gone", func(c *store.Cluster) (store.Event, error) {
			c.Status = store.Stopped
			return store.Event{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		// a3's lease lapses and b takes it over before a renews.
		clk.Advance(ttl + time.Second)
		if !take("a3", "b") {
			t.Fatal("b could not take over a lapsed lease")
		}
		n, err := db.RenewLeases(ctx, "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 { // a1, a2 (lapsed but not taken): a's still
			t.Errorf("RenewLeases renewed %d leases, want 2 (a1, a2)", n)
		}
		// Within the renewed TTL nobody else takes a's clusters.
		clk.Advance(ttl / 2)
		for _, c := range []string{"a1", "a2"} {
			if take(c, "b") {
				t.Errorf("b took %s, whose lease a renewed", c)
			}
		}
		if take("a3", "a") {
			t.Error("a took a3 back from b, whose lease is in force")
		}

		leases, err := db.ActiveLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(leases, func(i, j int) bool { return leases[i].Name < leases[j].Name })
		var names []string
		held := map[string]string{}
		for _, l := range leases {
			names = append(names, l.Name)
			switch {
			case l.Held("a"):
				held[l.Name] = "a"
			case l.Held("b"):
				held[l.Name] = "b"
			case l.Free():
				held[l.Name] = "free"
			}
			if l.Status != store.Pending || l.Version < 1 {
				t.Errorf("%s: status %s, version %d", l.Name, l.Status, l.Version)
			}
		}
		if got, want := names, []string{"a1", "a2", "a3", "b1", "free"}; !slices.Equal(got, want) {
			t.Errorf("ActiveLeases lists %v, want %v (stopped clusters are not active)", got, want)
		}
		if held["a1"] != "a" || held["a2"] != "a" || held["a3"] != "b" || held["free"] != "free" {
			t.Errorf("leases seen as %v", held)
		}

		// a stops renewing (it died): its leases pass to b after the TTL.
		clk.Advance(ttl)
		for _, c := range []string{"a1", "a2"} {
			if !take(c, "b") {
				t.Errorf("b could not take %s over after a stopped renewing", c)
			}
		}
		if n, err := db.RenewLeases(ctx, "a", ttl); err != nil || n != 0 {
			t.Errorf("RenewLeases after takeover = %d, %v; want 0: the leases are b's now", n, err)
		}
		if n, err := db.RenewLeases(ctx, "b", ttl); err != nil || n != 4 {
			t.Errorf("RenewLeases(b) = %d, %v; want 4", n, err)
		}
	})
}
