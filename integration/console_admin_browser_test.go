package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleAdmin drives the console's admin pages in Chromium against
// the real `gateway dev`, signed in through its issuer as "admin" (an
// admin there): dev's cluster is in the list of every cluster, the admin
// stops it (the real control loop ends its processes), edits dev's quota
// (an invalid value refused with the API's own words), reads the stop and
// the change in the audit log, and downloads the usage CSV, the API's to
// the byte. Signed in as dev, the admin pages are 403.
func TestConsoleAdmin(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	e := newEnv(t)
	e.startGateway()
	g := &browserGateway{e: e, chromium: chromium}
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "1")
	if c.Status != "RUNNING" {
		t.Fatalf("dev's cluster is %s, want RUNNING", c.Status)
	}
	var adm struct {
		Token string `json:"token"`
	}
	e.userEnv(t, "admin").gwJSON(&adm, "token", "create", "--name", "console-test", "--expires", "1h")

	b := newBrowser(t, chromium)
	g.consoleSignIn(t, b, "/admin/clusters", "admin")
	p := b.page()
	if p.H1 != "Every cluster" || !strings.Contains(p.Text, c.Name) || !strings.Contains(p.Text, "dev") {
		t.Fatalf("every cluster, as admin: %+v", p)
	}

	// Stop dev's cluster.
	status := b.click("stop dev's cluster", chromedp.CSS(`form[action="/admin/clusters/`+c.Name+`/stop"] button`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Stopping "+c.Name) {
		t.Fatalf("after stopping: HTTP %d: %+v", status, p)
	}
	waitNoMembers(t, c.Name)

	// Edit dev's quota: a value the API refuses, with its words, then a
	// good one.
	entry := `section[aria-label="user:dev"] `
	if status := b.open("open dev's quota", e.url+"/admin/quotas?subject=user:dev"); status != http.StatusOK {
		t.Fatalf("dev's quota: HTTP %d: %+v", status, b.page())
	}
	b.must("type a negative limit", chromedp.SetValue(chromedp.CSS(entry+`input[name="set.max_vcpus"]`), "-1"))
	status = b.click("save the negative limit", chromedp.CSS(entry+`button[type=submit]`))
	apiStatus, apiBody := call(t, http.MethodPatch, e.url+"/api/v1/admin/quotas/user:dev", adm.Token, `{"max_vcpus": "-1"}`)
	var apiErr struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(apiBody), &apiErr); err != nil || apiStatus != http.StatusUnprocessableEntity || apiErr.Message == "" {
		t.Fatalf("the API's answer to the same: %d %s", apiStatus, apiBody)
	}
	expectErrorPage(t, b, status, http.StatusUnprocessableEntity, "Unprocessable Entity", apiErr.Message)

	if status := b.open("open dev's quota again", e.url+"/admin/quotas?subject=user:dev"); status != http.StatusOK {
		t.Fatalf("dev's quota: HTTP %d", status)
	}
	b.must("type a limit", chromedp.SetValue(chromedp.CSS(entry+`input[name="set.max_clusters"]`), "3"))
	status = b.click("save the limit", chromedp.CSS(entry+`button[type=submit]`))
	if p := b.page(); status != http.StatusOK || !strings.Contains(p.Text, "Saved user:dev: set max_clusters.") {
		t.Fatalf("after saving: HTTP %d: %+v", status, p)
	}
	var got struct {
		Entry struct {
			Limits  map[string]any    `json:"limits"`
			Sources map[string]string `json:"sources"`
		} `json:"entry"`
	}
	if s, body := call(t, http.MethodGet, e.url+"/api/v1/admin/quotas/user:dev", adm.Token, ""); s != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil ||
		got.Entry.Limits["max_clusters"] != 3.0 || got.Entry.Sources["max_clusters"] != "api" {
		t.Fatalf("dev's entry through the API: %d %s", s, body)
	}

	// The audit log has both, under the admin's name.
	if status := b.open("open the audit log", e.url+"/admin/audit"); status != http.StatusOK {
		t.Fatalf("audit log: HTTP %d", status)
	}
	p = b.page()
	for _, want := range []string{"admin\tcluster.stop\tcluster:" + c.Name, "admin\tquota.set\tuser:dev\tmax_clusters: - -> 3"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, p.Text)
		}
	}
	if status := b.open("filter the audit log", e.url+"/admin/audit?target=cluster:"+c.Name); status != http.StatusOK ||
		strings.Contains(b.page().Text, "quota.set") || !strings.Contains(b.page().Text, "cluster.stop") {
		t.Errorf("the audit log for cluster:%s: HTTP %d:\n%s", c.Name, status, b.page().Text)
	}

	// The usage report: charts, and the API's CSV.
	if status := b.open("open the usage report", e.url+"/admin/usage"); status != http.StatusOK {
		t.Fatalf("usage: HTTP %d", status)
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	type download struct{ Href, CSV, Type string }
	dl, err := chromedp.Run(ctx, chromedp.Evaluate[download](`(async () => {
		const a = document.querySelector('a[href^="/admin/usage.csv?by=cluster"]');
		const r = await fetch(a.getAttribute("href"));
		return {Href: a.getAttribute("href"), CSV: await r.text(), Type: r.headers.get("Content-Type")};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetching the CSV: %v", err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("figure.chart svg").length`)); n != 3 {
		t.Errorf("%d charts, want 3 (by user, group, day):\n%s", n, b.page().Text)
	}
	u, _ := url.Parse(dl.Href)
	q := u.Query()
	q.Set("format", "csv")
	_, apiCSV := call(t, http.MethodGet, e.url+"/api/v1/admin/usage?"+q.Encode(), adm.Token, "")
	if dl.CSV != apiCSV || dl.Type != "text/csv; charset=utf-8" || !strings.Contains(dl.CSV, c.Name+",dev,") {
		t.Errorf("the console's CSV (%s):\n%s\nthe API's:\n%s", dl.Type, dl.CSV, apiCSV)
	}

	// dev is no admin: 403, and no admin link.
	d := newBrowser(t, chromium)
	g.consoleSignIn(t, d, "/admin/clusters", "dev")
	expectErrorPage(t, d, http.StatusForbidden, http.StatusForbidden, "Admins only", "dev is not one of them")
	if status := d.open("open the console as dev", e.url+"/"); status != http.StatusOK {
		t.Fatalf("dev's clusters: HTTP %d", status)
	}
	dctx, dcancel := context.WithTimeout(d.ctx, stepTimeout)
	defer dcancel()
	if n, err := chromedp.Run(dctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href^="/admin"]').length`)); err != nil || n != 0 {
		t.Errorf("dev's page links the admin pages (%d, %v)", n, err)
	}
}
