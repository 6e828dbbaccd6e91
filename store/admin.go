package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// QuotaRow is a quota entry stored through the admin API.
type QuotaRow struct {
	Subject   string
	Limits    string // JSON object of the fields set
	UpdatedAt time.Time
	UpdatedBy string
}

// Actor is who made an admin change.
type Actor struct {
	ID   string
	Name string
}

// AuditEntry is one admin change.
type AuditEntry struct {
	ID      int64
	At      time.Time
	Actor   string // the admin's user name
	ActorID string // the admin's stable id
	Action  string // e.g. "quota.set", "cluster.stop"
	Target  string // e.g. "user:ann", "cluster:3f9c..."
	Before  string // JSON, "" when there was nothing
	After   string // JSON, "" when there is nothing
}

// QuotaEntries returns every stored quota entry.
func (s *DB) QuotaEntries(ctx context.Context) ([]QuotaRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT subject, limits, updated_at, updated_by FROM quota_entries ORDER BY subject`)
	if err != nil {
		return nil, fmt.Errorf("store: quotas: %w", err)
	}
	defer rows.Close()
	var out []QuotaRow
	for rows.Next() {
		var r QuotaRow
		var at int64
		if err := rows.Scan(&r.Subject, &r.Limits, &at, &r.UpdatedBy); err != nil {
			return nil, fmt.Errorf("store: quotas: %w", err)
		}
		r.UpdatedAt = time.UnixMilli(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// QuotaChange computes a subject's new stored limits from the old ones
// ("" and false when none is stored). Returning "" deletes the entry.
type QuotaChange func(old string, exists bool) (string, error)

// UpdateQuota changes one stored quota entry and records the change in the
// audit log, in one transaction. It returns the entry before and after
// ("" for none).
func (s *DB) UpdateQuota(ctx context.Context, subject string, by Actor, action string, change QuotaChange) (before, after string, err error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return "", "", fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if s.dialect == postgres {
		// A row lock locks nothing while the entry does not exist yet: two
		// first sets would both read "none" and one would be lost.
		if err := s.advisoryLock(ctx, tx, "quota:"+subject); err != nil {
			return "", "", fmt.Errorf("store: quota %s: %w", subject, err)
		}
	}
	q := `SELECT limits FROM quota_entries WHERE subject = ?`
	err = tx.QueryRowContext(ctx, s.rebind(q), subject).Scan(&before)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", "", fmt.Errorf("store: quota %s: %w", subject, err)
	}
	after, err = change(before, exists)
	if err != nil {
		return "", "", err
	}
	now := s.now().UnixMilli()
	switch {
	case after == "" && exists:
		_, err = tx.ExecContext(ctx, s.rebind(`DELETE FROM quota_entries WHERE subject = ?`), subject)
	case after == "":
		return before, after, nil // nothing to delete, nothing to record
	default:
		// Two first sets of one subject at once: the loser updates.
		_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO quota_entries (subject, limits, updated_at, updated_by) VALUES (?, ?, ?, ?)
ON CONFLICT (subject) DO UPDATE SET limits = excluded.limits, updated_at = excluded.updated_at, updated_by = excluded.updated_by`),
			subject, after, now, text(by.Name))
	}
	if err != nil {
		return "", "", fmt.Errorf("store: quota %s: %w", subject, err)
	}
	if err := s.audit(ctx, tx, AuditEntry{Actor: by.Name, ActorID: by.ID, Action: action, Target: subject, Before: before, After: after}); err != nil {
		return "", "", err
	}
	if err := tx.Commit(); err != nil {
		return "", "", fmt.Errorf("store: quota %s: %w", subject, err)
	}
	return before, after, nil
}

func (s *DB) audit(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO audit_log (at, actor, actor_id, action, target, before_state, after_state) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		s.now().UnixMilli(), text(e.Actor), text(e.ActorID), text(e.Action), text(e.Target), text(e.Before), text(e.After))
	if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}

// AuditFilter selects audit entries; zero fields select everything.
type AuditFilter struct {
	Since  time.Time
	Target string
	Actor  string
	Limit  int // newest first; 0: 1000
}

// AuditLog returns audit entries, newest first.
func (s *DB) AuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	where := []string{"at >= ?"}
	args := []any{f.Since.UnixMilli()}
	if f.Since.IsZero() {
		args[0] = int64(0)
	}
	if f.Target != "" {
		where = append(where, "target = ?")
		args = append(args, f.Target)
	}
	if f.Actor != "" {
		where = append(where, "actor = ?")
		args = append(args, f.Actor)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id, at, actor, actor_id, action, target, before_state, after_state FROM audit_log
WHERE `+strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, limit)), args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.ActorID, &e.Action, &e.Target, &e.Before, &e.After); err != nil {
			return nil, fmt.Errorf("store: audit log: %w", err)
		}
		e.At = time.UnixMilli(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastGroups returns the groups a user had when they last made a cluster,
// and when that was (zero when they never did).
func (s *DB) LastGroups(ctx context.Context, ownerName string) ([]string, time.Time, error) {
	var raw string
	var at int64
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT owner_groups, created_at FROM clusters WHERE owner_name = ? ORDER BY created_at DESC LIMIT 1`), ownerName).Scan(&raw, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("store: last groups: %w", err)
	}
	var groups []string
	if err := json.Unmarshal([]byte(raw), &groups); err != nil {
		return nil, time.Time{}, fmt.Errorf("store: last groups: %w", err)
	}
	return groups, time.UnixMilli(at), nil
}
