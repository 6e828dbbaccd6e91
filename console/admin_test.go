package console

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// The admin pages run over the real store (clusters, the usage ledger,
// the audit log, the stored quota entries) and the real quota service;
// storeLoop stands in for the control loop's admin side.

// storeLoop lists the store's clusters and stops one as the control loop
// does for an admin: the cluster goes to STOPPING and the stop is
// audited under the admin, in the same write.
type storeLoop struct{ db *store.DB }

func (l *storeLoop) ListAll(ctx context.Context, statuses []store.Status) ([]*store.Cluster, error) {
	return l.db.ListClusters(ctx, store.Filter{Statuses: statuses})
}

func (l *storeLoop) AdminStop(ctx context.Context, by store.Actor, name string) error {
	_, err := l.db.UpdateCluster(ctx, name, func(c *store.Cluster) (store.Event, error) {
		if !c.Status.Live() {
			return store.Event{}, fmt.Errorf("%w: cluster %s is %s already", errConflict, name, c.Status)
		}
		c.Status = store.Stopping
		return store.Event{Kind: "stop", Message: "stopped by admin " + by.Name,
			Audit: &store.AuditEntry{Actor: by.Name, ActorID: by.ID, Action: "cluster.stop", Target: "cluster:" + name}}, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: cluster %s", errNotFound, name)
	}
	return err
}

// adminConsole is a console with the admin pages, over a quota service
// whose configuration file gives group:analysts max_vcpus 32 (and the
// built-in defaults under the default entry).
type adminConsole struct {
	*testConsole
	quotas *quota.Service
}

func newAdminConsole(t *testing.T) *adminConsole {
	t.Helper()
	a := &adminConsole{}
	a.testConsole = newTestConsole(t, newFakeClusters(), func(tc *testConsole) {
		cfg, err := quota.ParseLimits([]byte(`{"max_vcpus": 32}`))
		if err != nil {
			t.Fatal(err)
		}
		if a.quotas, err = quota.NewService(tc.db, []quota.ConfigEntry{{Subject: "group:analysts", Limits: cfg}}, quota.Clamp); err != nil {
			t.Fatal(err)
		}
		tc.console.SetAdmin(&storeLoop{db: tc.db}, a.quotas, tc.db)
	})
	return a
}

var adminRO = &auth.User{ID: "admin", Name: "admin", ReadOnly: true}

// cluster stores a cluster of owner's, made with the given groups.
func (a *adminConsole) cluster(name, owner string, groups []string, st store.Status) {
	a.t.Helper()
	c := &store.Cluster{Name: name, Owner: "id-" + owner, OwnerName: owner, OwnerGroups: groups, Status: st, Provider: "local", Options: "{}", DesiredWorkers: 2}
	if err := a.db.CreateCluster(context.Background(), c); err != nil {
		a.t.Fatal(err)
	}
}

// used records one member of the cluster in the ledger, from from to to.
func (a *adminConsole) used(cluster string, from, to time.Time, vcpus float64, gpus int, price float64) {
	a.t.Helper()
	ctx := context.Background()
	if _, err := a.db.UpdateCluster(ctx, cluster, func(*store.Cluster) (store.Event, error) {
		return store.Event{Ledger: []store.LedgerEntry{{Member: "w-" + from.Format("150405"), Kind: store.LedgerStart, At: from, VCPUs: vcpus, MemoryGiB: 2 * vcpus,
			GPUs: gpus, GPUType: "t4", PriceHour: price}}}, nil
	}); err != nil {
		a.t.Fatal(err)
	}
	if err := a.db.RecordLedger(ctx, cluster, store.LedgerEntry{Member: "w-" + from.Format("150405"), Kind: store.LedgerStop, At: to}); err != nil {
		a.t.Fatal(err)
	}
}

func (a *adminConsole) audit() []store.AuditEntry {
	a.t.Helper()
	entries, err := a.db.AuditLog(context.Background(), store.AuditFilter{})
	if err != nil {
		a.t.Fatal(err)
	}
	return entries
}

func (a *adminConsole) status(name string) store.Status {
	a.t.Helper()
	c, err := a.db.GetCluster(context.Background(), name)
	if err != nil {
		a.t.Fatal(err)
	}
	return c.Status
}

// Every admin page and action, known or not, is 403 with a page that says
// so to anyone but an admin, and changes nothing; the navigation offers
// them to admins only.
func TestAdminRefusesNonAdmins(t *testing.T) {
	a := newAdminConsole(t)
	a.cluster("b1", "bob", nil, store.Running)
	paths := []struct{ method, path string }{
		{"GET", "/admin/clusters"}, {"GET", "/admin/clusters?user=bob"}, {"GET", "/admin/users"}, {"GET", "/admin/quotas"},
		{"GET", "/admin/quotas?subject=user:bob"}, {"GET", "/admin/usage"}, {"GET", "/admin/usage.csv"}, {"GET", "/admin/audit"},
		{"GET", "/admin/"}, {"GET", "/admin/nope"}, {"POST", "/admin/clusters/b1/stop"}, {"POST", "/admin/quotas"}, {"POST", "/admin/users"},
		{"DELETE", "/admin/clusters/b1"},
	}
	form := url.Values{"subject": {"user:alice"}, "set.max_clusters": {"100"}}
	for _, u := range []*auth.User{alice, aliceRO} {
		b := a.browser(u)
		for _, p := range paths {
			var f url.Values
			if p.method != "GET" {
				f = form
			}
			got := b.do(p.method, p.path, f, nil)
			if got.Status != http.StatusForbidden || !strings.Contains(got.Body, "<h1>Admins only</h1>") || !strings.Contains(got.Body, "alice is not one of them") ||
				strings.Contains(got.Body, "b1") {
				t.Errorf("%s %s as %+v: %d\n%s", p.method, p.path, u, got.Status, got.Body)
			}
		}
	}
	if st := a.status("b1"); st != store.Running {
		t.Errorf("b1 is %s", st)
	}
	if e := a.audit(); len(e) != 0 {
		t.Errorf("audit log %+v", e)
	}
	if home := a.browser(alice).get("/"); strings.Contains(home.Body, `href="/admin/clusters"`) {
		t.Error("alice's navigation links the admin pages")
	}
	if home := a.browser(admin).get("/"); !strings.Contains(home.Body, `href="/admin/clusters"`) {
		t.Error("the admin's navigation lacks the admin pages")
	}
	// Signed out: the sign-in page, and no action.
	if got := a.browser(nil).get("/admin/clusters"); got.Status != http.StatusOK || !strings.Contains(got.Body, "Sign in to the gateway") {
		t.Errorf("signed out: %d\n%s", got.Status, got.Body)
	}
	if got := a.browser(nil).post("/admin/clusters/b1/stop", url.Values{}); got.Status != http.StatusUnauthorized {
		t.Errorf("signed-out stop: %d", got.Status)
	}
	// An admin is told of an unknown admin page, and sent on from /admin/.
	if got := a.browser(admin).get("/admin/nope"); got.Status != http.StatusNotFound {
		t.Errorf("admin, unknown page: %d", got.Status)
	}
	if got := a.browser(admin).get("/admin/"); got.Status != http.StatusSeeOther || got.Header.Get("Location") != "/admin/clusters" {
		t.Errorf("admin, /admin/: %d %s", got.Status, got.Header.Get("Location"))
	}
}

func TestAdminClustersFilters(t *testing.T) {
	a := newAdminConsole(t)
	a.cluster("a1", "alice", []string{"analysts"}, store.Running)
	a.cluster("b1", "bob", []string{"analysts", "gpu"}, store.Running)
	a.cluster("b2", "bob", []string{"gpu"}, store.Stopped)
	a.cluster("c1", "carol", nil, store.Pending)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"a1", "b1", "c1"}},
		{"?status=all", []string{"a1", "b1", "b2", "c1"}},
		{"?status=STOPPED", []string{"b2"}},
		{"?status=pending", []string{"c1"}},
		{"?user=bob", []string{"b1"}},
		{"?user=bob&status=all", []string{"b1", "b2"}},
		{"?group=analysts", []string{"a1", "b1"}},
		{"?group=gpu&status=all", []string{"b1", "b2"}},
		{"?group=gpu&user=alice", nil},
		{"?user=nobody", nil},
	}
	b := a.browser(admin)
	for _, tt := range tests {
		got := b.get("/admin/clusters" + tt.query)
		if got.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", tt.query, got.Status, got.Body)
		}
		for _, name := range []string{"a1", "b1", "b2", "c1"} {
			shown := strings.Contains(got.Body, `data-cluster="`+name+`"`)
			if want := contains(tt.want, name); shown != want {
				t.Errorf("%s: %s shown %v, want %v", tt.query, name, shown, want)
			}
		}
		if tt.want == nil && !strings.Contains(got.Body, "No cluster matches.") {
			t.Errorf("%s: no word of an empty list", tt.query)
		}
	}
	all := b.get("/admin/clusters?status=all")
	for _, want := range []string{`action="/admin/clusters/a1/stop"`, `action="/admin/clusters/c1/stop"`, "analysts, gpu", `<option value="carol">`, `<option value="gpu">`} {
		if !strings.Contains(all.Body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if strings.Contains(all.Body, `action="/admin/clusters/b2/stop"`) {
		t.Error("a stopped cluster has a stop button")
	}
	// The filter's values are kept for the stop, to come back to it.
	if f := b.get("/admin/clusters?user=bob&group=gpu"); !strings.Contains(f.Body, `<input type="hidden" name="user" value="bob">`) ||
		!strings.Contains(f.Body, `<input type="hidden" name="group" value="gpu">`) || !strings.Contains(f.Body, `name="user" value="bob" list=`) {
		t.Errorf("the filter is not kept:\n%s", f.Body)
	}
	if got := b.get("/admin/clusters?status=bogus"); got.Status != http.StatusUnprocessableEntity || !strings.Contains(got.Body, "unknown status &#34;bogus&#34;") {
		t.Errorf("bad status: %d\n%s", got.Status, got.Body)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// An admin stops anyone's cluster; the stop is audited under the
// admin's name and shows in the audit log. What cannot be stopped, and a
// request that is not the admin's own, are refused.
func TestAdminStop(t *testing.T) {
	a := newAdminConsole(t)
	a.cluster("b1", "bob", []string{"gpu"}, store.Running)
	a.cluster("b2", "bob", nil, store.Stopped)
	b := a.browser(admin)
	got := b.post("/admin/clusters/b1/stop", url.Values{"user": {"bob"}, "group": {""}, "status": {"all"}})
	loc, _ := url.Parse(got.Header.Get("Location"))
	if got.Status != http.StatusSeeOther || loc.Path != "/admin/clusters" || loc.Query().Get("user") != "bob" || loc.Query().Get("status") != "all" ||
		loc.Query().Has("group") || !strings.HasPrefix(loc.Query().Get("msg"), "Stopping b1") {
		t.Fatalf("stop: %d at %s\n%s", got.Status, loc, got.Body)
	}
	if st := a.status("b1"); st != store.Stopping {
		t.Errorf("b1 is %s, want STOPPING", st)
	}
	e := a.audit()
	if len(e) != 1 || e[0].Actor != "admin" || e[0].ActorID != "admin" || e[0].Action != "cluster.stop" || e[0].Target != "cluster:b1" {
		t.Fatalf("audit log %+v, want the stop of b1 by admin", e)
	}
	if page := b.get(loc.String()); !strings.Contains(page.Body, "Stopping b1") || !strings.Contains(page.Body, `data-cluster="b1"`) {
		t.Errorf("back at the list:\n%s", page.Body)
	}
	if page := b.get("/admin/audit"); !strings.Contains(page.Body, `href="/admin/audit?target=cluster%3ab1"`) || !strings.Contains(page.Body, "cluster.stop") ||
		!strings.Contains(page.Body, `href="/admin/audit?actor=admin"`) {
		t.Errorf("the audit log lacks the stop:\n%s", page.Body)
	}

	tests := []struct {
		name   string
		u      *auth.User
		path   string
		header map[string]string
		want   int
		text   string
	}{
		{"unknown cluster", admin, "/admin/clusters/nope/stop", nil, http.StatusNotFound, "nope"},
		{"stopped already", admin, "/admin/clusters/b2/stop", nil, http.StatusConflict, "cluster b2 is STOPPED already"},
		{"stopping already", admin, "/admin/clusters/b1/stop", nil, http.StatusConflict, "cluster b1 is STOPPING already"},
		{"cross-site", admin, "/admin/clusters/b1/stop", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "did not come from the gateway"},
		{"read-only admin", adminRO, "/admin/clusters/b1/stop", nil, http.StatusForbidden, "read-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.browser(tt.u).do("POST", tt.path, url.Values{}, tt.header)
			if got.Status != tt.want || !strings.Contains(got.Body, tt.text) {
				t.Errorf("%d, want %d with %q:\n%s", got.Status, tt.want, tt.text, got.Body)
			}
		})
	}
	if e := a.audit(); len(e) != 1 {
		t.Errorf("refused stops were audited: %+v", e)
	}
}

// A read-only admin session reads every admin page but is shown no
// control, and its changes are refused.
func TestAdminReadOnly(t *testing.T) {
	a := newAdminConsole(t)
	a.cluster("b1", "bob", nil, store.Running)
	if _, err := a.quotas.Set(context.Background(), store.Actor{Name: "root"}, "user:bob", quota.Limits{MaxClusters: amount(3)}); err != nil {
		t.Fatal(err)
	}
	b := a.browser(adminRO)
	for _, path := range []string{"/admin/clusters", "/admin/users", "/admin/quotas", "/admin/quotas?subject=user:bob", "/admin/usage", "/admin/audit"} {
		got := b.get(path)
		if got.Status != http.StatusOK || strings.Contains(got.Body, `method="post" action="/admin`) || strings.Contains(got.Body, `name="set.`) ||
			!strings.Contains(got.Body, "(read-only)") {
			t.Errorf("%s as a read-only admin: %d\n%s", path, got.Status, got.Body)
		}
	}
	if got := b.post("/admin/quotas", url.Values{"subject": {"user:bob"}, "set.max_clusters": {"9"}, "was.max_clusters": {"3"}}); got.Status != http.StatusForbidden {
		t.Errorf("read-only quota set: %d", got.Status)
	}
	if e, _ := a.quotas.Entry(context.Background(), "user:bob"); *e.Stored.MaxClusters != 3 {
		t.Errorf("user:bob's entry changed: %v", e.Stored)
	}
	// The same pages have controls for a full session.
	if got := a.browser(admin).get("/admin/quotas?subject=user:bob"); !strings.Contains(got.Body, `method="post" action="/admin/quotas"`) {
		t.Errorf("no form for an admin:\n%s", got.Body)
	}
}

func amount(v float64) *quota.Amount { a := quota.Amount(v); return &a }

func TestAdminQuotaEdit(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		stored string // user:alice's stored entry beforehand, JSON ("" none)
		form   url.Values
		header map[string]string
		status int
		text   string // in the answer (an error page) or its message (a redirect)
		after  string // user:alice's stored entry afterwards, JSON ("" none)
		audits []string
	}{
		{name: "set", form: url.Values{"set.max_vcpus": {"16"}, "was.max_vcpus": {""}, "set.max_lifetime": {"8h"}, "was.max_lifetime": {""}},
			status: http.StatusSeeOther, text: "Saved user:alice: set max_lifetime, max_vcpus.", after: `{"max_vcpus":16,"max_lifetime":"8h0m0s"}`, audits: []string{"quota.set"}},
		{name: "every kind", form: url.Values{"set.max_clusters": {"unlimited"}, "set.allowed_providers": {"local, ec2"}, "set.max_gpus_by_type": {"a100=2,t4=4"}},
			status: http.StatusSeeOther, after: `{"max_clusters":"unlimited","max_gpus_by_type":{"a100":2,"t4":4},"allowed_providers":["local","ec2"]}`, audits: []string{"quota.set"}},
		{name: "unchanged", stored: `{"max_vcpus":16}`, form: url.Values{"set.max_vcpus": {"16"}, "was.max_vcpus": {"16"}, "set.max_gpus": {""}, "was.max_gpus": {""}},
			status: http.StatusSeeOther, text: "Nothing changed for user:alice.", after: `{"max_vcpus":16}`},
		{name: "emptied", stored: `{"max_vcpus":16,"max_clusters":2}`, form: url.Values{"set.max_vcpus": {""}, "was.max_vcpus": {"16"}, "set.max_clusters": {"2"}, "was.max_clusters": {"2"}},
			status: http.StatusSeeOther, text: "removed max_vcpus", after: `{"max_clusters":2}`, audits: []string{"quota.unset"}},
		{name: "emptied whole", stored: `{"max_vcpus":16}`, form: url.Values{"set.max_vcpus": {""}, "was.max_vcpus": {"16"}},
			status: http.StatusSeeOther, after: "", audits: []string{"quota.unset"}},
		{name: "set and emptied", stored: `{"max_vcpus":16}`, form: url.Values{"set.max_vcpus": {""}, "was.max_vcpus": {"16"}, "set.max_gpus": {"1"}},
			status: http.StatusSeeOther, text: "set max_gpus; removed max_vcpus", after: `{"max_gpus":1}`, audits: []string{"quota.set", "quota.unset"}},
		{name: "a GPU type dropped", stored: `{"max_gpus_by_type":{"a100":2,"t4":4}}`, form: url.Values{"set.max_gpus_by_type": {"a100=3"}, "was.max_gpus_by_type": {"a100=2,t4=4"}},
			status: http.StatusSeeOther, after: `{"max_gpus_by_type":{"a100":3}}`, audits: []string{"quota.set", "quota.unset"}},
		// What another admin stored after the page was shown stays: only
		// the fields this admin changed are written.
		{name: "others' changes kept", stored: `{"max_clusters":3}`, form: url.Values{"set.max_clusters": {""}, "was.max_clusters": {""}, "set.max_vcpus": {"8"}, "was.max_vcpus": {""}},
			status: http.StatusSeeOther, after: `{"max_clusters":3,"max_vcpus":8}`, audits: []string{"quota.set"}},
		// Refused with the API's words (PATCH /api/v1/admin/quotas/...),
		// nothing stored.
		{name: "negative", form: url.Values{"set.max_vcpus": {"-1"}}, status: http.StatusUnprocessableEntity,
			text: `max_vcpus: want a number of at least 0 or &#34;unlimited&#34;, got &#34;-1&#34;`},
		{name: "a fraction of a count", form: url.Values{"set.max_clusters": {"2.5"}}, status: http.StatusUnprocessableEntity,
			text: `max_clusters: want a whole number of at least 0 or &#34;unlimited&#34;, got &#34;2.5&#34;`},
		{name: "bad duration", form: url.Values{"set.max_lifetime": {"8 hours"}}, status: http.StatusUnprocessableEntity,
			text: `max_lifetime: want a duration of at least 1s such as &#34;2h&#34;, or &#34;unlimited&#34;, got &#34;8 hours&#34;`},
		{name: "a name with a space", form: url.Values{"set.allowed_regions": {"eu west"}}, status: http.StatusUnprocessableEntity,
			text: `allowed_regions: &#34;eu west&#34; is not a name (no spaces, 1 to 128 characters)`},
		{name: "two problems", form: url.Values{"set.max_vcpus": {"x"}, "set.max_gpus_by_type": {"a100"}}, status: http.StatusUnprocessableEntity,
			text: `max_vcpus: want a number of at least 0 or &#34;unlimited&#34;, got &#34;x&#34;; max_gpus_by_type: want type=count pairs`},
		{name: "bad subject", form: url.Values{"subject": {"team:x"}, "set.max_vcpus": {"1"}}, status: http.StatusUnprocessableEntity,
			text: `subject &#34;team:x&#34; must be default, user:&lt;name&gt; or group:&lt;name&gt;`},
		{name: "gone meanwhile", form: url.Values{"set.max_vcpus": {""}, "was.max_vcpus": {"16"}}, status: http.StatusNotFound, text: "no stored quota entry for user:alice"},
		{name: "cross-site", form: url.Values{"set.max_vcpus": {"16"}}, header: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			status: http.StatusForbidden, text: "did not come from the gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdminConsole(t)
			if tt.stored != "" {
				l, err := quota.ParseLimits([]byte(tt.stored))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.quotas.Set(ctx, store.Actor{Name: "root"}, "user:alice", l); err != nil {
					t.Fatal(err)
				}
			}
			before := len(a.audit())
			if !tt.form.Has("subject") {
				tt.form.Set("subject", "user:alice")
			}
			got := a.browser(admin).do("POST", "/admin/quotas", tt.form, tt.header)
			loc, _ := url.Parse(got.Header.Get("Location"))
			if got.Status != tt.status || (tt.status == http.StatusSeeOther && (loc.Path != "/admin/quotas" || loc.Query().Get("subject") != "user:alice" ||
				!strings.Contains(loc.Query().Get("msg"), tt.text))) || (tt.status != http.StatusSeeOther && !strings.Contains(got.Body, tt.text)) {
				t.Fatalf("%d at %s, want %d with %q:\n%s", got.Status, loc, tt.status, tt.text, got.Body)
			}
			e, err := a.quotas.Entry(ctx, "user:alice")
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonOf(t, e.Stored); got != tt.after && !(tt.after == "" && e.Stored == nil) {
				t.Errorf("stored %s, want %s", got, tt.after)
			}
			var actions []string
			for _, x := range a.audit()[:len(a.audit())-before] {
				if x.Actor != "admin" || x.ActorID != "admin" || x.Target != "user:alice" {
					t.Errorf("audit entry %+v, want admin's change of user:alice", x)
				}
				actions = append([]string{x.Action}, actions...)
			}
			if strings.Join(actions, " ") != strings.Join(tt.audits, " ") {
				t.Errorf("audited %v, want %v", actions, tt.audits)
			}
		})
	}
}

func jsonOf(t *testing.T, l *quota.Limits) string {
	t.Helper()
	if l == nil {
		return ""
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each entry shows each limit's value and source (built-in, config,
// api), its stored value in its field and what lies under it as the
// placeholder; a user asked for also gets what applies to them.
func TestAdminQuotasPage(t *testing.T) {
	a := newAdminConsole(t)
	ctx := context.Background()
	a.cluster("a1", "alice", []string{"analysts"}, store.Running)
	if _, err := a.quotas.Set(ctx, store.Actor{ID: "root-id", Name: "root"}, "group:analysts", quota.Limits{MaxGPUs: amount(4), MaxVCPUs: amount(64)}); err != nil {
		t.Fatal(err)
	}
	b := a.browser(admin)
	got := b.get("/admin/quotas")
	for _, want := range []string{
		`aria-label="default"`, `aria-label="group:analysts"`, "Stored limits changed", "by root.",
		// default: max_clusters 5 from the built-in defaults, in force; no stored value.
		`<td>5</td>` + "\n" + `<td>built-in</td>`, `name="set.max_clusters" value="" placeholder="5 (built-in)"`,
		// group:analysts: max_vcpus stored 64 over the file's 32.
		`<td>64</td>` + "\n" + `<td>api</td>`, `name="set.max_vcpus" value="64" placeholder="32 (config)"`, `name="was.max_vcpus" value="64"`,
		`name="set.max_lifetime" value="" placeholder="duration (2h) or unlimited"`,
	} {
		if !strings.Contains(got.Body, want) {
			t.Errorf("the quotas page lacks %q", want)
		}
	}
	got = b.get("/admin/quotas?subject=user:alice")
	for _, want := range []string{`aria-label="user:alice"`, "What applies to alice, in groups analysts (groups from their latest cluster",
		"<th scope=\"row\">max_vcpus</th><td>64</td><td>group:analysts (api)</td>", "<th scope=\"row\">max_clusters</th><td>5</td><td>built-in default</td>",
		"<th scope=\"row\">max_memory_gib</th><td>unlimited</td><td><span class=\"hint\">nothing limits it</span>"} {
		if !strings.Contains(got.Body, want) {
			t.Errorf("alice's quota lacks %q:\n%s", want, got.Body)
		}
	}
	if got := b.get("/admin/quotas?subject=user:alice&groups=gpu"); !strings.Contains(got.Body, "in groups gpu (groups from this page") ||
		!strings.Contains(got.Body, "<th scope=\"row\">max_vcpus</th><td>unlimited</td>") {
		t.Errorf("alice with the groups given:\n%s", got.Body)
	}
	if got := b.get("/admin/quotas?subject=user:carol"); !strings.Contains(got.Body, "in no group (groups from none known") {
		t.Errorf("a user without clusters:\n%s", got.Body)
	}
	if got := b.get("/admin/quotas?subject=nobody"); got.Status != http.StatusUnprocessableEntity || !strings.Contains(got.Body, "must be default, user:&lt;name&gt; or group:&lt;name&gt;") {
		t.Errorf("a bad subject: %d\n%s", got.Status, got.Body)
	}
}

// The users and groups the gateway knows, with what they run and what
// they used this month.
func TestAdminUsers(t *testing.T) {
	a := newAdminConsole(t)
	ctx := context.Background()
	now := time.Now()
	start := quota.MonthStart(now)
	span := min(2*time.Hour, now.Sub(start)-time.Second)
	a.cluster("a1", "alice", []string{"analysts"}, store.Running)
	a.cluster("b1", "bob", []string{"analysts", "gpu"}, store.Stopped)
	a.used("a1", start, start.Add(span), 2, 0, 0.5)
	a.used("b1", start, start.Add(span), 1, 1, 0)
	if _, err := a.quotas.Set(ctx, store.Actor{Name: "root"}, "user:carol", quota.Limits{MaxClusters: amount(1)}); err != nil {
		t.Fatal(err)
	}
	got := a.browser(admin).get("/admin/users")
	if got.Status != http.StatusOK {
		t.Fatalf("%d\n%s", got.Status, got.Body)
	}
	h := span.Hours()
	for _, want := range []string{
		// alice: one running cluster of 2 workers, 2 vCPUs for span.
		fmt.Sprintf("<td><a href=\"/admin/clusters?user=alice&amp;status=all\">alice</a></td>\n<td>analysts</td>\n<td>1</td>\n<td>2</td>\n<td>%s</td>\n<td>0.00</td>\n<td>%s</td>",
			hours(2*h), usd(0.5*h)),
		fmt.Sprintf("<td><a href=\"/admin/clusters?user=bob&amp;status=all\">bob</a></td>\n<td>analysts, gpu</td>\n<td>0</td>\n<td>0</td>\n<td>%s</td>\n<td>%s</td>", hours(h), hours(h)),
		// carol has a quota entry and nothing else.
		"<td><a href=\"/admin/clusters?user=carol&amp;status=all\">carol</a></td>\n<td></td>\n<td>0</td>",
		`<a href="/admin/quotas?subject=user%3acarol">entry</a>`, `<a href="/admin/quotas?subject=user%3aalice">limits</a>`,
		// analysts: both, one running, two clusters; the file's entry.
		fmt.Sprintf("<a href=\"/admin/clusters?group=analysts&amp;status=all\">analysts</a></td>\n<td>alice, bob</td>\n<td>1</td>\n<td>2</td>\n<td>%s</td>", hours(3*h)),
		`<a href="/admin/quotas?subject=group%3aanalysts">entry</a>`,
		fmt.Sprintf("<a href=\"/admin/clusters?group=gpu&amp;status=all\">gpu</a></td>\n<td>bob</td>\n<td>0</td>\n<td>1</td>\n<td>%s</td>", hours(h)),
	} {
		if !strings.Contains(got.Body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(got.Body)
	}
}

// usageWorld is three users' use over three days of November 2026.
func usageWorld(t *testing.T) *adminConsole {
	a := newAdminConsole(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a.cluster("a1", "alice", []string{"analysts"}, store.Stopped)
	a.cluster("b1", "bob", []string{"analysts", "gpu"}, store.Stopped)
	a.cluster("c1", "=carol", nil, store.Stopped)
	a.used("a1", day.Add(22*time.Hour), day.Add(26*time.Hour), 2, 0, 0.5) // 2h on the 1st, 2h on the 2nd
	a.used("b1", day.Add(48*time.Hour), day.Add(49*time.Hour), 4, 1, 1)
	a.used("c1", day.Add(time.Hour), day.Add(2*time.Hour), 1, 0, 0.1)
	return a
}

const novemberQuery = "?since=2026-11-01&until=2026-11-04"

func TestAdminUsagePage(t *testing.T) {
	a := usageWorld(t)
	b := a.browser(admin)
	got := b.get("/admin/usage" + novemberQuery)
	if got.Status != http.StatusOK {
		t.Fatalf("%d\n%s", got.Status, got.Body)
	}
	for _, want := range []string{
		"From 2026-11-01 00:00:00 UTC to 2026-11-04 00:00:00 UTC",
		"Total: 13.00 vCPU-hours, 26.00 GiB-hours, 1.00 GPU-hours, $3.10.",
		// Charts, one bar per user, group, day, each with its figure.
		`<figcaption id="by-user-title">vCPU-hours by user</figcaption>`, `<svg role="img" aria-labelledby="by-user-title"`,
		"<title>alice: 8.00</title>", "<title>bob: 4.00</title>", "<title>=carol: 1.00</title>",
		"<title>analysts: 12.00</title>", "<title>gpu: 4.00</title>", "<title>(no group): 1.00</title>",
		"<title>2026-11-01: 5.00</title>", "<title>2026-11-02: 4.00</title>", "<title>2026-11-03: 4.00</title>",
		// The tables.
		"<tr><td>alice</td><td>1</td><td>8.00</td><td>16.00</td><td>0.00</td><td>$2.00</td></tr>",
		"<tr><td>analysts</td><td>2</td><td>2</td><td>12.00</td><td>24.00</td><td>1.00</td><td>$3.00</td></tr>",
		"<tr><td>2026-11-03</td><td>4.00</td><td>8.00</td><td>1.00</td><td>$1.00</td></tr>",
		// The CSV of this window.
		`href="/admin/usage.csv?since=2026-11-01T00%3A00%3A00Z&amp;until=2026-11-04T00%3A00%3A00Z"`,
		`href="/admin/usage.csv?by=cluster&amp;since=2026-11-01T00%3A00%3A00Z&amp;until=2026-11-04T00%3A00%3A00Z"`,
	} {
		if !strings.Contains(got.Body, want) {
			t.Errorf("the usage page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(got.Body)
	}
	// The biggest bar is the chart's width; the others in proportion.
	if !strings.Contains(got.Body, `<rect class="bar" x="170" y="7" width="460" height="16"></rect>`) ||
		!strings.Contains(got.Body, `<rect class="bar" x="170" y="29" width="230" height="16"></rect>`) {
		t.Errorf("the bars by user are not to scale:\n%s", got.Body)
	}
	if got := b.get("/admin/usage" + novemberQuery + "&metric=cost&user=alice"); !strings.Contains(got.Body, "<title>alice: $2.00</title>") ||
		strings.Contains(got.Body, "<title>bob") || !strings.Contains(got.Body, "estimated cost (USD) by day (UTC)") {
		t.Errorf("alice's cost:\n%s", got.Body)
	}
	if got := b.get("/admin/usage?since=2000-01-01&until=2026-11-04"); !strings.Contains(got.Body, "The window is longer than a year") || strings.Contains(got.Body, "by-day-title") {
		t.Errorf("a long window is drawn day by day:\n%s", got.Body)
	}
	for _, tt := range []struct{ query, want string }{
		{"?metric=bogus", `metric must be one of vcpu_hours, gpu_hours, memory_gib_hours, cost, got &#34;bogus&#34;`},
		{"?since=yesterday", `since: &#34;yesterday&#34; is not a date like 2026-12-01 or a time like 2026-12-01T15:04:05Z`},
		{"?since=2026-11-04&until=2026-11-01", "since (2026-11-04T00:00:00Z) must be before until (2026-11-01T00:00:00Z)"},
	} {
		if got := b.get("/admin/usage" + tt.query); got.Status != http.StatusUnprocessableEntity || !strings.Contains(got.Body, tt.want) {
			t.Errorf("%s: %d\n%s", tt.query, got.Status, got.Body)
		}
	}
}

// The CSV is the API's (GET /api/v1/admin/usage?format=csv), as a file
// named after its window.
func TestAdminUsageCSV(t *testing.T) {
	a := usageWorld(t)
	b := a.browser(admin)
	tests := []struct {
		query, file string
		rows        [][]string
	}{
		{novemberQuery, "gateway-usage-by-user-20261101-20261104.csv", [][]string{
			{"user", "user_id", "clusters", "vcpu_hours", "memory_gib_hours", "gpu_hours", "gpu_hours_by_type", "estimated_cost_usd", "running", "since", "until"},
			{"'=carol", "id-=carol", "1", "1.0000", "2.0000", "0.0000", "", "0.1000", "false", "2026-11-01T00:00:00Z", "2026-11-04T00:00:00Z"},
			{"alice", "id-alice", "1", "8.0000", "16.0000", "0.0000", "", "2.0000", "false", "2026-11-01T00:00:00Z", "2026-11-04T00:00:00Z"},
			{"bob", "id-bob", "1", "4.0000", "8.0000", "1.0000", "t4=1.0000", "1.0000", "false", "2026-11-01T00:00:00Z", "2026-11-04T00:00:00Z"},
		}},
		{novemberQuery + "&by=cluster&user=bob", "gateway-usage-by-cluster-20261101-20261104.csv", [][]string{
			{"cluster", "user", "user_id", "clusters", "vcpu_hours", "memory_gib_hours", "gpu_hours", "gpu_hours_by_type", "estimated_cost_usd", "running", "since", "until"},
			{"b1", "bob", "id-bob", "1", "4.0000", "8.0000", "1.0000", "t4=1.0000", "1.0000", "false", "2026-11-01T00:00:00Z", "2026-11-04T00:00:00Z"},
		}},
	}
	for _, tt := range tests {
		got := b.get("/admin/usage.csv" + tt.query)
		if got.Status != http.StatusOK || got.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
			got.Header.Get("Content-Disposition") != `attachment; filename="`+tt.file+`"` || got.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: %d %v\n%s", tt.query, got.Status, got.Header, got.Body)
		}
		rows, err := csv.NewReader(strings.NewReader(got.Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rows) != fmt.Sprint(tt.rows) {
			t.Errorf("%s:\n%q\nwant\n%q", tt.query, rows, tt.rows)
		}
	}
	for _, tt := range []struct{ query, want string }{
		{"?by=group", `by must be user or cluster, got &#34;group&#34;`},
		{"?until=soon", `until: &#34;soon&#34; is not a date`},
	} {
		if got := b.get("/admin/usage.csv" + tt.query); got.Status != http.StatusUnprocessableEntity || !strings.Contains(got.Body, tt.want) {
			t.Errorf("%s: %d\n%s", tt.query, got.Status, got.Body)
		}
	}
}

func TestAdminAuditFilters(t *testing.T) {
	a := newAdminConsole(t)
	ctx := context.Background()
	for _, c := range []struct {
		actor, subject string
		max            float64
	}{{"root", "user:alice", 1}, {"admin", "user:alice", 2}, {"admin", "group:gpu", 3}} {
		if _, err := a.quotas.Set(ctx, store.Actor{ID: c.actor, Name: c.actor}, quota.Subject(c.subject), quota.Limits{MaxGPUs: amount(c.max)}); err != nil {
			t.Fatal(err)
		}
	}
	b := a.browser(admin)
	changes := map[string]string{"1": "max_gpus: - -&gt; 1", "2": "max_gpus: 1 -&gt; 2", "3": "max_gpus: - -&gt; 3"}
	tests := []struct {
		query string
		want  []string // the changes shown, newest first
	}{
		{"", []string{"3", "2", "1"}},
		{"?target=user:alice", []string{"2", "1"}},
		{"?actor=admin", []string{"3", "2"}},
		{"?actor=admin&target=user:alice", []string{"2"}},
		{"?limit=1", []string{"3"}},
		{"?since=2000-01-01", []string{"3", "2", "1"}},
		{"?since=2999-01-01", nil},
		{"?target=user:nobody", nil},
	}
	for _, tt := range tests {
		got := b.get("/admin/audit" + tt.query)
		if got.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", tt.query, got.Status, got.Body)
		}
		var shown []string
		rest := got.Body
		for {
			i := strings.Index(rest, "<td><code>")
			if i < 0 {
				break
			}
			rest = rest[i+len("<td><code>"):]
			for k, c := range changes {
				if strings.HasPrefix(rest, c+"</code>") {
					shown = append(shown, k)
				}
			}
		}
		if fmt.Sprint(shown) != fmt.Sprint(tt.want) {
			t.Errorf("%s: shows %v, want %v", tt.query, shown, tt.want)
		}
		if tt.want == nil && !strings.Contains(got.Body, "No audit entry matches.") {
			t.Errorf("%s: no word of an empty log", tt.query)
		}
	}
	if got := b.get("/admin/audit?target=user:alice&actor=root&since=2026-01-01&limit=5"); !strings.Contains(got.Body, `name="target" value="user:alice"`) ||
		!strings.Contains(got.Body, `name="actor" value="root"`) || !strings.Contains(got.Body, `name="since" value="2026-01-01"`) || !strings.Contains(got.Body, `name="limit" value="5"`) {
		t.Errorf("the filter's form does not keep its values:\n%s", got.Body)
	}
	for _, tt := range []struct{ query, want string }{
		{"?limit=0", "limit must be a whole number from 1 to 10000"},
		{"?limit=10001", "limit must be a whole number from 1 to 10000"},
		{"?since=last+week", "since: &#34;last week&#34; is not a date"},
	} {
		if got := b.get("/admin/audit" + tt.query); got.Status != http.StatusUnprocessableEntity || !strings.Contains(got.Body, tt.want) {
			t.Errorf("%s: %d\n%s", tt.query, got.Status, got.Body)
		}
	}
}

// What users and identity providers control is rendered as text on every
// admin page: user and group names, cluster phases and reasons, quota
// subjects, audit entries, and the charts' labels. No page has inline
// script or style.
func TestAdminHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	a := newAdminConsole(t)
	ctx := context.Background()
	now := time.Now()
	start := quota.MonthStart(now)
	a.cluster("e1", evil, []string{evil, "</title><script>alert(1)</script>"}, store.Running)
	if _, err := a.db.UpdateCluster(ctx, "e1", func(c *store.Cluster) (store.Event, error) {
		c.Phase, c.Reason = evil, evil
		return store.Event{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	a.used("e1", start, start.Add(min(time.Hour, now.Sub(start)-time.Second)), 2, 0, 1)
	if _, err := a.quotas.Set(ctx, store.Actor{ID: evil, Name: evil}, quota.UserSubject(evil), quota.Limits{AllowedProviders: []string{"<b>x</b>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.quotas.Set(ctx, store.Actor{Name: "root"}, quota.GroupSubject(evil), quota.Limits{MaxGPUs: amount(1)}); err != nil {
		t.Fatal(err)
	}
	b := a.browser(admin)
	for _, path := range []string{"/admin/clusters", "/admin/clusters?status=all&user=" + url.QueryEscape(evil), "/admin/users", "/admin/quotas",
		"/admin/quotas?subject=" + url.QueryEscape("user:"+evil), "/admin/usage", "/admin/usage?user=" + url.QueryEscape(evil), "/admin/audit",
		"/admin/audit?actor=" + url.QueryEscape(evil)} {
		got := b.get(path)
		if got.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, got.Status, got.Body)
		}
		if strings.Contains(got.Body, "<img src=x") || strings.Contains(got.Body, "<script>alert") || strings.Contains(got.Body, "<b>x</b>") {
			t.Errorf("%s renders a hostile value as HTML:\n%s", path, got.Body)
		}
		if !strings.Contains(got.Body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s does not show the value as text:\n%s", path, got.Body)
		}
		if strings.Contains(got.Body, "<script>") || strings.Contains(got.Body, " style=") || strings.Contains(got.Body, "<style") {
			t.Errorf("%s has inline script or style", path)
		}
	}
	// The CSV is not HTML: the name is as given (a file to download, never
	// rendered by the browser).
	got := b.get("/admin/usage.csv")
	rows, err := csv.NewReader(strings.NewReader(got.Body)).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != evil || !strings.HasPrefix(got.Header.Get("Content-Disposition"), "attachment;") {
		t.Errorf("csv %v: %q", err, rows)
	}
}
