package store

import (
	"context"
	"fmt"
	"time"
)

// AcquireLease takes or renews holder's lease on a cluster until now+ttl.
// It succeeds when the cluster has no lease, an expired one, or one already
// held by holder; false means another replica holds it.
func (s *DB) AcquireLease(ctx context.Context, cluster, holder string, ttl time.Duration) (bool, error) {
	now := s.now()
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE clusters SET lease_holder = ?, lease_expires = ?
WHERE name = ? AND (lease_holder = ? OR lease_holder = '' OR lease_expires < ?)`),
		holder, now.Add(ttl).UnixMilli(), cluster, holder, now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("store: lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseLease gives a lease up (a replica shutting down cleanly).
func (s *DB) ReleaseLease(ctx context.Context, cluster, holder string) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`UPDATE clusters SET lease_holder = '', lease_expires = 0 WHERE name = ? AND lease_holder = ?`),
		cluster, holder)
	if err != nil {
		return fmt.Errorf("store: release lease: %w", err)
	}
	return nil
}

// RenewLeases extends every lease holder holds on an active cluster to
// now+ttl in one statement, and returns how many it renewed. A lease that
// another replica has taken over meanwhile is not the holder's any more
// and stays with the other; one that lapsed without being taken is the
// holder's still, as AcquireLease would have it.
func (s *DB) RenewLeases(ctx context.Context, holder string, ttl time.Duration) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE clusters SET lease_expires = ?
WHERE lease_holder = ? AND status IN (?, ?, ?, ?)`),
		s.now().Add(ttl).UnixMilli(), holder, string(Pending), string(Starting), string(Running), string(Stopping))
	if err != nil {
		return 0, fmt.Errorf("store: renew leases: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: renew leases: %w", err)
	}
	return n, nil
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

// ActiveLeases lists the active clusters' versions and leases.
func (s *DB) ActiveLeases(ctx context.Context) ([]ActiveLease, error) {
	now := s.now().UnixMilli()
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
		l.Status, l.Lapsed = Status(status), exp < now
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: active leases: %w", err)
	}
	return out, nil
}
