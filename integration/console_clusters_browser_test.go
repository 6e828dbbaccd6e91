package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestConsoleClusters is a person's path through the console's cluster
// pages, in Chromium against the real `gateway dev` and real Dask: sign in
// from the console's own button, start a cluster from the form (the
// estimate and the quota that would refuse shown before sending), watch
// it start on its page and appear RUNNING on the list in another tab
// without a reload, scale it from the list, follow its logs, connect with
// the page's Python, stop it; to another user its page is not found.
func TestConsoleClusters(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	// A price per vCPU-hour, so that the local backend's clusters cost
	// something to show.
	e := newEnv(t, "GATEWAY_PRICING_VCPU_HOUR=0.5")
	e.startGateway()
	g := &browserGateway{e: e, chromium: chromium}
	admin := e.userEnv(t, "admin")
	admin.gwOK("admin", "quota", "set", "user:dev", "--max-vcpus", "3")

	b := newBrowser(t, chromium)
	consoleSignIn(t, g, b, "dev")

	// A second tab watches the list while the first starts a cluster.
	list := b.tab(t)
	if status := list.open("open the list in a second tab", e.url+"/"); status != http.StatusOK {
		t.Fatalf("the list: HTTP %d", status)
	}
	list.markNoReload()
	if p := list.page(); !strings.Contains(p.Text, "No cluster is running") {
		t.Fatalf("the list before any cluster: %q", p.Text)
	}

	b.click("open the new-cluster form", `nav a[href="/new"]`)
	if p := b.page(); p.H1 != "New cluster" || !strings.Contains(p.Text, "Workers at start") || !strings.Contains(p.Text, "Within your quota") {
		t.Fatalf("the form: %+v", p)
	}
	b.markNoReload()
	// Before sending: four workers of one vCPU would pass the quota's 3.
	b.must("ask for 4 workers", chromedp.SetValue(`#opt-workers`, ""), chromedp.SendKeys(`#opt-workers`, "4"))
	b.waitFor(t, "the estimate names the quota", `(() => { const e = document.querySelector("#estimate [data-quota]");
		return e && e.getAttribute("data-quota") === "max_vcpus" && e.textContent.includes("from user:dev (api)") &&
			document.querySelector("#estimate").textContent.includes("$2.00 per hour"); })()`)
	b.must("ask for 1 worker", chromedp.SetValue(`#opt-workers`, ""), chromedp.SendKeys(`#opt-workers`, "1"))
	b.waitFor(t, "the estimate of one worker", `(() => { const e = document.querySelector("#estimate");
		return e.textContent.includes("$0.50 per hour") && e.textContent.includes("Within your quota"); })()`)
	b.expectNoReload(t, "the form")

	status := b.click("start the cluster", `form.options button[type=submit]:not([formmethod])`)
	p := b.page()
	u, _ := url.Parse(p.URL)
	name := strings.TrimPrefix(u.Path, "/c/")
	if status != http.StatusOK || !strings.HasPrefix(u.Path, "/c/") || p.H1 != name || !strings.Contains(p.Text, "Starting "+name) {
		t.Fatalf("after starting: HTTP %d at %s: %+v", status, p.URL, p)
	}
	b.markNoReload()
	b.waitFor(t, "the cluster's page shows it running", `(() => {
		const s = document.querySelector("#cluster .status"), w = document.querySelector("#cluster .workers");
		return s && s.textContent === "RUNNING" && w && w.textContent.startsWith("1 ready of 1"); })()`)
	b.expectNoReload(t, "the cluster's page")

	row := fmt.Sprintf(`document.querySelector('tr[data-cluster=%q]')`, name)
	list.waitFor(t, "the list shows it running", `(() => { const r = `+row+`;
		return r && r.querySelector(".status").textContent === "RUNNING" && r.querySelector(".workers").textContent === "1 / 1" &&
			r.textContent.includes("$0.50/h") && r.querySelector('td[data-label="Idle"]').textContent.includes("of 20m left"); })()`)
	list.expectNoReload(t, "the list")

	// Scale from the list (a form: the page comes back), to two workers.
	list.must("type 2 workers in the list", chromedp.SetValue(fmt.Sprintf(`tr[data-cluster=%q] input[name=workers]`, name), "2"))
	if status := list.click("scale from the list", chromedp.CSS(fmt.Sprintf(`tr[data-cluster=%q] form[action$="/scale"] button`, name))); status != http.StatusOK {
		t.Fatalf("scale: HTTP %d", status)
	}
	list.markNoReload()
	list.waitFor(t, "the list shows two workers", `(() => { const r = `+row+`;
		return r && r.querySelector(".workers").textContent === "2 / 2" && r.textContent.includes("$1.00/h"); })()`)

	// The cluster's page: its members, and its logs followed as a third
	// worker starts.
	if status := b.open("open the cluster's page", e.url+"/c/"+name); status != http.StatusOK {
		t.Fatalf("the cluster's page: HTTP %d", status)
	}
	b.markNoReload()
	b.waitFor(t, "two workers on the page", `document.querySelector("#cluster .workers").textContent.startsWith("2 ready of 2")`)
	if p := b.page(); !strings.Contains(p.Text, "worker-1") || !strings.Contains(p.Text, "1 vCPU") || !strings.Contains(p.Text, "[scheduler]") {
		t.Fatalf("the cluster's page lacks its members or logs:\n%s", p.Text)
	}
	b.must("follow the logs", chromedp.WaitVisible(`input[data-follow]`), chromedp.Click(`input[data-follow]`))
	b.waitFor(t, "the logs are followed", `document.querySelector("[data-logs]").hasAttribute("data-updated")`)
	e.gwOK("scale", name, "--workers", "3")
	b.waitFor(t, "the third worker's log lines arrive", `document.querySelector("[data-logs]").textContent.includes("[worker-2]") &&
		document.querySelector("#cluster .workers").textContent.startsWith("3 ready of 3")`)
	b.expectNoReload(t, "the followed logs")

	// The page's Python connects (gateway show writes the credentials it
	// reads).
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	snippet, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('pre[aria-label="Python with distributed"]').textContent`))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	e.gwOK("show", name)
	if out, err := e.runPython(snippet + "\nprint('answer', client.submit(lambda x: x + 1, 41).result())\nclient.close()\n"); err != nil ||
		!strings.Contains(out, "answer 42") {
		t.Fatalf("the page's distributed snippet: %v\n%s\n--- snippet:\n%s", err, out, snippet)
	}

	// Another user's cluster is not found, and not on their list (a
	// subtest: its browser's screenshots go to a place of their own).
	t.Run("OtherUser", func(t *testing.T) {
		other := newBrowser(t, chromium)
		consoleSignIn(t, g, other, "dev2")
		status := other.open("open dev's cluster as dev2", e.url+"/c/"+name)
		expectErrorPage(t, other, status, http.StatusNotFound, "Not found")
		other.open("dev2's list", e.url+"/")
		if p := other.page(); strings.Contains(p.Text, name) {
			t.Errorf("dev2's list shows dev's cluster:\n%s", p.Text)
		}
	})

	// Stop it from its page: the page follows it to STOPPED.
	if status := b.click("stop the cluster", `form[action$="/stop"] button`); status != http.StatusOK {
		t.Fatalf("stop: HTTP %d", status)
	}
	b.markNoReload()
	b.waitFor(t, "the cluster's page shows it stopped", `document.querySelector("#cluster .status").textContent === "STOPPED"`)
	list.waitFor(t, "the list shows it ended", `(() => { const r = document.querySelector('table.ended '+`+fmt.Sprintf("%q", fmt.Sprintf(`tr[data-cluster=%q]`, name))+`);
		return r && r.textContent.includes("STOPPED"); })()`)
	if p := b.page(); !strings.Contains(p.Text, "stopped by dev in the console") {
		t.Errorf("the stopped cluster's page:\n%s", p.Text)
	}
	waitNoMembers(t, name)
}

// consoleSignIn signs b in as user from the console's own Sign in button
// and the dev issuer's page, and checks it lands on the clusters list.
func consoleSignIn(t *testing.T, g *browserGateway, b *browser, user string) {
	t.Helper()
	if status := b.open("open the console signed out", g.e.url+"/"); status != http.StatusOK {
		t.Fatalf("the console: HTTP %d", status)
	}
	if p := b.page(); p.H1 != "Sign in to the gateway" {
		t.Fatalf("signed out, the console shows %+v", p)
	}
	b.click("click Sign in", `main a.button`)
	g.expectIssuerLogin(t, b, user)
	status := b.click("pick "+user+" on the issuer's page", chromedp.CSS(`button[name=username][value=`+user+`]`))
	if p := b.page(); status != http.StatusOK || p.URL != g.e.url+"/" || p.H1 != "Your clusters" || !strings.Contains(p.Text, user) {
		t.Fatalf("after signing in as %s: HTTP %d at %s: %+v", user, status, p.URL, p)
	}
}

// tab is another tab of the same browser (the same session), with its
// screenshots beside the first tab's.
func (b *browser) tab(t *testing.T) *browser {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	shots := filepath.Join(b.shots, fmt.Sprintf("tab%d", b.n))
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// markNoReload marks the page: a reload or another page loses the mark.
func (b *browser) markNoReload() {
	b.t.Helper()
	b.must("mark the page", chromedp.Evaluate[chromedp.Void](`window.gatewayTestMark = true`))
}

// expectNoReload checks the page kept its mark: what changed on it came
// through its script, not a new page.
func (b *browser) expectNoReload(t *testing.T, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.gatewayTestMark === true`)); err != nil || !kept {
		t.Fatalf("%s was reloaded (mark kept: %v, %v)", what, kept, err)
	}
}

// waitFor waits, within the hang bound, until the expression holds on
// the page, and keeps a screenshot of it.
func (b *browser) waitFor(t *testing.T, name, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testutil.HangBound)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(testutil.HangBound)))
	b.snapshot(name)
	if err != nil {
		t.Fatalf("waiting until %s: %v\nthe page shows:\n%s", name, err, b.page().Text)
	}
}
