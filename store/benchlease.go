package store

import (
	"context"
	"fmt"
	"time"
)

// maxBenchRunClusters bounds the clusters one run holds: A, B and A2,
// and their replacements should one fail.
const maxBenchRunClusters = 32

// RenewBenchRun extends a running run's lease to until and records the
// clusters it holds (added to those already recorded). It fails with
// ErrNotFound for an unknown run and ErrBenchFinished for one that has
// ended (its client is told to stop).
func (s *DB) RenewBenchRun(ctx context.Context, id string, until time.Time, clusters []string) error {
	clusters = uniqueStrings(clusters)
	if len(clusters) > maxBenchRunClusters {
		return fmt.Errorf("store: bench run %s: %d clusters; a run holds at most %d: %w", id, len(clusters), maxBenchRunClusters, ErrBenchInvalid)
	}
	for _, c := range clusters {
		if c == "" {
			return fmt.Errorf("store: bench run %s: an empty cluster name: %w", id, ErrBenchInvalid)
		}
		if err := checkBenchName("cluster name", c); err != nil {
			return err
		}
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: renew bench run: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	res, err := tx.ExecContext(ctx, s.rebind(`UPDATE bench_runs SET lease_expires = ? WHERE id = ? AND status = ?`),
		millis(until), id, BenchRunning)
	if err != nil {
		return fmt.Errorf("store: renew bench run: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		tx.Rollback() //nolint:errcheck // read outside it
		r, err := s.GetBenchRun(ctx, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("store: bench run %s already finished (%s): %w", id, r.Status, ErrBenchFinished)
	}
	held, err := s.strings(ctx, tx, `SELECT cluster FROM bench_run_clusters WHERE run_id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: renew bench run: %w", err)
	}
	have := map[string]bool{}
	for _, c := range held {
		have[c] = true
	}
	for _, c := range clusters {
		if have[c] {
			continue
		}
		if len(have) >= maxBenchRunClusters {
			return fmt.Errorf("store: bench run %s holds %d clusters already; at most %d: %w", id, len(have), maxBenchRunClusters, ErrBenchInvalid)
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO bench_run_clusters (run_id, cluster) VALUES (?, ?)`), id, c); err != nil {
			return fmt.Errorf("store: renew bench run: cluster %s: %w", c, err)
		}
		have[c] = true
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: renew bench run: %w", err)
	}
	return nil
}

// LapsedBenchRun is a running run whose client stopped renewing its
// lease, with the clusters it recorded.
type LapsedBenchRun struct {
	ID           string
	Owner        string
	LeaseExpires time.Time
	Clusters     []string
}

// LapsedBenchRuns lists the running runs whose lease expired before now
// (runs without a lease are never listed), oldest lease first, at most
// limit (0: 100).
func (s *DB) LapsedBenchRuns(ctx context.Context, now time.Time, limit int) ([]LapsedBenchRun, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id, owner, lease_expires FROM bench_runs
WHERE status = ? AND lease_expires > 0 AND lease_expires < ? ORDER BY lease_expires, id LIMIT ?`), BenchRunning, millis(now), limit)
	if err != nil {
		return nil, fmt.Errorf("store: lapsed bench runs: %w", err)
	}
	var out []LapsedBenchRun
	for rows.Next() {
		var r LapsedBenchRun
		var exp int64
		if err := rows.Scan(&r.ID, &r.Owner, &exp); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: lapsed bench runs: %w", err)
		}
		r.LeaseExpires = fromMillis(exp)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: lapsed bench runs: %w", err)
	}
	for i := range out {
		if out[i].Clusters, err = s.BenchRunClusters(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BenchRunClusters are the clusters a run recorded, by name.
func (s *DB) BenchRunClusters(ctx context.Context, id string) ([]string, error) {
	c, err := s.strings(ctx, s.db, `SELECT cluster FROM bench_run_clusters WHERE run_id = ? ORDER BY cluster`, id)
	if err != nil {
		return nil, fmt.Errorf("store: bench run %s: clusters: %w", id, err)
	}
	return c, nil
}
