package proxy

import (
	"encoding/json"
	"html"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// chromiumAccept is the Accept header Chromium sends when it opens a page.
const chromiumAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"

// Issue 15: the proxy's own errors are a page a person can read when a
// browser opened the dashboard, and the API's JSON error for API clients
// (and for a dashboard's scripts, whose fetch() does not ask for HTML).
func TestDashboardErrorsAnswerTheirClient(t *testing.T) {
	deadURL := deadURL(t)
	rt := routes.New()
	rt.SetRoute("down", "alice", "127.0.0.1:1", deadURL, nil, nil)
	rt.SetRoute("c2", "bob", "127.0.0.1:1", deadURL, nil, nil)
	h := New(Config{DialTimeout: ioTimeout}, rt).DashboardHandler(sessionAuthn)

	cases := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		code, title, msg   string
	}{
		{"bad token", "GET", "/clusters/down/status", map[string]string{"Authorization": "Bearer mallory-token"}, 401, "unauthenticated", "Sign-in needed", "authentication failed"},
		{"another user's cluster", "GET", "/clusters/c2/status", alice, 404, "cluster_not_found", "Dashboard not found", "cluster c2 not found or not running"},
		{"no cluster name", "GET", "/clusters/", alice, 404, "cluster_not_found", "Dashboard not found", "no cluster named in the path; use /clusters/<name>/status"},
		{"cross-site post", "POST", "/clusters/down/status", map[string]string{"Cookie": auth.SessionCookie + "=alice-session", "Origin": "http://evil.example"}, 403, "cross_site", "Request refused", "cross-site request refused: Origin http://evil.example is not this gateway"},
		{"dashboard down", "GET", "/clusters/down/status", alice, 502, "bad_gateway", "The dashboard did not answer", "the cluster's dashboard did not answer"},
	}
	for _, tc := range cases {
		for _, accept := range []string{chromiumAccept, "application/json", ""} {
			t.Run(tc.name+"/"+strings.SplitN(accept, ",", 2)[0], func(t *testing.T) {
				req := httptest.NewRequest(tc.method, tc.path, nil)
				for k, v := range tc.hdr {
					req.Header.Set(k, v)
				}
				if accept != "" {
					req.Header.Set("Accept", accept)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				body := rec.Body.String()
				if rec.Code != tc.status || rec.Header().Get("Cache-Control") != "no-store" {
					t.Fatalf("%d %q, want %d, no-store: %s", rec.Code, rec.Header().Get("Cache-Control"), tc.status, body)
				}
				if accept == chromiumAccept {
					if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
						t.Fatalf("Content-Type %q for a browser: %s", ct, body)
					}
					for _, want := range []string{"<h1>" + html.EscapeString(tc.title) + "</h1>", html.EscapeString(tc.msg), tc.code} {
						if !strings.Contains(body, want) {
							t.Errorf("page lacks %q:\n%s", want, body)
						}
					}
					if strings.HasPrefix(strings.TrimSpace(body), "{") {
						t.Errorf("a browser got JSON: %s", body)
					}
					return
				}
				var e dashErr
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &e) != nil {
					t.Fatalf("Content-Type %q, body %q: want JSON", ct, body)
				}
				if e.Code != tc.code || e.Error != tc.msg || e.Message != tc.msg {
					t.Errorf("error %+v, want code %s, message %q", e, tc.code, tc.msg)
				}
			})
		}
	}
}

// Regression test for issue 15: a dashboard page's websocket (Dask's
// /eventstream, Bokeh's) failed in a browser: Tornado refuses an upgrade
// whose Origin is not the Host it was sent to, and the proxy sends the
// scheduler's Host. The gateway's own origin now reaches the scheduler as
// the scheduler's own; a foreign Origin reaches it unchanged.
func TestDashboardOriginForTheScheduler(t *testing.T) {
	f := startDashboard(t)
	backend := strings.TrimPrefix(f.c1.url(), "http://")
	cases := []struct{ name, origin, want string }{
		{"the gateway's own page", f.base, "http://" + backend},
		{"another site's page", "http://evil.example", "http://evil.example"},
		{"no page", "", ""},
		{"a sandboxed page", "null", "null"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.c1.requests())
			hdr := map[string]string{"Authorization": alice["Authorization"]}
			if tc.origin != "" {
				hdr["Origin"] = tc.origin
			}
			if a := f.get(t, "/clusters/c1/eventstream", hdr); a.status != 200 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			reqs := f.c1.requests()
			if len(reqs) != before+1 {
				t.Fatalf("backend got %d requests, want 1", len(reqs)-before)
			}
			if got := reqs[len(reqs)-1].Header.Get("Origin"); got != tc.want {
				t.Errorf("the scheduler saw Origin %q, want %q", got, tc.want)
			}
		})
	}
}
