package integration

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleAccount: the console's account pages in Chromium against the
// real gateway: this month's usage with its chart (dev's running cluster
// is in the ledger), an API token made on the page and shown once, which
// then works on the API until it is revoked from the page, and the
// sessions list, where another session of the user is ended.
func TestConsoleAccount(t *testing.T) {
	t.Parallel()
	g := startBrowserGateway(t)
	b := newBrowser(t, g.chromium)
	csp := watchCSP(t, b)
	g.consoleSignIn(t, b, "/", "dev")

	// Usage, from the navigation.
	status := b.click("open Usage", chromedp.CSS(`nav a[href="/usage"]`))
	if p := b.page(); status != http.StatusOK || p.H1 != "Usage" || !strings.Contains(p.Text, g.devCluster+" (running)") ||
		!strings.Contains(p.Text, "Your limits") {
		t.Fatalf("usage page: HTTP %d: %q\n%s", status, p.H1, p.Text)
	}
	chart := evalString(t, b, `(() => { const s = document.querySelector("svg.chart[role=img]");
		return s ? s.querySelector("title").textContent + " | " + s.querySelectorAll("rect").length : "" })()`)
	if !strings.Contains(chart, "vCPU-hours") || strings.HasSuffix(chart, "| 0") || chart == "" {
		t.Fatalf("the usage chart: %q", chart)
	}
	checkAccessibility(t, b, "the usage page")

	// A token: made on the page, shown once, working until revoked.
	b.click("open Tokens", chromedp.CSS(`nav a[href="/tokens"]`))
	b.must("fill in the token form",
		chromedp.SendKeys(`input[name=name]`, "browser-test"),
		chromedp.Click(`input[name=read_only]`))
	status = b.click("create the token", chromedp.CSS(`form[action="/tokens"] button[type=submit]`))
	p := b.page()
	secret := evalString(t, b, `(document.querySelector("#new-token") || {}).value || ""`)
	if u, _ := url.Parse(p.URL); status != http.StatusOK || !strings.HasPrefix(secret, "gw_") || u.Path != "/tokens" || u.RawQuery != "" ||
		!strings.Contains(p.Text, "shown only this once") {
		t.Fatalf("after creating a token: HTTP %d at %s, token %q:\n%s", status, p.URL, secret, p.Text)
	}
	checkAccessibility(t, b, "the new token")
	if code := whoami(t, g.e.url, secret); code != http.StatusOK {
		t.Fatalf("the new token on the API: HTTP %d", code)
	}
	b.open("open the tokens list again", g.e.url+"/tokens")
	if html := evalString(t, b, `document.documentElement.outerHTML`); strings.Contains(html, secret) || !strings.Contains(html, "browser-test") {
		t.Fatal("the list shows the secret again, or not the token")
	}
	checkAccessibility(t, b, "the tokens list")
	id := evalString(t, b, `(() => { for (const tr of document.querySelectorAll("tr[data-token]"))
		if (tr.innerText.includes("browser-test")) return tr.dataset.token; return "" })()`)
	status = b.click("revoke the token", chromedp.CSS(`tr[data-token="`+id+`"] button.danger`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Revoked token "+id) {
		t.Fatalf("after revoking: HTTP %d:\n%s", status, p.Text)
	}
	if code := whoami(t, g.e.url, secret); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the API: HTTP %d, want 401", code)
	}

	// Another session of dev's (a dashboard link redeemed elsewhere),
	// listed beside this one and ended from here.
	other := linkSession(t, g, g.link(t, g.e, g.devCluster))
	if !signedInConsole(t, other, g.e.url) {
		t.Fatal("the other session is not signed in")
	}
	status = b.click("open Sessions", chromedp.CSS(`nav a[href="/sessions"]`))
	p = b.page()
	if status != http.StatusOK || p.H1 != "Browser sessions" || !strings.Contains(p.Text, "(this browser)") ||
		!strings.Contains(p.Text, "dashboard link") || evalString(t, b, `String(document.querySelectorAll("tr[data-session]").length)`) != "2" {
		t.Fatalf("sessions page: HTTP %d:\n%s", status, p.Text)
	}
	checkAccessibility(t, b, "the sessions page")
	otherID := evalString(t, b, `document.querySelector("tr[data-session]:not(.current)").dataset.session`)
	status = b.click("end the other session", chromedp.CSS(`tr[data-session="`+otherID+`"] button.danger`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Ended session "+otherID) || strings.Contains(p.Text, otherID+" ") {
		t.Fatalf("after ending the other session: HTTP %d:\n%s", status, p.Text)
	}
	if signedInConsole(t, other, g.e.url) {
		t.Fatal("the ended session still signs in")
	}
	if p := b.page(); !strings.Contains(p.Text, "(this browser)") {
		t.Fatalf("this browser's session went too:\n%s", p.Text)
	}
	csp.check(t)
}

func evalString(t *testing.T, b *browser, js string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return s
}

// whoami is the API's answer to the token.
func whoami(t *testing.T, gateway, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", gateway+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: stepTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// linkSession redeems a sign-in link outside the browser: a client with
// a session of its own.
func linkSession(t *testing.T, g *browserGateway, link string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: stepTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	lu, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.PostForm(g.e.url+"/auth/ticket", url.Values{"t": {lu.Query().Get("t")}, "next": {lu.Query().Get("next")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeeming the link: HTTP %d", resp.StatusCode)
	}
	return c
}

// signedInConsole says whether the client's session opens the console's
// sessions page (signed out, it gets the sign-in page).
func signedInConsole(t *testing.T, c *http.Client, gateway string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", gateway+"/sessions", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "<h1>Browser sessions</h1>")
}
