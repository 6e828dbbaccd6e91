package auth

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// countingTokenStore counts the token reads that reach the store.
type countingTokenStore struct {
	TokenStore
	reads atomic.Int64
}

func (c *countingTokenStore) TokenByHash(ctx context.Context, hash string) (*store.APIToken, error) {
	c.reads.Add(1)
	return c.TokenStore.TokenByHash(ctx, hash)
}

// TestAPITokenRevokedOnEveryReplica: two gateways on one database each
// remember a token they authenticated, so that a busy client costs one
// store read a second rather than one per request; a revocation still
// applies at once on the replica that made it and within tokenCacheTTL (one
// second) on the other. The clock is a fake one, shared by both replicas
// and the store.
func TestAPITokenRevokedOnEveryReplica(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		now := time.Now().Truncate(time.Millisecond)
		clock := func() time.Time { return now }
		replica := func() (*store.DB, *APITokens, *countingTokenStore) {
			db, err := store.Open(ctx, url) // a pool of its own, as another process has
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			db.SetClock(clock)
			cs := &countingTokenStore{TokenStore: db}
			a := NewAPITokens(cs, nil, nil)
			a.SetClock(clock)
			return db, a, cs
		}
		dbA, a, _ := replica()
		_, b, bReads := replica()

		mk := func(id string, exp time.Time) string {
			secret := NewToken(APITokenPrefix)
			if err := dbA.CreateToken(ctx, &store.APIToken{ID: id, Owner: "alice", Name: id, Hash: HashToken(secret), ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
			return secret
		}
		secret := mk("t1", now.Add(time.Hour))
		for name, r := range map[string]*APITokens{"A": a, "B": b} {
			if u, err := r.Authenticate(ctx, secret); err != nil || u.Owner() != "alice" || u.TokenID != "t1" {
				t.Fatalf("replica %s: %+v %v", name, u, err)
			}
		}
		// B remembers the token: without that, the bound below would hold
		// trivially.
		before := bReads.reads.Load()
		if _, err := b.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if n := bReads.reads.Load() - before; n != 0 {
			t.Fatalf("a token used a moment ago was read from the store again (%d reads)", n)
		}

		// Revoked on A (as the API's revoke does: in the store, then Forget).
		if err := dbA.RevokeToken(ctx, "alice", "t1"); err != nil {
			t.Fatal(err)
		}
		a.Forget()
		if _, err := a.Authenticate(ctx, secret); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("replica A accepts the token it revoked: %v", err)
		}
		// B refuses it within tokenCacheTTL: poll in steps of a tenth.
		revokedAt := now
		var err error
		for now.Sub(revokedAt) <= tokenCacheTTL {
			if _, err = b.Authenticate(ctx, secret); err != nil {
				break
			}
			now = now.Add(tokenCacheTTL / 10)
		}
		if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("replica B still accepts the revoked token %s after the revocation: %v", now.Sub(revokedAt), err)
		}
		// And keeps refusing it: refusals are not remembered as anything.
		now = now.Add(time.Millisecond)
		if _, err := b.Authenticate(ctx, secret); !errors.Is(err, ErrEnded) {
			t.Errorf("revoked token accepted again: %v", err)
		}

		// A remembered token still ends at its expiry, to the millisecond.
		short := mk("t2", now.Add(500*time.Millisecond))
		if _, err := b.Authenticate(ctx, short); err != nil {
			t.Fatal(err)
		}
		now = now.Add(500*time.Millisecond + time.Millisecond)
		if _, err := b.Authenticate(ctx, short); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "expired") {
			t.Errorf("a remembered token outlived its expiry: %v", err)
		}

		// Unknown tokens are not remembered (guesses cannot fill the
		// cache, and a token created a moment later works at once).
		before = bReads.reads.Load()
		for range 2 {
			if _, err := b.Authenticate(ctx, APITokenPrefix+"unknown"); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrEnded) {
				t.Fatalf("unknown token: %v", err)
			}
		}
		if n := bReads.reads.Load() - before; n != 2 {
			t.Errorf("two uses of an unknown token read the store %d times, want 2", n)
		}

		// Chain.Forget reaches the API tokens among its authenticators.
		fresh := mk("t3", now.Add(time.Hour))
		chain := Chain{NewStaticTokens(nil), b}
		if _, err := chain.Authenticate(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		before = bReads.reads.Load()
		chain.Forget()
		if _, err := chain.Authenticate(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		if n := bReads.reads.Load() - before; n != 1 {
			t.Errorf("after Chain.Forget the token was read %d times, want 1", n)
		}
	})
}
