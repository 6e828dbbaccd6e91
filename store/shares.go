package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Share is one share of a cluster: with a user or a group, allowing what
// it allows beyond viewing and connecting. Package sharing decides what
// shares grant.
type Share struct {
	Cluster string
	Kind    string // "user" or "group"
	// Subject is a user's stable id (auth.User.Owner) or a group's name.
	Subject string
	// SubjectName is a user's name when the cluster was shared with them.
	SubjectName string
	Allow       []string // "scale", "stop"
	// OwnerMember: the owner belonged to the group when sharing with it.
	OwnerMember bool
	CreatedAt   time.Time
	CreatedBy   string // the sharer's name
}

// Label is how the share's subject is shown: a user by name when known.
func (s Share) Label() string {
	if s.Kind == "user" && s.SubjectName != "" {
		return s.SubjectName
	}
	return s.Subject
}

// sameGrant says whether two shares name the same subject with the same
// rights: a share made again unchanged changes nothing.
func sameGrant(a, b Share) bool {
	return a.Kind == b.Kind && a.Subject == b.Subject && a.OwnerMember == b.OwnerMember && slices.Equal(a.Allow, b.Allow)
}

const shareColumns = `s.cluster, s.kind, s.subject, s.subject_name, s.allow, s.owner_member, s.created_at, s.created_by`

func shareDest(sh *Share, allow *string, member *int, at *int64) []any {
	return []any{&sh.Cluster, &sh.Kind, &sh.Subject, &sh.SubjectName, allow, member, at, &sh.CreatedBy}
}

func (sh *Share) fill(allow string, member int, at int64) {
	sh.Allow = nil
	if allow != "" {
		sh.Allow = strings.Split(allow, ",")
	}
	sh.OwnerMember = member != 0
	sh.CreatedAt = time.UnixMilli(at)
}

// ClusterShares returns a cluster's shares: users, then groups, by subject.
func (s *DB) ClusterShares(ctx context.Context, cluster string) ([]Share, error) {
	out, err := s.queryShares(ctx, s.db, cluster)
	if err != nil {
		return nil, fmt.Errorf("store: shares of %s: %w", cluster, err)
	}
	return out, nil
}

func (s *DB) queryShares(ctx context.Context, q querier, cluster string) ([]Share, error) {
	rows, err := q.QueryContext(ctx, s.rebind(`SELECT `+shareColumns+` FROM cluster_shares s WHERE s.cluster = ? ORDER BY s.kind DESC, s.subject`), cluster)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Share
	for rows.Next() {
		var sh Share
		var allow string
		var member int
		var at int64
		if err := rows.Scan(shareDest(&sh, &allow, &member, &at)...); err != nil {
			return nil, err
		}
		sh.fill(allow, member, at)
		out = append(out, sh)
	}
	return out, rows.Err()
}

// ShareChange computes a cluster's shares from its owner and its current
// shares. Returning an error aborts the change and is returned as it is.
type ShareChange func(owner string, current []Share) ([]Share, error)

// UpdateShares sets a cluster's shares to what change returns and records
// the change in the audit log (action, by, the shares before and after),
// in one transaction, serialised with the cluster's other share changes.
// Shares kept unchanged keep their creation; a change that changes
// nothing writes nothing. It returns the shares before and after.
func (s *DB) UpdateShares(ctx context.Context, cluster string, by Actor, action string, change ShareChange) (before, after []Share, err error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	q := `SELECT owner FROM clusters WHERE name = ?`
	if s.dialect == postgres {
		q += " FOR UPDATE" // two share changes of one cluster queue here
	}
	var owner string
	err = tx.QueryRowContext(ctx, s.rebind(q), cluster).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("store: cluster %s: %w", cluster, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: shares of %s: %w", cluster, err)
	}
	if before, err = s.queryShares(ctx, tx, cluster); err != nil {
		return nil, nil, fmt.Errorf("store: shares of %s: %w", cluster, err)
	}
	next, err := change(owner, slices.Clone(before))
	if err != nil {
		return nil, nil, err
	}
	after = s.settle(cluster, by, before, next)
	if sameShares(before, after) {
		return before, before, nil
	}
	if err := s.writeShares(ctx, tx, cluster, after); err != nil {
		return nil, nil, err
	}
	if err := s.audit(ctx, tx, AuditEntry{Actor: by.Name, ActorID: by.ID, Action: action, Target: "cluster:" + cluster,
		Before: SharesJSON(before), After: SharesJSON(after)}); err != nil {
		return nil, nil, err
	}
	// The owner's cluster list shows whom each cluster is shared with.
	if err := s.bumpUsage(ctx, tx, owner, usageDelta{}); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("store: shares of %s: %w", cluster, err)
	}
	return before, after, nil
}

// settle fills in what the store decides of the next shares: the cluster,
// and the creation of each (kept for one unchanged), in a stable order.
func (s *DB) settle(cluster string, by Actor, before, next []Share) []Share {
	now := s.now().Truncate(time.Millisecond)
	out := make([]Share, 0, len(next))
	for _, sh := range next {
		sh.Cluster = cluster
		sh.SubjectName, sh.CreatedBy = text(sh.SubjectName), text(by.Name)
		sh.CreatedAt = now
		sort.Strings(sh.Allow)
		sh.Allow = slices.Compact(sh.Allow)
		for _, old := range before {
			if sameGrant(old, sh) {
				sh.CreatedAt, sh.CreatedBy, sh.SubjectName = old.CreatedAt, old.CreatedBy, old.SubjectName
			}
		}
		out = append(out, sh)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind
		}
		return out[i].Subject < out[j].Subject
	})
	return out
}

func sameShares(a, b []Share) bool {
	return slices.EqualFunc(a, b, sameGrant)
}

func (s *DB) writeShares(ctx context.Context, tx *sql.Tx, cluster string, shares []Share) error {
	if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM cluster_shares WHERE cluster = ?`), cluster); err != nil {
		return fmt.Errorf("store: shares of %s: %w", cluster, err)
	}
	for _, sh := range shares {
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO cluster_shares (cluster, kind, subject, subject_name, allow, owner_member, created_at, created_by)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), cluster, text(sh.Kind), text(sh.Subject), sh.SubjectName, text(strings.Join(sh.Allow, ",")),
			boolInt(sh.OwnerMember), millis(sh.CreatedAt), sh.CreatedBy)
		if err != nil {
			return fmt.Errorf("store: shares of %s: %w", cluster, err)
		}
	}
	return nil
}

// shareJSON is a share as the audit log keeps it.
type shareJSON struct {
	With  string   `json:"with"`
	Name  string   `json:"name,omitempty"`
	Allow []string `json:"allow"`
}

// SharesJSON is shares as the audit log keeps them ("" for none).
func SharesJSON(shares []Share) string {
	if len(shares) == 0 {
		return ""
	}
	out := make([]shareJSON, len(shares))
	for i, sh := range shares {
		out[i] = shareJSON{With: sh.Kind + ":" + sh.Subject, Allow: nonNil(sh.Allow)}
		if sh.Kind == "user" {
			out[i].Name = sh.SubjectName
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// SharedCluster is a cluster someone else owns, with the shares that name
// a given user (by id or by one of their groups).
type SharedCluster struct {
	Cluster *Cluster
	Shares  []Share
}

// SharedWith returns the clusters of other owners shared with the user id
// or one of groups, newest first, with the shares that name them; only
// clusters in statuses, when given.
func (s *DB) SharedWith(ctx context.Context, id string, groups []string, statuses []Status) ([]SharedCluster, error) {
	where := []string{"s.kind = 'user' AND s.subject = ?"}
	args := []any{id}
	if len(groups) > 0 {
		where = append(where, "s.kind = 'group' AND s.subject IN ("+placeholders(len(groups))+")")
		for _, g := range groups {
			args = append(args, g)
		}
	}
	query := `SELECT ` + shareColumns + `, ` + prefixed("c.", clusterColumns) + ` FROM cluster_shares s JOIN clusters c ON c.name = s.cluster
WHERE ((` + strings.Join(where, ") OR (") + `)) AND c.owner <> ?`
	args = append(args, id)
	if len(statuses) > 0 {
		query += " AND c.status IN (" + placeholders(len(statuses)) + ")"
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	query += " ORDER BY c.created_at DESC, c.name, s.kind DESC, s.subject"
	rows, err := s.db.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return nil, fmt.Errorf("store: clusters shared with %s: %w", id, err)
	}
	defer rows.Close()
	var out []SharedCluster
	for rows.Next() {
		var sh Share
		var allow string
		var member int
		var at int64
		c, err := scanCluster(prefixScanner{rows, shareDest(&sh, &allow, &member, &at)})
		if err != nil {
			return nil, fmt.Errorf("store: clusters shared with %s: %w", id, err)
		}
		sh.fill(allow, member, at)
		if n := len(out); n > 0 && out[n-1].Cluster.Name == c.Name {
			out[n-1].Shares = append(out[n-1].Shares, sh)
			continue
		}
		out = append(out, SharedCluster{Cluster: c, Shares: []Share{sh}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: clusters shared with %s: %w", id, err)
	}
	return out, nil
}

// prefixScanner scans its own destinations first, then the rest as asked.
type prefixScanner struct {
	r    scanner
	dest []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.r.Scan(append(slices.Clone(p.dest), dest...)...)
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// prefixed qualifies each column of a comma-separated list.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// UserIDsByName returns the ids of the users whose latest login named them
// name (several when an identity provider reuses names).
func (s *DB) UserIDsByName(ctx context.Context, name string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id FROM user_claims WHERE name = ? ORDER BY id`), name)
	if err != nil {
		return nil, fmt.Errorf("store: users named %s: %w", name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: users named %s: %w", name, err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// RecordAudit adds one entry to the audit log on its own: what someone
// did that changed nothing stored (connected to a cluster they do not
// own, read its logs, opened its dashboard).
func (s *DB) RecordAudit(ctx context.Context, e AuditEntry) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := s.audit(ctx, tx, e); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}
