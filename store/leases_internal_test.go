package store

import (
	"context"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
)

// TestActiveLeasesForgetsDeadReplicas: the row of a replica that stopped
// renewing a day ago is removed by the next ActiveLeases, and its clusters
// read as free; rows in force, or lately run out, stay.
func TestActiveLeasesForgetsDeadReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		now := time.Unix(1_700_000_000, 0)
		db.SetClock(func() time.Time { return now })
		if err := db.CreateCluster(ctx, &Cluster{Name: "c1", Owner: "ann", Status: Running, Provider: "local", TLSCert: []byte("c"), TLSKey: []byte("k")}); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.AcquireLease(ctx, "c1", "dead", time.Second); err != nil || !ok {
			t.Fatalf("AcquireLease = %v, %v", ok, err)
		}
		if err := db.RenewLeases(ctx, "dead", time.Second); err != nil {
			t.Fatal(err)
		}
		now = now.Add(replicaForget)
		for _, id := range []string{"live", "lately"} {
			if err := db.RenewLeases(ctx, id, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(2 * time.Minute) // "lately" ran out, "dead" a day ago
		if err := db.RenewLeases(ctx, "live", time.Minute); err != nil {
			t.Fatal(err)
		}
		leases, err := db.ActiveLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) != 1 || !leases[0].Free() {
			t.Errorf("ActiveLeases = %+v, want c1 free", leases)
		}
		rows, err := db.db.QueryContext(ctx, `SELECT id FROM replicas ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if len(ids) != 2 || ids[0] != "lately" || ids[1] != "live" {
			t.Errorf("replica rows after ActiveLeases: %v, want [lately live]", ids)
		}
	})
}
