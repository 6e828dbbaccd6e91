package auth

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// issuerAndStore is a test issuer and the store at url, on clock.
func issuerAndStore(t *testing.T, url string, clock func() time.Time) (*testIssuer, *store.DB) {
	t.Helper()
	ti := newTestIssuer(t)
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetClock(clock)
	return ti, db
}

// TestStoredCredentialsFollowLogins: API tokens and browser sessions take
// groups, and the admin rights that follow, from the user's latest OIDC
// login, not from the moment they were made. Someone removed from the admin
// group loses admin through an old token at their next login, and without
// a login for longer than the maximum age a token keeps no group-derived
// rights at all.
func TestStoredCredentialsFollowLogins(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		now := time.Now().Truncate(time.Second)
		clock := func() time.Time { return now }
		ti, db := issuerAndStore(t, url, clock)
		const maxAge = 24 * time.Hour
		newOIDC := func() *OIDC {
			o, err := NewOIDC(ctx, OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", AdminGroups: []string{"ops"}, Now: clock, Users: db})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		o := newOIDC()
		tokens := NewAPITokens(db, nil, []string{"ops"})
		tokens.SetClock(clock)
		tokens.SetGroupsMaxAge(maxAge)
		sessions, err := NewSessions(bytes.Repeat([]byte("k"), 32), 72*time.Hour, false)
		if err != nil {
			t.Fatal(err)
		}
		sessions.SetClock(clock)
		sessions.SetStore(db, Access{AdminGroups: []string{"ops"}, GroupsMaxAge: maxAge})

		login := func(groups ...string) (*User, string) {
			t.Helper()
			raw := ti.sign(t, ti.claims(now, map[string]any{"groups": groups, "exp": now.Add(time.Hour).Unix()}))
			u, err := o.Authenticate(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			return u, raw
		}
		first, oldIDToken := login("data", "ops")
		if !first.Admin {
			t.Fatalf("login with the admin group: %+v", first)
		}
		// A token and a session made now, while alice is an admin (the
		// token records her groups of the moment, as the API does).
		secret := NewToken(APITokenPrefix)
		if err := db.CreateToken(ctx, &store.APIToken{ID: "tok-1", Owner: first.Owner(), OwnerName: first.Name, Name: "ci",
			Hash: HashToken(secret), Groups: first.Groups, ExpiresAt: now.Add(366 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		cookie, err := sessions.Start(ctx, *first, "login")
		if err != nil {
			t.Fatal(err)
		}
		type want struct {
			admin  bool
			groups []string
		}
		expect := func(step string, w want) {
			t.Helper()
			// Both remember a credential for up to a second: a login's
			// groups apply within that (here the clock stands still).
			tokens.Forget()
			u, err := tokens.Authenticate(ctx, secret)
			if err != nil {
				t.Fatalf("%s: token: %v", step, err)
			}
			if u.Admin != w.admin || !slices.Equal(u.Groups, w.groups) || u.Owner() != first.Owner() || u.Subject != "sub-alice" {
				t.Errorf("%s: token grants admin=%v groups=%v (owner %s), want admin=%v groups=%v", step, u.Admin, u.Groups, u.Owner(), w.admin, w.groups)
			}
			sessions.Forget()
			su, err := sessions.FromRequest(cookieRequest(cookie))
			if err != nil {
				t.Fatalf("%s: session: %v", step, err)
			}
			if su.Admin != w.admin || !slices.Equal(su.Groups, w.groups) {
				t.Errorf("%s: session grants admin=%v groups=%v, want admin=%v groups=%v", step, su.Admin, su.Groups, w.admin, w.groups)
			}
		}
		claimsAt := func() time.Time {
			t.Helper()
			c, err := db.GetUserClaims(ctx, first.Owner())
			if err != nil {
				t.Fatal(err)
			}
			return c.ClaimsAt
		}
		expect("after the first login", want{true, []string{"data", "ops"}})

		// Removed from the admin group at the provider: the next login says so.
		now = now.Add(time.Hour)
		if u, _ := login("data"); u.Admin {
			t.Fatalf("login without the admin group is admin: %+v", u)
		}
		if !claimsAt().Equal(now) {
			t.Errorf("the record was not refreshed at the login: %v, want %v", claimsAt(), now)
		}
		expect("after a login without the admin group", want{false, []string{"data"}})

		// The ID token of the first login is still valid for a few minutes,
		// but its older claims do not overwrite the newer ones.
		if _, err := newOIDC().Authenticate(ctx, oldIDToken); err != nil {
			t.Fatal(err)
		}
		expect("after the older ID token is used again", want{false, []string{"data"}})

		// Added back, and the record refreshes at each login, also when the
		// claims do not change.
		now = now.Add(time.Hour)
		login("data", "ops")
		expect("after a login with the admin group again", want{true, []string{"data", "ops"}})
		now = now.Add(10 * time.Minute)
		login("data", "ops")
		if !claimsAt().Equal(now) {
			t.Errorf("a login with the same claims did not refresh the record: %v, want %v", claimsAt(), now)
		}

		// No login for longer than the maximum age: no groups, so no
		// group-derived admin, until the next login.
		now = now.Add(maxAge + time.Second)
		expect("after the maximum age without a login", want{false, nil})
		login("data", "ops")
		expect("after the next login", want{true, []string{"data", "ops"}})

		// Admins by identity are checked against the configuration of
		// the moment, whatever the groups; a user name (which users may
		// edit at the provider) makes nobody an admin.
		now = now.Add(maxAge + time.Second)
		for _, tc := range []struct {
			adminUsers []string
			admin      bool
		}{
			{[]string{"oidc:sub-alice"}, true},
			{[]string{"sub:sub-alice"}, true},
			{[]string{"alice"}, false},
			{nil, false},
		} {
			a := NewAPITokens(db, tc.adminUsers, []string{"ops"})
			a.SetClock(clock)
			u, err := a.Authenticate(ctx, secret)
			if err != nil || u.Admin != tc.admin {
				t.Errorf("admin_users %v: admin=%v (%v), want %v", tc.adminUsers, u != nil && u.Admin, err, tc.admin)
			}
		}
	})
}

// TestOlderIDTokenCannotRestoreGroups (issue 32, finding 3): the claims an
// API token follows are those of the latest issued ID token, not of the
// latest one seen. Y1 (users) is used and an API token made; X (admins) is
// issued but kept; Y2 (users) is issued after X and used; then X is used:
// the API token must not become admin. Y2 and X are used through the same
// gateway and through two replicas on one store.
func TestOlderIDTokenCannotRestoreGroups(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		for _, replicas := range []bool{false, true} {
			name := "one gateway"
			if replicas {
				name = "two replicas"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				t0 := time.Now().Truncate(time.Second)
				now := t0
				clock := func() time.Time { return now }
				ti, db := issuerAndStore(t, url, clock)
				// Each subtest is a user of its own: the databases are shared.
				sub := NewToken("sub-")[:16]
				newOIDC := func() *OIDC {
					o, err := NewOIDC(ctx, OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", AdminGroups: []string{"admins"}, Now: clock, Users: db})
					if err != nil {
						t.Fatal(err)
					}
					return o
				}
				first, second := newOIDC(), newOIDC()
				if !replicas {
					second = first
				}
				idToken := func(iat time.Time, group string) string {
					return ti.sign(t, ti.claims(iat, map[string]any{"sub": sub, "groups": []string{group}, "exp": iat.Add(time.Hour).Unix()}))
				}
				use := func(o *OIDC, raw string) {
					t.Helper()
					if _, err := o.Authenticate(ctx, raw); err != nil {
						t.Fatal(err)
					}
				}
				y1 := idToken(t0, "users")
				x := idToken(t0.Add(time.Minute), "admins")
				y2 := idToken(t0.Add(2*time.Minute), "users")

				use(first, y1)
				secret := NewToken(APITokenPrefix)
				if err := db.CreateToken(ctx, &store.APIToken{ID: "tok-" + sub, Owner: "oidc:" + sub, OwnerName: "alice", Name: "ci",
					Hash: HashToken(secret), ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
					t.Fatal(err)
				}
				tokens := NewAPITokens(db, nil, []string{"admins"})
				tokens.SetClock(clock)
				admin := func() bool {
					t.Helper()
					tokens.Forget()
					u, err := tokens.Authenticate(ctx, secret)
					if err != nil {
						t.Fatal(err)
					}
					return u.Admin
				}
				now = t0.Add(2 * time.Minute)
				use(first, y2)
				if admin() {
					t.Fatal("the API token is admin after logins in group users only")
				}
				now = t0.Add(3 * time.Minute)
				use(second, x)
				if admin() {
					c, _ := db.GetUserClaims(ctx, "oidc:"+sub)
					t.Errorf("after X (admins, issued at +1m) was used following Y2 (users, issued at +2m), the API token is admin: the stored claims are %v as of %v", c.Groups, c.ClaimsAt.Sub(t0))
				}
			})
		}
	})
}
