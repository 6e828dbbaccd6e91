package auth

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// sessionEnv is two replicas' Sessions on one store, with one clock.
type sessionEnv struct {
	db   *store.DB
	a, b *Sessions
	now  time.Time
}

func newSessionEnv(t *testing.T, url string, access Access) *sessionEnv {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &sessionEnv{db: db, now: time.Now().Truncate(time.Millisecond)}
	clock := func() time.Time { return e.now }
	db.SetClock(clock)
	key := bytes.Repeat([]byte("k"), 32)
	for _, s := range []**Sessions{&e.a, &e.b} {
		*s, err = NewSessions(key, 8*time.Hour, true)
		if err != nil {
			t.Fatal(err)
		}
		(*s).SetClock(clock)
		(*s).SetStore(db, access)
	}
	return e
}

func cookieRequest(c *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/clusters/x/status", nil)
	if c != nil {
		r.AddCookie(c)
	}
	return r
}

// TestSessionsInStore: a session is a store record behind an opaque cookie;
// it ends for every replica when revoked, at logout, with the API token
// that made it, and at its expiry.
func TestSessionsInStore(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		e := newSessionEnv(t, url, Access{})
		alice := User{ID: "oidc:alice", Name: "alice", Groups: []string{"ops"}, Admin: true, Via: "oidc"}

		c, err := e.a.Start(ctx, alice, "login")
		if err != nil {
			t.Fatal(err)
		}
		if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != int((8*time.Hour).Seconds()) {
			t.Errorf("cookie attributes: %+v", c)
		}
		// The cookie is an opaque secret: nothing of the user in it, and
		// the store keeps only its hash.
		if !strings.HasPrefix(c.Value, sessionPrefix) || strings.Contains(c.Value, ".") || len(c.Value) < 40 {
			t.Errorf("cookie value is not an opaque random ID: %q", c.Value)
		}
		ss, err := e.db.ListSessions(ctx, "oidc:alice")
		if err != nil || len(ss) != 1 {
			t.Fatalf("stored sessions: %v %v", ss, err)
		}
		if ss[0].Hash != HashToken(c.Value) || strings.Contains(ss[0].Hash, c.Value) || ss[0].Via != "login" {
			t.Errorf("stored session %+v", ss[0])
		}
		for name, s := range map[string]*Sessions{"replica a": e.a, "replica b": e.b} {
			u, err := s.FromRequest(cookieRequest(c))
			if err != nil || u.Owner() != "oidc:alice" || u.Name != "alice" || u.Via != "session" || u.SessionID != ss[0].ID || u.ReadOnly {
				t.Fatalf("%s: %+v %v", name, u, err)
			}
			// Groups and admin are not the cookie's: alice never logged
			// in through OIDC here, so there are no recorded groups.
			if u.Admin || len(u.Groups) != 0 {
				t.Errorf("%s: session carries groups or admin without a login record: %+v", name, u)
			}
		}

		// Revocation: refused at once by the replica that revoked (it
		// forgets its cache), and by the other within the cache's second.
		if err := e.db.RevokeSession(ctx, "oidc:alice", ss[0].ID); err != nil {
			t.Fatal(err)
		}
		e.a.Forget()
		if _, err := e.a.FromRequest(cookieRequest(c)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ended") {
			t.Errorf("revoked session accepted by the revoking replica: %v", err)
		}
		e.now = e.now.Add(sessionCacheTTL)
		if _, err := e.b.FromRequest(cookieRequest(c)); !errors.Is(err, ErrInvalid) {
			t.Errorf("revoked session accepted by the other replica after %s: %v", sessionCacheTTL, err)
		}

		// Logout ends the session of the request's cookie.
		c2, err := e.a.Start(ctx, alice, "login")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.FromRequest(cookieRequest(c2)); err != nil {
			t.Fatal(err)
		}
		if err := e.a.End(cookieRequest(c2)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.FromRequest(cookieRequest(c2)); !errors.Is(err, ErrInvalid) {
			t.Errorf("session used after logout: %v", err)
		}
		e.now = e.now.Add(sessionCacheTTL)
		if _, err := e.b.FromRequest(cookieRequest(c2)); !errors.Is(err, ErrInvalid) {
			t.Errorf("session used after logout on the other replica: %v", err)
		}
		if err := e.a.End(cookieRequest(nil)); err != nil {
			t.Errorf("logout without a session: %v", err)
		}

		// A session made by an API token's link: read-only like the token,
		// no longer than the token, and ended with it.
		tokSecret := NewToken(APITokenPrefix)
		tokExp := e.now.Add(time.Hour)
		if err := e.db.CreateToken(ctx, &store.APIToken{ID: "tok-1", Owner: "oidc:alice", Name: "ci", Hash: HashToken(tokSecret), ReadOnly: true, ExpiresAt: tokExp}); err != nil {
			t.Fatal(err)
		}
		viaToken, err := NewAPITokens(e.db, nil, nil).Authenticate(ctx, tokSecret)
		if err != nil {
			t.Fatal(err)
		}
		c3, err := e.a.Start(ctx, *viaToken, "link")
		if err != nil {
			t.Fatal(err)
		}
		if c3.MaxAge != int(time.Hour.Seconds()) {
			t.Errorf("a token's session lasts %ds, past the token's hour", c3.MaxAge)
		}
		u, err := e.b.FromRequest(cookieRequest(c3))
		if err != nil || !u.ReadOnly || u.TokenID != "tok-1" {
			t.Fatalf("session of a read-only token: %+v %v", u, err)
		}
		if err := e.db.RevokeToken(ctx, "oidc:alice", "tok-1"); err != nil {
			t.Fatal(err)
		}
		e.a.Forget()
		if _, err := e.a.FromRequest(cookieRequest(c3)); !errors.Is(err, ErrInvalid) {
			t.Errorf("session of a revoked token accepted: %v", err)
		}
		e.now = e.now.Add(sessionCacheTTL)
		if _, err := e.b.FromRequest(cookieRequest(c3)); !errors.Is(err, ErrInvalid) {
			t.Errorf("session of a revoked token accepted by the other replica: %v", err)
		}
		if _, err := e.a.Start(ctx, *viaToken, "link"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a revoked token's link started a session: %v", err)
		}

		// Expiry, even from the cache.
		c4, err := e.a.Start(ctx, alice, "link")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.FromRequest(cookieRequest(c4)); err != nil {
			t.Fatal(err)
		}
		e.now = e.now.Add(8 * time.Hour)
		if _, err := e.a.FromRequest(cookieRequest(c4)); !errors.Is(err, ErrInvalid) {
			t.Errorf("expired session accepted: %v", err)
		}

		// Unknown, forged and old stateless cookies are refused; no cookie
		// is no credentials.
		for name, v := range map[string]string{
			"unknown":          NewToken(sessionPrefix),
			"stateless signed": "eyJ2Ijp7Im4iOiJhbGljZSIsImEiOnRydWV9LCJlIjo5OTk5OTk5OTk5fQ.c2ln",
			"empty-ish":        sessionPrefix,
		} {
			if _, err := e.a.FromRequest(cookieRequest(&http.Cookie{Name: SessionCookie, Value: v})); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s cookie: %v", name, err)
			}
		}
		if _, err := e.a.FromRequest(cookieRequest(nil)); !errors.Is(err, ErrNoCredentials) {
			t.Errorf("no cookie: %v", err)
		}
	})
}

// TestSessionsNeedAStore: without a store no session begins or is accepted
// (nothing falls back to cookies that cannot be revoked).
func TestSessionsNeedAStore(t *testing.T) {
	s, err := NewSessions(bytes.Repeat([]byte("k"), 32), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(context.Background(), User{Name: "alice"}, "login"); err == nil {
		t.Error("a session began without a store")
	}
	if _, err := s.FromRequest(cookieRequest(&http.Cookie{Name: SessionCookie, Value: NewToken(sessionPrefix)})); !errors.Is(err, ErrInvalid) {
		t.Errorf("a session cookie was accepted without a store: %v", err)
	}
}
