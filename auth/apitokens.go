package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// APITokenPrefix starts every API token, so they are recognisable in a
// leaked file and told apart from ID tokens without a lookup.
const APITokenPrefix = "gw_"

// TokenStore is what API tokens need of the store.
type TokenStore interface {
	TokenByHash(ctx context.Context, hash string) (*store.APIToken, error)
	TouchToken(ctx context.Context, id string, at time.Time) error
}

// APITokens authenticates the gateway's own API tokens.
type APITokens struct {
	store  TokenStore
	access Access
	now    func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // last_used writes, at most once a minute per token
}

// NewAPITokens authenticates tokens against st. Groups and admin are
// recomputed at each use from the owner's latest login (see Access) and the
// configured admin users and groups.
func NewAPITokens(st TokenStore, adminUsers, adminGroups []string) *APITokens {
	return &APITokens{store: st, access: Access{AdminUsers: adminUsers, AdminGroups: adminGroups}, now: time.Now, touched: map[string]time.Time{}}
}

// SetGroupsMaxAge sets how long a login's groups count for tokens
// (DefaultGroupsMaxAge otherwise).
func (a *APITokens) SetGroupsMaxAge(d time.Duration) { a.access.GroupsMaxAge = d }

// SetClock replaces the clock (tests).
func (a *APITokens) SetClock(now func() time.Time) { a.now = now }

// HashToken is how tokens are stored.
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Authenticate implements Authenticator.
func (a *APITokens) Authenticate(ctx context.Context, token string) (*User, error) {
	if !strings.HasPrefix(token, APITokenPrefix) {
		return nil, ErrNoCredentials
	}
	t, err := a.store.TokenByHash(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown API token", ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up token: %w", err)
	}
	now := a.now()
	if !t.RevokedAt.IsZero() {
		return nil, ended("API token %q was revoked", t.Name)
	}
	if !t.ExpiresAt.IsZero() && now.After(t.ExpiresAt) {
		return nil, ended("API token %q expired at %s", t.Name, t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	u := &User{ID: t.Owner, Name: t.OwnerName, Via: "token", ReadOnly: t.ReadOnly, Expires: t.ExpiresAt, TokenID: t.ID}
	if u.Name == "" {
		u.Name = t.Owner
	}
	// Not t.Groups: those are the groups when the token was made, which
	// may have been taken away since.
	a.access.apply(u, t.Claims, now)
	a.mu.Lock()
	last := a.touched[t.ID]
	touch := now.Sub(last) > time.Minute
	if touch {
		a.touched[t.ID] = now
	}
	a.mu.Unlock()
	if touch {
		_ = a.store.TouchToken(ctx, t.ID, now)
	}
	return u, nil
}
