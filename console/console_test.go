package console

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

func running(name, owner string) *store.Cluster {
	return &store.Cluster{Name: name, Owner: owner, OwnerName: owner, Status: store.Running, Provider: "local", Options: "{}",
		DesiredWorkers: 2, ReadyWorkers: 1, DashboardAddress: "http://127.0.0.1:1", CreatedAt: testTime, StartedAt: testTime}
}

// Every answer, pages, errors and static files alike, carries the
// security headers: no inline script or style, no framing.
func TestSecurityHeaders(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
	for _, tt := range []struct {
		name string
		b    *browser
		path string
		want int
	}{
		{"signed out", tc.browser(nil), "/", http.StatusOK},
		{"clusters", tc.browser(alice), "/", http.StatusOK},
		{"cluster", tc.browser(alice), "/c/c1", http.StatusOK},
		{"not found", tc.browser(alice), "/no/such/page", http.StatusNotFound},
		{"static", tc.browser(nil), "/static/console.css", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.b.get(tt.path)
			if a.Status != tt.want {
				t.Fatalf("GET %s: %d, want %d:\n%s", tt.path, a.Status, tt.want, a.Body)
			}
			csp := a.Header.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") {
				t.Errorf("CSP allows inline: %q", csp)
			}
			if a.Header.Get("X-Frame-Options") != "DENY" || a.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers: %v", a.Header)
			}
			if strings.Contains(a.Body, "<script>") || strings.Contains(a.Body, " style=") || strings.Contains(a.Body, "<style") {
				t.Errorf("inline script or style in %s", tt.path)
			}
		})
	}
}

func TestSignedOut(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
	b := tc.browser(nil)
	a := b.get("/c/c1?x=1")
	if a.Status != http.StatusOK || !strings.Contains(a.Body, "Sign in to the gateway") ||
		!strings.Contains(a.Body, `href="/auth/login?next=%2Fc%2Fc1%3Fx%3D1"`) || strings.Contains(a.Body, "c1</h1>") {
		t.Fatalf("signed out, /c/c1: %d\n%s", a.Status, a.Body)
	}
	if a := b.post("/c/c1/stop", url.Values{}); a.Status != http.StatusUnauthorized {
		t.Fatalf("signed-out stop: %d", a.Status)
	}
	if len(tc.clusters.stopped) != 0 {
		t.Fatalf("stopped %v", tc.clusters.stopped)
	}
	// An ended session is signed out too.
	ended := tc.browser(alice)
	base, _ := url.Parse(tc.srv.URL)
	req := &http.Request{Header: http.Header{}}
	for _, c := range ended.client.Jar.Cookies(base) {
		req.AddCookie(c)
	}
	req = req.WithContext(context.Background())
	if err := tc.sessions.End(req); err != nil {
		t.Fatal(err)
	}
	tc.sessions.Forget()
	if a := ended.get("/"); !strings.Contains(a.Body, "Sign in to the gateway") {
		t.Fatalf("ended session: %d\n%s", a.Status, a.Body)
	}
}

func TestClustersPage(t *testing.T) {
	stopped := running("old", "alice")
	stopped.Status, stopped.StoppedAt, stopped.Reason = store.Stopped, testTime.Add(90*time.Minute), "stopped by alice"
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice"), stopped, running("b1", "bob")))
	a := tc.browser(alice).get("/")
	for _, want := range []string{`href="/c/c1"`, "1 / 2", `href="/clusters/c1/status"`, `action="/c/c1/stop"`, `action="/c/c1/scale"`,
		"Recently ended", `href="/c/old"`, "1h30m", "stopped by alice"} {
		if !strings.Contains(a.Body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if strings.Contains(a.Body, "b1") {
		t.Error("alice's list shows bob's cluster")
	}
	if strings.Contains(a.Body, `action="/c/old/stop"`) {
		t.Error("an ended cluster has a stop button")
	}
}

// Another user's cluster is not found, to see and to act on.
func TestIsolation(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
	b := tc.browser(bob)
	if a := b.get("/c/c1"); a.Status != http.StatusNotFound || strings.Contains(a.Body, "127.0.0.1:1") {
		t.Fatalf("bob opens alice's cluster: %d\n%s", a.Status, a.Body)
	}
	for _, path := range []string{"/c/c1/stop", "/c/c1/scale"} {
		if a := b.post(path, url.Values{"workers": {"5"}}); a.Status != http.StatusNotFound {
			t.Errorf("bob posts %s: %d", path, a.Status)
		}
	}
	if len(tc.clusters.stopped) != 0 || len(tc.clusters.scaled) != 0 {
		t.Fatalf("bob changed alice's cluster: stopped %v, scaled %v", tc.clusters.stopped, tc.clusters.scaled)
	}
}

func TestActions(t *testing.T) {
	tests := []struct {
		name       string
		user       bool
		readOnly   bool
		path       string
		form       url.Values
		header     map[string]string
		wantStatus int
		wantWhere  string // Location on success
		wantText   string
	}{
		{name: "scale", path: "/c/c1/scale", form: url.Values{"workers": {"5"}}, wantStatus: http.StatusSeeOther, wantWhere: "/c/c1?msg="},
		{name: "scale from the list", path: "/c/c1/scale", form: url.Values{"workers": {"3"}, "from": {"list"}}, wantStatus: http.StatusSeeOther, wantWhere: "/?msg="},
		{name: "scale, not a number", path: "/c/c1/scale", form: url.Values{"workers": {"many"}}, wantStatus: http.StatusUnprocessableEntity, wantText: "Workers must be a whole number from 0, not &#34;many&#34;"},
		{name: "scale, negative", path: "/c/c1/scale", form: url.Values{"workers": {"-1"}}, wantStatus: http.StatusUnprocessableEntity, wantText: "whole number from 0"},
		{name: "scale, unknown cluster", path: "/c/nope/scale", form: url.Values{"workers": {"1"}}, wantStatus: http.StatusNotFound},
		{name: "stop", path: "/c/c1/stop", form: url.Values{}, wantStatus: http.StatusSeeOther, wantWhere: "/c/c1?msg=Stopping"},
		{name: "cross-site", path: "/c/c1/stop", form: url.Values{}, header: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			wantStatus: http.StatusForbidden, wantText: "did not come from the gateway"},
		{name: "read-only", readOnly: true, path: "/c/c1/stop", form: url.Values{}, wantStatus: http.StatusForbidden, wantText: "read-only"},
		{name: "too large", path: "/c/c1/scale", form: url.Values{"workers": {"1"}, "pad": {strings.Repeat("x", maxForm)}}, wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
			u := alice
			if tt.readOnly {
				u = aliceRO
			}
			a := tc.browser(u).do("POST", tt.path, tt.form, tt.header)
			if a.Status != tt.wantStatus || !strings.HasPrefix(a.Header.Get("Location"), tt.wantWhere) || !strings.Contains(a.Body, tt.wantText) {
				t.Fatalf("POST %s: %d at %q, want %d at %q with %q:\n%s", tt.path, a.Status, a.Header.Get("Location"), tt.wantStatus, tt.wantWhere, tt.wantText, a.Body)
			}
			changed := len(tc.clusters.stopped) + len(tc.clusters.scaled)
			if (tt.wantStatus == http.StatusSeeOther) != (changed == 1) {
				t.Fatalf("changes made: stopped %v, scaled %v", tc.clusters.stopped, tc.clusters.scaled)
			}
		})
	}
}

// A read-only session sees no controls.
func TestReadOnlyShowsNoControls(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
	for _, path := range []string{"/", "/c/c1"} {
		a := tc.browser(aliceRO).get(path)
		if a.Status != http.StatusOK || strings.Contains(a.Body, `method="post" action="/c/`) || !strings.Contains(a.Body, "(read-only)") {
			t.Errorf("%s as read-only: %d\n%s", path, a.Status, a.Body)
		}
	}
}

// What users control is rendered as text: cluster names, phases,
// reasons, events and log lines.
func TestHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	c := running("c1", "alice")
	c.Phase, c.Reason = evil, evil
	f := newFakeClusters(c)
	f.events["c1"] = []store.Event{{At: testTime, Kind: evil, Message: evil}}
	f.logs["c1"] = evil + "\n</pre><script>alert(1)</script>\n"
	tc := newTestConsole(t, f)
	for _, path := range []string{"/", "/c/c1"} {
		expectEscaped(t, path, tc.browser(&auth.User{ID: "alice", Name: evil}).get(path))
	}
	// A message in the URL is the action's own words, shown as text.
	a := tc.browser(alice).get("/?msg=" + url.QueryEscape(evil))
	if strings.Contains(a.Body, "<img src=x") || !strings.Contains(a.Body, "&lt;img") {
		t.Errorf("the message renders as HTML:\n%s", a.Body)
	}
}

// expectEscaped checks that a page shows the hostile value
// (<img src=x onerror=alert(1)>, and a script in a log) as text, never
// as HTML.
func expectEscaped(t *testing.T, path string, a answer) {
	t.Helper()
	if a.Status != http.StatusOK {
		t.Fatalf("%s: %d\n%s", path, a.Status, a.Body)
	}
	if strings.Contains(a.Body, "<img src=x") || strings.Contains(a.Body, "<script>alert") {
		t.Errorf("%s renders a hostile value as HTML:\n%s", path, a.Body)
	}
	if !strings.Contains(a.Body, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("%s does not show the value as text:\n%s", path, a.Body)
	}
}

// The event stream sends the clusters table anew when the user's
// clusters change, and only theirs.
func TestEventStream(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"), running("b1", "bob"))
	tc := newTestConsole(t, f)
	rd := openStream(t, tc.browser(alice))
	// bob's change is not alice's news; hers is.
	f.change("bob", func(m map[string]*store.Cluster) { m["b1"].DesiredWorkers = 9 })
	f.change("alice", func(m map[string]*store.Cluster) { m["c2"] = running("c2", "alice") })
	event, data := readEvent(t, rd)
	if event != "clusters" || !strings.Contains(data, `href="/c/c2"`) || strings.Contains(data, "b1") {
		t.Fatalf("event %q:\n%s", event, data)
	}
}

// A user's open pages render a change once between them.
func TestEventStreamRendersOnce(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"))
	tc := newTestConsole(t, f)
	var streams []*bufio.Reader
	for range 3 {
		streams = append(streams, openStream(t, tc.browser(alice)))
	}
	f.mu.Lock()
	before := f.lists
	f.mu.Unlock()
	f.change("alice", func(m map[string]*store.Cluster) { m["c2"] = running("c2", "alice") })
	for i, rd := range streams {
		if event, data := readEvent(t, rd); event != "clusters" || !strings.Contains(data, "c2") {
			t.Fatalf("stream %d: %q\n%s", i, event, data)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.lists - before; n != 1 {
		t.Fatalf("the clusters were listed %d times for 3 pages of one user, want 1", n)
	}
}

// openStream opens the event stream as b and reads past its first
// (retry) line, so that the stream is subscribed.
func openStream(t *testing.T, b *browser) *bufio.Reader {
	t.Helper()
	return openStreamAt(t, b, "/events")
}

// readEvent reads one server-sent event (comments skipped).
func readEvent(t *testing.T, rd *bufio.Reader) (event, data string) {
	t.Helper()
	var lines []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && event != "":
			return event, strings.Join(lines, "\n")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			lines = append(lines, strings.TrimPrefix(line, "data: "))
		}
	}
}
