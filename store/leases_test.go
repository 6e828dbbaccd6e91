package store_test

import (
	"context"
	"maps"
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

// TestRenewLeases: one write of a replica's row keeps every lease it
// holds in force, for as long as it renews, long after each cluster's own
// expiry; nothing else: not a lease another replica took over from it.
// Once it stops renewing, its leases pass to another replica within the
// TTL, and renewing again does not get them back. ActiveLeases says the
// same as AcquireLease does.
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
		renew := func(holder string) {
			t.Helper()
			if err := db.RenewLeases(ctx, holder, ttl); err != nil {
				t.Fatal(err)
			}
		}
		// holders says who holds each active cluster's lease, as
		// ActiveLeases sees it: a replica, or "free".
		holders := func() map[string]string {
			t.Helper()
			leases, err := db.ActiveLeases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, l := range leases {
				switch {
				case l.Free():
					out[l.Name] = "free"
				case l.Held("a"):
					out[l.Name] = "a"
				case l.Held("b"):
					out[l.Name] = "b"
				default:
					out[l.Name] = "?" + l.Holder
				}
			}
			return out
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
		// a has not renewed yet: a3's own lease lapses and b takes it over.
		clk.Advance(ttl + time.Second)
		if !take("a3", "b") {
			t.Fatal("b could not take over a lapsed lease")
		}
		if take("a3", "a") {
			t.Error("a took a3 back from b, whose lease is in force")
		}
		// a's renewal makes a1 and a2 (lapsed, not taken) a's again, and
		// keeps them a's over many TTLs with no write to their rows.
		renew("a")
		for range 5 {
			clk.Advance(ttl / 2)
			renew("a")
			for _, c := range []string{"a1", "a2"} {
				if take(c, "b") {
					t.Fatalf("b took %s, whose holder renews its replica row", c)
				}
			}
		}

		leases, err := db.ActiveLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(leases, func(i, j int) bool { return leases[i].Name < leases[j].Name })
		var names []string
		for _, l := range leases {
			names = append(names, l.Name)
			if l.Status != store.Pending || l.Version < 1 {
				t.Errorf("%s: status %s, version %d", l.Name, l.Status, l.Version)
			}
		}
		if got, want := names, []string{"a1", "a2", "a3", "b1", "free"}; !slices.Equal(got, want) {
			t.Errorf("ActiveLeases lists %v, want %v (stopped clusters are not active)", got, want)
		}
		// b never renewed: its own leases ran out with their rows' expiry.
		want := map[string]string{"a1": "a", "a2": "a", "a3": "free", "b1": "free", "free": "free"}
		if got := holders(); !maps.Equal(got, want) {
			t.Errorf("leases seen as %v, want %v", got, want)
		}

		// a stops renewing (it died): its leases pass to b after the TTL,
		// not before.
		clk.Advance(ttl - time.Second)
		if take("a1", "b") {
			t.Error("b took a1 within the TTL of a's last renewal")
		}
		clk.Advance(2 * time.Second)
		if got := holders()["a2"]; got != "free" {
			t.Errorf("a2 is %s a TTL after a's last renewal, want free", got)
		}
		for _, c := range []string{"a1", "a2"} {
			if !take(c, "b") {
				t.Errorf("b could not take %s over after a stopped renewing", c)
			}
		}
		renew("a") // a comes back: what b took stays b's
		renew("b")
		for _, c := range []string{"a1", "a2"} {
			if take(c, "a") {
				t.Errorf("a took %s back from b after renewing", c)
			}
		}
		want = map[string]string{"a1": "b", "a2": "b", "a3": "b", "b1": "b", "free": "free"}
		if got := holders(); !maps.Equal(got, want) {
			t.Errorf("leases seen as %v, want %v", got, want)
		}
	})
}

// TestReleaseLeases: a replica shutting down gives up all its leases at
// once, however fresh its row was, and only its own.
func TestReleaseLeases(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, _ := openTestDB(t, url)
		const ttl = time.Minute
		for _, n := range []string{"a1", "a2", "b1"} {
			mustCreate(t, db, newCluster(n, "ann"))
		}
		for c, h := range map[string]string{"a1": "a", "a2": "a", "b1": "b"} {
			if ok, err := db.AcquireLease(ctx, c, h, ttl); err != nil || !ok {
				t.Fatalf("AcquireLease(%s, %s) = %v, %v", c, h, ok, err)
			}
			if err := db.RenewLeases(ctx, h, ttl); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.ReleaseLeases(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		for c, want := range map[string]bool{"a1": true, "a2": true, "b1": false} {
			if ok, err := db.AcquireLease(ctx, c, "c", ttl); err != nil || ok != want {
				t.Errorf("AcquireLease(%s, c) after a released = %v, %v; want %v", c, ok, err, want)
			}
		}
	})
}
