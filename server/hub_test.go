package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth/authtest"
)

// TestServeWithJupyterHub: the composition of the hub's keys. A hub alone
// (no OIDC provider) is a whole gateway: its tokens authenticate, browsers
// sign in with it, and the CLI is told there is no OIDC login. Beside an
// OIDC provider, auth.browser_login decides where browsers go, and the
// other provider's callback answers 404.
func TestServeWithJupyterHub(t *testing.T) {
	const tok = "a11ce0123456789abcdef0123456789a"
	idp := startIdP(t)

	cases := []struct {
		name         string
		oidc, client bool
		login        string // auth.browser_login
		authConfig   int    // GET /api/v1/auth/config
		signInAt     string // where /auth/login sends browsers
		offCallback  string // the callback of the sign-in not chosen
	}{
		{name: "hub alone", client: true, authConfig: http.StatusNotFound, signInAt: "hub", offCallback: "/auth/callback"},
		{name: "hub tokens alone", authConfig: http.StatusNotFound, offCallback: "/auth/callback"},
		{name: "hub and OIDC, the hub's sign-in", oidc: true, client: true, authConfig: http.StatusOK, signInAt: "hub", offCallback: "/auth/callback"},
		{name: "hub and OIDC, OIDC's sign-in", oidc: true, client: true, login: "oidc", authConfig: http.StatusOK, signInAt: "oidc", offCallback: "/auth/jupyterhub/callback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			public := "http://gateway.example:8000"
			hub := authtest.NewHub(t, public+"/auth/jupyterhub/callback")
			hub.AddToken(tok, authtest.HubToken{Kind: "user", Name: "alice", Groups: []string{"hub-ops"}, Scopes: []string{authtest.HubAccess}})
			v := ConfigSchema().New()
			v.Set("listen", "127.0.0.1:0")
			v.Set("public_url", public)
			v.Set("data_dir", t.TempDir())
			v.Set("tls.allow_plain_http", true)
			v.Set("providers.local.trust_users", true)
			v.Set("auth.admin_groups", []string{"hub-ops"})
			v.Set("auth.jupyterhub.api_url", hub.APIURL())
			v.Set("auth.jupyterhub.api_token", authtest.HubServiceToken)
			if tc.client {
				v.Set("auth.jupyterhub.oauth_client_id", authtest.HubClientID)
			}
			if tc.oidc {
				v.Set("auth.oidc.issuer", idp.URL)
			}
			if tc.login != "" {
				v.Set("auth.browser_login", tc.login)
			}
			cfg, err := ConfigSchema().Load(v, "")
			if err != nil {
				t.Fatal(err)
			}
			g := runGateway(t, cfg)
			base := "http://" + g.Addr().String()
			send := func(path, authz string) (int, http.Header, string) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, base+path, nil)
				req.Header.Set("Accept", "text/html")
				if authz != "" {
					req.Header.Set("Authorization", authz)
				}
				c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header, string(b)
			}
			if code, _, body := send("/api/v1/whoami", "jupyterhub "+tok); code != http.StatusOK || !strings.Contains(body, `"id":"jupyterhub:alice"`) || !strings.Contains(body, `"admin":true`) {
				t.Errorf("whoami with a hub token: %d %s; want jupyterhub:alice, an admin by the hub's group", code, body)
			}
			if code, _, body := send("/api/v1/auth/config", ""); code != tc.authConfig {
				t.Errorf("auth config: %d %s; want %d", code, body, tc.authConfig)
			}
			code, hdr, body := send("/auth/login?next=/", "")
			loc, _ := url.Parse(hdr.Get("Location"))
			switch tc.signInAt {
			case "hub":
				q := loc.Query()
				if code != http.StatusFound || !strings.HasPrefix(loc.String(), hub.APIURL()+"/oauth2/authorize?") || q.Get("client_id") != authtest.HubClientID ||
					q.Get("redirect_uri") != public+"/auth/jupyterhub/callback" {
					t.Errorf("sign-in: %d to %s; want the hub's authorization for %s", code, loc, authtest.HubClientID)
				}
			case "oidc":
				if code != http.StatusFound || !strings.HasPrefix(loc.String(), idp.URL) || loc.Query().Get("redirect_uri") != public+"/auth/callback" {
					t.Errorf("sign-in: %d to %s; want the OIDC provider", code, loc)
				}
			default:
				if code != http.StatusNotFound || !strings.Contains(body, "Sign-in is not enabled") {
					t.Errorf("sign-in with no browser sign-in: %d %s; want 404", code, body)
				}
			}
			// The console: straight to the hub's sign-in, else its page.
			code, hdr, _ = send("/", "")
			if want := map[bool]int{true: http.StatusFound, false: http.StatusOK}[tc.signInAt == "hub"]; code != want ||
				(code == http.StatusFound && hdr.Get("Location") != "/auth/login?next=%2F") {
				t.Errorf("the console signed out: %d to %q; want %d", code, hdr.Get("Location"), want)
			}
			if code, _, body := send(tc.offCallback+"?state=x&code=y", ""); code != http.StatusNotFound {
				t.Errorf("%s: %d %s; want 404", tc.offCallback, code, body)
			}
		})
	}
}
