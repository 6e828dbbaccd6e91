package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// The JupyterHub authenticator against a stand-in hub (authtest.Hub): the
// integration tests (integration/hub_test.go) run the same against the
// real JupyterHub.

const (
	aliceTok   = "alice0123456789abcdef0123456789ab"
	bobTok     = "bob00123456789abcdef0123456789ab"
	noScopeTok = "carol123456789abcdef0123456789ab"
	allSvcTok  = "dave0123456789abcdef0123456789ab"
)

func newHub(t *testing.T) *authtest.Hub {
	t.Helper()
	h := authtest.NewHub(t, "http://gateway.test/auth/jupyterhub/callback")
	h.AddToken(aliceTok, authtest.HubToken{Kind: "user", Name: "alice", Groups: []string{"hub-ops", "team"}, Scopes: []string{authtest.HubAccess, "read:users:name!user=alice"}})
	h.AddToken(bobTok, authtest.HubToken{Kind: "user", Name: "bob", Scopes: []string{authtest.HubAccess}})
	// A token the hub gave another service (or another user's server):
	// it names its user, but does not reach the gateway's service.
	h.AddToken(noScopeTok, authtest.HubToken{Kind: "user", Name: "carol", Scopes: []string{"access:services!service=other", "read:users:name!user=carol"}})
	// An admin's token: access to every service.
	h.AddToken(allSvcTok, authtest.HubToken{Kind: "user", Name: "dave", Groups: []string{}, Scopes: []string{"access:services", "admin:users"}})
	return h
}

func newHubAuth(t *testing.T, h *authtest.Hub, mod func(*auth.JupyterHubConfig)) *auth.JupyterHub {
	t.Helper()
	cfg := auth.JupyterHubConfig{APIURL: h.APIURL(), APIToken: authtest.HubServiceToken, AdminGroups: []string{"hub-admins"}, AdminUsers: []string{"jupyterhub:bob"}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := auth.NewJupyterHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestJupyterHubTokens: whose a token is, as the hub says; which tokens
// the hub is never asked about; which answers refuse.
func TestJupyterHubTokens(t *testing.T) {
	h := newHub(t)
	h.AddToken("erin0123456789abcdef0123456789ab", authtest.HubToken{Kind: "user", Name: "erin", Groups: []string{"hub-admins"}, Scopes: []string{authtest.HubAccess}})
	cases := []struct {
		name, tok string
		mod       func(*auth.JupyterHubConfig)
		wantID    string
		wantErr   error
		errHas    string
		groups    []string
		admin     bool
		asks      int // hub requests carrying tok
	}{
		{name: "a user's token", tok: aliceTok, wantID: "jupyterhub:alice", groups: []string{"hub-ops", "team"}, asks: 1},
		{name: "an admin by the hub's group", tok: "erin0123456789abcdef0123456789ab", wantID: "jupyterhub:erin", groups: []string{"hub-admins"}, admin: true, asks: 1},
		{name: "an admin by id", tok: bobTok, wantID: "jupyterhub:bob", admin: true, asks: 1},
		{name: "access to all services", tok: allSvcTok, wantID: "jupyterhub:dave", asks: 1},
		{name: "the hub names OIDC subjects", tok: aliceTok, mod: func(c *auth.JupyterHubConfig) { c.Identity = auth.HubIdentityOIDCSubject }, wantID: "oidc:alice", groups: []string{"hub-ops", "team"}, asks: 1},
		{name: "another service's token for a user", tok: noScopeTok, wantErr: auth.ErrInvalid, errHas: "access:services!service=gateway", asks: 1},
		{name: "a service's token", tok: authtest.HubServiceToken, wantErr: auth.ErrInvalid, errHas: "a service's, not a user's", asks: 2}, // and once to learn the service's name
		{name: "an unknown token", tok: "feedfacefeedfacefeedfacefeedface", wantErr: auth.ErrInvalid, errHas: "does not accept this token", asks: 1},
		{name: "the gateway's own token", tok: auth.APITokenPrefix + "whatever", wantErr: auth.ErrNoCredentials},
		{name: "an ID token", tok: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", wantErr: auth.ErrNoCredentials},
		{name: "a control character", tok: "abc\r\nX-Evil: 1", wantErr: auth.ErrInvalid, errHas: "not a token"},
		{name: "a space", tok: "abc def", wantErr: auth.ErrInvalid, errHas: "not a token"},
		{name: "not ASCII", tok: "abcé", wantErr: auth.ErrInvalid, errHas: "not a token"},
		{name: "too long", tok: strings.Repeat("a", 4097), wantErr: auth.ErrInvalid, errHas: "not a token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.Asks(tc.tok)
			a := newHubAuth(t, h, tc.mod)
			u, err := a.Authenticate(context.Background(), tc.tok)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.errHas) || u != nil {
					t.Fatalf("got %+v, %v; want %v saying %q", u, err, tc.wantErr, tc.errHas)
				}
				if errors.Is(err, auth.ErrEnded) || strings.Contains(err.Error(), tc.tok) {
					t.Errorf("a refused hub token must count as a failure and not be echoed: %v", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				want := tc.groups
				if u.Owner() != tc.wantID || u.Via != "jupyterhub" || !slices.Equal(u.Groups, want) || u.Admin != tc.admin {
					t.Fatalf("got %+v; want id %s, groups %v, admin %v", u, tc.wantID, want, tc.admin)
				}
				if u.MayCreateTokens() {
					t.Error("a hub token may create API tokens")
				}
			}
			if got := h.Asks(tc.tok) - before; got != tc.asks {
				t.Errorf("the hub was asked %d times with the token, want %d", got, tc.asks)
			}
		})
	}
}

// TestJupyterHubRevocation: a token revoked on the hub keeps working from
// the cache until CacheTTL after the hub last vouched for it, and no
// longer; the default TTL keeps that within the 30 seconds docs/operating.md
// promises.
func TestJupyterHubRevocation(t *testing.T) {
	if auth.DefaultHubCacheTTL > 30*time.Second {
		t.Fatalf("DefaultHubCacheTTL %s: a revoked hub token must stop within 30s", auth.DefaultHubCacheTTL)
	}
	h := newHub(t)
	clock := testutil.NewClock(time.Now())
	a := newHubAuth(t, h, func(c *auth.JupyterHubConfig) { c.Now = clock.Now }) // the default TTL
	if a.CacheTTL() != auth.DefaultHubCacheTTL {
		t.Fatalf("TTL %s, want the default %s", a.CacheTTL(), auth.DefaultHubCacheTTL)
	}
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, aliceTok); err != nil {
		t.Fatal(err)
	}
	h.Revoke(aliceTok)
	clock.Advance(auth.DefaultHubCacheTTL - time.Millisecond)
	if u, err := a.Authenticate(ctx, aliceTok); err != nil || u.Name != "alice" {
		t.Fatalf("within the TTL: %v %v; want the cached answer", u, err)
	}
	if n := h.Asks(aliceTok); n != 1 {
		t.Fatalf("the hub was asked %d times within the TTL, want once", n)
	}
	clock.Advance(time.Millisecond)
	if _, err := a.Authenticate(ctx, aliceTok); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("at the TTL: %v; want the revocation seen", err)
	}
	if n := h.Asks(aliceTok); n != 2 {
		t.Fatalf("the hub was asked %d times, want twice", n)
	}
}

// TestJupyterHubForgedTokenCost: a forged token costs the hub one request
// per TTL, however often and however concurrently it is tried.
func TestJupyterHubForgedTokenCost(t *testing.T) {
	h := newHub(t)
	clock := testutil.NewClock(time.Now())
	a := newHubAuth(t, h, func(c *auth.JupyterHubConfig) { c.Now = clock.Now; c.CacheTTL = 5 * time.Second })
	ctx := context.Background()
	const forged = "0000000000000000000000000000dead"
	// Learn the service's name first, so the hold below holds the forged
	// token's request.
	if _, err := a.Authenticate(ctx, bobTok); err != nil {
		t.Fatal(err)
	}

	arrived := make(chan string, 64)
	release := h.Hold(arrived)
	const callers = 20
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.Authenticate(ctx, forged)
			errs <- err
		}()
	}
	select {
	case <-arrived:
	case <-time.After(testutil.HangBound):
		t.Fatal("no request reached the hub")
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("a forged token: %v", err)
		}
	}
	for range 50 {
		if _, err := a.Authenticate(ctx, forged); !errors.Is(err, auth.ErrInvalid) {
			t.Fatal(err)
		}
	}
	if n := h.Asks(forged); n != 1 {
		t.Fatalf("the hub was asked %d times about the forged token within the TTL, want once", n)
	}
	clock.Advance(5 * time.Second)
	if _, err := a.Authenticate(ctx, forged); !errors.Is(err, auth.ErrInvalid) {
		t.Fatal(err)
	}
	if n := h.Asks(forged); n != 2 {
		t.Fatalf("after the TTL the hub was asked %d times in all, want 2", n)
	}
}

// TestJupyterHubUnavailable: a hub that does not answer, or answers
// nonsense, is ErrUnavailable (the API's 503), never ErrInvalid, and is
// asked again at the next request: once it answers, the token works.
func TestJupyterHubUnavailable(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(*authtest.Hub)
	}{
		{"connections closed unanswered", func(h *authtest.Hub) { h.SetHang(true) }},
		{"server error", func(h *authtest.Hub) { h.SetStatus(http.StatusBadGateway) }},
		{"too many requests", func(h *authtest.Hub) { h.SetStatus(http.StatusTooManyRequests) }},
		{"stopped", func(h *authtest.Hub) { h.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t)
			a := newHubAuth(t, h, nil)
			tc.breakIt(h)
			for range 2 {
				_, err := a.Authenticate(context.Background(), aliceTok)
				if !errors.Is(err, auth.ErrUnavailable) || errors.Is(err, auth.ErrInvalid) {
					t.Fatalf("got %v; want ErrUnavailable and not ErrInvalid", err)
				}
				if strings.Contains(err.Error(), aliceTok) {
					t.Fatalf("the error shows the token: %v", err)
				}
			}
			if a.Remembered() != 0 {
				t.Errorf("%d answers remembered of a hub that did not answer", a.Remembered())
			}
		})
	}
	t.Run("recovers", func(t *testing.T) {
		h := newHub(t)
		a := newHubAuth(t, h, nil)
		h.SetStatus(http.StatusServiceUnavailable)
		if _, err := a.Authenticate(context.Background(), aliceTok); !errors.Is(err, auth.ErrUnavailable) {
			t.Fatal(err)
		}
		h.SetStatus(0)
		if u, err := a.Authenticate(context.Background(), aliceTok); err != nil || u.Name != "alice" {
			t.Fatalf("after the hub is back: %v %v", u, err)
		}
	})
	t.Run("not a user model", func(t *testing.T) {
		hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<html>a login page</html>")
		}))
		defer hub.Close()
		a, err := auth.NewJupyterHub(auth.JupyterHubConfig{APIURL: hub.URL + "/hub/api", APIToken: authtest.HubServiceToken})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(context.Background(), aliceTok); !errors.Is(err, auth.ErrUnavailable) {
			t.Fatalf("got %v; want ErrUnavailable", err)
		}
	})
	t.Run("the gateway's own token refused", func(t *testing.T) {
		h := newHub(t)
		a := newHubAuth(t, h, func(c *auth.JupyterHubConfig) { c.APIToken = "not-the-service-token-0123456789" })
		_, err := a.Authenticate(context.Background(), aliceTok)
		if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "auth.jupyterhub.api_token") {
			t.Fatalf("got %v; want ErrUnavailable naming auth.jupyterhub.api_token", err)
		}
		if h.Asks(aliceTok) != 0 {
			t.Error("the user's token was sent before the service was known")
		}
	})
	t.Run("a user's token as the gateway's", func(t *testing.T) {
		h := newHub(t)
		a := newHubAuth(t, h, func(c *auth.JupyterHubConfig) { c.APIToken = bobTok })
		if _, err := a.Authenticate(context.Background(), aliceTok); !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "gateway's hub service") {
			t.Fatalf("got %v; want ErrUnavailable saying the token must be the service's", err)
		}
	})
}

// TestJupyterHubCacheBound: answers are kept in bounded memory, forged
// tokens' included.
func TestJupyterHubCacheBound(t *testing.T) {
	h := newHub(t)
	a := newHubAuth(t, h, nil)
	ctx := context.Background()
	for i := range auth.MaxHubAnswers + 50 {
		if _, err := a.Authenticate(ctx, fmt.Sprintf("forged%026d", i)); !errors.Is(err, auth.ErrInvalid) {
			t.Fatal(err)
		}
	}
	if n := a.Remembered(); n > auth.MaxHubAnswers {
		t.Fatalf("%d answers kept, more than %d", n, auth.MaxHubAnswers)
	}
	if u, err := a.Authenticate(ctx, aliceTok); err != nil || u.Name != "alice" {
		t.Fatalf("a good token after the flood: %v %v", u, err)
	}
}

// TestJupyterHubSessions: the hub's word on a user's groups is recorded,
// so that a browser session begun by a hub sign-in has them; such a
// session may create API tokens (a sign-in), one begun by a hub token's
// dashboard link may not (a token's).
func TestJupyterHubSessions(t *testing.T) {
	h := newHub(t)
	sessions, db := authtest.StoredSessions(t)
	a := newHubAuth(t, h, func(c *auth.JupyterHubConfig) { c.Users = db })
	ctx := context.Background()
	u, err := a.Authenticate(ctx, aliceTok)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := db.GetUserClaims(ctx, "jupyterhub:alice")
	if err != nil || claims.Name != "alice" || !slices.Equal(claims.Groups, []string{"hub-ops", "team"}) {
		t.Fatalf("recorded claims %+v, %v", claims, err)
	}
	for _, tc := range []struct {
		via, stored string
		mint        bool
	}{
		{auth.SessionViaHub, auth.SessionViaHub, true},
		{"link", auth.SessionViaHubLink, false},
	} {
		c, err := sessions.Start(ctx, *u, tc.via)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(c)
		su, err := sessions.FromRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		if su.Owner() != "jupyterhub:alice" || su.SessionVia != tc.stored || !slices.Equal(su.Groups, []string{"hub-ops", "team"}) || su.MayCreateTokens() != tc.mint {
			t.Errorf("session started via %s: %+v; want via %s, the hub's groups, may create tokens %v", tc.via, su, tc.stored, tc.mint)
		}
	}
}
