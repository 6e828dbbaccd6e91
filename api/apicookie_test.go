package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// cookieServer serves the API with the API cookie on, API tokens in a real
// store (alice's "rw" and read-only "ro") and a static token for alice.
// hits counts the requests that reach the server.
type cookieServer struct {
	srv     *httptest.Server
	api     *Server
	db      *store.DB
	core    *fakeCore
	secrets map[string]string
	hits    atomic.Int64
}

func newCookieServer(t *testing.T, cookie bool) *cookieServer {
	return newCookieServerTLS(t, cookie, false)
}

// newCookieServerTLS is newCookieServer for a gateway that says it serves
// HTTPS (secure), which marks the cookie Secure.
func newCookieServerTLS(t *testing.T, cookie, secure bool) *cookieServer {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cs := &cookieServer{db: db, secrets: map[string]string{}}
	for id, ro := range map[string]bool{"rw": false, "ro": true} {
		cs.secrets[id] = auth.NewToken(auth.APITokenPrefix)
		if err := db.CreateToken(ctx, &store.APIToken{ID: id, Owner: "alice", Name: id, Hash: auth.HashToken(cs.secrets[id]), ReadOnly: ro, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	cs.core = &fakeCore{clusters: map[string]*store.Cluster{
		"run1": {Name: "run1", Owner: "alice", Status: store.Running, Options: `{}`, CreatedAt: time.UnixMilli(5000)},
	}, scaled: map[string]int{}}
	a := auth.Chain{auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice", Expires: time.Now().Add(time.Minute)}}), auth.NewAPITokens(db, nil, nil)}
	cs.srv = httptest.NewUnstartedServer(nil)
	cs.api = New(Config{Version: "test", PublicURL: "http://" + cs.srv.Listener.Addr().String()}, cs.core, a, nil, nil)
	cs.api.SetTokenStore(db)
	if cookie {
		if err := cs.api.SetAPICookie(make([]byte, 32), secure); err != nil {
			t.Fatal(err)
		}
	}
	cs.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		cs.api.ServeHTTP(w, r)
	})
	cs.srv.Start()
	t.Cleanup(cs.srv.Close)
	return cs
}

// upstreamCall does what dask_gateway's Gateway._request does: send the
// request with only the cookie jar's cookies, and after a 401 send it again
// with the credentials.
func upstreamCall(t *testing.T, c *http.Client, method, url, body, authz string) int {
	t.Helper()
	send := func(withAuth bool) *http.Response {
		var rd *strings.Reader
		if body != "" {
			rd = strings.NewReader(body)
		} else {
			rd = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, url, rd)
		if body != "" {
			req.Header.Set("Content-Type", "application/json") // aiohttp's json=
		}
		if withAuth {
			req.Header.Set("Authorization", authz)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := send(false)
	if resp.StatusCode == http.StatusUnauthorized {
		resp = send(true)
	}
	return resp.StatusCode
}

// TestAPICookieSavesRoundTrips counts the requests a dask-gateway-style
// client makes for ten calls: twenty without the cookie (a 401 each time),
// eleven with it (one 401, on the first call).
func TestAPICookieSavesRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		cookie bool
		want   int64
	}{{false, 20}, {true, 11}} {
		cs := newCookieServer(t, tc.cookie)
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		authz := "Bearer " + cs.secrets["rw"]
		for i := 0; i < 10; i++ {
			method, path, body := "GET", "/api/v1/clusters/", ""
			if i%2 == 1 {
				method, path, body = "POST", "/api/v1/clusters/run1/scale", `{"count":2}`
			}
			if code := upstreamCall(t, c, method, cs.srv.URL+path, body, authz); code != 200 {
				t.Fatalf("cookie %v, call %d: %d", tc.cookie, i, code)
			}
		}
		if got := cs.hits.Load(); got != tc.want {
			t.Errorf("cookie %v: %d requests for 10 calls, want %d", tc.cookie, got, tc.want)
		}
	}
}

// apiCookieOf authenticates once with authz and returns the cookie set.
func apiCookieOf(t *testing.T, cs *cookieServer, authz string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest("GET", cs.srv.URL+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", authz)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == apiCookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", apiCookieName, resp.Header["Set-Cookie"])
	return nil
}

func withCookie(t *testing.T, cs *cookieServer, ck *http.Cookie, method, path, body string, hdr map[string]string) (int, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest(method, cs.srv.URL+path, strings.NewReader(body))
	req.AddCookie(ck)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp
}

// TestAPICookieAttributes: HttpOnly, only for /api/, SameSite=Strict, and
// never longer than five minutes nor than the credential it came from.
func TestAPICookieAttributes(t *testing.T) {
	cs := newCookieServer(t, true)
	ck := apiCookieOf(t, cs, "Bearer "+cs.secrets["rw"])
	if !ck.HttpOnly || ck.Path != "/api/" || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.MaxAge <= 0 || ck.MaxAge > 300 {
		t.Errorf("cookie %+v: want HttpOnly, Path /api/, SameSite Strict, not Secure on http, Max-Age in (0, 300]", ck)
	}
	if strings.Contains(ck.Value, cs.secrets["rw"]) || strings.Contains(ck.Value, "gw_") {
		t.Error("the cookie shows the token in the clear")
	}
	// The static token's user expires in a minute: so does its cookie.
	if ck := apiCookieOf(t, cs, "Bearer alice-token-000000"); ck.MaxAge > 60 {
		t.Errorf("cookie outlives its credential: Max-Age %d, credential ends in 60s", ck.MaxAge)
	}
	// HTTPS gateways mark it Secure.
	tlsCS := newCookieServerTLS(t, true, true)
	if ck := apiCookieOf(t, tlsCS, "Bearer "+tlsCS.secrets["rw"]); !ck.Secure {
		t.Error("cookie not Secure on an HTTPS gateway")
	}
}

// TestAPICookieEnds: a revoked token stops its cookie on the next request
// (the answer also clears it); a cookie is refused after five minutes, and
// when altered.
func TestAPICookieEnds(t *testing.T) {
	cs := newCookieServer(t, true)
	ck := apiCookieOf(t, cs, "Bearer "+cs.secrets["rw"])
	if code, _ := withCookie(t, cs, ck, "GET", "/api/v1/whoami", "", nil); code != 200 {
		t.Fatalf("fresh cookie: %d", code)
	}
	// Expiry: five minutes on, the same cookie no longer opens (a copy
	// with a later clock; the serving one is not touched while it serves).
	later := *cs.api.cookie
	later.now = func() time.Time { return time.Now().Add(apiCookieTTL + time.Second) }
	if _, err := later.open(ck.Value); err == nil {
		t.Error("cookie still opens after its five minutes")
	}
	if tok, err := cs.api.cookie.open(ck.Value); err != nil || tok != cs.secrets["rw"] {
		t.Errorf("fresh cookie does not open to its token: %v", err)
	}
	// Tampering: one character changed.
	bad := *ck
	flip := byte('A')
	if ck.Value[10] == 'A' {
		flip = 'B'
	}
	bad.Value = ck.Value[:10] + string(flip) + ck.Value[11:]
	if code, _ := withCookie(t, cs, &bad, "GET", "/api/v1/whoami", "", nil); code != 401 {
		t.Errorf("altered cookie: %d, want 401", code)
	}
	// Revocation through this gateway: at once, although the token was
	// used a moment ago (the revocation drops this replica's cache; other
	// replicas' last at most a second, see auth's
	// TestAPITokenRevokedOnEveryReplica).
	if code, _ := withCookie(t, cs, ck, "DELETE", "/api/v1/tokens/rw", "", map[string]string{"Authorization": "Bearer " + cs.secrets["rw"]}); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	code, resp := withCookie(t, cs, ck, "GET", "/api/v1/whoami", "", nil)
	if code != 401 {
		t.Errorf("cookie of a revoked token: %d, want 401", code)
	}
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == apiCookieName && c.MaxAge < 0)
	}
	if !cleared {
		t.Error("the 401 for a revoked token's cookie does not clear it")
	}
}

// TestAPICookieCSRF: a cookie rides along on requests other sites' pages
// make, so it authenticates only what such a page cannot send: safe
// methods, DELETE, and JSON bodies, without cross-site markers. Refused
// requests get the plain 401 and never reach the core.
func TestAPICookieCSRF(t *testing.T) {
	cs := newCookieServer(t, true)
	ck := apiCookieOf(t, cs, "Bearer "+cs.secrets["rw"])
	scale := "/api/v1/clusters/run1/scale"
	for _, tc := range []struct {
		name   string
		method string
		hdr    map[string]string
		status int
	}{
		{"form post", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 401},
		{"text/plain post (no-cors fetch)", "POST", map[string]string{"Content-Type": "text/plain"}, 401},
		{"post without a type", "POST", nil, 401},
		{"JSON from another origin", "POST", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 401},
		{"JSON from an opaque origin", "POST", map[string]string{"Content-Type": "application/json", "Origin": "null"}, 401},
		{"JSON marked cross-site", "POST", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 401},
		{"JSON marked same-site (a sibling host)", "POST", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, 401},
		{"JSON, as dask-gateway's client sends", "POST", map[string]string{"Content-Type": "application/json"}, 200},
		{"JSON from the gateway's own origin", "POST", map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": cs.srv.URL, "Sec-Fetch-Site": "same-origin"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(cs.core.scaled, "run1")
			code, _ := withCookie(t, cs, ck, tc.method, scale, `{"count":4}`, tc.hdr)
			if code != tc.status {
				t.Fatalf("%d, want %d", code, tc.status)
			}
			if _, reached := cs.core.scaled["run1"]; reached != (tc.status == 200) {
				t.Errorf("reached the core: %v", reached)
			}
		})
	}
	if code, _ := withCookie(t, cs, ck, "GET", "/api/v1/clusters/", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != 401 {
		t.Errorf("cross-site GET with the cookie: %d, want 401", code)
	}
	if code, _ := withCookie(t, cs, ck, "DELETE", "/api/v1/clusters/run1", "", nil); code != 204 {
		t.Errorf("DELETE with the cookie: %d, want 204", code)
	}
}

// TestAPICookieKeepsLimits: a read-only token's cookie is read-only, and
// the dashboard's authentication (api.Authenticate, then its own session
// cookie) does not take the API cookie.
func TestAPICookieKeepsLimits(t *testing.T) {
	cs := newCookieServer(t, true)
	ck := apiCookieOf(t, cs, "Bearer "+cs.secrets["ro"])
	if code, _ := withCookie(t, cs, ck, "POST", "/api/v1/clusters/run1/scale", `{"count":1}`, map[string]string{"Content-Type": "application/json"}); code != 403 {
		t.Errorf("read-only token's cookie scaled: %d, want 403", code)
	}
	r := httptest.NewRequest("GET", "/clusters/run1/status", nil)
	r.AddCookie(apiCookieOf(t, cs, "Bearer "+cs.secrets["rw"]))
	if _, err := Authenticate(r, cs.api.auth); !errors.Is(err, auth.ErrNoCredentials) {
		t.Errorf("dashboard authentication with only the API cookie: %v, want no credentials", err)
	}
}

// aiohttpClient is dask_gateway.Gateway._request's pattern, in the library
// it uses (the client itself is not installable here): one ClientSession
// with CookieJar(unsafe=True), each request sent without credentials first,
// and again with JupyterHubAuth's header after a 401.
const aiohttpClient = `
import asyncio, sys
import aiohttp

async def main(base, token):
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        for i in range(10):
            if i % 2:
                method, url, body = "POST", base + "/api/v1/clusters/run1/scale", {"count": 2}
            else:
                method, url, body = "GET", base + "/api/v1/clusters/", None
            resp = await session.request(method, url, json=body)
            if resp.status == 401:
                resp = await session.request(method, url, json=body, headers={"Authorization": "jupyterhub " + token})
            if resp.status != 200:
                sys.exit("call %d: %d %s" % (i, resp.status, await resp.text()))

asyncio.run(main(sys.argv[1], sys.argv[2]))
`

// TestAPICookieWithAiohttp runs that pattern with the real aiohttp
// (Debian's python3-aiohttp) and counts what reaches the gateway.
func TestAPICookieWithAiohttp(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import aiohttp").Run(); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, "python3-aiohttp is not installed (apt-get install python3-aiohttp)")
	}
	for _, tc := range []struct {
		cookie bool
		want   int64
	}{{false, 20}, {true, 11}} {
		cs := newCookieServer(t, tc.cookie)
		out, err := exec.Command("/usr/bin/python3", "-c", aiohttpClient, cs.srv.URL, cs.secrets["rw"]).CombinedOutput()
		if err != nil {
			t.Fatalf("cookie %v: %v: %s", tc.cookie, err, out)
		}
		if got := cs.hits.Load(); got != tc.want {
			t.Errorf("cookie %v: aiohttp made %d requests for 10 calls, want %d", tc.cookie, got, tc.want)
		}
	}
}

// TestAPICookieKeptThroughOutage: a cookie whose token cannot be checked
// (the database is away) gets a 503 and stays: only a refused token's
// cookie is cleared, or every browser would be signed out by a restart
// of the database.
func TestAPICookieKeptThroughOutage(t *testing.T) {
	cs := newCookieServer(t, true)
	ck := apiCookieOf(t, cs, "Bearer "+cs.secrets["rw"])
	if err := cs.db.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the token cache's second
	code, resp := withCookie(t, cs, ck, "GET", "/api/v1/whoami", "", nil)
	if code != http.StatusServiceUnavailable {
		t.Errorf("cookie while the database is away: %d, want 503", code)
	}
	for _, c := range resp.Cookies() {
		if c.Name == apiCookieName && c.MaxAge < 0 {
			t.Error("the cookie was cleared because the database was away")
		}
	}
}
