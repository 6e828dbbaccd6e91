package integration

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The console's browser tests: Chromium signs in from the console's own
// page through the dev issuer and uses the pages as a person does. Every
// page visited is checked with axe-core (testdata/axe-core, from npm:
// axe-core@4.10.3, MPL-2.0) for serious and critical accessibility
// violations, and the browser's log for Content-Security-Policy
// refusals, which would mean a page relies on something its policy
// blocks.

//go:embed testdata/axe-core/axe.min.js
var axeSource string

// consoleSignIn opens a console page signed out, follows its sign-in
// link to the dev issuer, picks user there, and checks the browser comes
// back to the page, signed in as user.
func (g *browserGateway) consoleSignIn(t *testing.T, b *browser, path, user string) {
	t.Helper()
	if status := b.open("open "+path+" signed out", g.e.url+path); status != http.StatusOK || b.page().H1 != "Sign in to the gateway" {
		t.Fatalf("%s signed out: HTTP %d: %+v", path, status, b.page())
	}
	b.click("click Sign in", chromedp.CSS(`a.button`))
	g.expectIssuerLogin(t, b, user)
	status := b.click("pick "+user+" on the issuer's page", chromedp.CSS(`button[name=username][value=`+user+`]`))
	p := b.page()
	if u, _ := url.Parse(p.URL); u.Path != path || !strings.Contains(p.Text, user) {
		t.Fatalf("after signing in as %s: HTTP %d at %s, want %s signed in:\n%s", user, status, p.URL, path, p.Text)
	}
}

// cspWatch collects the browser's log entries about the
// Content-Security-Policy.
type cspWatch struct {
	mu      sync.Mutex
	refused []string
}

func watchCSP(t *testing.T, b *browser) *cspWatch {
	t.Helper()
	w := &cspWatch{}
	err := chromedp.Listen(b.ctx, func(ev any) {
		var text string
		switch e := ev.(type) {
		case *log.EventEntryAdded:
			text = e.Entry.Text
		case *runtime.EventExceptionThrown:
			text = e.ExceptionDetails.Text
		}
		if strings.Contains(text, "Content Security Policy") || strings.Contains(text, "Content-Security-Policy") {
			w.mu.Lock()
			w.refused = append(w.refused, text)
			w.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *cspWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) > 0 {
		t.Errorf("the browser refused, by the Content-Security-Policy:\n%s", strings.Join(w.refused, "\n"))
	}
}

// axeViolation is one rule axe-core found broken.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// checkAccessibility runs axe-core on the page in the tab and fails on
// serious or critical violations. The script is evaluated through the
// DevTools protocol, which the page's CSP does not govern (turning the
// policy off would hide what watchCSP looks for).
func checkAccessibility(t *testing.T, b *browser, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](axeSource+`
;axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
  .then(r => JSON.stringify(r.violations))`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on %s: %v", name, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("axe on %s: %v", name, err)
	}
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target)+" "+n.HTML)
		}
		t.Errorf("%s: axe %s (%s): %s at\n  %s", name, v.ID, v.Impact, v.Help, strings.Join(where, "\n  "))
	}
}

// waitText waits until the element's text contains want.
func waitText(t *testing.T, b *browser, what, sel, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	js := fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err == nil && strings.Contains(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			b.snapshot(what)
			t.Fatalf("%s: %s never showed %q (last: %q, %v)", what, sel, want, got, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestConsoleBrowser: the console's clusters list in Chromium, signed in
// from the console itself: the user's clusters only, live as the CLI
// makes one, stop from the list, and the pages pass axe-core.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	g := startBrowserGateway(t)
	b := newBrowser(t, g.chromium)
	csp := watchCSP(t, b)
	b.open("open the console signed out", g.e.url+"/")
	checkAccessibility(t, b, "the sign-in page")
	g.consoleSignIn(t, b, "/", "dev")
	checkAccessibility(t, b, "the clusters list")
	p := b.page()
	if p.H1 != "Your clusters" {
		t.Fatalf("signed in, / shows %q", p.H1)
	}
	if !strings.Contains(p.Text, g.devCluster) || strings.Contains(p.Text, g.dev2Cluster) {
		t.Fatalf("dev's list: want %s and not dev2's %s:\n%s", g.devCluster, g.dev2Cluster, p.Text)
	}

	// A cluster made on the command line appears without a reload.
	var c cluster
	g.e.gwJSON(&c, "new-cluster", "--workers", "0")
	waitText(t, b, "the new cluster on the list", "#clusters", c.Name)
	b.snapshot("the list after new-cluster")

	// Its page, then stop it from the list.
	status := b.click("open the new cluster's page", chromedp.CSS(`a[href="/c/`+c.Name+`"]`))
	if p := b.page(); status != http.StatusOK || p.H1 != c.Name || !strings.Contains(p.Text, "Connect from Python") {
		t.Fatalf("cluster page: HTTP %d: %q\n%s", status, p.H1, p.Text)
	}
	checkAccessibility(t, b, "the cluster page")
	b.open("back to the list", g.e.url+"/")
	status = b.click("stop it from the list", chromedp.CSS(`tr[data-cluster="`+c.Name+`"] button.danger`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Stopping "+c.Name) {
		t.Fatalf("after stop: HTTP %d:\n%s", status, p.Text)
	}
	waitText(t, b, "the cluster among the ended", "table.ended", c.Name)

	// Another user's cluster is not found; an unknown page says so.
	status = b.open("open dev2's cluster as dev", g.e.url+"/c/"+g.dev2Cluster)
	expectErrorPage(t, b, status, http.StatusNotFound, "Not found", "cluster "+g.dev2Cluster+" not found")
	checkAccessibility(t, b, "the not-found page")

	// Once dev2 shares it with a group dev is in (view only), it comes to
	// dev's open list without a reload, marked with its owner and without
	// controls; its page opens without them.
	b.open("back to the list before the share", g.e.url+"/")
	g.dev2.gwOK("share", g.dev2Cluster, "--with", "group:gateway-users")
	row := `tr[data-cluster="` + g.dev2Cluster + `"]`
	waitText(t, b, "dev2's shared cluster on dev's list", row, "shared by")
	b.waitFor(t, "no controls on the shared row", fmt.Sprintf(`document.querySelector(%q) && !document.querySelector(%q)`, row, row+" form"))
	b.snapshot("the list with a shared cluster")
	status = b.click("open the shared cluster's page", chromedp.CSS(row+` a[href="/c/`+g.dev2Cluster+`"]`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Shared with you by") || strings.Contains(p.Text, "Stop the cluster") {
		t.Fatalf("the shared cluster's page: HTTP %d:\n%s", status, p.Text)
	}
	checkAccessibility(t, b, "a shared cluster's page")
	csp.check(t)

	readOnlySession(t, g)
}

// readOnlySession drives the console as a read-only token's session (its
// dashboard link, signed in in a browser of its own): no page shows a
// state-changing control, and a POST sent anyway is refused.
func readOnlySession(t *testing.T, g *browserGateway) {
	var tok struct{ Token string }
	g.e.gwJSON(&tok, "token", "create", "--name", "console-ro", "--read-only", "--expires", "1h")
	ro := &env{t: t, bin: g.e.bin, home: t.TempDir(), gwLog: g.e.gwLog, url: g.e.url}
	ro.vars = append(filterEnv(os.Environ()), "HOME="+ro.home, "XDG_CONFIG_HOME="+filepath.Join(ro.home, "config"),
		"GATEWAY_URL="+g.e.url, "GATEWAY_TOKEN="+tok.Token)
	b := newBrowser(t, g.chromium)
	csp := watchCSP(t, b)
	g.signInWithLink(t, b, g.link(t, ro, g.devCluster), "dev", g.devCluster)
	// Forms that change state post; the sign-out form (the session's own)
	// and GET forms (the logs' tail) may stay.
	const controls = `document.querySelectorAll('form[method=post]:not([action="/auth/logout"]), button.danger').length === 0`
	for _, path := range []string{"/", "/c/" + g.devCluster, "/new", "/tokens", "/sessions", "/environments", "/usage", "/benchmarks"} {
		b.open("open "+path+" read-only", g.e.url+path)
		if p := b.page(); strings.Contains(p.Text, "Sign in") && !strings.Contains(p.Text, "Sign out") {
			t.Fatalf("%s: the read-only session is not signed in:\n%s", path, p.Text)
		}
		b.waitFor(t, "no state-changing control on "+path+" read-only", controls)
	}
	// A stop sent anyway, from the gateway's own page (the cross-site
	// check passes), is refused as read-only.
	b.open("back to the list read-only", g.e.url+"/")
	b.must("post a stop anyway", chromedp.Evaluate[chromedp.Void](`void fetch("/c/`+g.devCluster+`/stop", {method: "POST",
		body: new URLSearchParams({from: "list"})}).then(r => { window.roStatus = r.status })`))
	b.waitFor(t, "the stop refused with 403", `window.roStatus === 403`)
	if out := g.e.gwOK("show", g.devCluster); !strings.Contains(out, "RUNNING") {
		t.Fatalf("a read-only session's POST stopped %s:\n%s", g.devCluster, out)
	}
	csp.check(t)
}
