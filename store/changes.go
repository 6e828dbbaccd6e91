package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Changes returns a number that is greater after every committed write to
// the clusters table that another replica needs to see: a cluster created
// (CreateCluster, AdmitCluster) or changed (UpdateCluster, UpdateOwned:
// not when the update changed nothing and so wrote nothing), a lease
// taken or given up (AcquireLease, ReleaseLease, ReleaseLeases: when they
// change a row's holder). Reads, a holder renewing its own lease, and
// RenewLeases, which writes the replica's own row only, leave it. It costs
// one small query, so that a periodic sweep can skip reading every active
// cluster while the number stays put.
//
// A caller that gets v and then reads the clusters table sees every write
// whose bump made a number <= v. On SQLite the bump is made by triggers on
// the clusters table (migration 0015), in the writing statement's own
// transaction and whoever writes (a replica of another release too), so
// two calls returning the same number mean that no write to clusters
// committed in between: see ChangesExact. On PostgreSQL the bump follows the
// commit (see commitChange): two equal numbers may straddle a write that
// had committed but not yet bumped, which moves the number right after, so
// a poller notices it one call late rather than never. A write whose
// process dies between its commit and its bump, or whose bump fails, never
// moves the number: a periodic full read must stay the safety net.
func (s *DB) Changes(ctx context.Context) (int64, error) {
	q := `SELECT seq FROM store_changes WHERE id = 1`
	if s.dialect == postgres {
		// Before the first nextval, last_value is the start value (1) with
		// is_called false: reading it as is would make the first write
		// invisible.
		q = `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM store_changes_seq`
	}
	var n int64
	if err := s.queryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: changes: %w", err)
	}
	return n, nil
}

// ChangesExact reports whether Changes moves with every write to the
// clusters table that another replica needs to see, whoever makes it, in
// the write's own transaction (SQLite), so that an unchanged number is
// proof that nothing changed. On PostgreSQL it is not: a write whose
// process dies between its commit and its bump never moves it, and writes
// of a release that keeps no count do not either.
func (s *DB) ChangesExact() bool { return s.dialect != postgres }

// changeBumpTimeout bounds PostgreSQL's bump after a commit, which runs
// even if the caller's context has ended: the write took place.
const changeBumpTimeout = 5 * time.Second

// commitChange commits tx, which wrote the clusters table, and moves the
// number of Changes. On SQLite the table's triggers moved it in the
// transaction: one writer at a time, so it is exact and free. PostgreSQL
// moves its sequence once the commit is done: a counter row in the
// transaction would serialise the cluster writes of every replica, and
// bumping only after the commit is what lets a reader of the number trust
// that the writes it counts are visible.
func (s *DB) commitChange(ctx context.Context, tx *sql.Tx) error {
	if s.dialect != postgres {
		return tx.Commit()
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.bumpCommitted(ctx)
	return nil
}

// bumpCommitted moves PostgreSQL's sequence after a write committed. Its
// failure is not reported: the write took place, and an error would have
// the caller retry or give up on it; what the number misses, the sweep's
// periodic full read catches.
func (s *DB) bumpCommitted(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changeBumpTimeout)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, `SELECT nextval('store_changes_seq')`)
}

// execChange runs query, one statement that may write the clusters table,
// and returns the number of rows it changed; Changes moves when that is
// not zero (on SQLite by the table's triggers, in the statement's own
// transaction; on PostgreSQL after it).
func (s *DB) execChange(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n > 0 && s.dialect == postgres {
		s.bumpCommitted(ctx)
	}
	return n, nil
}
