package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// The cluster pages' section (SetClusterPages): costs, environment, spot
// and idle time on the list; the new-cluster form with its estimate; a
// cluster's members, software, logs (tail and follow) and live facts.

// withOptions is c with these options and the fake's priced shape.
func withOptions(c *store.Cluster, opts string) *store.Cluster {
	c.Options = opts
	c.Shape = `{"provider":"fake","scheduler":{"vcpus":2,"memory_gib":4,"instance_type":"m5.large","price_hour":0.25},"worker":{"vcpus":1,"memory_gib":2,"price_hour":0.5}}`
	return c
}

// ledger records c in the real store (the ledger's rows name their
// cluster's owner from it) with its members' ledger entries.
func (tc *testConsole) ledger(c *store.Cluster, entries ...store.LedgerEntry) {
	tc.t.Helper()
	row := *c
	if err := tc.db.CreateCluster(context.Background(), &row); err != nil {
		tc.t.Fatal(err)
	}
	if len(entries) > 0 {
		if err := tc.db.RecordLedger(context.Background(), c.Name, entries...); err != nil {
			tc.t.Fatal(err)
		}
	}
}

func started(member string, at time.Time, price float64) store.LedgerEntry {
	return store.LedgerEntry{Member: member, Kind: store.LedgerStart, At: at, VCPUs: 1, MemoryGiB: 2, InstanceType: "t3.small", PriceHour: price}
}

func stopped(member string, at time.Time) store.LedgerEntry {
	return store.LedgerEntry{Member: member, Kind: store.LedgerStop, At: at}
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(body, n) {
			t.Errorf("%s has %q", what, n)
		}
	}
}

// The list shows each cluster's cost so far (the ledger), per hour (its
// shape at the workers asked), environment, spot and idle time left.
func TestClustersListFacts(t *testing.T) {
	now := time.Now()
	c1 := withOptions(running("c1", "alice"), `{"workers":2,"idle_timeout":1200,"env":"team-env","spot":true}`)
	c2 := withOptions(running("c2", "alice"), `{"idle_timeout":600,"image":"registry.example/img:1"}`)
	c2.CreatedAt, c2.DesiredWorkers = testTime.Add(time.Minute), 0
	c3 := withOptions(running("c3", "alice"), `{"idle_timeout":0}`)
	old := withOptions(running("old", "alice"), `{"workers":1}`)
	old.Status, old.StoppedAt = store.Stopped, now
	b1 := withOptions(running("b1", "bob"), `{}`)
	f := newFakeClusters(c1, c2, c3, old, b1)
	f.idle["c1"] = 5 * time.Minute
	tc := newTestConsole(t, f).clusterPages()
	tc.ledger(c1, started("scheduler", now.Add(-2*time.Hour), 0.25), started("worker-0", now.Add(-2*time.Hour), 0.5), stopped("worker-0", now.Add(-time.Hour)))
	tc.ledger(old, started("scheduler", now.Add(-3*time.Hour), 1), stopped("scheduler", now.Add(-time.Hour)))
	tc.ledger(b1, started("scheduler", now.Add(-time.Hour), 7))

	a := tc.browser(alice).get("/")
	if a.Status != http.StatusOK {
		t.Fatalf("GET /: %d", a.Status)
	}
	row := func(name string) string {
		i := strings.Index(a.Body, `<tr data-cluster="`+name+`">`)
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", name, a.Body)
		}
		return a.Body[i : i+strings.Index(a.Body[i:], "</tr>")]
	}
	mustContain(t, "c1's row", row("c1"), "$1.00", "$1.25/h", "team-env", "spot", "5m of 20m left")
	mustContain(t, "c2's row", row("c2"), "$0.25/h", "registry.example/img:1", "stops after 10m idle")
	mustContain(t, "c3's row", row("c3"), "never stops when idle", "default")
	mustContain(t, "old's row", row("old"), "$2.00")
	mustContain(t, "the list", a.Body, "Cost so far", "Per hour", "Idle", `href="/new"`)
	mustNotContain(t, "the list", a.Body, "b1", "$7.00")
	// Live updates carry the same.
	f.change("alice", func(m map[string]*store.Cluster) { m["c1"].DesiredWorkers = 3 })
	frag, err := tc.console.clustersFragment(context.Background(), alice, false)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the stream's table", frag, "$1.75/h", "5m of 20m left")
}

// Without the section the list has no cost columns (nor a link to a form
// that is not there).
func TestClustersListWithoutClusterPages(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters(running("c1", "alice")))
	a := tc.browser(alice).get("/")
	mustNotContain(t, "the list", a.Body, "Cost so far", `href="/new"`)
	if a := tc.browser(alice).get("/new"); a.Status != http.StatusNotFound {
		t.Errorf("GET /new without the section: %d", a.Status)
	}
}

// The form is the published options, each as its kind of input, with the
// estimate of its defaults.
func TestNewClusterForm(t *testing.T) {
	tc := newTestConsole(t, newFakeClusters()).clusterPages()
	a := tc.browser(alice).get("/new")
	if a.Status != http.StatusOK {
		t.Fatalf("GET /new: %d\n%s", a.Status, a.Body)
	}
	mustContain(t, "the form", a.Body,
		`<a href="/new" aria-current="page">New cluster</a>`,
		`<form method="post" action="/new"`,
		`<input type="number" id="opt-workers" name="workers" value="0" min="0" max="5" step="1">`,
		`<input type="number" id="opt-worker_memory" name="worker_memory" value="2" min="0.25" max="16" step="any">`,
		`name="idle_timeout" value="1200"`,
		`<input type="text" id="opt-image" name="image" value="">`,
		`<textarea id="opt-client_env" name="client_env"`,
		`<option value="t4">t4</option>`, `<option value="" selected>(any)</option>`,
		`<input type="checkbox" name="spot" value="true">`,
		"Estimated cost:", "$0.25 per hour", "m5.large", "Within your quota")
	if tc.clusters.checked != 1 {
		t.Errorf("CheckCreate called %d times, want once", tc.clusters.checked)
	}
}

// The estimate follows the form's values: the cost, the quota that would
// refuse (named with its source), or the API's words on a bad value.
func TestNewClusterEstimate(t *testing.T) {
	tests := []struct {
		name  string
		query url.Values
		want  []string
		not   []string
	}{
		{"defaults", url.Values{}, []string{"$0.25 per hour", "Within your quota"}, []string{"refuse"}},
		{"two workers", url.Values{"form": {"1"}, "workers": {"2"}}, []string{"$1.25 per hour", "2 workers", "Within your quota"}, nil},
		{"over the quota", url.Values{"form": {"1"}, "workers": {"4"}},
			[]string{"$2.25 per hour", `data-quota="max_workers_per_cluster"`, "(<strong>max_workers_per_cluster</strong>, from user:alice (stored))",
				"4 workers is over your limit of 3"}, []string{"Within your quota"}},
		{"not a number", url.Values{"form": {"1"}, "workers": {"many"}},
			[]string{"data-problem", "workers must be a whole number from 0 to 5, got &#34;many&#34;"}, []string{"Within your quota", "Estimated cost"}},
		{"hostile value", url.Values{"form": {"1"}, "workers": {`<img src=x onerror=alert(1)>`}},
			[]string{"&lt;img src=x onerror=alert(1)&gt;"}, []string{"<img src=x"}},
	}
	tc := newTestConsole(t, newFakeClusters()).clusterPages()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/new/estimate?", "/new?"} {
				a := tc.browser(alice).get(path + tt.query.Encode())
				if a.Status != http.StatusOK {
					t.Fatalf("GET %s: %d\n%s", path, a.Status, a.Body)
				}
				mustContain(t, path, a.Body, tt.want...)
				mustNotContain(t, path, a.Body, tt.not...)
				if fragment := a.Header.Get("X-Console-Fragment") == "estimate"; fragment != strings.HasPrefix(path, "/new/estimate") ||
					fragment && strings.Contains(a.Body, "<html") {
					t.Errorf("GET %s: fragment header %q, page %v", path, a.Header.Get("X-Console-Fragment"), strings.Contains(a.Body, "<html"))
				}
			}
		})
	}
	// The form keeps what was typed.
	a := tc.browser(alice).get("/new?" + url.Values{"form": {"1"}, "workers": {"4"}, "spot": {"true"}, "gpu_type": {"t4"}}.Encode())
	mustContain(t, "the form", a.Body, `name="workers" value="4"`, `name="spot" value="true" checked`, `<option value="t4" selected>`)
}

// Submitting the form creates the cluster through the loop's Create
// (the API's) with the options set, defaults left out, and goes to the
// cluster's page; a refusal is the API's answer, on the form.
func TestCreateCluster(t *testing.T) {
	tests := []struct {
		name       string
		form       url.Values
		wantStatus int
		wantRaw    string // what Create was asked (JSON)
		wantText   []string
	}{
		{name: "defaults", form: url.Values{"form": {"1"}, "workers": {"0"}, "worker_memory": {"2"}, "idle_timeout": {"1200"}},
			wantStatus: http.StatusSeeOther, wantRaw: `{}`},
		{name: "options", form: url.Values{"form": {"1"}, "workers": {" 2 "}, "worker_memory": {"3.5"}, "image": {"reg.example/a:1"},
			"spot": {"true"}, "gpu_type": {"t4"}, "client_env": {"numpy = 1.26\r\n\r\ndask=2024.1\r\n"}},
			wantStatus: http.StatusSeeOther,
			wantRaw:    `{"client_env":{"dask":"2024.1","numpy":"1.26"},"gpu_type":"t4","image":"reg.example/a:1","spot":true,"worker_memory":3.5,"workers":2}`},
		{name: "idle never", form: url.Values{"form": {"1"}, "idle_timeout": {"0"}}, wantStatus: http.StatusSeeOther, wantRaw: `{"idle_timeout":0}`},
		{name: "bad value", form: url.Values{"form": {"1"}, "workers": {"2x"}}, wantStatus: http.StatusUnprocessableEntity,
			wantText: []string{"The gateway refused this cluster", "workers must be a whole number from 0 to 5, got &#34;2x&#34;", `name="workers" value="2x"`}},
		{name: "over the quota", form: url.Values{"form": {"1"}, "workers": {"5"}}, wantStatus: http.StatusForbidden,
			wantText: []string{"5 workers is over your limit of 3", "max_workers_per_cluster"}},
		{name: "hostile value", form: url.Values{"form": {"1"}, "workers": {`"><script>alert(1)</script>`}}, wantStatus: http.StatusUnprocessableEntity,
			wantText: []string{"&lt;script&gt;alert(1)&lt;/script&gt;"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeClusters()
			tc := newTestConsole(t, f).clusterPages()
			a := tc.browser(alice).post("/new", tt.form)
			if a.Status != tt.wantStatus {
				t.Fatalf("POST /new: %d, want %d\n%s", a.Status, tt.wantStatus, a.Body)
			}
			mustContain(t, "the answer", a.Body, tt.wantText...)
			mustNotContain(t, "the answer", a.Body, "<script>alert")
			if tt.wantStatus != http.StatusSeeOther {
				if len(f.created) != 0 {
					t.Fatalf("created %v", f.created)
				}
				return
			}
			if loc := a.Header.Get("Location"); loc != "/c/new1?msg=Starting+new1." {
				t.Errorf("went to %q", loc)
			}
			if len(f.created) != 1 {
				t.Fatalf("created %d clusters", len(f.created))
			}
			got, _ := json.Marshal(f.created[0])
			var want, have any
			_ = json.Unmarshal([]byte(tt.wantRaw), &want)
			_ = json.Unmarshal(got, &have)
			if !reflect.DeepEqual(have, want) {
				t.Errorf("Create asked %s, want %s", got, tt.wantRaw)
			}
			if c := f.clusters["new1"]; c == nil || c.Owner != "alice" {
				t.Errorf("the new cluster: %+v", c)
			}
		})
	}
}

// The form's refusals of who may post it.
func TestCreateClusterRefused(t *testing.T) {
	form := url.Values{"form": {"1"}, "workers": {"1"}}
	tests := []struct {
		name   string
		user   *auth.User
		header map[string]string
		want   int
		text   string
	}{
		{"read-only", aliceRO, nil, http.StatusForbidden, "read-only"},
		{"cross-site", alice, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "did not come from the gateway"},
		{"signed out", nil, nil, http.StatusUnauthorized, "Your session has ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeClusters()
			tc := newTestConsole(t, f).clusterPages()
			a := tc.browser(tt.user).do("POST", "/new", form, tt.header)
			if a.Status != tt.want || !strings.Contains(a.Body, tt.text) || len(f.created) != 0 {
				t.Fatalf("POST /new: %d (created %d), want %d with %q:\n%s", a.Status, len(f.created), tt.want, tt.text, a.Body)
			}
		})
	}
	// A read-only session's page has no form to send, but the estimate.
	tc := newTestConsole(t, newFakeClusters()).clusterPages()
	a := tc.browser(aliceRO).get("/new")
	if a.Status != http.StatusOK || strings.Contains(a.Body, `method="post" action="/new"`) || !strings.Contains(a.Body, "read-only") ||
		!strings.Contains(a.Body, "Estimated cost") {
		t.Fatalf("GET /new read-only: %d\n%s", a.Status, a.Body)
	}
	// The list links no form for it either.
	if a := tc.browser(aliceRO).get("/"); strings.Contains(a.Body, `Start one from <a href="/new">`) {
		t.Error("a read-only session's list links the form")
	}
}

// The loop's own failure to publish its options is the API's answer.
func TestNewClusterSpecError(t *testing.T) {
	f := newFakeClusters()
	f.specErr = fmt.Errorf("%w: quotas unreadable", errInvalid)
	tc := newTestConsole(t, f).clusterPages()
	for _, path := range []string{"/new", "/new/estimate"} {
		if a := tc.browser(alice).get(path); a.Status != http.StatusUnprocessableEntity || !strings.Contains(a.Body, "quotas unreadable") {
			t.Errorf("GET %s: %d\n%s", path, a.Status, a.Body)
		}
	}
	if a := tc.browser(alice).post("/new", url.Values{"form": {"1"}}); a.Status != http.StatusUnprocessableEntity || len(f.created) != 0 {
		t.Errorf("POST /new: %d, created %d", a.Status, len(f.created))
	}
}

// A cluster's page: its members as the ledger keeps them (state, machine,
// cost), what it runs, and how a member that refused it differs.
func TestClusterPageMembersAndSoftware(t *testing.T) {
	now := time.Now()
	c := withOptions(running("c1", "alice"), `{"workers":1,"env":"team-env","image":"reg.example/team@sha256:ab","client_env":{"numpy":"1.26.4","pandas":""}}`)
	c.Status = store.Failed
	c.Reason = "worker-0 runs other software than the client:\n" +
		"gateway: environment mismatch: this worker does not run the client's software\n" +
		"package      client       image\n" +
		"numpy        1.26.4       2.0.0\n" +
		"pandas       (missing)    2.2 rc 1\n" +
		"python       3.12         3.11"
	f := newFakeClusters(c)
	tc := newTestConsole(t, f).clusterPages()
	tc.ledger(c, started("scheduler", now.Add(-2*time.Hour), 0.25), started("worker-0", now.Add(-time.Hour), 0.5), stopped("worker-0", now.Add(-30*time.Minute)))
	a := tc.browser(alice).get("/c/c1")
	if a.Status != http.StatusOK {
		t.Fatalf("GET /c/c1: %d", a.Status)
	}
	mustContain(t, "the page", a.Body,
		`<tr data-member="scheduler"><td data-label="Member">scheduler</td><td data-label="State"><span class="state state-running">running</span></td><td data-label="Machine">t3.small, 1 vCPU, 2 GiB, $0.25/h</td>`,
		`<tr data-member="worker-0"><td data-label="Member">worker-0</td><td data-label="State"><span class="state state-stopped">stopped</span>`,
		"30m", "$0.75", "environment <code>team-env</code> (image <code>reg.example/team@sha256:ab</code>)",
		"<tr><td>numpy</td><td>1.26.4</td></tr>", "<tr><td>pandas</td><td>(missing)</td></tr>",
		"<caption>worker-0 runs other software than the client: the differences</caption>",
		"<tr><td>numpy</td><td>1.26.4</td><td>2.0.0</td></tr>",
		"<tr><td>pandas</td><td>(missing)</td><td>2.2 rc 1</td></tr>",
		"<tr><td>python</td><td>3.12</td><td>3.11</td></tr>")
}

// The table of differences as the launcher and the gateway print it,
// whatever the versions hold.
func TestDiffTable(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []diffRow
	}{
		{"launcher", "gateway: environment mismatch: x\npackage  client  image\nnumpy    1.26    2.0\n", []diffRow{{"numpy", "1.26", "2.0"}}},
		{"wide runes", "package  client  image\nnümpy    1.2 ß   2.0\n", []diffRow{{"nümpy", "1.2 ß", "2.0"}}},
		{"stops at a blank line", "package  client  image\na        1       2\n\nb  3  4\n", []diffRow{{"a", "1", "2"}}},
		{"short row", "package  client  image\nodd\n", []diffRow{{Package: "odd"}}},
		{"no table", "the scheduler failed to start: it exited", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diffTable(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("diffTable = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// ?tail= asks the loop for that many lines of each member's log, within
// bounds.
func TestClusterPageTail(t *testing.T) {
	tests := []struct {
		query    string
		want     int
		wantTail int
	}{
		{"", http.StatusOK, logTail},
		{"?tail=1000", http.StatusOK, 1000},
		{"?tail=0", http.StatusUnprocessableEntity, 0},
		{"?tail=5001", http.StatusUnprocessableEntity, 0},
		{"?tail=%3Cb%3E", http.StatusUnprocessableEntity, 0},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			f := newFakeClusters(running("c1", "alice"))
			f.logs["c1"] = "[scheduler] hello\n"
			tc := newTestConsole(t, f).clusterPages()
			a := tc.browser(alice).get("/c/c1" + tt.query)
			if a.Status != tt.want {
				t.Fatalf("GET /c/c1%s: %d\n%s", tt.query, a.Status, a.Body)
			}
			if tt.want != http.StatusOK {
				mustNotContain(t, "the error", a.Body, "<b>")
				if len(f.tails) != 0 {
					t.Errorf("logs read with a bad tail: %v", f.tails)
				}
				return
			}
			if len(f.tails) != 1 || f.tails[0] != tt.wantTail {
				t.Errorf("logs read with tails %v, want [%d]", f.tails, tt.wantTail)
			}
			mustContain(t, "the page", a.Body, "[scheduler] hello", fmt.Sprintf(`<option value="%d" selected>`, tt.wantTail), "data-follow")
		})
	}
}

// The snippets are Python that parses, for the cluster and this gateway.
func TestSnippets(t *testing.T) {
	gw, dist := snippets("http://127.0.0.1:8000", "c1", `al"ice`)
	mustContain(t, "the dask_gateway snippet", gw, `Gateway("http://127.0.0.1:8000", auth=BasicAuth("al\"ice", "gw_..."))`, `gateway.connect("c1")`)
	mustContain(t, "the distributed snippet", dist, `"daskgateway-c1"`, `Client("tls://127.0.0.1:8000"`, `"gateway", "clusters", "c1")`)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to parse the snippets")
	}
	for _, src := range []string{gw, dist} {
		cmd := exec.Command(py, "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = strings.NewReader(src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("python cannot parse:\n%s\n%s", src, out)
		}
	}
}

// openStream opens a page's event stream as b.
func openStream(t *testing.T, b *browser, path string) (*http.Response, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.tc.srv.URL+path, nil)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// A cluster's page's stream sends its facts anew when the cluster
// changes (the start's progress), and only to its owner.
func TestClusterStream(t *testing.T) {
	c := withOptions(running("c1", "alice"), `{}`)
	c.Status, c.Phase = store.Starting, "starting scheduler"
	f := newFakeClusters(c, running("b1", "bob"))
	tc := newTestConsole(t, f).clusterPages()
	if a := tc.browser(alice).get("/c/c1"); !strings.Contains(a.Body, `data-stream="/events?cluster=c1"`) {
		t.Fatalf("the page names no stream:\n%s", a.Body)
	}
	resp, rd := openStream(t, tc.browser(alice), "/events?cluster=c1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	// First the facts as they are, then as they change.
	event, data := readEvent(t, rd)
	if event != "cluster" || !strings.Contains(data, "starting scheduler") || strings.Contains(data, "<html") {
		t.Fatalf("first event %q:\n%s", event, data)
	}
	f.change("alice", func(m map[string]*store.Cluster) {
		m["c1"].Status, m["c1"].Phase, m["c1"].ReadyWorkers = store.Running, "waiting for workers 1/2", 1
	})
	readUntil(t, rd, func(event, data string) bool {
		if event != "cluster" || strings.Contains(data, "<html") {
			t.Fatalf("event %q:\n%s", event, data)
		}
		return strings.Contains(data, "waiting for workers 1/2") && strings.Contains(data, "1 ready of 2 requested")
	})
	for _, tt := range []struct {
		who  *auth.User
		path string
		want int
	}{
		{bob, "/events?cluster=c1", http.StatusNotFound},
		{alice, "/events?cluster=nope", http.StatusNotFound},
		{alice, "/events?cluster=c1&follow=1&tail=x", http.StatusUnprocessableEntity},
	} {
		if resp, _ := openStream(t, tc.browser(tt.who), tt.path); resp.StatusCode != tt.want {
			t.Errorf("%s as %s: %d, want %d", tt.path, tt.who.Name, resp.StatusCode, tt.want)
		}
	}
}

// Following the logs: the lines as the page showed them, then each
// read's new lines only, as text that cannot frame events of its own.
func TestFollowLogs(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"))
	f.logs["c1"] = "[scheduler] one\n[worker-0] a\n"
	tc := newTestConsole(t, f).clusterPages()
	_, rd := openStream(t, tc.browser(alice), "/events?cluster=c1&follow=1&tail=1000")
	logEvent := func() (string, string) {
		for {
			if event, data := readEvent(t, rd); event != "cluster" {
				return event, data
			}
		}
	}
	event, data := logEvent()
	if event != "logs-reset" || data != "[scheduler] one\n[worker-0] a" {
		t.Fatalf("first: %q %q", event, data)
	}
	f.mu.Lock()
	f.logs["c1"] = "[scheduler] one\n[scheduler] two\n[worker-0] a\n[worker-0] <b>b</b>\revent: evil\n"
	f.mu.Unlock()
	event, data = logEvent()
	if event != "logs" || data != "[scheduler] two\n[worker-0] <b>b</b>\nevent: evil" {
		t.Fatalf("then: %q %q", event, data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tails[0] != 1000 || f.tails[len(f.tails)-1] != followTail {
		t.Errorf("tails %v: want 1000 first, then %d", f.tails, followTail)
	}
}

// One user's streams that follow logs are bounded.
func TestFollowLimit(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"), running("b1", "bob"))
	tc := newTestConsole(t, f).clusterPages()
	for i := range maxFollows {
		if resp, _ := openStream(t, tc.browser(alice), "/events?cluster=c1&follow=1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("follow %d: %d", i+1, resp.StatusCode)
		}
	}
	if resp, _ := openStream(t, tc.browser(alice), "/events?cluster=c1&follow=1"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("one more follow: %d", resp.StatusCode)
	}
	// Others are not bounded by alice's; alice's stream without follow is not either.
	if resp, _ := openStream(t, tc.browser(bob), "/events?cluster=b1&follow=1"); resp.StatusCode != http.StatusOK {
		t.Errorf("bob's follow: %d", resp.StatusCode)
	}
	if resp, _ := openStream(t, tc.browser(alice), "/events?cluster=c1"); resp.StatusCode != http.StatusOK {
		t.Errorf("alice's stream: %d", resp.StatusCode)
	}
}

func TestLogFollower(t *testing.T) {
	steps := []struct {
		name, read string
		want       []string
	}{
		{"first", "[s] 1\n[s] 2\n[w] a\n", []string{"[s] 1", "[s] 2", "[w] a"}},
		{"growing", "[s] 1\n[s] 2\n[s] 3\n[w] a\n", []string{"[s] 3"}},
		{"repeated lines", "[s] 1\n[s] 2\n[s] 3\n[s] 3\n[w] a\n[w] a\n", []string{"[s] 3", "[w] a"}},
		{"sliding", "[s] 2\n[s] 3\n[s] 3\n[s] 4\n[w] a\n[w] a\n", []string{"[s] 4"}},
		{"a note above a cut log", "[s] (earlier lines omitted)\n[s] 3\n[s] 3\n[s] 4\n[s] 5\n[w] a\n[w] a\n", []string{"[s] 5"}},
		{"a member missing from a read", "[w] a\n[w] a\n[w] b\n", []string{"[w] b"}},
		{"it comes back", "[s] 4\n[s] 5\n[s] 6\n", []string{"[s] 6"}},
		{"a gap", "[s] x\n[s] y\n", []string{"[s] x", "[s] y"}},
		{"no prefix", "plain\n", []string{"plain"}},
	}
	var f logFollower
	for _, st := range steps {
		if got := f.news(st.read); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: news %q, want %q", st.name, got, st.want)
		}
	}
}

// A carriage return in an event's data ends its line, as the stream's
// framing reads it: it must not start a field (a forged event name).
func TestSSEEventCarriageReturn(t *testing.T) {
	got := string(sseEvent("logs", "a\revent: evil\r\nb\rdata: x"))
	want := "event: logs\ndata: a\ndata: event: evil\ndata: b\ndata: data: x\n\n"
	if got != want {
		t.Fatalf("sseEvent = %q, want %q", got, want)
	}
}

// What users control on the cluster pages is rendered as text: option
// labels, defaults and choices, environment and package names, versions,
// the differences' table, machine types.
func TestClusterPagesHostileValues(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	f := newFakeClusters()
	f.spec[0].Label = evil
	f.spec[3].Default = evil
	f.spec[5].Spec["options"] = []string{"", evil}
	c := withOptions(running("c1", "alice"), `{}`)
	opts, _ := json.Marshal(map[string]any{"env": evil, "image": evil, "client_env": map[string]string{evil: evil}})
	c.Options = string(opts)
	c.Status, c.Reason = store.Failed, "the scheduler runs other software than the client:\n"+
		"gateway: environment mismatch: this scheduler does not run the client's software\npackage  client  image\n"+evil+"  "+evil+"  "+evil
	f.clusters["c1"] = c
	tc := newTestConsole(t, f).clusterPages()
	tc.ledger(c, store.LedgerEntry{Member: evil, Kind: store.LedgerStart, At: time.Now().Add(-time.Minute), InstanceType: evil, GPUType: evil, GPUs: 1})
	for _, path := range []string{"/", "/c/c1", "/new", "/new?form=1&image=" + url.QueryEscape(evil), "/new/estimate?form=1&image=" + url.QueryEscape(evil)} {
		a := tc.browser(alice).get(path)
		if a.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, a.Status, a.Body)
		}
		if strings.Contains(a.Body, "<img src=x") {
			t.Errorf("%s renders a hostile value as HTML:\n%s", path, a.Body)
		}
		if !strings.Contains(a.Body, "&lt;img src=x onerror=alert(1)&gt;") && path != "/new/estimate?form=1&image="+url.QueryEscape(evil) {
			t.Errorf("%s does not show the value as text:\n%s", path, a.Body)
		}
	}
}

// A stream starts with the page as it is now: a change made between the
// page's rendering and the stream's start, which the user's watch had
// already read, would otherwise show only at the next change.
func TestStreamStartsWithThePage(t *testing.T) {
	f := newFakeClusters(running("c1", "alice"))
	tc := newTestConsole(t, f).clusterPages()
	// The user's watch runs (another page is open) and has read the
	// generation.
	_, first := openStream(t, tc.browser(alice), "/events")
	readUntil(t, first, func(event, data string) bool { return event == "clusters" })
	// The page is rendered; the cluster changes; the page's stream opens.
	tc.browser(alice).get("/c/c1")
	f.change("alice", func(m map[string]*store.Cluster) { m["c1"].Phase = "waiting for workers 1/2" })
	readUntil(t, first, func(event, data string) bool { return strings.Contains(data, "waiting for workers 1/2") })
	_, rd := openStream(t, tc.browser(alice), "/events?cluster=c1")
	if event, data := readEvent(t, rd); event != "cluster" || !strings.Contains(data, "waiting for workers 1/2") {
		t.Fatalf("first event %q:\n%s", event, data)
	}
}

// A new watch tells its streams at its first read, whatever it reads: a
// change made before that read, after a page was rendered, is news.
func TestHubFirstRead(t *testing.T) {
	h := newHub(func(context.Context, string) (int64, error) { return 7, nil }, 5*time.Millisecond, nil)
	defer h.close()
	ch, done, _, ok := h.subscribe("alice")
	if !ok {
		t.Fatal("subscribe refused")
	}
	defer done()
	select {
	case <-ch:
	case <-time.After(testutil.HangBound):
		t.Fatal("the watch's first read told nobody")
	}
}
