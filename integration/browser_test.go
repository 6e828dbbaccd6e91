package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The browser tests drive Debian's Chromium (headless) through the Chrome
// DevTools protocol against the real `gateway dev`: they click what a
// person clicks and check what the page shows. Each test runs its own
// browser with a fresh profile; the gateway and its clusters are shared.

// chromiumPath is the browser the tests drive: GATEWAY_TEST_CHROMIUM, else
// Debian's package.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("GATEWAY_TEST_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		msg := fmt.Sprintf("the browser tests need Chromium at %s (on Debian: apt-get install chromium; scripts/setup.sh installs it as root): %v", path, err)
		if os.Getenv("GATEWAY_TEST_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s (GATEWAY_TEST_REQUIRE_BROWSER=1)", msg)
		}
		t.Skip(msg)
	}
	return path
}

// browser is one headless Chromium with its own profile, and the place
// where its screenshots go.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
	n     int
}

// stepTimeout bounds every browser step; browserTimeout the whole browser.
const (
	stepTimeout    = 30 * time.Second
	browserTimeout = 4 * time.Minute
)

func newBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	bounded, cancelBound := context.WithTimeout(context.Background(), browserTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(bounded, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc() // stops the browser and waits for it
		cancelBound()
	})
	b := &browser{t: t, ctx: ctx, shots: artifactDir(t)}
	if err := chromedp.Do(ctx); err != nil { // start it, outside any step's timeout
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return b
}

// artifactDir is where a test's screenshots go: under
// GATEWAY_TEST_ARTIFACTS when set (kept: scripts/test.sh sets it, and
// prints where), else a temporary directory, kept (and its place logged)
// only when the test fails.
func artifactDir(t *testing.T) string {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	var dir string
	if root := os.Getenv("GATEWAY_TEST_ARTIFACTS"); root != "" {
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		// One folder a browser: a test with two (two users) keeps both.
		d, err := os.MkdirTemp(root, name+"-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	} else {
		d, err := os.MkdirTemp("", "gateway-browser-"+name+"-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	kept := os.Getenv("GATEWAY_TEST_ARTIFACTS") != ""
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screenshots of each step: %s", dir)
			return
		}
		if !kept {
			_ = os.RemoveAll(dir)
		}
	})
	return dir
}

// step runs actions within stepTimeout, then saves a screenshot and the
// page's HTML named after the step.
func (b *browser) step(name string, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	err := chromedp.Do(ctx, actions...)
	b.snapshot(name)
	return err
}

func (b *browser) snapshot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	b.n++
	base := filepath.Join(b.shots, fmt.Sprintf("%02d-%s", b.n, regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(name), "-")))
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		_ = os.WriteFile(base+".png", png, 0o644)
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
		_ = os.WriteFile(base+".html", []byte(html), 0o644)
	}
}

// must runs a step and stops the test if it fails.
func (b *browser) must(name string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := b.step(name, actions...); err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
}

// open navigates to u and returns the HTTP status of the page it ends on.
func (b *browser) open(name, u string) int64 {
	b.t.Helper()
	return b.navigation(name, chromedp.Navigate(u))
}

// click clicks the element and returns the HTTP status of the page the
// click leads to.
func (b *browser) click(name string, sel chromedp.CSS) int64 {
	b.t.Helper()
	return b.navigation(name, chromedp.WaitVisible(sel), chromedp.Click(sel))
}

func (b *browser) navigation(name string, actions ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	b.snapshot(name)
	if err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
	return resp.Status
}

// page is what the page in the tab shows.
type page struct {
	URL, ContentType, Title, H1, Text string
}

func (b *browser) page() page {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	p, err := chromedp.Run(ctx, chromedp.Evaluate[page](`({
		URL: location.href,
		ContentType: document.contentType,
		Title: document.title,
		H1: (document.querySelector("h1") || {}).innerText || "",
		Text: document.body ? document.body.innerText : "",
	})`))
	if err != nil {
		b.t.Fatalf("reading the page: %v", err)
	}
	return p
}

// browserGateway is one gateway for the browser tests: dev with a running
// cluster of two workers, dev2 with a cluster of none.
type browserGateway struct {
	e, dev2     *env
	devCluster  string
	dev2Cluster string
	chromium    string
}

func startBrowserGateway(t *testing.T) *browserGateway {
	t.Helper()
	chromium := chromiumPath(t)
	e := newEnv(t)
	e.startGateway()
	g := &browserGateway{e: e, dev2: e.userEnv(t, "dev2"), chromium: chromium}
	var a, b cluster
	e.gwJSON(&a, "new-cluster", "--workers", "2")
	g.dev2.gwJSON(&b, "new-cluster", "--workers", "0")
	if a.Status != "RUNNING" || b.Status != "RUNNING" {
		t.Fatalf("clusters: dev's %s, dev2's %s; want RUNNING", a.Status, b.Status)
	}
	g.devCluster, g.dev2Cluster = a.Name, b.Name
	return g
}

var linkRE = regexp.MustCompile(`https?://\S+/auth/ticket\?\S+`)

// link runs `gateway dashboard NAME` as u and returns the link it prints.
func (g *browserGateway) link(t *testing.T, u *env, name string) string {
	t.Helper()
	out := u.gwOK("dashboard", name)
	l := linkRE.FindString(out)
	if l == "" {
		t.Fatalf("gateway dashboard %s printed no sign-in link:\n%s", name, out)
	}
	return l
}

func (g *browserGateway) dashboard(name, path string) string {
	return g.e.url + "/clusters/" + name + path
}

// signInWithLink follows a sign-in link the way a person does: open it,
// check who it signs in as, click the button, land on the dashboard.
func (g *browserGateway) signInWithLink(t *testing.T, b *browser, link, user, cluster string) {
	t.Helper()
	if status := b.open("open the sign-in link", link); status != http.StatusOK {
		t.Fatalf("sign-in link: HTTP %d: %+v", status, b.page())
	}
	p := b.page()
	if p.H1 != "Sign in to the gateway" || !strings.Contains(p.Text, "signs this browser in as "+user) {
		t.Fatalf("confirm page: %+v", p)
	}
	status := b.click("click sign in", `button[type=submit]`)
	p = b.page()
	want := "/clusters/" + cluster + "/status"
	if u, _ := url.Parse(p.URL); !dashboardStatusPage(int(status), p.H1) || u.Path != want || u.Host != strings.TrimPrefix(g.e.url, "http://") {
		t.Fatalf("after clicking %q: HTTP %d at %s, want the dashboard %s (page: %q %q)", "Sign in as "+user, status, p.URL, want, p.H1, p.Text)
	}
}

// dashboardStatusPage says whether a dashboard's /status answered as it
// should: Dask's page with bokeh, or without it (Debian's
// python3-distributed) the gateway's page saying what is missing.
func dashboardStatusPage(status int, text string) bool {
	// The gateway's page when Dask has no bokeh: HTML for a browser, the
	// API's JSON error for a client that does not ask for HTML.
	return status == http.StatusOK || status == http.StatusServiceUnavailable &&
		(strings.Contains(text, "This dashboard needs bokeh") || strings.Contains(text, `"code":"dashboard_unavailable"`))
}

// expectWorkersPage opens the scheduler's workers page (served by Dask
// without bokeh) and checks it lists n workers.
func (g *browserGateway) expectWorkersPage(t *testing.T, b *browser, cluster string, n int) {
	t.Helper()
	u := g.dashboard(cluster, "/info/main/workers.html")
	if status := b.open("open the workers page", u); status != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %+v", u, status, b.page())
	}
	p := b.page()
	if p.URL != u || !strings.Contains(p.Text, "Workers") {
		t.Fatalf("workers page: at %s, showing %q", p.URL, p.Text)
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("a[href^='../worker/']").length`))
	if err != nil || rows != n {
		t.Fatalf("workers page links %d workers (%v), want %d:\n%s", rows, err, n, p.Text)
	}
}

// expectIssuerLogin checks the tab shows the dev issuer's sign-in page
// (another origin than the gateway's), offering the given user.
func (g *browserGateway) expectIssuerLogin(t *testing.T, b *browser, user string) {
	t.Helper()
	p := b.page()
	u, _ := url.Parse(p.URL)
	if u.Host == strings.TrimPrefix(g.e.url, "http://") || u.Path != "/login" {
		t.Fatalf("want the identity provider's login page, got %s: %q", p.URL, p.Text)
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`button[name=username][value=`+user+`]`))); err != nil {
		t.Fatalf("no button for %s on the issuer's page: %v\n%s", user, err, p.Text)
	}
}

// expectErrorPage checks the tab shows one of the gateway's error pages
// (HTML, not the API's JSON) with the status, heading and words given.
func expectErrorPage(t *testing.T, b *browser, status, wantStatus int64, h1 string, words ...string) {
	t.Helper()
	p := b.page()
	if status != wantStatus || p.ContentType != "text/html" || p.H1 != h1 || strings.HasPrefix(strings.TrimSpace(p.Text), "{") {
		t.Fatalf("HTTP %d, %s, heading %q, want %d, text/html, %q; the page shows:\n%s", status, p.ContentType, p.H1, wantStatus, h1, p.Text)
	}
	for _, w := range words {
		if !strings.Contains(p.Text, w) {
			t.Errorf("the page does not say %q:\n%s", w, p.Text)
		}
	}
}

// TestBrowser runs the browser tests on one gateway.
func TestBrowser(t *testing.T) {
	t.Parallel()
	g := startBrowserGateway(t)

	// Regression test for issue 15: the link that `gateway dashboard`
	// prints signs Chromium in (it answered "cross_site" when the confirm
	// page's Referrer-Policy made the browser send "Origin: null"), and the
	// session then opens the cluster's other dashboard pages.
	t.Run("SignInLink", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		g.signInWithLink(t, b, g.link(t, g.e, g.devCluster), "dev", g.devCluster)
		g.expectWorkersPage(t, b, g.devCluster, 2)
	})

	// The OIDC redirect: a dashboard URL without a session leads to the
	// identity provider's page; picking a user there comes back to the
	// dashboard. Another user's dashboard is then 404, as is a name that
	// does not exist, with the same page.
	t.Run("OIDCRedirectAndIsolation", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		want := g.dashboard(g.dev2Cluster, "/info/main/workers.html")
		b.open("open a dashboard without a session", want)
		g.expectIssuerLogin(t, b, "dev2")
		status := b.click("pick dev2 on the issuer's page", `button[name=username][value=dev2]`)
		if p := b.page(); status != http.StatusOK || p.URL != want || !strings.Contains(p.Text, "Workers") {
			t.Fatalf("after signing in as dev2: HTTP %d at %s, want %s: %q", status, p.URL, want, p.Text)
		}
		status = b.open("open dev's dashboard as dev2", g.dashboard(g.devCluster, "/info/main/workers.html"))
		expectErrorPage(t, b, status, http.StatusNotFound, "Dashboard not found", "cluster "+g.devCluster+" not found or not running")
		status = b.open("open a dashboard that does not exist", g.dashboard("no-such-cluster", "/status"))
		expectErrorPage(t, b, status, http.StatusNotFound, "Dashboard not found", "cluster no-such-cluster not found or not running")
		// Still signed in as dev2.
		g.expectWorkersPage(t, b, g.dev2Cluster, 0)
	})

	// Sign-out on the gateway's page ends the session: dashboards ask for
	// a sign-in again.
	t.Run("SignOut", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		g.signInWithLink(t, b, g.link(t, g.e, g.devCluster), "dev", g.devCluster)
		if status := b.open("open the sign-out page", g.e.url+"/auth/logout"); status != http.StatusOK {
			t.Fatalf("sign-out page: HTTP %d", status)
		}
		status := b.click("click sign out", `button[type=submit]`)
		if p := b.page(); status != http.StatusOK || p.H1 != "Signed out" {
			t.Fatalf("after clicking Sign out: HTTP %d: %+v", status, p)
		}
		b.open("open the dashboard after signing out", g.dashboard(g.devCluster, "/info/main/workers.html"))
		g.expectIssuerLogin(t, b, "dev")
	})

	// A used link, a link used elsewhere while its page was open, and a
	// made-up one are refused with a page that says what to do.
	t.Run("RefusedLinks", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		link := g.link(t, g.e, g.devCluster)
		g.signInWithLink(t, b, link, "dev", g.devCluster)
		status := b.open("open the used link again", link)
		expectErrorPage(t, b, status, http.StatusUnauthorized, "This sign-in link no longer works", "used or expired", "gateway dashboard NAME")

		// Spent by someone else (another tab, a copy) between opening the
		// page and clicking.
		other := g.link(t, g.e, g.devCluster)
		if status := b.open("open a fresh link", other); status != http.StatusOK {
			t.Fatalf("fresh link: HTTP %d", status)
		}
		lu, _ := url.Parse(other)
		resp, err := http.PostForm(g.e.url+"/auth/ticket", url.Values{"t": {lu.Query().Get("t")}, "next": {lu.Query().Get("next")}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status = b.click("click sign in on a link used elsewhere", `button[type=submit]`)
		expectErrorPage(t, b, status, http.StatusUnauthorized, "This sign-in link no longer works", "gateway dashboard NAME")

		made := g.e.url + "/auth/ticket?" + url.Values{"t": {"gwt_not-a-real-ticket"}, "next": {"/clusters/" + g.devCluster + "/status"}}.Encode()
		status = b.open("open a made-up link", made)
		expectErrorPage(t, b, status, http.StatusUnauthorized, "This sign-in link no longer works", "gateway dashboard NAME")
	})

	// Issue 38: without a usable bokeh (Debian's python3-distributed), every
	// bokeh page of the dashboard is the gateway's page: what is missing,
	// the command for this machine, links to the pages that work (which
	// do). With bokeh, the plots themselves.
	t.Run("MissingBokeh", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		g.signInWithLink(t, b, g.link(t, g.e, g.devCluster), "dev", g.devCluster)
		if exec.Command(python, "-c", "import bokeh").Run() == nil {
			// An image with bokeh: the gateway stays out of the way (the
			// check's range is TestDashboardWithBokeh's).
			if p := b.page(); p.H1 == "This dashboard needs bokeh" {
				t.Fatalf("with bokeh installed, the gateway still answers the dashboard: %q", p.Text)
			}
			return
		}
		for _, path := range []string{"/", "/status", "/workers", "/graph", "/tasks", "/system", "/profile", "/groups", "/individual-task-stream"} {
			status := b.open("open "+path, g.dashboard(g.devCluster, path))
			expectErrorPage(t, b, status, http.StatusServiceUnavailable, "This dashboard needs bokeh",
				"without bokeh", "-m pip install --user --break-system-packages 'bokeh>=2.4.2,<=2.4.3'", "These pages work without it")
		}
		checkAccessibility(t, b, "the missing-bokeh page")
		status := b.click("click Workers on the missing-bokeh page", `#links a[href$="/info/main/workers.html"]`)
		if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Workers") {
			t.Fatalf("the page's Workers link: HTTP %d: %q", status, p.Text)
		}
		// Another user is told nothing about the cluster.
		b2 := newBrowser(t, g.chromium)
		g.signInWithLink(t, b2, g.link(t, g.dev2, g.dev2Cluster), "dev2", g.dev2Cluster)
		status = b2.open("open dev's status page as dev2", g.dashboard(g.devCluster, "/status"))
		expectErrorPage(t, b2, status, http.StatusNotFound, "Dashboard not found")
	})

	// Issue 38: a worker's own pages through the gateway. The scheduler's
	// workers page links each worker as proxy/<port>/<host>/status; the
	// gateway sends that to the worker's path (once it has recorded the
	// worker's server), where the owner gets the worker's page (or the
	// missing-bokeh page) and its /health; another user gets 404.
	t.Run("WorkerPage", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		g.signInWithLink(t, b, g.link(t, g.e, g.devCluster), "dev", g.devCluster)
		workerPath := g.dashboard(g.devCluster, "/worker/")
		var landed string
		// The gateway records a worker's server on its next pass over the
		// cluster: generously bounded.
		for deadline := time.Now().Add(time.Minute); ; {
			if status := b.open("open the workers page", g.dashboard(g.devCluster, "/info/main/workers.html")); status != http.StatusOK {
				t.Fatalf("workers page: HTTP %d", status)
			}
			b.click("click a worker's dashboard link", `a[href*="/proxy/"]`)
			if landed = b.page().URL; strings.HasPrefix(landed, workerPath) || time.Now().After(deadline) {
				break
			}
		}
		if !strings.HasPrefix(landed, workerPath) || !strings.HasSuffix(landed, "/status") {
			t.Fatalf("the worker's dashboard link led to %s, want %s<worker>/status", landed, workerPath)
		}
		if p := b.page(); p.H1 != "This dashboard needs bokeh" && exec.Command(python, "-c", "import bokeh").Run() != nil {
			t.Fatalf("worker status page without bokeh: %q %q", p.H1, p.Text)
		}
		health := strings.TrimSuffix(landed, "/status") + "/health"
		if status := b.open("open the worker's health", health); status != http.StatusOK || strings.TrimSpace(b.page().Text) != "ok" {
			t.Fatalf("worker health: HTTP %d: %q", status, b.page().Text)
		}
		b2 := newBrowser(t, g.chromium)
		g.signInWithLink(t, b2, g.link(t, g.dev2, g.dev2Cluster), "dev2", g.dev2Cluster)
		for _, u := range []string{landed, health} {
			status := b2.open("open dev's worker page as dev2", u)
			expectErrorPage(t, b2, status, http.StatusNotFound, "Dashboard not found")
		}
	})

	// Issue 38: Enter on the dev issuer's device page, after typing the
	// code, approves nobody; the person picks an identity, and that one
	// signs in.
	t.Run("DevicePageEnter", func(t *testing.T) {
		u := &env{t: t, bin: g.e.bin, home: t.TempDir(), gwLog: g.e.gwLog, url: g.e.url}
		u.vars = append(filterEnv(os.Environ()), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, "config"), "GATEWAY_URL="+g.e.url)
		code, uri, wait := u.startLogin()
		b := newBrowser(t, g.chromium)
		if status := b.open("open the device page", uri); status != http.StatusOK {
			t.Fatalf("device page: HTTP %d", status)
		}
		checkAccessibility(t, b, "the device page")
		b.must("type the code and press Enter", chromedp.SendKeys(`#user_code`, code+kb.Enter))
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		defer cancel()
		invalid, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("input[name=username]:invalid") !== null`))
		if p := b.page(); err != nil || !invalid || p.H1 != "Connect a device" {
			t.Fatalf("after Enter with no identity chosen: %v, no choice asked for %v, page %q: %q", err, !invalid, p.H1, p.Text)
		}
		b.must("choose dev2", chromedp.Click(`input[name=username][value=dev2]`))
		status := b.navigation("press Enter in the code's field", chromedp.SendKeys(`#user_code`, kb.Enter))
		if p := b.page(); status != http.StatusOK || p.H1 != "Device connected" || !strings.Contains(p.Text, "Signed in as dev2") {
			t.Fatalf("after choosing dev2 and Enter: HTTP %d: %q %q", status, p.H1, p.Text)
		}
		if out := wait(); !strings.Contains(out, "as dev2") {
			t.Fatalf("gateway login: %s", out)
		}
	})

	// A websocket through the dashboard proxy, opened by a dashboard page's
	// JavaScript: the real scheduler's /eventstream (Dask's websocket,
	// served without bokeh) announces the cluster's workers and answers a
	// ping. The same script on another origin's page is refused, though
	// the browser sends the session cookie along (the port differs, the
	// site does not).
	t.Run("Websocket", func(t *testing.T) {
		b := newBrowser(t, g.chromium)
		g.signInWithLink(t, b, g.link(t, g.e, g.devCluster), "dev", g.devCluster)
		g.expectWorkersPage(t, b, g.devCluster, 2)
		wsURL := strings.Replace(g.dashboard(g.devCluster, "/eventstream"), "http://", "ws://", 1)
		script := `new Promise((resolve) => {
			const got = [];
			const ws = new WebSocket(` + fmt.Sprintf("%q", wsURL) + `);
			const done = (how) => { clearTimeout(timer); resolve({how, got}); try { ws.close(); } catch (e) {} };
			const timer = setTimeout(() => done("timeout"), 20000);
			ws.onopen = () => { got.push("open"); ws.send(JSON.stringify({name: "ping"})); };
			ws.onmessage = (ev) => { const m = JSON.parse(ev.data); got.push(m.name); if (m.name === "pong") done("pong"); };
			ws.onerror = () => done("error");
			ws.onclose = (ev) => done("closed " + ev.code);
		})`
		type result struct {
			How string
			Got []string
		}
		run := func(name string) result {
			t.Helper()
			ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
			defer cancel()
			r, err := chromedp.Run(ctx, chromedp.Evaluate[result](script, chromedp.EvalAwaitPromise))
			b.snapshot(name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return r
		}
		r := run("websocket from the dashboard page")
		workers := 0
		for _, m := range r.Got {
			if m == "add_worker" {
				workers++
			}
		}
		if r.How != "pong" || len(r.Got) == 0 || r.Got[0] != "open" || workers != 2 {
			t.Fatalf("websocket from the dashboard's page: %s after %v; want open, two add_worker, pong\n--- gateway log:\n%s", r.How, r.Got, g.e.gwLog.String())
		}

		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><title>another site</title><h1>Another site</h1>`)
		}))
		defer other.Close()
		if status := b.open("open another origin's page", other.URL); status != http.StatusOK {
			t.Fatalf("other page: HTTP %d", status)
		}
		const refusal = "refusing a cross-site dashboard request"
		before := strings.Count(g.e.gwLog.String(), refusal)
		if r := run("websocket from another origin's page"); r.How == "pong" || len(r.Got) > 0 && r.Got[0] == "open" {
			t.Fatalf("another origin's page opened the dashboard's websocket: %s after %v", r.How, r.Got)
		}
		// Refused by the gateway's origin check (the browser did send the
		// cookie), not for want of a session.
		if n := strings.Count(g.e.gwLog.String(), refusal); n != before+1 {
			t.Errorf("the gateway logged %d cross-site refusals for the websocket, want 1:\n%s", n-before, g.e.gwLog.String())
		}
	})
}
