package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func mustChanges(t *testing.T, db *store.DB) int64 {
	t.Helper()
	n, err := db.Changes(context.Background())
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	return n
}

// TestChanges: every write to the clusters table moves Changes up, and
// nothing else does: not an update that changes nothing, a refused or
// failed write, a lease call that changes no row, RenewLeases, or a read.
// The cases run in order on one database, each on what the previous left.
func TestChanges(t *testing.T) {
	const ttl = 10 * time.Second
	errNo := errors.New("no")
	scale := func(n int) store.UpdateFunc {
		return func(c *store.Cluster) (store.Event, error) {
			c.DesiredWorkers = n
			return store.Event{}, nil
		}
	}
	tests := []struct {
		name    string
		do      func(ctx context.Context, db *store.DB) error
		changes bool
	}{
		{"CreateCluster", func(ctx context.Context, db *store.DB) error {
			return db.CreateCluster(ctx, newCluster("c1", "ann"))
		}, true},
		{"AdmitCluster", func(ctx context.Context, db *store.DB) error {
			return db.AdmitCluster(ctx, newCluster("c2", "ann"), time.Time{}, func(store.Usage, store.Totals) error { return nil })
		}, true},
		{"AdmitCluster refused", func(ctx context.Context, db *store.DB) error {
			if err := db.AdmitCluster(ctx, newCluster("c3", "ann"), time.Time{}, func(store.Usage, store.Totals) error { return errNo }); !errors.Is(err, errNo) {
				return fmt.Errorf("AdmitCluster = %v, want %v", err, errNo)
			}
			return nil
		}, false},
		{"CreateCluster of a taken name", func(ctx context.Context, db *store.DB) error {
			if err := db.CreateCluster(ctx, newCluster("c1", "ann")); !errors.Is(err, store.ErrExists) {
				return fmt.Errorf("CreateCluster = %v, want ErrExists", err)
			}
			return nil
		}, false},
		{"UpdateCluster", func(ctx context.Context, db *store.DB) error {
			_, err := db.UpdateCluster(ctx, "c1", scale(2))
			return err
		}, true},
		{"UpdateCluster that changes nothing", func(ctx context.Context, db *store.DB) error {
			_, err := db.UpdateCluster(ctx, "c1", scale(2))
			return err
		}, false},
		{"UpdateCluster refused", func(ctx context.Context, db *store.DB) error {
			if _, err := db.UpdateCluster(ctx, "c1", func(c *store.Cluster) (store.Event, error) {
				c.DesiredWorkers = 9
				return store.Event{}, errNo
			}); !errors.Is(err, errNo) {
				return fmt.Errorf("UpdateCluster = %v, want %v", err, errNo)
			}
			return nil
		}, false},
		{"UpdateCluster with only an event", func(ctx context.Context, db *store.DB) error {
			_, err := db.UpdateCluster(ctx, "c1", func(*store.Cluster) (store.Event, error) {
				return store.Event{Kind: "note", Message: "rewritten with its event"}, nil
			})
			return err
		}, true},
		{"UpdateOwned", func(ctx context.Context, db *store.DB) error {
			_, err := db.UpdateOwned(ctx, "c2", time.Time{}, func(c *store.Cluster, _ store.Usage, _ store.Totals) (store.Event, error) {
				c.DesiredWorkers = 3
				return store.Event{}, nil
			})
			return err
		}, true},
		{"UpdateOwned that changes nothing", func(ctx context.Context, db *store.DB) error {
			_, err := db.UpdateOwned(ctx, "c2", time.Time{}, func(*store.Cluster, store.Usage, store.Totals) (store.Event, error) {
				return store.Event{}, nil
			})
			return err
		}, false},
		{"AcquireLease of a free cluster", func(ctx context.Context, db *store.DB) error {
			return acquire(ctx, db, "c1", "a", ttl, true)
		}, true},
		{"AcquireLease held by another", func(ctx context.Context, db *store.DB) error {
			return acquire(ctx, db, "c1", "b", ttl, false)
		}, false},
		{"AcquireLease of a missing cluster", func(ctx context.Context, db *store.DB) error {
			return acquire(ctx, db, "nope", "a", ttl, false)
		}, false},
		// Every full pass renews: a renewal is news to nobody.
		{"AcquireLease renewed by its holder", func(ctx context.Context, db *store.DB) error {
			return acquire(ctx, db, "c1", "a", ttl, true)
		}, false},
		{"RenewLeases", func(ctx context.Context, db *store.DB) error {
			return db.RenewLeases(ctx, "a", ttl)
		}, false},
		{"ReleaseLease by another", func(ctx context.Context, db *store.DB) error {
			return db.ReleaseLease(ctx, "c1", "b")
		}, false},
		{"ReleaseLease", func(ctx context.Context, db *store.DB) error {
			return db.ReleaseLease(ctx, "c1", "a")
		}, true},
		{"ReleaseLease of a released lease", func(ctx context.Context, db *store.DB) error {
			return db.ReleaseLease(ctx, "c1", "a")
		}, false},
		{"AcquireLease of the other cluster", func(ctx context.Context, db *store.DB) error {
			return acquire(ctx, db, "c2", "b", ttl, true)
		}, true},
		{"ReleaseLeases", func(ctx context.Context, db *store.DB) error {
			return db.ReleaseLeases(ctx, "b")
		}, true},
		{"ReleaseLeases of a holder with none", func(ctx context.Context, db *store.DB) error {
			return db.ReleaseLeases(ctx, "b")
		}, false},
		{"reads", func(ctx context.Context, db *store.DB) error {
			if _, err := db.GetCluster(ctx, "c1"); err != nil {
				return err
			}
			if _, err := db.ListClusters(ctx, store.Filter{}); err != nil {
				return err
			}
			if _, err := db.ActiveLeases(ctx); err != nil {
				return err
			}
			_, err := db.Events(ctx, "c1")
			return err
		}, false},
	}
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkChanges(t, db, tt.changes, func() error { return tt.do(ctx, db) })
			})
		}
	})
}

// checkChanges runs do and checks that Changes moved up (changes) or
// stayed where it was.
func checkChanges(t *testing.T, db *store.DB, changes bool, do func() error) {
	t.Helper()
	before := mustChanges(t, db)
	if err := do(); err != nil {
		t.Fatal(err)
	}
	after := mustChanges(t, db)
	switch {
	case changes && after <= before:
		t.Errorf("Changes went from %d to %d, want it greater", before, after)
	case !changes && after != before:
		t.Errorf("Changes went from %d to %d, want it unchanged", before, after)
	}
}

func acquire(ctx context.Context, db *store.DB, cluster, holder string, ttl time.Duration, want bool) error {
	got, err := db.AcquireLease(ctx, cluster, holder, ttl)
	if err == nil && got != want {
		err = fmt.Errorf("AcquireLease(%s, %s) = %v, want %v", cluster, holder, got, want)
	}
	return err
}

// TestChangesConcurrentWrites: writes from several stores at once (as
// replicas would make them) each count, none lost to another.
func TestChangesConcurrentWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		const writers, each = 4, 10
		dbs := make([]*store.DB, writers)
		for i := range dbs {
			dbs[i], _ = openTestDB(t, url)
			mustCreate(t, dbs[i], newCluster(fmt.Sprintf("c%d", i), "ann"))
		}
		before := mustChanges(t, dbs[0])
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := db.UpdateCluster(ctx, fmt.Sprintf("c%d", i), func(c *store.Cluster) (store.Event, error) {
						c.DesiredWorkers++
						return store.Event{}, nil
					}); err != nil {
						errs[i] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for i, db := range dbs {
			if got := mustChanges(t, db) - before; got != writers*each {
				t.Errorf("store %d: Changes moved by %d, want %d", i, got, writers*each)
			}
		}
	})
}

// TestChangesAfterUpgrade: a database migrated before the counter existed
// gets it when this build opens it, and counts from then on.
func TestChangesAfterUpgrade(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, db, newCluster("old", "ann"))
		db.Close()
		// Back to the schema as 0013 left it.
		drop := `DROP TABLE store_changes`
		if isPostgres(url) {
			drop = `DROP SEQUENCE store_changes_seq`
		}
		raw := rawDB(t, url)
		for _, q := range []string{drop, `DELETE FROM schema_migrations WHERE version = '0014_store_changes'`} {
			if _, err := raw.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		raw.Close()

		db, _ = openTestDB(t, url) // the upgrade
		if n := rawCount(t, url, `SELECT COUNT(*) FROM schema_migrations WHERE version = '0014_store_changes'`); n != 1 {
			t.Fatalf("0014_store_changes recorded %d times, want once", n)
		}
		before := mustChanges(t, db)
		if _, err := db.UpdateCluster(ctx, "old", func(c *store.Cluster) (store.Event, error) {
			c.DesiredWorkers = 1
			return store.Event{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if after := mustChanges(t, db); after <= before {
			t.Errorf("Changes went from %d to %d across an update, want it greater", before, after)
		}
	})
}

// TestChangesOtherWriters: on SQLite the count is the clusters table's
// own (triggers), so it moves with writes made behind the store's back, as
// a replica of another release makes them, and stays for a holder's
// renewal of its own lease; ChangesExact says so. On PostgreSQL it is
// moved by the store after its commits only, and ChangesExact says not.
func TestChangesOtherWriters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		mustCreate(t, db, newCluster("c1", "ann"))
		mustCreate(t, db, newCluster("c2", "ann"))
		if isPostgres(url) {
			if db.ChangesExact() {
				t.Fatal("ChangesExact on PostgreSQL, whose count follows commits")
			}
			return
		}
		if !db.ChangesExact() {
			t.Fatal("ChangesExact false on SQLite")
		}
		raw := rawDB(t, url)
		tests := []struct {
			name    string
			query   string
			changes bool
		}{
			{"a new version", `UPDATE clusters SET version = version + 1, desired_workers = 4 WHERE name = 'c1'`, true},
			{"a lease taken", `UPDATE clusters SET lease_holder = 'x', lease_expires = 5 WHERE name = 'c1'`, true},
			{"the holder renewing", `UPDATE clusters SET lease_expires = 9 WHERE name = 'c1'`, false},
			{"a lease given up", `UPDATE clusters SET lease_holder = '', lease_expires = 0 WHERE name = 'c1'`, true},
			{"a status", `UPDATE clusters SET status = 'FAILED' WHERE name = 'c2'`, true},
			{"a row removed", `DELETE FROM clusters WHERE name = 'c2'`, true},
			{"no row matched", `UPDATE clusters SET version = version + 1 WHERE name = 'nope'`, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkChanges(t, db, tt.changes, func() error {
					_, err := raw.ExecContext(ctx, tt.query)
					return err
				})
			})
		}
	})
}
