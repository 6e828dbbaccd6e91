package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/store"
)

const sessionServerFailureLimit = 5

type sessionServer struct {
	srv      *httptest.Server
	db       *store.DB
	sessions *auth.Sessions
}

// newSessionServer serves the API with browser sessions and API tokens in
// a real store; alice and bob authenticate with static tokens, and alice
// also has API tokens "rw" and "ro" (returned).
func newSessionServer(t *testing.T) (*sessionServer, map[string]string) {
	t.Helper()
	return newSessionServerOver(t, false)
}

// newSessionServerOver is newSessionServer, over HTTPS when tls is set:
// then the gateway's public URL is the server's, and the API cookie is on.
func newSessionServerOver(t *testing.T, tls bool) (*sessionServer, map[string]string) {
	t.Helper()
	ctx := context.Background()
	sessions, db := authtest.StoredSessions(t)
	secrets := map[string]string{}
	for _, ro := range []bool{false, true} {
		id := map[bool]string{false: "rw", true: "ro"}[ro]
		secrets[id] = auth.NewToken(auth.APITokenPrefix)
		if err := db.CreateToken(ctx, &store.APIToken{ID: id, Owner: "alice", Name: id, Hash: auth.HashToken(secrets[id]), ReadOnly: ro, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	core := &fakeCore{clusters: map[string]*store.Cluster{
		"run1": {Name: "run1", Owner: "alice", Status: store.Running, Options: `{}`, CreatedAt: time.UnixMilli(5000)},
	}, scaled: map[string]int{}}
	// The static tokens first: the chain answers with the last
	// authenticator's refusal, which for gw_ tokens must be the store's.
	a := auth.Chain{auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}}), auth.NewAPITokens(db, nil, nil)}
	ss := &sessionServer{db: db, sessions: sessions}
	ss.srv = httptest.NewUnstartedServer(nil)
	cfg := Config{Version: "test"}
	if tls {
		cfg.PublicURL = "https://" + ss.srv.Listener.Addr().String()
	}
	api := New(cfg, core, a, sessions, nil)
	api.SetTokenStore(db)
	api.SetSessionStore(db)
	api.SetFailureLimiter(auth.NewFailureLimiter(sessionServerFailureLimit))
	ss.srv.Config.Handler = api
	if tls {
		if err := api.SetAPICookie(make([]byte, 32), true); err != nil {
			t.Fatal(err)
		}
		ss.srv.StartTLS()
	} else {
		ss.srv.Start()
	}
	t.Cleanup(ss.srv.Close)
	return ss, secrets
}

// signIn follows a dashboard link made with token and returns the session
// cookie.
func (ss *sessionServer) signIn(t *testing.T, token string) *http.Cookie {
	t.Helper()
	_, form := ss.link(t, token)
	req, _ := http.NewRequest("POST", ss.srv.URL+"/auth/ticket", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{Transport: ss.srv.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == auth.SessionCookie {
			return c
		}
	}
	t.Fatalf("sign-in set no session cookie: %d", resp.StatusCode)
	return nil
}

// dashboardUser is what the dashboard proxy would take the cookie for.
func (ss *sessionServer) dashboardUser(c *http.Cookie) (*auth.User, error) {
	r := httptest.NewRequest("GET", "/clusters/run1/status", nil)
	r.AddCookie(c)
	return ss.sessions.FromRequest(r)
}

func (ss *sessionServer) listSessions(t *testing.T, token string) []apitype.SessionJSON {
	t.Helper()
	code, _, body := do(t, ss.srv, "GET", "/api/v1/sessions", token, "")
	var out []apitype.SessionJSON
	if code != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("list sessions: %d %s", code, body)
	}
	return out
}

// TestSessionEndpoints: the caller lists and ends their own browser sessions
// only; logout and the revocation of the API token behind a session end it
// at once.
func TestSessionEndpoints(t *testing.T) {
	ss, secrets := newSessionServer(t)
	const alice, bob = "alice-token-000000", "bob-token-00000000"

	c1 := ss.signIn(t, alice)
	if _, err := ss.dashboardUser(c1); err != nil {
		t.Fatal(err)
	}
	list := ss.listSessions(t, alice)
	if len(list) != 1 || list[0].Via != "link" || list[0].ReadOnly || !strings.HasPrefix(list[0].ID, "ses_") {
		t.Fatalf("alice's sessions: %+v", list)
	}
	_, _, raw := do(t, ss.srv, "GET", "/api/v1/sessions", alice, "")
	if strings.Contains(string(raw), c1.Value) || strings.Contains(string(raw), auth.HashToken(c1.Value)) {
		t.Errorf("the session list shows the cookie or its hash: %s", raw)
	}
	if other := ss.listSessions(t, bob); len(other) != 0 {
		t.Errorf("bob sees alice's sessions: %+v", other)
	}

	// bob cannot end alice's session; alice can, and the next dashboard
	// request with the cookie is refused.
	if code, _, body := do(t, ss.srv, "DELETE", "/api/v1/sessions/"+list[0].ID, bob, ""); code != http.StatusNotFound {
		t.Errorf("bob revoking alice's session: %d %s", code, body)
	}
	if _, err := ss.dashboardUser(c1); err != nil {
		t.Fatalf("alice's session after bob's attempt: %v", err)
	}
	if code, _, body := do(t, ss.srv, "DELETE", "/api/v1/sessions/"+list[0].ID, alice, ""); code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if _, err := ss.dashboardUser(c1); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("revoked session still signs the dashboard in: %v", err)
	}
	if code, _, _ := do(t, ss.srv, "DELETE", "/api/v1/sessions/"+list[0].ID, alice, ""); code != http.StatusNotFound {
		t.Errorf("revoking an ended session: %d, want 404", code)
	}
	// A read-only token lists but does not end sessions.
	if code, _, _ := do(t, ss.srv, "DELETE", "/api/v1/sessions", secrets["ro"], ""); code != http.StatusForbidden {
		t.Errorf("read-only token ended sessions: %d", code)
	}

	// Signing out in the browser ends the session, not only the cookie.
	c2 := ss.signIn(t, alice)
	req, _ := http.NewRequest("POST", ss.srv.URL+"/auth/logout", nil)
	req.Header.Set("Origin", ss.srv.URL)
	req.AddCookie(c2)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	if _, err := ss.dashboardUser(c2); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("a copy of the cookie works after logout: %v", err)
	}

	// A session from an API token's link dies with the token.
	c4 := ss.signIn(t, secrets["rw"])
	if u, err := ss.dashboardUser(c4); err != nil || u.ReadOnly || u.TokenID != "rw" {
		t.Fatalf("session of a token: %+v %v", u, err)
	}
	if code, _, body := do(t, ss.srv, "DELETE", "/api/v1/tokens/rw", alice, ""); code != http.StatusNoContent {
		t.Fatalf("revoke token: %d %s", code, body)
	}
	if _, err := ss.dashboardUser(c4); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("the session of a revoked token still signs the dashboard in: %v", err)
	}

	// gateway logout: all of alice's sessions end, bob's stay.
	c3, c5 := ss.signIn(t, alice), ss.signIn(t, alice)
	bobs := ss.dashboardUserOf(t, bob)
	code, _, body := do(t, ss.srv, "DELETE", "/api/v1/sessions", alice, "")
	var n struct{ Revoked int }
	if code != http.StatusOK || json.Unmarshal(body, &n) != nil || n.Revoked != 2 {
		t.Errorf("end all sessions: %d %s", code, body)
	}
	for name, c := range map[string]*http.Cookie{"first": c3, "second": c5} {
		if _, err := ss.dashboardUser(c); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("%s session after ending all: %v", name, err)
		}
	}
	if _, err := ss.dashboardUser(bobs); err != nil {
		t.Errorf("ending alice's sessions ended bob's: %v", err)
	}
}

// dashboardUserOf signs user in with a session made straight from a
// ticket (bob has no cluster to make a link for).
func (ss *sessionServer) dashboardUserOf(t *testing.T, token string) *http.Cookie {
	t.Helper()
	u, err := auth.NewStaticTokens(map[string]auth.User{token: {Name: "bob"}}).Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ss.sessions.Start(context.Background(), *u, "login")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFailureLimitBeforeVerification: an address over the failure limit is
// answered 429 before its credentials are verified, so a flood of forged
// tokens costs no verification (nor, for ID tokens, key set fetches).
func TestFailureLimitBeforeVerification(t *testing.T) {
	ca := &authtest.Counting{Authenticator: auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}})}
	s := New(Config{Version: "test"}, &fakeCore{clusters: map[string]*store.Cluster{}}, ca, nil, nil)
	const limit = 5
	s.SetFailureLimiter(auth.NewFailureLimiter(limit))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	counts := map[int]int{}
	for i := 0; i < 300; i++ {
		code, _, _ := do(t, srv, "GET", "/api/v1/clusters/", "eyJforged.token."+strings.Repeat("x", i), "")
		counts[code]++
	}
	// limit failures, then the one that crosses the limit: 429, verified;
	// every later one: 429 without verification.
	if counts[http.StatusUnauthorized] != limit || counts[http.StatusTooManyRequests] != 300-limit {
		t.Errorf("answers %v, want %d × 401 and %d × 429", counts, limit, 300-limit)
	}
	if n := ca.Count(); n != limit+1 {
		t.Errorf("%d of 300 forged tokens were verified, want %d", n, limit+1)
	}
	// The address waits out the window, whatever it sends.
	if code, _, _ := do(t, srv, "GET", "/api/v1/clusters/", "alice-token-000000", ""); code != http.StatusTooManyRequests {
		t.Errorf("a blocked address: %d, want 429", code)
	}
	if n := ca.Count(); n != limit+1 {
		t.Errorf("a blocked address's credentials were verified")
	}
}

// TestEndedCredentialsAreNotGuesses: a revoked or expired API token is a
// genuine credential, not a guess: a script still polling with one gets 401
// saying why, and does not get its address blocked for everyone behind it.
// Unknown tokens still count.
func TestEndedCredentialsAreNotGuesses(t *testing.T) {
	ss, secrets := newSessionServer(t)
	if err := ss.db.RevokeToken(context.Background(), "alice", "rw"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*sessionServerFailureLimit; i++ {
		if code, _, body := do(t, ss.srv, "GET", "/api/v1/clusters/", secrets["rw"], ""); code != http.StatusUnauthorized || !strings.Contains(string(body), "revoked") {
			t.Fatalf("revoked token, request %d: %d %s", i, code, body)
		}
	}
	if code, _, _ := do(t, ss.srv, "GET", "/api/v1/clusters/", secrets["ro"], ""); code != http.StatusOK {
		t.Errorf("a valid token after a revoked one's requests: %d", code)
	}
	counts := map[int]int{}
	for i := 0; i <= sessionServerFailureLimit; i++ {
		code, _, _ := do(t, ss.srv, "GET", "/api/v1/clusters/", auth.APITokenPrefix+"guess"+strings.Repeat("x", i), "")
		counts[code]++
	}
	if counts[http.StatusUnauthorized] != sessionServerFailureLimit || counts[http.StatusTooManyRequests] != 1 {
		t.Errorf("guesses: %v, want %d × 401 then 429", counts, sessionServerFailureLimit)
	}
}

// A read-only token may make a dashboard (sign-in) link, which changes no
// cluster; the session it starts is read-only, as the token is, and ends
// with the token; a read-write token's stays read-write. Regression test:
// a read-only token's link must never yield a read-write session.
func TestReadOnlyTokenSession(t *testing.T) {
	ss, secrets := newSessionServer(t)
	cases := []struct {
		token    string
		readOnly bool
	}{{"ro", true}, {"rw", false}}
	for _, c := range cases {
		cookie := ss.signIn(t, secrets[c.token])
		u, err := ss.dashboardUser(cookie)
		if err != nil {
			t.Fatalf("%s token's session: %v", c.token, err)
		}
		if u.ReadOnly != c.readOnly || u.TokenID != c.token || u.Owner() != "alice" {
			t.Errorf("%s token's session: read-only %t, token %q, owner %q; want read-only %t, token %q, alice",
				c.token, u.ReadOnly, u.TokenID, u.Owner(), c.readOnly, c.token)
		}
	}
	ro := ss.signIn(t, secrets["ro"])
	list := ss.listSessions(t, "alice-token-000000")
	var sawRO bool
	for _, se := range list {
		sawRO = sawRO || se.ReadOnly
	}
	if !sawRO {
		t.Errorf("no read-only session listed: %+v", list)
	}
	// The link is the only POST a read-only token may make.
	if code, _, body := do(t, ss.srv, "POST", "/api/v1/clusters/run1/scale", secrets["ro"], `{"count":2}`); code != http.StatusForbidden || !strings.Contains(string(body), "read-only") {
		t.Errorf("a read-only token scaled: %d %s", code, body)
	}
	// Revoking the token ends its sessions.
	if code, _, body := do(t, ss.srv, "DELETE", "/api/v1/tokens/ro", "alice-token-000000", ""); code != http.StatusNoContent {
		t.Fatalf("revoke token: %d %s", code, body)
	}
	if _, err := ss.dashboardUser(ro); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("the session of a revoked read-only token still works: %v", err)
	}
}
