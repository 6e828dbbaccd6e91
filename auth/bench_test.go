package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// failingTokenStore fails the benchmark if the API-token authenticator
// ever looks an ID token up.
type failingTokenStore struct{ tb testing.TB }

func (f failingTokenStore) TokenByHash(context.Context, string) (*store.APIToken, error) {
	f.tb.Error("an ID token reached the API token store")
	return nil, store.ErrNotFound
}

func (f failingTokenStore) TouchToken(context.Context, string, time.Time) error { return nil }

// BenchmarkOIDCAuthenticate measures ID token verification: the cache hit
// (what every API request with a valid ID token costs after the first), the
// same through the gateway's Chain{API tokens, OIDC}, the full verification
// of a token not cached yet (RS256 signature and claims, keys already
// fetched), and a forged token, which is never cached.
func BenchmarkOIDCAuthenticate(b *testing.B) {
	bi := newTestIssuer(b)
	ctx := context.Background()
	o, err := NewOIDC(ctx, OIDCConfig{Issuer: bi.srv.URL, ClientID: "gateway", AdminGroups: []string{"ops"}})
	if err != nil {
		b.Fatal(err)
	}
	tok := bi.sign(b, bi.claims(time.Now(), nil))
	check := func(u *User, err error) {
		if err != nil {
			b.Fatalf("Authenticate: %v", err)
		}
		if u.Owner() != "oidc:sub-alice" || u.Name != "alice" || !u.Admin || u.Via != "oidc" {
			b.Fatalf("Authenticate = %+v", u)
		}
	}
	check(o.Authenticate(ctx, tok)) // fetches the keys, fills the cache
	// noIssuerTraffic asserts that a sub-benchmark did not go back to the
	// issuer: verification of good tokens is in memory once keys are known.
	noIssuerTraffic := func(b *testing.B, before int64) {
		if n := bi.jwksFetches.Load() - before; n != 0 {
			b.Fatalf("%d JWKS fetches during the benchmark, want none", n)
		}
	}

	b.Run("cache-hit", func(b *testing.B) {
		before := bi.jwksFetches.Load()
		b.ReportAllocs()
		for b.Loop() {
			check(o.Authenticate(ctx, tok))
		}
		noIssuerTraffic(b, before)
	})

	b.Run("cache-hit-parallel", func(b *testing.B) {
		before := bi.jwksFetches.Load()
		var bad atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if u, err := o.Authenticate(ctx, tok); err != nil || u.Owner() != "oidc:sub-alice" {
					bad.Add(1)
				}
			}
		})
		if n := bad.Load(); n != 0 {
			b.Fatalf("%d authentications failed", n)
		}
		noIssuerTraffic(b, before)
	})

	b.Run("chain-cache-hit", func(b *testing.B) {
		chain := Chain{NewAPITokens(failingTokenStore{b}, nil, nil), o}
		before := bi.jwksFetches.Load()
		b.ReportAllocs()
		for b.Loop() {
			check(chain.Authenticate(ctx, tok))
		}
		noIssuerTraffic(b, before)
	})

	b.Run("miss-full-verify", func(b *testing.B) {
		before := bi.jwksFetches.Load()
		b.ReportAllocs()
		for b.Loop() {
			o.mu.Lock()
			clear(o.cache) // every lookup misses
			o.mu.Unlock()
			check(o.Authenticate(ctx, tok))
		}
		noIssuerTraffic(b, before)
	})

	// A token with the issuer's key ID but another key's signature: go-oidc
	// assumes the keys rotated and fetches the JWKS again before refusing,
	// so each such token costs a round trip to the issuer (reported as
	// jwks-fetches/op).
	b.Run("reject-forged-signature", func(b *testing.B) {
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			b.Fatal(err)
		}
		forged := signWith(b, other, bi.kids[len(bi.kids)-1], bi.claims(time.Now(), nil)) // the issuer's key id, another key
		before := bi.jwksFetches.Load()
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			if u, err := o.Authenticate(ctx, forged); !errors.Is(err, ErrInvalid) || u != nil {
				b.Fatalf("forged token: %+v, %v", u, err)
			}
			n++
		}
		b.ReportMetric(float64(bi.jwksFetches.Load()-before)/float64(n), "jwks-fetches/op")
	})
}

// BenchmarkAPITokenAuthenticate measures the gateway's own API tokens. They
// have no in-process cache: every request hashes the token and runs
// store.TokenByHash (last-use writes are rate-limited to one a minute per
// token, so the steady state is one indexed read).
func BenchmarkAPITokenAuthenticate(b *testing.B) {
	const tokens = 1000
	ctx := context.Background()
	for _, s := range testdb.URLs(b) {
		b.Run(s.Name, func(b *testing.B) {
			db, err := store.Open(ctx, s.URL)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			secrets := make([]string, tokens)
			exp := time.Now().Add(24 * time.Hour)
			for i := range secrets {
				secrets[i] = NewToken(APITokenPrefix)
				t := &store.APIToken{ID: "t" + strconv.Itoa(i), Owner: "owner-" + strconv.Itoa(i%50), Name: "bench",
					Hash: HashToken(secrets[i]), Groups: []string{"data"}, ExpiresAt: exp}
				if err := db.CreateToken(ctx, t); err != nil {
					b.Fatal(err)
				}
			}
			a := NewAPITokens(db, nil, []string{"ops"})
			for i, sec := range secrets { // record each token's use now, outside the loop
				if u, err := a.Authenticate(ctx, sec); err != nil || u.Owner() != "owner-"+strconv.Itoa(i%50) {
					b.Fatalf("token %d: %+v, %v", i, u, err)
				}
			}

			b.Run("valid", func(b *testing.B) {
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					u, err := a.Authenticate(ctx, secrets[i])
					if err != nil || u.Via != "token" || u.Owner() != "owner-"+strconv.Itoa(i%50) {
						b.Fatalf("token %d: %+v, %v", i, u, err)
					}
					if i++; i == tokens {
						i = 0
					}
				}
			})

			b.Run("unknown", func(b *testing.B) {
				unknown := NewToken(APITokenPrefix)
				b.ReportAllocs()
				for b.Loop() {
					if u, err := a.Authenticate(ctx, unknown); !errors.Is(err, ErrInvalid) || u != nil {
						b.Fatalf("unknown token: %+v, %v", u, err)
					}
				}
			})
		})
	}
}

// BenchmarkSessionFromRequest measures what a dashboard request's session
// cookie costs: a hit in the one-second cache, and the store lookup that
// follows each expiry (or a revocation made here).
func BenchmarkSessionFromRequest(b *testing.B) {
	ctx := context.Background()
	for _, s := range testdb.URLs(b) {
		b.Run(s.Name, func(b *testing.B) {
			db, err := store.Open(ctx, s.URL)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			sessions, err := NewSessions(make([]byte, 32), time.Hour, false)
			if err != nil {
				b.Fatal(err)
			}
			sessions.SetStore(db, Access{AdminGroups: []string{"ops"}})
			if _, err := db.RecordUserClaims(ctx, &store.UserClaims{ID: "oidc:alice", Name: "alice", Groups: []string{"ops"}, ClaimsAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
			c, err := sessions.Start(ctx, User{ID: "oidc:alice", Name: "alice"}, "login")
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/clusters/x/status", nil)
			r.AddCookie(c)
			check := func(u *User, err error) {
				if err != nil || u.Owner() != "oidc:alice" || !u.Admin {
					b.Fatalf("session: %+v, %v", u, err)
				}
			}
			b.Run("cache-hit", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					check(sessions.FromRequest(r))
				}
			})
			b.Run("store", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sessions.Forget()
					check(sessions.FromRequest(r))
				}
			})
		})
	}
}
