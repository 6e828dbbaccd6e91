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
//
// A token's record is remembered for at most tokenCacheTTL after it was
// read, so that a busy client (a dashboard's page and its websocket, a
// script polling the API) costs one store read a second, not one per
// request. A revocation therefore applies at once on the replica that made
// it (Forget) and within tokenCacheTTL on every other. Expiry, groups and
// admin are still worked out at each use.
type APITokens struct {
	store  TokenStore
	access Access
	now    func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // last_used writes, at most once a minute per token

	cmu   sync.Mutex
	cache map[[32]byte]cachedToken // by SHA-256 of the token; valid tokens only
}

type cachedToken struct {
	t     *store.APIToken // never modified once cached
	until time.Time
}

// tokenCacheTTL bounds how long a revocation made through another replica
// (or straight in the store) may take to apply here.
const tokenCacheTTL = time.Second

// maxCachedAPITokens bounds the cache; past it the cache starts again empty
// (the store has the truth). Only tokens that authenticated are cached, so
// guesses cannot fill it.
const maxCachedAPITokens = 10000

// NewAPITokens authenticates tokens against st. Groups and admin are
// recomputed at each use from the owner's latest login (see Access) and the
// configured admin users and groups.
func NewAPITokens(st TokenStore, adminUsers, adminGroups []string) *APITokens {
	return &APITokens{store: st, access: Access{AdminUsers: adminUsers, AdminGroups: adminGroups}, now: time.Now,
		touched: map[string]time.Time{}, cache: map[[32]byte]cachedToken{}}
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
	k := sha256.Sum256([]byte(token))
	// The clock is read before the store: the record is at least as new
	// as now, so it is trusted until now+tokenCacheTTL at the latest.
	now := a.now()
	t, err := a.lookup(ctx, k, now)
	if err != nil {
		return nil, err
	}
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

// lookup returns the token whose SHA-256 is k: from the cache while the
// entry is younger than tokenCacheTTL, otherwise from the store, caching
// it when it is neither revoked nor expired.
func (a *APITokens) lookup(ctx context.Context, k [32]byte, now time.Time) (*store.APIToken, error) {
	a.cmu.Lock()
	c, ok := a.cache[k]
	if ok && !now.Before(c.until) {
		delete(a.cache, k)
		ok = false
	}
	a.cmu.Unlock()
	if ok {
		return c.t, nil
	}
	t, err := a.store.TokenByHash(ctx, hex.EncodeToString(k[:]))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown API token", ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up token: %w", err)
	}
	if t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt)) {
		a.cmu.Lock()
		if len(a.cache) >= maxCachedAPITokens {
			clear(a.cache)
		}
		a.cache[k] = cachedToken{t: t, until: now.Add(tokenCacheTTL)}
		a.cmu.Unlock()
	}
	return t, nil
}

// Forget drops what this process remembers of tokens, after a revocation
// made in the store, so that it applies at once here (and within
// tokenCacheTTL on other replicas).
func (a *APITokens) Forget() {
	a.cmu.Lock()
	clear(a.cache)
	a.cmu.Unlock()
}
