package store

import (
	"context"
	"fmt"
	"time"
)

// AcquireLease takes or renews holder's lease on a cluster until now+ttl.
// It succeeds when the cluster has no lease, one already held by holder,
// or one that has lapsed: its own expiry passed and its holder's replica
// row (RenewLeases) is not fresh either. False means another replica
// holds it.
//
// Renewing a lease holder holds already leaves Changes alone: every full
// pass renews, and a count that moved with each would have every sweep
// read every lease while any cluster is busy. Only a change of holder is
// news to the other replicas.
func (s *DB) AcquireLease(ctx context.Context, cluster, holder string, ttl time.Duration) (bool, error) {
	now := s.now()
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE clusters SET lease_expires = ? WHERE name = ? AND lease_holder = ?`),
		now.Add(ttl).UnixMilli(), cluster, holder)
	if err != nil {
		return false, fmt.Errorf("store: lease: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("store: lease: %w", err)
	} else if n == 1 {
		return true, nil
	}
	n, err := s.execChange(ctx, s.rebind(`UPDATE clusters SET lease_holder = ?, lease_expires = ?
WHERE name = ? AND (lease_holder = ? OR lease_holder = '' OR (lease_expires < ?
  AND NOT EXISTS (SELECT 1 FROM replicas WHERE replicas.id = clusters.lease_holder AND replicas.expires >= ?)))`),
		holder, now.Add(ttl).UnixMilli(), cluster, holder, now.UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseLease gives a lease up (a replica shutting down cleanly).
func (s *DB) ReleaseLease(ctx context.Context, cluster, holder string) error {
	_, err := s.execChange(ctx, s.rebind(`UPDATE clusters SET lease_holder = '', lease_expires = 0 WHERE name = ? AND lease_holder = ?`),
		cluster, holder)
	if err != nil {
		return fmt.Errorf("store: release lease: %w", err)
	}
	return nil
}

// RenewLeases keeps every lease holder holds in force until now+ttl, in
// one write of holder's replica row whatever the number of clusters: a
// cluster's lease lasts while its holder's row is fresh. A lease that
// another replica has taken over meanwhile is not the holder's any more
// and stays with the other; one that lapsed without being taken is the
// holder's again, as AcquireLease would have it.
func (s *DB) RenewLeases(ctx context.Context, holder string, ttl time.Duration) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO replicas (id, expires) VALUES (?, ?)
ON CONFLICT (id) DO UPDATE SET expires = excluded.expires`), holder, s.now().Add(ttl).UnixMilli())
	if err != nil {
		return fmt.Errorf("store: renew leases: %w", err)
	}
	return nil
}

// ReleaseLeases gives up every lease holder holds and its replica row, in
// one transaction (a replica shutting down cleanly): other replicas may
// take its clusters at once.
func (s *DB) ReleaseLeases(ctx context.Context, holder string) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	res, err := tx.ExecContext(ctx, s.rebind(`UPDATE clusters SET lease_holder = '', lease_expires = 0 WHERE lease_holder = ?`), holder)
	if err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	released, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM replicas WHERE id = ?`), holder); err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	if released > 0 {
		err = s.commitChange(ctx, tx)
	} else {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("store: release leases: %w", err)
	}
	return nil
}

// ActiveLease is an active cluster's version and lease: what a replica
// needs to see which clusters are its own, which changed, and which
// nobody holds, without reading whole rows.
type ActiveLease struct {
	Name    string
	Status  Status
	Version int64 // bumped by every UpdateCluster
	Holder  string
	Lapsed  bool // the lease ran out (by the store's clock) and was not renewed
}

// Held says whether holder's lease on the cluster is in force.
func (l ActiveLease) Held(holder string) bool { return l.Holder == holder && !l.Lapsed }

// Free says whether any replica may take the cluster.
func (l ActiveLease) Free() bool { return l.Holder == "" || l.Lapsed }

// replicaForget is how long a replica's row outlives its last renewal: a
// replica that died leaves one row, removed by the next ActiveLeases after
// that (a row's absence reads as stale, so nothing depends on it).
const replicaForget = 24 * time.Hour

// ActiveLeases lists the active clusters' versions and leases. The
// clusters are read from the index clusters_active_leases alone, and the
// replicas' rows, a handful, apart.
func (s *DB) ActiveLeases(ctx context.Context) ([]ActiveLease, error) {
	now := s.now().UnixMilli()
	fresh, err := s.freshReplicas(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("store: active leases: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT name, status, version, lease_holder, lease_expires FROM clusters
WHERE status IN (?, ?, ?, ?)`), string(Pending), string(Starting), string(Running), string(Stopping))
	if err != nil {
		return nil, fmt.Errorf("store: active leases: %w", err)
	}
	defer rows.Close()
	var out []ActiveLease
	for rows.Next() {
		var l ActiveLease
		var status string
		var exp int64
		if err := rows.Scan(&l.Name, &status, &l.Version, &l.Holder, &exp); err != nil {
			return nil, fmt.Errorf("store: active leases: %w", err)
		}
		l.Status, l.Lapsed = Status(status), exp < now && !fresh[l.Holder]
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: active leases: %w", err)
	}
	return out, nil
}

// freshReplicas reads which replicas' rows are in force at now, and
// removes those that ran out more than replicaForget ago.
func (s *DB) freshReplicas(ctx context.Context, now int64) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, expires FROM replicas`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	fresh := map[string]bool{}
	forget := false
	for rows.Next() {
		var id string
		var exp int64
		if err := rows.Scan(&id, &exp); err != nil {
			return nil, err
		}
		fresh[id] = exp >= now
		forget = forget || exp < now-replicaForget.Milliseconds()
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if forget {
		if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM replicas WHERE expires < ?`), now-replicaForget.Milliseconds()); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}
