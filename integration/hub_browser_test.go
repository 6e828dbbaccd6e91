package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestJupyterHubBrowserSignIn: Chromium signs in to the real JupyterHub,
// then opens a cluster's dashboard through the gateway with no second
// sign-in (the gateway sends it to the hub's authorization, which knows it
// and sends it back with a code); signing out of the gateway ends the
// gateway's session; the console then signs it in again the same way.
func TestJupyterHubBrowserSignIn(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	g := startHubGateway(t)
	tok := g.hub.newToken("alice")
	authz := "jupyterhub " + tok.Token
	name := g.hubCluster(t, authz)

	b := newBrowser(t, chromium)
	if status := b.open("open the hub's sign-in page", g.hub.public+"/hub/login"); status != http.StatusOK {
		t.Fatalf("the hub's sign-in page: HTTP %d: %+v", status, b.page())
	}
	b.must("type alice's name and a password (the dummy authenticator takes any)",
		chromedp.WaitVisible(chromedp.CSS(`#username_input`)),
		chromedp.SendKeys(chromedp.CSS(`#username_input`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`#password_input`), "anything"))
	if status := b.click("sign in to the hub", `#login_submit`); status != http.StatusOK {
		t.Fatalf("signing in to the hub: HTTP %d: %+v", status, b.page())
	}
	if p := b.page(); !strings.HasPrefix(p.URL, g.hub.public+"/hub/") || strings.Contains(p.URL, "/hub/login") {
		t.Fatalf("after signing in to the hub: at %s: %q", p.URL, p.Text)
	}

	dash := g.e.url + "/clusters/" + name + "/info/main/workers.html"
	status := b.open("open the cluster's dashboard through the gateway", dash)
	if p := b.page(); status != http.StatusOK || p.URL != dash || !strings.Contains(p.Text, "Workers") {
		t.Fatalf("the dashboard after the hub's sign-in: HTTP %d at %s, want %s with no second sign-in: %q", status, p.URL, dash, p.Text)
	}
	code, _, body := hubCall(t, http.MethodGet, g.e.url+"/api/v1/sessions", authz, "")
	var sessions []struct {
		ID  string `json:"id"`
		Via string `json:"via"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &sessions) != nil || len(sessions) != 1 || sessions[0].Via != "jupyterhub" {
		t.Fatalf("alice's gateway sessions: %d %s; want one begun by the hub's sign-in", code, body)
	}

	session := g.sessionCookie(t, b)
	if got := dashboardWith(t, dash, session); got != http.StatusOK {
		t.Fatalf("the dashboard with the browser's session cookie: HTTP %d, want 200", got)
	}
	if status := b.open("open the sign-out page", g.e.url+"/auth/logout"); status != http.StatusOK {
		t.Fatalf("sign-out page: HTTP %d", status)
	}
	status = b.click("sign out of the gateway", `button[type=submit]`)
	if p := b.page(); status != http.StatusOK || p.H1 != "Signed out" {
		t.Fatalf("after signing out: HTTP %d: %+v", status, p)
	}
	if got := dashboardWith(t, dash, session); got != http.StatusFound {
		t.Fatalf("the dashboard with the signed-out session's cookie: HTTP %d, want 302 to sign in", got)
	}

	// The hub's own session stays: the console, asked for without a
	// gateway session, signs the browser in again through the hub, with
	// nothing to click.
	status = b.open("open the console after signing out of the gateway", g.e.url+"/")
	if p := b.page(); status != http.StatusOK || p.URL != g.e.url+"/" || !strings.Contains(p.Text, "alice") || !strings.Contains(p.Text, name) {
		t.Fatalf("the console: HTTP %d at %s, want alice's console with her cluster %s: %q", status, p.URL, name, p.Text)
	}
	if again := g.sessionCookie(t, b); again.Value == session.Value {
		t.Fatal("the console kept the signed-out session")
	}
}

// hubCluster starts a cluster through the API as the holder of authz and
// waits until it runs; it returns its name.
func (g *hubGateway) hubCluster(t *testing.T, authz string) string {
	t.Helper()
	code, _, body := hubSend(t, http.MethodPost, g.e.url+"/api/v1/clusters/", authz, "", `{"cluster_options": {}}`)
	var c struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	if code != http.StatusCreated && code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.Name == "" {
		t.Fatalf("new cluster with a hub token: %d %s", code, body)
	}
	deadline := time.Now().Add(testutil.HangBound)
	for c.Status != "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s is %s after %s", c.Name, c.Status, testutil.HangBound)
		}
		code, _, body = hubCall(t, http.MethodGet, g.e.url+"/api/v1/clusters/"+c.Name+"?wait=true", authz, "")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
			t.Fatalf("cluster %s: %d %s", c.Name, code, body)
		}
		if c.Status == "FAILED" || c.Status == "STOPPED" {
			t.Fatalf("cluster %s: %s\n--- gateway log:\n%s", c.Name, body, g.e.gwLog.String())
		}
	}
	return c.Name
}

// sessionCookie is the gateway's session cookie in the browser (HttpOnly:
// read through the DevTools protocol).
func (g *hubGateway) sessionCookie(t *testing.T, b *browser) *http.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{g.e.url + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "gateway_session" {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("no gateway session cookie in the browser")
	return nil
}

// dashboardWith opens a dashboard page as a browser with only the cookie
// given, and returns the status (a redirect is not followed).
func dashboardWith(t *testing.T, u string, c *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.AddCookie(c)
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusFound {
		if loc, _ := url.Parse(resp.Header.Get("Location")); loc == nil || loc.Path != "/auth/login" {
			t.Fatalf("redirected to %s, not to sign in", resp.Header.Get("Location"))
		}
	}
	return resp.StatusCode
}
