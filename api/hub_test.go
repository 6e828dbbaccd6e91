package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// The API with JupyterHub: hub tokens, and the sign-in with the hub, each
// against a stand-in hub (authtest.Hub). integration/hub_test.go and
// integration/hub_browser_test.go run them against the real JupyterHub.

const hubAliceToken = "a11ce0123456789abcdef0123456789a"

// hubServer is the API with a hub's tokens in its chain and the hub's
// sign-in for browsers.
type hubServer struct {
	srv      *httptest.Server
	hub      *authtest.Hub
	sessions *auth.Sessions
	db       *store.DB
	clock    *testutil.Clock
	// fail, when set, is the sign-in's user check's answer: the hub gone
	// away between the code exchange and the check, or refusing the user.
	fail atomic.Pointer[error]
}

func newHubServer(t *testing.T) *hubServer {
	t.Helper()
	sessions, db := authtest.StoredSessions(t)
	hs := &hubServer{sessions: sessions, db: db, clock: testutil.NewClock(time.Now())}
	hs.srv = httptest.NewUnstartedServer(nil)
	public := "http://" + hs.srv.Listener.Addr().String()
	hs.hub = authtest.NewHub(t, public+"/auth/jupyterhub/callback")
	hs.hub.AddToken(hubAliceToken, authtest.HubToken{Kind: "user", Name: "alice", Groups: []string{"hub-ops"}, Scopes: []string{authtest.HubAccess}})
	hub, err := auth.NewJupyterHub(auth.JupyterHubConfig{APIURL: hs.hub.APIURL(), APIToken: authtest.HubServiceToken, CacheTTL: 5 * time.Second, Users: db, Now: hs.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	core := &fakeCore{clusters: map[string]*store.Cluster{
		"run1": {Name: "run1", Owner: "jupyterhub:alice", Status: store.Running, Options: `{}`, CreatedAt: time.UnixMilli(5000)},
	}, scaled: map[string]int{}}
	api := New(Config{Version: "test", PublicURL: public}, core, auth.Chain{auth.NewAPITokens(db, nil, nil), hub}, sessions, nil)
	api.SetTokenStore(db)
	api.SetFailureLimiter(auth.NewFailureLimiter(3))
	if err := api.SetAPICookie(make([]byte, 32), false); err != nil {
		t.Fatal(err)
	}
	api.SetBrowserLogin(&BrowserLogin{
		OAuth2: &oauth2.Config{ClientID: authtest.HubClientID, ClientSecret: authtest.HubServiceToken, RedirectURL: public + "/auth/jupyterhub/callback",
			Endpoint: oauth2.Endpoint{AuthURL: hs.hub.APIURL() + "/oauth2/authorize", TokenURL: hs.hub.APIURL() + "/oauth2/token", AuthStyle: oauth2.AuthStyleInParams}},
		Hub: func(ctx context.Context, tok string) (*auth.User, error) {
			if err := hs.fail.Load(); err != nil {
				return nil, *err
			}
			return hub.Authenticate(ctx, tok)
		},
	})
	hs.srv.Config.Handler = api
	hs.srv.Start()
	t.Cleanup(hs.srv.Close)
	return hs
}

// TestHubTokenThroughAPI: a hub token (JupyterHubAuth's header) is the
// hub's user with the hub's groups; a hub that stops answering gives 503
// without counting a failure or dropping the API cookie, and the cookie
// works again when the hub is back; a forged token counts as a failure.
func TestHubTokenThroughAPI(t *testing.T) {
	hs := newHubServer(t)
	get := func(hdr map[string]string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.srv.URL+"/api/v1/whoami", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	code, hdr, body := get(map[string]string{"Authorization": "jupyterhub " + hubAliceToken})
	if code != http.StatusOK || !strings.Contains(body, `"id":"jupyterhub:alice"`) || !strings.Contains(body, `"groups":["hub-ops"]`) || !strings.Contains(body, `"via":"jupyterhub"`) {
		t.Fatalf("whoami with a hub token: %d %s", code, body)
	}
	var cookie string
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == "gateway-api" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatal("no API cookie for a hub token")
	}

	hs.hub.SetHang(true)
	hs.clock.Advance(5 * time.Second) // the cached answer is over
	for i := range 5 {                // more than the failure limit
		for _, h := range []map[string]string{{"Authorization": "token " + hubAliceToken}, {"Cookie": cookie}} {
			code, hdr, body := get(h)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"auth_unavailable"`) || hdr.Get("Retry-After") == "" {
				t.Fatalf("call %d %v with the hub away: %d %s; want 503 auth_unavailable", i, h, code, body)
			}
			if strings.Contains(body, hs.hub.URL) {
				t.Errorf("the answer names the hub's address: %s", body)
			}
			if sc := hdr.Values("Set-Cookie"); len(sc) > 0 {
				t.Fatalf("call %d with the hub away set cookies %v", i, sc)
			}
		}
	}
	hs.hub.SetHang(false)
	if code, _, body := get(map[string]string{"Cookie": cookie}); code != http.StatusOK || !strings.Contains(body, `"id":"jupyterhub:alice"`) {
		t.Fatalf("the API cookie once the hub is back: %d %s", code, body)
	}

	for i := range 4 {
		code, _, body := get(map[string]string{"Authorization": "jupyterhub forged0123456789abcdef0123456789"})
		want := http.StatusUnauthorized
		if i == 3 {
			want = http.StatusTooManyRequests // over the limit of 3
		}
		if code != want {
			t.Fatalf("forged token, try %d: %d %s; want %d", i+1, code, body, want)
		}
	}
	if n := hs.hub.Asks("forged0123456789abcdef0123456789"); n != 1 {
		t.Errorf("the hub was asked %d times about the forged token, want once", n)
	}
}

// TestHubSignIn: a browser sent to sign in goes to the hub (no PKCE, no
// nonce: the hub checks neither), comes back with a code, and gets a
// session of the hub's user, marked as a hub sign-in, with the hub's
// groups; then lands where it was going. The OIDC callback path is not
// this sign-in's. A hub that cannot vouch for the user is 503, a user it
// refuses 401, and neither starts a session.
func TestHubSignIn(t *testing.T) {
	hs := newHubServer(t)
	hs.hub.SignIn("alice")
	signIn := func(t *testing.T) (*http.Response, *cookiejar.Jar, []string) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		var path []string
		c := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			path = append(path, r.URL.String())
			if r.URL.Path == "/clusters/run1/status" {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		req, _ := http.NewRequest("GET", hs.srv.URL+"/auth/login?next=/clusters/run1/status", nil)
		req.Header.Set("Accept", browserAccept)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, jar, path
	}

	resp, jar, path := signIn(t)
	if len(path) != 3 || !strings.HasPrefix(path[0], hs.hub.APIURL()+"/oauth2/authorize?") || !strings.HasPrefix(path[1], hs.srv.URL+"/auth/jupyterhub/callback?") {
		t.Fatalf("redirects %v; want the hub's authorization, the callback, the dashboard", path)
	}
	if q, _ := url.Parse(path[0]); q.Query().Has("code_challenge") || q.Query().Has("nonce") || q.Query().Get("state") == "" {
		t.Errorf("authorization request %s: want a state, and neither PKCE nor a nonce", path[0])
	}
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	u, _ := url.Parse(hs.srv.URL)
	var session *http.Cookie
	for _, c := range jar.Cookies(u) {
		if c.Name == auth.SessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie after the hub's sign-in")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(session)
	su, err := hs.sessions.FromRequest(r)
	if err != nil || su.Owner() != "jupyterhub:alice" || su.SessionVia != auth.SessionViaHub || len(su.Groups) != 1 || su.Groups[0] != "hub-ops" {
		t.Fatalf("the session: %+v %v; want alice's hub sign-in with the hub's groups", su, err)
	}

	// The OIDC way back is not the hub's.
	a := (&sessionServer{srv: hs.srv}).send(t, "GET", "/auth/callback?state=x&code=y", map[string]string{"Accept": browserAccept}, nil)
	if a.status != http.StatusNotFound {
		t.Errorf("/auth/callback with the hub's sign-in: %d, want 404", a.status)
	}

	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{"hub away", fmt.Errorf("%w: JupyterHub does not answer", auth.ErrUnavailable), http.StatusServiceUnavailable},
		{"user refused", fmt.Errorf("%w: this JupyterHub token does not grant access", auth.ErrInvalid), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs.fail.Store(&tc.err)
			resp, jar, _ := signIn(t)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.status)
			}
			for _, c := range jar.Cookies(u) {
				if c.Name == auth.SessionCookie {
					t.Fatal("a session was started")
				}
			}
		})
	}
}
