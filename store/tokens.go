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
}

const tokenColumns = `id, owner, owner_name, name, hash, groups, read_only, created_at, expires_at, last_used_at, revoked_at`

func scanToken(r scanner) (*APIToken, error) {
	var t APIToken
	var groups string
	var ro int
	var created, expires, used, revoked int64
	if err := r.Scan(&t.ID, &t.Owner, &t.OwnerName, &t.Name, &t.Hash, &groups, &ro, &created, &expires, &used, &revoked); err != nil {
		return nil, err
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

// TokenByHash finds a token by the hash of its value.
func (s *DB) TokenByHash(ctx context.Context, hash string) (*APIToken, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, s.rebind(`SELECT `+tokenColumns+` FROM api_tokens WHERE hash = ?`), hash))
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

// RevokeToken revokes one of the owner's tokens; another owner's token is
// ErrNotFound.
func (s *DB) RevokeToken(ctx context.Context, owner, id string) error {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND owner = ? AND revoked_at = 0`),
		s.now().UnixMilli(), id, owner)
	if err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists int
		_ = s.db.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM api_tokens WHERE id = ? AND owner = ?`), id, owner).Scan(&exists)
		if exists == 0 {
			return fmt.Errorf("store: token %s: %w", id, ErrNotFound)
		}
	}
	return nil
}

// TouchToken records a token's use.
func (s *DB) TouchToken(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`UPDATE api_tokens SET last_used_at = ? WHERE id = ?`), millis(at), id)
	return err
}
