package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// APIToken is a stored API token: never the token itself, only its hash.
type APIToken struct {
	ID        string
	Owner     string // the owning identity (auth.User.Owner)
	OwnerName string // its display name when the token was made
	Name      string
	Hash      string // hex SHA-256 of the token
	Groups    []string
	ReadOnly  bool
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	LastUsed  time.Time
	RevokedAt time.Time
	// Claims are the owner's latest login claims, filled in by TokenByHash;
	// nil when the owner never logged in with OIDC. Groups above are only
	// those at the token's creation, kept for the record.
	Claims *UserClaims
}

const tokenColumns = `id, owner, owner_name, name, hash, groups, read_only, created_at, expires_at, last_used_at, revoked_at`

// tokenColumnsT are tokenColumns of the table alias t, for joins.
const tokenColumnsT = `t.id, t.owner, t.owner_name, t.name, t.hash, t.groups, t.read_only, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func scanToken(r scanner) (*APIToken, error) { return scanTokenClaims(r, false) }

func scanTokenClaims(r scanner, withClaims bool) (*APIToken, error) {
	var t APIToken
	var groups string
	var ro int
	var created, expires, used, revoked int64
	dest := []any{&t.ID, &t.Owner, &t.OwnerName, &t.Name, &t.Hash, &groups, &ro, &created, &expires, &used, &revoked}
	var c rawClaims
	if withClaims {
		dest = append(dest, c.dest()...)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	if withClaims {
		t.Claims = c.claims()
	}
	_ = json.Unmarshal([]byte(groups), &t.Groups)
	t.ReadOnly = ro != 0
	t.CreatedAt, t.ExpiresAt, t.LastUsed, t.RevokedAt = fromMillis(created), fromMillis(expires), fromMillis(used), fromMillis(revoked)
	return &t, nil
}

// CreateToken stores a new token.
func (s *DB) CreateToken(ctx context.Context, t *APIToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	groups, _ := json.Marshal(t.Groups)
	if t.Groups == nil {
		groups = []byte("[]")
	}
	ro := 0
	if t.ReadOnly {
		ro = 1
	}
	_, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO api_tokens (`+tokenColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`),
		t.ID, t.Owner, t.OwnerName, t.Name, t.Hash, string(groups), ro, millis(t.CreatedAt), millis(t.ExpiresAt), 0, 0)
	if err != nil {
		return fmt.Errorf("store: create token: %w", err)
	}
	return nil
}

// TokenByHash finds a token by the hash of its value, with its owner's
// latest login claims.
func (s *DB) TokenByHash(ctx context.Context, hash string) (*APIToken, error) {
	t, err := scanTokenClaims(s.queryRow(ctx, `SELECT `+tokenColumnsT+`, `+claimsColumns+`
FROM api_tokens t LEFT JOIN user_claims u ON u.id = t.owner WHERE t.hash = ?`, hash), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: token: %w", err)
	}
	return t, nil
}

// ListTokens returns the owner's tokens, newest first, revoked ones included.
func (s *DB) ListTokens(ctx context.Context, owner string) ([]*APIToken, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT `+tokenColumns+` FROM api_tokens WHERE owner = ? ORDER BY created_at DESC, id`), owner)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	defer rows.Close()
	var out []*APIToken
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes one of the owner's tokens, and the browser sessions
// its dashboard links made; another owner's token is ErrNotFound.
func (s *DB) RevokeToken(ctx context.Context, owner, id string) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	defer tx.Rollback()
	now := s.now().UnixMilli()
	res, err := tx.ExecContext(ctx, s.rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND owner = ? AND revoked_at = 0`), now, id, owner)
	if err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists int
		if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM api_tokens WHERE id = ? AND owner = ?`), id, owner).Scan(&exists); err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		if exists == 0 {
			return fmt.Errorf("store: token %s: %w", id, ErrNotFound)
		}
	}
	// Also when the token was revoked already (idempotent). CreateSession
	// refuses revoked tokens, and locks the token's row while it stores a
	// session, so no session of the token survives this.
	if _, err := tx.ExecContext(ctx, s.rebind(`UPDATE sessions SET revoked_at = ? WHERE token_id = ? AND owner = ? AND revoked_at = 0`), now, id, owner); err != nil {
		return fmt.Errorf("store: revoke token's sessions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	return nil
}

// TouchToken records a token's use.
func (s *DB) TouchToken(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`UPDATE api_tokens SET last_used_at = ? WHERE id = ?`), millis(at), id)
	return err
}
