package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// chromiumHeaders are the headers Chromium 156 (Debian bookworm) sends with
// the confirm page's form POST, captured from the browser clicking the
// button. The Origin and Referer depend on the page's Referrer-Policy:
// under the old "no-referrer" the browser sent "Origin: null" and no
// Referer; under "strict-origin" it sends both, as the bare origin.
func chromiumHeaders(origin string) map[string]string {
	h := map[string]string{
		"Accept":                    "text/html,application/xhtml+xml,application/xml;q=0.9,image/jxl,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
		"Accept-Encoding":           "gzip, deflate, br, zstd",
		"Accept-Language":           "en-US,en;q=0.9",
		"Cache-Control":             "max-age=0",
		"Content-Type":              "application/x-www-form-urlencoded",
		"Origin":                    "null",
		"Sec-Ch-Ua":                 `"Not:A-Brand";v="8", "Chromium";v="156"`,
		"Sec-Ch-Ua-Mobile":          "?0",
		"Sec-Ch-Ua-Platform":        `"Linux"`,
		"Sec-Fetch-Dest":            "document",
		"Sec-Fetch-Mode":            "navigate",
		"Sec-Fetch-Site":            "same-origin",
		"Sec-Fetch-User":            "?1",
		"Upgrade-Insecure-Requests": "1",
		"User-Agent":                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36",
	}
	if origin != "" {
		h["Origin"], h["Referer"] = origin, origin+"/"
	}
	return h
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

type browserAnswer struct {
	status int
	header http.Header
	body   string
}

func (a browserAnswer) isPage() bool {
	return strings.HasPrefix(a.header.Get("Content-Type"), "text/html") && strings.Contains(a.body, "<h1>")
}

func (a browserAnswer) jsonCode() string {
	var e apitype.Error
	if a.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(a.body), &e) != nil || e.Error == "" {
		return ""
	}
	return e.Code
}

func (ss *sessionServer) send(t *testing.T, method, path string, hdr map[string]string, form url.Values) browserAnswer {
	t.Helper()
	return ss.sendBody(t, method, path, hdr, form.Encode())
}

// sendBody is send with any body ("": none).
func (ss *sessionServer) sendBody(t *testing.T, method, path string, hdr map[string]string, body string) browserAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ss.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: ss.srv.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return browserAnswer{resp.StatusCode, resp.Header, string(b)}
}

// link asks for a dashboard link and returns its ticket form.
func (ss *sessionServer) link(t *testing.T, token string) (string, url.Values) {
	t.Helper()
	code, _, body := do(t, ss.srv, "POST", "/api/v1/clusters/run1/dashboard-link", token, "{}")
	var v struct{ URL string }
	if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
		t.Fatalf("link: %d %s", code, body)
	}
	u, _ := url.Parse(v.URL)
	return u.RequestURI(), url.Values{"t": {u.Query().Get("t")}, "next": {u.Query().Get("next")}}
}

// Regression test for issue 15: the confirm page was served with
// "Referrer-Policy: no-referrer", so Chromium posted its form with
// "Origin: null" and the gateway refused its own page as cross-site. The
// confirm page now sends only the bare origin (its URL holds the ticket),
// and a same-origin POST is recognised from what Chromium sends under
// either policy; every cross-site POST is still refused and leaves the
// ticket unspent.
func TestSignInLinkFromChromium(t *testing.T) {
	ss, _ := newSessionServer(t)
	const alice = "alice-token-000000"

	page, _ := ss.link(t, alice)
	a := ss.send(t, "GET", page, map[string]string{"Accept": browserAccept, "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `<form method="post" action="/auth/ticket">`) {
		t.Fatalf("confirm page: %d %s", a.status, a.body)
	}
	// strict-origin: Origin and Referer carry the origin only, never this
	// URL's query (the ticket), to this gateway or to any other site.
	if rp := a.header.Get("Referrer-Policy"); rp != "strict-origin" {
		t.Errorf("confirm page Referrer-Policy %q, want strict-origin", rp)
	}

	cases := []struct {
		name string
		hdr  map[string]string
		ok   bool
	}{
		{"Chromium under strict-origin", chromiumHeaders(ss.srv.URL), true},
		{"Chromium under no-referrer (a proxy may add the header)", chromiumHeaders(""), true},
		{"no browser headers at all (curl)", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, true},
		{"another site's page", with(chromiumHeaders("https://evil.example"), "Sec-Fetch-Site", "cross-site"), false},
		{"another port of this host", with(chromiumHeaders("http://127.0.0.1:1"), "Sec-Fetch-Site", "same-site"), false},
		{"a sandboxed page of another site", with(chromiumHeaders(""), "Sec-Fetch-Site", "cross-site"), false},
		{"null Origin from a browser without Sec-Fetch-Site", without(chromiumHeaders(""), "Sec-Fetch-Site"), false},
		{"another site, browser without Sec-Fetch-Site", without(chromiumHeaders("https://evil.example"), "Sec-Fetch-Site"), false},
		{"a matching Origin but a cross-site fetch", with(chromiumHeaders(ss.srv.URL), "Sec-Fetch-Site", "cross-site"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, form := ss.link(t, alice)
			a := ss.send(t, "POST", "/auth/ticket", tc.hdr, form)
			if !tc.ok {
				if a.status != http.StatusForbidden || a.header.Get("Set-Cookie") != "" {
					t.Fatalf("refused sign-in: %d, Set-Cookie %q; want 403 and no cookie", a.status, a.header.Get("Set-Cookie"))
				}
				if strings.Contains(tc.hdr["Accept"], "text/html") && (!a.isPage() || !strings.Contains(a.body, "gateway&#39;s own page")) {
					t.Errorf("a browser got no page saying why: %s", a.body)
				}
				// The refusal did not spend the ticket: the real page still works.
				a = ss.send(t, "POST", "/auth/ticket", chromiumHeaders(ss.srv.URL), form)
			}
			if a.status != http.StatusSeeOther || a.header.Get("Location") != "/clusters/run1/status" || !strings.Contains(a.header.Get("Set-Cookie"), "gateway_session=") {
				t.Fatalf("sign-in: %d %v %s", a.status, a.header, a.body)
			}
		})
	}
}

func with(h map[string]string, k, v string) map[string]string { h[k] = v; return h }
func without(h map[string]string, k string) map[string]string { delete(h, k); return h }

// Issue 15: a refused sign-in link is a page a person can read when the
// browser asked for HTML, and the API's JSON error otherwise.
func TestSignInErrorsAnswerTheirClient(t *testing.T) {
	ss, _ := newSessionServer(t)
	const alice = "alice-token-000000"
	page, form := ss.link(t, alice)
	if a := ss.send(t, "POST", "/auth/ticket", chromiumHeaders(ss.srv.URL), form); a.status != http.StatusSeeOther {
		t.Fatalf("first use: %d %s", a.status, a.body)
	}
	unknown := url.Values{"t": {"gwt_made-up"}, "next": {"/clusters/run1/status"}}
	cases := []struct {
		name, method, path string
		form               url.Values
		status             int
		code, says         string
	}{
		{"used link opened again", "GET", page, nil, 401, "unauthenticated", "This sign-in link no longer works"},
		{"used link posted again", "POST", "/auth/ticket", form, 401, "unauthenticated", "This sign-in link no longer works"},
		{"unknown link", "GET", "/auth/ticket?" + unknown.Encode(), nil, 401, "unauthenticated", "This sign-in link no longer works"},
		{"link to another site", "GET", "/auth/ticket?" + url.Values{"t": {"x"}, "next": {"https://evil.example/"}}.Encode(), nil, 400, "invalid_request", "This sign-in link is damaged"},
		{"cross-site post", "POST", "/auth/ticket", unknown, 403, "cross_site", "Sign-in refused"},
		{"cross-site sign-out", "POST", "/auth/logout", nil, 403, "cross_site", "Sign-out refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, browser := range []bool{true, false} {
				hdr := map[string]string{"Accept": browserAccept}
				if !browser {
					hdr = map[string]string{"Accept": "application/json"}
				}
				if tc.method == "POST" {
					hdr["Content-Type"] = "application/x-www-form-urlencoded"
					hdr["Origin"] = ss.srv.URL
					if tc.code == "cross_site" {
						hdr["Origin"] = "https://evil.example"
					}
				}
				a := ss.send(t, tc.method, tc.path, hdr, tc.form)
				if a.status != tc.status || a.header.Get("Cache-Control") != "no-store" {
					t.Fatalf("browser %v: %d %q, want %d, no-store: %s", browser, a.status, a.header.Get("Cache-Control"), tc.status, a.body)
				}
				if browser {
					if !a.isPage() || !strings.Contains(a.body, "<h1>"+tc.says+"</h1>") || strings.HasPrefix(a.body, "{") {
						t.Errorf("a browser got %q: %s", a.header.Get("Content-Type"), a.body)
					}
					if tc.code == "unauthenticated" && !strings.Contains(a.body, "gateway dashboard NAME") {
						t.Errorf("the page does not say how to get a new link: %s", a.body)
					}
				} else if got := a.jsonCode(); got != tc.code {
					t.Errorf("an API client got code %q (%q), want %q: %s", got, a.header.Get("Content-Type"), tc.code, a.body)
				}
			}
		})
	}
}

// Issue 15: an expired link is refused with the same page as a used one,
// on opening it and on clicking its button.
func TestExpiredSignInLink(t *testing.T) {
	ss, _ := newSessionServer(t)
	page, form := ss.link(t, "alice-token-000000")
	later := time.Now().Add(auth.TicketTTL + time.Second)
	ss.sessions.SetClock(func() time.Time { return later })
	for _, a := range []browserAnswer{
		ss.send(t, "GET", page, map[string]string{"Accept": browserAccept}, nil),
		ss.send(t, "POST", "/auth/ticket", chromiumHeaders(ss.srv.URL), form),
	} {
		if a.status != http.StatusUnauthorized || !a.isPage() || !strings.Contains(a.body, "<h1>This sign-in link no longer works</h1>") || !strings.Contains(a.body, "expired") {
			t.Errorf("expired link: %d %q: %s", a.status, a.header.Get("Content-Type"), a.body)
		}
	}
}

// Issue 15: a browser signs out on the gateway's own page (GET shows the
// button, its POST ends the session and says so); an API client's POST
// still gets 204.
func TestSignOutPage(t *testing.T) {
	ss, _ := newSessionServer(t)
	a := ss.send(t, "GET", "/auth/logout", map[string]string{"Accept": browserAccept}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `<form method="post" action="/auth/logout">`) || !strings.Contains(a.header.Get("Content-Security-Policy"), "form-action 'self'") {
		t.Fatalf("sign-out page: %d %v %s", a.status, a.header, a.body)
	}
	for _, browser := range []bool{true, false} {
		c := ss.signIn(t, "alice-token-000000")
		hdr := chromiumHeaders(ss.srv.URL)
		if !browser {
			hdr = map[string]string{"Origin": ss.srv.URL}
		}
		hdr["Cookie"] = c.Name + "=" + c.Value
		a := ss.send(t, "POST", "/auth/logout", hdr, url.Values{})
		want := map[bool]int{true: http.StatusOK, false: http.StatusNoContent}[browser]
		if a.status != want || !strings.Contains(a.header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("browser %v: sign-out %d %q, want %d and the cookie cleared", browser, a.status, a.header.Get("Set-Cookie"), want)
		}
		if browser && !strings.Contains(a.body, "<h1>Signed out</h1>") {
			t.Errorf("signed-out page: %s", a.body)
		}
		if _, err := ss.dashboardUser(c); err == nil {
			t.Errorf("browser %v: the session still works after sign-out", browser)
		}
	}
}

// Issue 15: the identity provider's way back (/auth/callback) answers its
// errors with a page for a browser and JSON otherwise.
func TestLoginErrorsAnswerTheirClient(t *testing.T) {
	sessions, err := auth.NewSessions(make([]byte, 32), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	api := New(Config{Version: "test"}, &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}, auth.Chain{}, sessions, nil)
	api.SetBrowserLogin(&BrowserLogin{
		OAuth2: &oauth2.Config{ClientID: "gateway", Endpoint: oauth2.Endpoint{AuthURL: "http://127.0.0.1:1/authorize", TokenURL: "http://127.0.0.1:1/token"}},
		Verify: func(context.Context, string, string) (*auth.User, error) { return nil, auth.ErrInvalid },
	})
	ss := &sessionServer{srv: httptest.NewServer(api)}
	t.Cleanup(ss.srv.Close)

	// A login started here: its state cookie, and the state the identity
	// provider would send back.
	a := ss.send(t, "GET", "/auth/login?next=/clusters/x/status", map[string]string{"Accept": browserAccept}, nil)
	loc, _ := url.Parse(a.header.Get("Location"))
	var cookie string
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	if a.status != http.StatusFound || loc.Query().Get("state") == "" || cookie == "" {
		t.Fatalf("start login: %d %v", a.status, a.header)
	}
	state := loc.Query().Get("state")

	cases := []struct {
		name, query, cookie string
		status              int
		code, says          string
	}{
		{"no login started", "state=" + state + "&code=c", "", 400, "login_expired", "Sign-in expired"},
		{"another login's answer", "state=other&code=c", cookie, 400, "login_mismatch", "Sign-in failed"},
		{"refused by the identity provider", "state=" + state + "&error=access_denied", cookie, 401, "login_refused", "Sign-in refused"},
		{"code not accepted", "state=" + state + "&code=c", cookie, 401, "login_failed", "Sign-in failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, browser := range []bool{true, false} {
				hdr := map[string]string{"Accept": browserAccept}
				if !browser {
					hdr["Accept"] = "application/json"
				}
				if tc.cookie != "" {
					hdr["Cookie"] = tc.cookie
				}
				a := ss.send(t, "GET", "/auth/callback?"+tc.query, hdr, nil)
				if a.status != tc.status {
					t.Fatalf("browser %v: %d, want %d: %s", browser, a.status, tc.status, a.body)
				}
				if browser && (!a.isPage() || !strings.Contains(a.body, "<h1>"+tc.says+"</h1>")) {
					t.Errorf("a browser got %q: %s", a.header.Get("Content-Type"), a.body)
				}
				if !browser && a.jsonCode() != tc.code {
					t.Errorf("an API client got %q: %s", a.header.Get("Content-Type"), a.body)
				}
			}
		})
	}
}

// Regression test for issue 32 finding 2: the sign-in form was read in
// full before any check, so a POST declaring a 1 MB body and sending a
// byte every few seconds held its connection for the server's whole read
// timeout. A declared body over the form's bound is refused before it is
// read; one without a declared length is cut at the bound; the ticket is
// not spent by either.
func TestSignInFormBounded(t *testing.T) {
	ss, _ := newSessionServer(t)
	_, form := ss.link(t, "alice-token-000000")
	addr := strings.TrimPrefix(ss.srv.URL, "http://")
	for _, tc := range []struct {
		name, framing, body string
	}{
		{"declared 1 MB, sent slowly", "Content-Length: 1000000\r\n", "t="},
		{"chunked, over the bound", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\nt=%s\r\n0\r\n\r\n", maxTicketForm+2, strings.Repeat("a", maxTicketForm))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // the hang bound: the answer comes without the rest of the body
			if _, err := fmt.Fprintf(c, "POST /auth/ticket HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nContent-Type: application/x-www-form-urlencoded\r\n%s\r\n%s",
				addr, ss.srv.URL, tc.framing, tc.body); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer while the rest of the body was not sent: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), fmt.Sprintf("at most %d bytes", maxTicketForm)) {
				t.Fatalf("answered %s %s; want 413 saying the form's bound", resp.Status, b)
			}
		})
	}
	if a := ss.send(t, "POST", "/auth/ticket", chromiumHeaders(ss.srv.URL), form); a.status != http.StatusSeeOther {
		t.Fatalf("the real form after the refusals: %d %s", a.status, a.body)
	}
}
