package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func mustSession(t *testing.T, db *store.DB, se *store.Session) *store.Session {
	t.Helper()
	if err := db.CreateSession(context.Background(), se); err != nil {
		t.Fatalf("CreateSession(%s): %v", se.ID, err)
	}
	return se
}

func sessionIDs(t *testing.T, db *store.DB, owner string) []string {
	t.Helper()
	ss, err := db.ListSessions(context.Background(), owner)
	if err != nil {
		t.Fatalf("ListSessions(%s): %v", owner, err)
	}
	var ids []string
	for _, s := range ss {
		if s.Owner != owner {
			t.Errorf("ListSessions(%s) returned %s of %s", owner, s.ID, s.Owner)
		}
		ids = append(ids, s.ID)
	}
	return ids
}

// TestSessions: sessions are found by hash with their owner's claims, listed
// per owner while active, and end by revocation, logout (by hash), expiry,
// "end all mine", or the revocation of the API token that made them.
func TestSessions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		now := clk.Now()
		exp := now.Add(8 * time.Hour)
		mustCreateToken(t, db, newToken("tok-1", "alice"))
		a1 := mustSession(t, db, &store.Session{ID: "s-a1", Hash: tokenHash("a1"), Owner: "alice", OwnerName: "Alice", Via: "login", ExpiresAt: exp})
		clk.Advance(time.Second)
		mustSession(t, db, &store.Session{ID: "s-a2", Hash: tokenHash("a2"), Owner: "alice", Via: "link", TokenID: "tok-1", ReadOnly: true, ExpiresAt: exp})
		clk.Advance(time.Second)
		mustSession(t, db, &store.Session{ID: "s-a3", Hash: tokenHash("a3"), Owner: "alice", Via: "link", ExpiresAt: now.Add(time.Hour)})
		mustSession(t, db, &store.Session{ID: "s-b1", Hash: tokenHash("b1"), Owner: "bob", Via: "login", ExpiresAt: exp})

		got, err := db.SessionByHash(ctx, tokenHash("a1"))
		if err != nil || got.ID != "s-a1" || got.Owner != "alice" || got.OwnerName != "Alice" || got.Via != "login" || got.ReadOnly ||
			!got.CreatedAt.Equal(a1.CreatedAt) || !got.ExpiresAt.Equal(exp) || !got.RevokedAt.IsZero() || got.Claims != nil {
			t.Fatalf("SessionByHash = %+v, %v", got, err)
		}
		if got, err := db.SessionByHash(ctx, tokenHash("a2")); err != nil || !got.ReadOnly || got.TokenID != "tok-1" {
			t.Fatalf("read-only session from a token = %+v, %v", got, err)
		}
		if _, err := db.SessionByHash(ctx, tokenHash("nobody")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown hash: %v", err)
		}
		if err := db.CreateSession(ctx, &store.Session{ID: "s-dup", Hash: tokenHash("a1"), Owner: "mallory", ExpiresAt: exp}); err == nil {
			t.Error("a second session with the same hash was stored")
		}
		if err := db.CreateSession(ctx, &store.Session{ID: "s-noexp", Hash: tokenHash("x"), Owner: "alice"}); err == nil {
			t.Error("a session without expiry was stored")
		}

		if ids := sessionIDs(t, db, "alice"); !slices.Equal(ids, []string{"s-a3", "s-a2", "s-a1"}) {
			t.Errorf("alice's sessions: %v", ids)
		}
		if ids := sessionIDs(t, db, "bob"); !slices.Equal(ids, []string{"s-b1"}) {
			t.Errorf("bob's sessions: %v", ids)
		}

		// Another owner cannot revoke alice's session.
		if err := db.RevokeSession(ctx, "bob", "s-a1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("bob revoked alice's session: %v", err)
		}
		if err := db.RevokeSession(ctx, "alice", "s-a1"); err != nil {
			t.Fatal(err)
		}
		if err := db.RevokeSession(ctx, "alice", "s-a1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoking an ended session: %v, want ErrNotFound", err)
		}
		if got, _ := db.SessionByHash(ctx, tokenHash("a1")); got.RevokedAt.IsZero() {
			t.Error("revoked session has no revocation time")
		}

		// Revoking the token that made s-a2 ends it.
		if err := db.RevokeToken(ctx, "alice", "tok-1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.SessionByHash(ctx, tokenHash("a2")); got.RevokedAt.IsZero() {
			t.Error("the session of a revoked token lives on")
		}
		// ...and no new session comes from it (a link redeemed after the
		// revocation), nor from another owner's or an unknown token.
		mustCreateToken(t, db, newToken("tok-b", "bob"))
		for _, tc := range []struct{ owner, token string }{{"alice", "tok-1"}, {"alice", "tok-b"}, {"alice", "tok-none"}} {
			err := db.CreateSession(ctx, &store.Session{ID: "s-" + tc.token, Hash: tokenHash("late-" + tc.token), Owner: tc.owner, TokenID: tc.token, ExpiresAt: exp})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("session of %s's token %s: %v, want ErrNotFound", tc.owner, tc.token, err)
			}
		}
		// Expiry: s-a3 ends an hour in.
		clk.Advance(time.Hour)
		if ids := sessionIDs(t, db, "alice"); len(ids) != 0 {
			t.Errorf("alice's sessions after revocations and expiry: %v", ids)
		}

		// Logout by hash ends the cookie's session; unknown hashes are fine.
		if err := db.RevokeSessionByHash(ctx, tokenHash("b1")); err != nil {
			t.Fatal(err)
		}
		if err := db.RevokeSessionByHash(ctx, tokenHash("nobody")); err != nil {
			t.Errorf("logout of an unknown session: %v", err)
		}
		if got, _ := db.SessionByHash(ctx, tokenHash("b1")); got.RevokedAt.IsZero() {
			t.Error("logout did not end the session")
		}

		// End all of an owner's sessions, and nobody else's.
		mustSession(t, db, &store.Session{ID: "s-c1", Hash: tokenHash("c1"), Owner: "carol", ExpiresAt: clk.Now().Add(time.Hour)})
		mustSession(t, db, &store.Session{ID: "s-c2", Hash: tokenHash("c2"), Owner: "carol", ExpiresAt: clk.Now().Add(time.Hour)})
		mustSession(t, db, &store.Session{ID: "s-b2", Hash: tokenHash("b2"), Owner: "bob", ExpiresAt: clk.Now().Add(time.Hour)})
		if n, err := db.RevokeSessions(ctx, "carol"); err != nil || n != 2 {
			t.Errorf("RevokeSessions(carol) = %d, %v; want 2", n, err)
		}
		if ids := sessionIDs(t, db, "bob"); !slices.Equal(ids, []string{"s-b2"}) {
			t.Errorf("bob's sessions after carol's ended: %v", ids)
		}

		// Ended sessions are swept a day later.
		clk.Advance(25 * time.Hour)
		mustSession(t, db, &store.Session{ID: "s-new", Hash: tokenHash("new"), Owner: "bob", ExpiresAt: clk.Now().Add(time.Hour)})
		if _, err := db.SessionByHash(ctx, tokenHash("a1")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a session ended a day ago is still stored: %v", err)
		}
	})
}

// TestUserClaims: the claims of the latest issued ID token are kept per
// user, ordered by the token's issue time: a newer token is written even
// with the same claims (else an older token with other claims, used later,
// would look newer), an older or the same token never is; they come along
// with tokens and sessions.
func TestUserClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		t0 := clk.Now()
		record := func(name string, groups []string, at time.Time) bool {
			t.Helper()
			wrote, err := db.RecordUserClaims(ctx, &store.UserClaims{ID: "oidc:a", Name: name, Email: "a@example.com", Groups: groups, ClaimsAt: at})
			if err != nil {
				t.Fatal(err)
			}
			return wrote
		}
		if !record("alice", []string{"ops", "data", "ops"}, t0) {
			t.Fatal("first claims not written")
		}
		c, err := db.GetUserClaims(ctx, "oidc:a")
		if err != nil || c.Name != "alice" || !slices.Equal(c.Groups, []string{"data", "ops"}) || !c.ClaimsAt.Equal(t0) {
			t.Fatalf("claims: %+v %v", c, err)
		}
		steps := []struct {
			name   string
			groups []string
			at     time.Time
			wrote  bool
		}{
			{"the same token again", []string{"ops", "data"}, t0, false},
			{"the same claims issued a second later", []string{"ops", "data"}, t0.Add(time.Second), true},
			{"the same claims issued two minutes later", []string{"data", "ops"}, t0.Add(2 * time.Minute), true},
			// Issued between the two above, used after them (issue 32, 3).
			{"an older token with other groups", []string{"admins"}, t0.Add(time.Minute), false},
			{"changed groups", []string{"data"}, t0.Add(3 * time.Minute), true},
			{"an older token with more groups", []string{"data", "ops"}, t0.Add(2*time.Minute + time.Second), false},
		}
		for _, s := range steps {
			if got := record("alice", s.groups, s.at); got != s.wrote {
				t.Errorf("%s: wrote=%v, want %v", s.name, got, s.wrote)
			}
		}
		c, _ = db.GetUserClaims(ctx, "oidc:a")
		if !slices.Equal(c.Groups, []string{"data"}) || !c.ClaimsAt.Equal(t0.Add(3*time.Minute)) {
			t.Errorf("claims after the steps: %+v", c)
		}
		if _, err := db.RecordUserClaims(ctx, &store.UserClaims{ID: "oidc:a", Groups: []string{"admins"}}); err == nil || !strings.Contains(err.Error(), "no issue time") {
			t.Errorf("claims without an issue time: %v", err)
		}
		if _, err := db.GetUserClaims(ctx, "oidc:nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown user: %v", err)
		}

		// Tokens and sessions come with their owner's claims, others' never.
		tok := newToken("tok-a", "oidc:a")
		mustCreateToken(t, db, tok)
		mustCreateToken(t, db, newToken("tok-b", "oidc:b"))
		if got := mustToken(t, db, tok.Hash); got.Claims == nil || got.Claims.ID != "oidc:a" || !slices.Equal(got.Claims.Groups, []string{"data"}) {
			t.Errorf("token's claims: %+v", got.Claims)
		}
		if got := mustToken(t, db, tokenHash("secret-tok-b")); got.Claims != nil {
			t.Errorf("a user who never logged in has claims: %+v", got.Claims)
		}
		mustSession(t, db, &store.Session{ID: "s", Hash: tokenHash("s"), Owner: "oidc:a", ExpiresAt: clk.Now().Add(time.Hour)})
		if got, err := db.SessionByHash(ctx, tokenHash("s")); err != nil || got.Claims == nil || got.Claims.Name != "alice" {
			t.Errorf("session's claims: %+v %v", got, err)
		}
	})
}
