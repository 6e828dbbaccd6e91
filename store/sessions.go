package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Session is a browser session: never its cookie, only the cookie's hash.
type Session struct {
	ID        string // public: listed and revoked by it
	Hash      string // hex SHA-256 of the cookie's secret
	Owner     string // the owning identity (auth.User.Owner)
	OwnerName string // its display name when the session was made
	// Via says how the session began: "login" (the browser signed in with
	// the identity provider), "link" (a dashboard link), "jupyterhub" (it
	// signed in with JupyterHub) or "jupyterhub-link" (a dashboard link made
	// with a JupyterHub token).
	Via string
	// TokenID is the API token whose dashboard link made the session; the
	// session ends with it.
	TokenID   string
	ReadOnly  bool
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time
	// Claims are the owner's latest login claims, filled in by
	// SessionByHash; nil when the owner never logged in with OIDC.
	Claims *UserClaims
}

// UserClaims are what the identity provider last said about a user.
type UserClaims struct {
	ID     string // the identity (auth.User.Owner)
	Name   string
	Email  string
	Groups []string
	// ClaimsAt is when the provider asserted them (the ID token's iat).
	ClaimsAt  time.Time
	UpdatedAt time.Time
}

const sessionColumns = `s.id, s.hash, s.owner, s.owner_name, s.via, s.token_id, s.read_only, s.created_at, s.expires_at, s.revoked_at`

// claimsColumns are the claims of a LEFT JOIN user_claims u, as rawClaims
// reads them; absent claims come back empty.
const claimsColumns = `COALESCE(u.id, ''), COALESCE(u.name, ''), COALESCE(u.email, ''), COALESCE(u.groups, '[]'), COALESCE(u.claims_at, 0), COALESCE(u.updated_at, 0)`

func scanSession(r scanner, withClaims bool) (*Session, error) {
	var s Session
	var ro int
	var created, expires, revoked int64
	dest := []any{&s.ID, &s.Hash, &s.Owner, &s.OwnerName, &s.Via, &s.TokenID, &ro, &created, &expires, &revoked}
	var c rawClaims
	if withClaims {
		dest = append(dest, c.dest()...)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	s.ReadOnly = ro != 0
	s.CreatedAt, s.ExpiresAt, s.RevokedAt = fromMillis(created), fromMillis(expires), fromMillis(revoked)
	if withClaims {
		s.Claims = c.claims()
	}
	return &s, nil
}

// rawClaims receives the columns of claimsColumns.
type rawClaims struct {
	id, name, email, groups string
	at, updated             int64
}

func (c *rawClaims) dest() []any {
	return []any{&c.id, &c.name, &c.email, &c.groups, &c.at, &c.updated}
}

func (c *rawClaims) claims() *UserClaims {
	if c.id == "" {
		return nil
	}
	u := &UserClaims{ID: c.id, Name: c.name, Email: c.email, ClaimsAt: fromMillis(c.at), UpdatedAt: fromMillis(c.updated)}
	_ = json.Unmarshal([]byte(c.groups), &u.Groups)
	return u
}

// stmtCache keeps prepared statements for the lookups every request makes
// (API tokens, sessions): preparing the query each time cost as much as
// running it.
type stmtCache struct{ m sync.Map } // rebound query → *sql.Stmt

// queryRow runs a per-request lookup through a prepared statement.
func (s *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	q := s.rebind(query)
	if st, ok := s.stmts.m.Load(q); ok {
		return st.(*sql.Stmt).QueryRowContext(ctx, args...)
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return s.db.QueryRowContext(ctx, q, args...) // reports the same error
	}
	if prev, loaded := s.stmts.m.LoadOrStore(q, st); loaded {
		st.Close()
		st = prev.(*sql.Stmt)
	}
	return st.QueryRowContext(ctx, args...)
}

// sessionGrace is how long ended sessions stay listed in the table (for
// audits by hand) before CreateSession sweeps them.
const sessionGrace = 24 * time.Hour

// CreateSession stores a new session, and removes sessions that ended more
// than a day ago.
func (s *DB) CreateSession(ctx context.Context, se *Session) error {
	if se.CreatedAt.IsZero() {
		se.CreatedAt = s.now()
	}
	if se.ExpiresAt.IsZero() {
		return fmt.Errorf("store: create session: no expiry")
	}
	ro := 0
	if se.ReadOnly {
		ro = 1
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	defer tx.Rollback()
	if se.TokenID != "" {
		// The token must still be valid, and stay so until the session is
		// stored: FOR UPDATE makes a concurrent RevokeToken wait, and then
		// see the session and end it too.
		lock := ""
		if s.dialect == postgres {
			lock = " FOR UPDATE"
		}
		var revoked, expires int64
		err := tx.QueryRowContext(ctx, s.rebind(`SELECT revoked_at, expires_at FROM api_tokens WHERE id = ? AND owner = ?`+lock), se.TokenID, se.Owner).Scan(&revoked, &expires)
		if errors.Is(err, sql.ErrNoRows) || revoked != 0 || (expires != 0 && expires <= millis(s.now())) {
			return fmt.Errorf("store: create session: token %s is no longer valid: %w", se.TokenID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: create session: %w", err)
		}
	}
	_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO sessions (id, hash, owner, owner_name, via, token_id, read_only, created_at, expires_at, revoked_at)
VALUES (?,?,?,?,?,?,?,?,?,0)`), se.ID, se.Hash, se.Owner, se.OwnerName, se.Via, se.TokenID, ro, millis(se.CreatedAt), millis(se.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	old := millis(s.now().Add(-sessionGrace))
	if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE expires_at < ? OR (revoked_at > 0 AND revoked_at < ?)`), old, old); err != nil {
		return fmt.Errorf("store: sweep sessions: %w", err)
	}
	return nil
}

// SessionByHash finds a session by the hash of its cookie, with its
// owner's latest claims. Revoked and expired sessions are returned too:
// the caller says why they no longer count.
func (s *DB) SessionByHash(ctx context.Context, hash string) (*Session, error) {
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+`, `+claimsColumns+`
FROM sessions s LEFT JOIN user_claims u ON u.id = s.owner WHERE s.hash = ?`, hash), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: session: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: session: %w", err)
	}
	return se, nil
}

// ListSessions returns the owner's sessions that are neither revoked nor
// expired, newest first.
func (s *DB) ListSessions(ctx context.Context, owner string) ([]*Session, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT `+sessionColumns+` FROM sessions s
WHERE s.owner = ? AND s.revoked_at = 0 AND s.expires_at > ? ORDER BY s.created_at DESC, s.id`), owner, millis(s.now()))
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		se, err := scanSession(rows, false)
		if err != nil {
			return nil, fmt.Errorf("store: list sessions: %w", err)
		}
		out = append(out, se)
	}
	return out, rows.Err()
}

// RevokeSession ends one of the owner's sessions; another owner's session,
// or one that already ended, is ErrNotFound.
func (s *DB) RevokeSession(ctx context.Context, owner, id string) error {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE sessions SET revoked_at = ? WHERE id = ? AND owner = ? AND revoked_at = 0 AND expires_at > ?`),
		millis(s.now()), id, owner, millis(s.now()))
	if err != nil {
		return fmt.Errorf("store: revoke session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: session %s: %w", id, ErrNotFound)
	}
	return nil
}

// RevokeSessionByHash ends the session of a cookie (logout). Unknown or
// ended sessions are not an error: the cookie is gone either way.
func (s *DB) RevokeSessionByHash(ctx context.Context, hash string) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`UPDATE sessions SET revoked_at = ? WHERE hash = ? AND revoked_at = 0`), millis(s.now()), hash)
	if err != nil {
		return fmt.Errorf("store: end session: %w", err)
	}
	return nil
}

// RevokeSessions ends every active session of the owner and says how many.
func (s *DB) RevokeSessions(ctx context.Context, owner string) (int, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE sessions SET revoked_at = ? WHERE owner = ? AND revoked_at = 0 AND expires_at > ?`),
		millis(s.now()), owner, millis(s.now()))
	if err != nil {
		return 0, fmt.Errorf("store: end sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// RecordUserClaims keeps what the identity provider says about a user at a
// login, ordered by the ID token's issue time (c.ClaimsAt, its iat): it
// writes only claims issued after the stored ones, whether or not they
// changed, so an earlier ID token still in use can never replace newer
// claims, even one with the same claims as a later token. A token seen
// again (by another replica, or once more here) is not written. It reports
// whether it wrote.
func (s *DB) RecordUserClaims(ctx context.Context, c *UserClaims) (bool, error) {
	if c.ClaimsAt.IsZero() {
		return false, fmt.Errorf("store: record claims of %s: no issue time to order them by", c.ID)
	}
	groups := slices.Clone(c.Groups)
	slices.Sort(groups)
	groups = slices.Compact(groups)
	if groups == nil {
		groups = []string{}
	}
	g, _ := json.Marshal(groups)
	// Not "unless unchanged within a few minutes": skipping a newer token
	// with the same claims would leave the stored issue time behind it, and
	// an older token with other claims, used later, would then look newer.
	res, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO user_claims (id, name, email, groups, claims_at, updated_at) VALUES (?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET name = excluded.name, email = excluded.email, groups = excluded.groups,
    claims_at = excluded.claims_at, updated_at = excluded.updated_at
WHERE excluded.claims_at > user_claims.claims_at`),
		c.ID, c.Name, c.Email, string(g), millis(c.ClaimsAt), millis(s.now()))
	if err != nil {
		return false, fmt.Errorf("store: record claims of %s: %w", c.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// GetUserClaims returns a user's latest login claims.
func (s *DB) GetUserClaims(ctx context.Context, id string) (*UserClaims, error) {
	var c rawClaims
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT `+claimsColumns+` FROM user_claims u WHERE u.id = ?`), id).Scan(c.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: claims of %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: claims of %s: %w", id, err)
	}
	return c.claims(), nil
}
