package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
)

// TestDashboardAuthLimitsBeforeVerification: the dashboard proxy's
// authentication refuses an address over the failure limit before verifying
// its credentials, bearer tokens and session cookies alike; valid sessions
// from other addresses still work.
func TestDashboardAuthLimitsBeforeVerification(t *testing.T) {
	ctx := context.Background()
	sessions, _ := authtest.StoredSessions(t)
	ca := &authtest.Counting{Authenticator: auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}})}
	const limit = 3
	check := dashboardAuth(ca, sessions, auth.NewFailureLimiter(limit))
	req := func(addr, bearer string, c *http.Cookie) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/clusters/x/status", nil)
		r.RemoteAddr = addr + ":40000"
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		if c != nil {
			r.AddCookie(c)
		}
		return r
	}
	for i := 0; i < 100; i++ {
		if _, err := check(req("192.0.2.1", "forged-"+strings.Repeat("x", i), nil)); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("forged token %d: %v", i, err)
		}
	}
	if n := ca.Count(); n != limit+1 {
		t.Errorf("%d of 100 forged tokens were verified, want %d", n, limit+1)
	}
	alice, err := sessions.Start(ctx, auth.User{Name: "alice"}, "login")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(req("192.0.2.1", "", alice)); !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "too many") {
		t.Errorf("a session from the blocked address: %v", err)
	}
	if u, err := check(req("192.0.2.2", "", alice)); err != nil || u.Name != "alice" || u.Via != "session" {
		t.Errorf("a session from another address: %+v %v", u, err)
	}

	// A dashboard tab still polling after its session ended is refused
	// each time, but is no guess: the address is not blocked for it.
	if err := sessions.End(req("192.0.2.3", "", alice)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10*limit; i++ {
		if _, err := check(req("192.0.2.3", "", alice)); !errors.Is(err, auth.ErrEnded) {
			t.Fatalf("ended session, request %d: %v", i, err)
		}
	}
	bob, err := sessions.Start(ctx, auth.User{Name: "bob"}, "login")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := check(req("192.0.2.3", "", bob)); err != nil || u.Name != "bob" {
		t.Errorf("another user's session from the address of an ended one: %+v %v", u, err)
	}
}
