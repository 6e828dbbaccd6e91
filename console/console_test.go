package console

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
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

// TestSignInAtOnce: with the hub's sign-in, a signed-out browser asking
// for a page goes straight to sign in (no page, no button), and comes back
// to the page; the event stream and forms still answer 401.
func TestSignInAtOnce(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")), func(tc *testConsole) { tc.console.cfg.SignInAtOnce = true })
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/c/c1?x=1", http.StatusFound, "/auth/login?next=%2Fc%2Fc1%3Fx%3D1"},
		{"GET", "/", http.StatusFound, "/auth/login?next=%2F"},
		{"GET", "/events", http.StatusUnauthorized, ""},
		{"POST", "/c/c1/stop", http.StatusUnauthorized, ""},
	} {
		req, _ := http.NewRequest(tt.method, tc.srv.URL+tt.path, nil)
		req.Header.Set("Accept", "text/html")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.location {
			t.Errorf("%s %s signed out: %d to %q; want %d to %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Location"), tt.status, tt.location)
		}
	}
	if len(tc.clusters.stopped) != 0 {
		t.Fatalf("stopped %v", tc.clusters.stopped)
	}
	if a := tc.browser(alice).get("/c/c1"); a.Status != http.StatusOK {
		t.Errorf("signed in: %d", a.Status)
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
	rd := openListStream(t, tc.browser(alice))
	// bob's change is not alice's news; hers is.
	f.change("bob", func(m map[string]*store.Cluster) { m["b1"].DesiredWorkers = 9 })
	f.change("alice", func(m map[string]*store.Cluster) { m["c2"] = running("c2", "alice") })
	// The stream first sends the table as it is; then as it changes.
	readUntil(t, rd, func(event, data string) bool {
		if event != "clusters" || strings.Contains(data, "b1") {
			t.Fatalf("event %q:\n%s", event, data)
		}
		return strings.Contains(data, `href="/c/c2"`)
	})
}

// readUntil reads events until done says so.
func readUntil(t *testing.T, rd *bufio.Reader, done func(event, data string) bool) {
	t.Helper()
	for {
		if event, data := readEvent(t, rd); done(event, data) {
			return
		}
	}
}

// A user's open pages render a change once between them.
func TestEventStreamRendersOnce(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"))
	// A clock that stands still: the tables are kept by the time rounded
	// to fragmentFresh too, and a round number passing would render anew.
	tc := newTestConsole(t, f, func(tc *testConsole) { tc.console.now = func() time.Time { return testTime } })
	var streams []*bufio.Reader
	for range 3 {
		streams = append(streams, openListStream(t, tc.browser(alice)))
	}
	f.mu.Lock()
	before := f.lists
	f.mu.Unlock()
	f.change("alice", func(m map[string]*store.Cluster) { m["c2"] = running("c2", "alice") })
	for _, rd := range streams {
		// A watch's first read may tell of the table as it was, first.
		readUntil(t, rd, func(event, data string) bool {
			if event != "clusters" {
				t.Fatalf("event %q:\n%s", event, data)
			}
			return strings.Contains(data, "c2")
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.lists - before; n != 1 {
		t.Fatalf("the clusters were listed %d times for 3 pages of one user, want 1", n)
	}
}

// openListStream opens the list's event stream as b and reads past its
// first (retry) line and the page as it is, so that the stream is
// subscribed and has rendered what it starts with.
func openListStream(t *testing.T, b *browser) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.tc.srv.URL+"/events", nil)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream's first line %q: %v", line, err)
	}
	if event, _ := readEvent(t, rd); event != "clusters" {
		t.Fatalf("the stream starts with %q, want the clusters as they are", event)
	}
	return rd
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

// The list shows the newest page of a user's live clusters, and all of
// them when asked.
func TestClustersListPages(t *testing.T) {
	var cls []*store.Cluster
	for i := range listPage + 5 {
		c := running(fmt.Sprintf("c%03d", i), "alice")
		c.CreatedAt = testTime.Add(time.Duration(i) * time.Minute)
		cls = append(cls, c)
	}
	tc := newTestConsole(t, newFakeClusters(cls...))
	b := tc.browser(alice)
	a := b.get("/")
	if n := strings.Count(a.Body, "<tr data-cluster="); n != listPage {
		t.Fatalf("the list shows %d clusters, want %d", n, listPage)
	}
	last := fmt.Sprintf("c%03d", listPage+4)
	if !strings.Contains(a.Body, `href="/c/`+last+`"`) || strings.Contains(a.Body, `href="/c/c000"`) ||
		!strings.Contains(a.Body, fmt.Sprintf("The newest %d of your %d running clusters", listPage, listPage+5)) ||
		!strings.Contains(a.Body, `href="/?all=1"`) {
		t.Fatalf("the first page: newest first, and a way to all:\n%s", a.Body)
	}
	a = b.get("/?all=1")
	if n := strings.Count(a.Body, "<tr data-cluster="); n != listPage+5 || strings.Contains(a.Body, `href="/?all=1"`) ||
		!strings.Contains(a.Body, `data-stream="/events?all=1&amp;since=`) {
		t.Fatalf("?all=1 shows %d clusters, want %d, with its own stream:\n%s", n, listPage+5, a.Body)
	}
}

// A page's stream starts with the table only if it changed since the
// page was made: a large list is not sent twice for every page opened.
func TestStreamSince(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"))
	tc := newTestConsole(t, f)
	page := tc.browser(alice).get("/")
	if !strings.Contains(page.Body, `data-stream="/events?since=0"`) {
		t.Fatalf("the page names no generation for its stream:\n%s", page.Body)
	}
	// Unchanged: the first event is the change that comes next.
	_, rd := openStream(t, tc.browser(alice), "/events?since=0")
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("first line %q: %v", line, err)
	}
	f.change("alice", func(m map[string]*store.Cluster) { m["c2"] = running("c2", "alice") })
	readUntil(t, rd, func(event, data string) bool {
		if !strings.Contains(data, "c2") {
			t.Fatalf("the stream sent the table as it was first:\n%s", data)
		}
		return true
	})
	// Changed since: it starts with the table as it is now.
	_, rd = openStream(t, tc.browser(alice), "/events?since=0")
	if event, data := readEvent(t, rd); event != "clusters" || !strings.Contains(data, "c2") {
		t.Fatalf("a stale page's stream starts with %q:\n%s", event, data)
	}
}

// The stylesheet's blocks close: a rule left inside an unclosed @media
// block applies only at a phone's width (two merges once left every
// rule after the account pages' there, uncolored charts included).
func TestStylesheetBlocksClose(t *testing.T) {
	css, err := fs.ReadFile(staticFS, "static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for i, line := range strings.Split(string(css), "\n") {
		if depth == 1 && strings.HasPrefix(line, "/*") {
			t.Errorf("line %d: a section's comment inside a block: %q", i+1, line)
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth < 0 || depth > 2 {
			t.Fatalf("line %d: blocks %d deep: %q", i+1, depth, line)
		}
	}
	if depth != 0 {
		t.Errorf("%d blocks left open at the end", depth)
	}
}
