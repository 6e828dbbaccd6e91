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
