package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// The sharing matrix runs a whole gateway in process (gateway dev's
// assembly: the real API, control loop, store, dashboard proxy and the
// local provider's Dask schedulers), with users given API tokens and
// groups through the store, as logins would.

// sharer is one person of the matrix.
type sharer struct {
	name, id, token string
	groups          []string
	readOnly        bool
}

// addSharer records a login's claims for name (their groups) and gives
// them an API token.
func addSharer(t *testing.T, g *Gateway, name, user string, groups []string, readOnly bool) sharer {
	t.Helper()
	ctx := context.Background()
	id := "oidc:" + user
	if _, err := g.store.RecordUserClaims(ctx, &store.UserClaims{ID: id, Name: user, Groups: groups, ClaimsAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := auth.APITokenPrefix + hex.EncodeToString(b)
	err := g.store.CreateToken(ctx, &store.APIToken{ID: "t-" + hex.EncodeToString(b[:6]), Owner: id, OwnerName: user, Name: "matrix", Hash: auth.HashToken(tok),
		ReadOnly: readOnly, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return sharer{name: name, id: id, token: tok, groups: groups, readOnly: readOnly}
}

// call sends one request to the gateway as tok and returns the status and
// body.
func call(t *testing.T, base, method, path, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func requireLocalDask(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import distributed").Run(); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, "these tests run Debian's python3-distributed at /usr/bin/python3 (apt-get install python3-distributed)")
	}
}

// sharingGateway runs gateway dev's assembly with cluster.sharing set.
func sharingGateway(t *testing.T, setting string) (*Gateway, string) {
	t.Helper()
	requireLocalDask(t)
	v := ConfigSchema().New()
	v.Set("dev", true)
	v.Set("listen", "127.0.0.1:0")
	v.Set("data_dir", t.TempDir())
	v.Set("cluster.on_shutdown", "stop")
	v.Set("cluster.sharing", setting)
	cfg, err := ConfigSchema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	g := runGateway(t, cfg)
	return g, g.PublicURL
}

// startCluster asks for a cluster as owner and waits until it runs.
func startCluster(t *testing.T, base string, owner sharer, wait bool) string {
	t.Helper()
	code, body := call(t, base, "POST", "/api/v1/clusters/", owner.token, `{"cluster_options":{"workers":0}}`)
	var created struct{ Name string }
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	if !wait {
		return created.Name
	}
	deadline := time.Now().Add(testutil.HangBound)
	for time.Now().Before(deadline) {
		code, body = call(t, base, "GET", "/api/v1/clusters/"+created.Name+"?wait", owner.token, "")
		var c apitype.Cluster
		if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
			t.Fatalf("wait: %d %s", code, body)
		}
		switch c.Status {
		case "RUNNING":
			return created.Name
		case "FAILED", "STOPPED":
			t.Fatalf("cluster %s: %s", created.Name, body)
		}
	}
	t.Fatalf("cluster %s did not start within %s", created.Name, testutil.HangBound)
	return ""
}

// matrixCase is one setting and one --allow: each person's outcome follows
// from whether the cluster reaches them and what the shares allow.
type matrixCase struct {
	setting string
	allow   []string
}

// shareStatus is what sharing with target answers under setting: only
// groups the owner belongs to under groups; anything under any.
func (m matrixCase) shareStatus(target string) int {
	switch {
	case m.setting == "off":
		return http.StatusForbidden
	case m.setting == "groups" && strings.HasPrefix(target, "user:"):
		return http.StatusForbidden
	}
	return http.StatusOK
}

// reaches says whether the cluster, shared with user:bob and group:ops
// (as far as the setting let its owner), reaches p.
func (m matrixCase) reaches(p sharer) bool {
	switch {
	case p.name == "owner":
		return true
	case m.setting == "off":
		return false
	case p.name == "bob":
		return m.setting == "any"
	}
	return slices.Contains(p.groups, "ops")
}

// may says whether p may scale or stop the cluster: read-only tokens
// only read.
func (m matrixCase) may(p sharer, action string) bool {
	return p.name == "owner" || (m.reaches(p) && !p.readOnly && slices.Contains(m.allow, action))
}

// TestSharingMatrix: a cluster of ann's, shared with user:bob and
// group:ops (as far as cluster.sharing lets her), with and without
// --allow, under each setting, for ann, bob, carol of ops, carol's
// read-only token, dave (no share), and erin (an admin it is not shared
// with): who lists it, gets it with its TLS credentials (what
// Gateway().connect(name) does), opens its dashboard, scales and stops
// it; and the audit log has a row for each share and for each thing
// someone other than ann did with it, and none for anyone else.
func TestSharingMatrix(t *testing.T) {
	cases := []matrixCase{
		{"off", []string{"scale", "stop"}},
		{"groups", nil}, {"groups", []string{"scale"}}, {"groups", []string{"scale", "stop"}},
		{"any", nil}, {"any", []string{"scale", "stop"}},
	}
	for _, setting := range []string{"off", "groups", "any"} {
		g, _ := sharingGateway(t, setting) // one gateway per setting, for the test
		for _, m := range cases {
			if m.setting != setting {
				continue
			}
			t.Run(fmt.Sprintf("%s/allow=%s", m.setting, strings.Join(m.allow, ",")), func(t *testing.T) { runMatrix(t, g, m) })
		}
	}
}

func runMatrix(t *testing.T, g *Gateway, m matrixCase) {
	base := g.PublicURL
	suffix := strings.NewReplacer("/", "-", ",", "-", "=", "-").Replace(t.Name()) // user names: no commas
	people := []sharer{
		addSharer(t, g, "owner", "ann"+suffix, []string{"ops", "team"}, false),
		addSharer(t, g, "bob", "bob"+suffix, []string{"team2"}, false),
		addSharer(t, g, "carol", "carol"+suffix, []string{"ops"}, false),
		addSharer(t, g, "carol read-only", "carol"+suffix, []string{"ops"}, true),
		addSharer(t, g, "dave", "dave"+suffix, []string{"finance"}, false),
		addSharer(t, g, "admin erin", "erin"+suffix, []string{"gateway-admins"}, false),
	}
	owner, bob := people[0], people[1]
	name := startCluster(t, base, owner, true)
	share := func(cluster string) {
		t.Helper()
		for _, target := range []string{"group:ops", "user:" + strings.TrimPrefix(bob.id, "oidc:")} {
			body := fmt.Sprintf(`{"with":[%q],"allow":%s}`, target, jsonList(m.allow))
			if code, out := call(t, base, "POST", "/api/v1/clusters/"+cluster+"/share", owner.token, body); code != m.shareStatus(target) {
				t.Errorf("share %s with %s: %d %s, want %d", cluster, target, code, out, m.shareStatus(target))
			}
		}
		if m.setting != "any" {
			sharedEarlier(t, g, cluster, bob, m.allow)
		}
	}
	share(name)

	workers := 0 // each allowed scale changes it, between 0 and 1, so that each is recorded
	for _, p := range people {
		checkList(t, base, m, p, name)
		checkGet(t, base, m, p, name)
		checkDashboard(t, base, m, p, name)
		checkScale(t, base, m, p, name, &workers)
	}
	checkStops(t, base, m, people, name, share)
	checkAudit(t, base, m, people, people[5])
}

// sharedEarlier stores the shares the setting refused, as a gateway with
// cluster.sharing: any would have made them before the setting was
// lowered: they must grant nothing the setting does not allow now.
func sharedEarlier(t *testing.T, g *Gateway, cluster string, bob sharer, allow []string) {
	t.Helper()
	earlier := []store.Share{
		{Kind: "user", Subject: bob.id, SubjectName: "bob", Allow: allow},
		{Kind: "group", Subject: "ops", Allow: allow, OwnerMember: true},
		{Kind: "group", Subject: "team2", Allow: allow}, // bob's; the owner is not in it
	}
	_, _, err := g.store.UpdateShares(context.Background(), cluster, store.Actor{ID: "oidc:earlier", Name: "earlier"}, "cluster.share",
		func(_ string, cur []store.Share) ([]store.Share, error) {
			for _, sh := range earlier {
				if !slices.ContainsFunc(cur, func(x store.Share) bool { return x.Kind == sh.Kind && x.Subject == sh.Subject }) {
					cur = append(cur, sh)
				}
			}
			return cur, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func jsonList(s []string) string {
	b, _ := json.Marshal(append([]string{}, s...))
	return string(b)
}

func checkList(t *testing.T, base string, m matrixCase, p sharer, name string) {
	t.Helper()
	for _, view := range []string{"", "?view=detail"} {
		code, body := call(t, base, "GET", "/api/v1/clusters/"+view, p.token, "")
		var list map[string]map[string]any
		if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("%s: list%s: %d %s", p.name, view, code, body)
		}
		c, listed := list[name]
		if listed != m.reaches(p) {
			t.Errorf("%s: list%s shows the cluster: %v, want %v", p.name, view, listed, m.reaches(p))
			continue
		}
		if !listed {
			continue
		}
		_, access := c["access"]
		if view == "" && len(c) != 8 {
			t.Errorf("%s: the default list's entry has %d fields, want dask-gateway's 8: %v", p.name, len(c), c)
		}
		if view != "" && access != (p.name != "owner") {
			t.Errorf("%s: the detail list's entry has access: %v: %v", p.name, access, c)
		}
		if view != "" && access && c["owner_name"] == "" {
			t.Errorf("%s: a shared cluster listed without its owner: %v", p.name, c)
		}
	}
}

func checkGet(t *testing.T, base string, m matrixCase, p sharer, name string) {
	t.Helper()
	code, body := call(t, base, "GET", "/api/v1/clusters/"+name+"?wait", p.token, "")
	if !m.reaches(p) {
		if code != http.StatusNotFound {
			t.Errorf("%s: get: %d %s, want 404", p.name, code, body)
		}
		return
	}
	var c apitype.Cluster
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("%s: get: %d %s", p.name, code, body)
	}
	if hasKey := c.TLSKey != nil && strings.Contains(*c.TLSKey, "PRIVATE KEY"); hasKey == p.readOnly {
		t.Errorf("%s: get hands out the cluster's key: %v", p.name, hasKey)
	}
}

func checkDashboard(t *testing.T, base string, m matrixCase, p sharer, name string) {
	t.Helper()
	code, body := call(t, base, "GET", "/clusters/"+name+"/health", p.token, "")
	want := http.StatusNotFound
	if m.reaches(p) {
		want = http.StatusOK
	}
	if code != want {
		t.Errorf("%s: dashboard: %d %s, want %d", p.name, code, body, want)
	}
}

func checkScale(t *testing.T, base string, m matrixCase, p sharer, name string, workers *int) {
	t.Helper()
	n := 1 - *workers
	code, body := call(t, base, "POST", "/api/v1/clusters/"+name+"/scale", p.token, fmt.Sprintf(`{"count":%d}`, n))
	want := http.StatusNotFound
	switch {
	case p.readOnly:
		want = http.StatusForbidden // read-only tokens only read, whatever the cluster
	case m.may(p, "scale"):
		want = http.StatusOK
		*workers = n
	case m.reaches(p):
		want = http.StatusForbidden
	}
	if code != want {
		t.Errorf("%s: scale: %d %s, want %d", p.name, code, body, want)
	}
	if want == http.StatusForbidden && !p.readOnly && !strings.Contains(body, "--allow scale") {
		t.Errorf("%s: scale refused without saying why: %s", p.name, body)
	}
}

// checkStops: everyone who may not stop the cluster tries first, and it
// keeps running; then each who may stops one (a fresh cluster, shared the
// same way, when the first has stopped).
func checkStops(t *testing.T, base string, m matrixCase, people []sharer, name string, share func(string)) {
	t.Helper()
	owner := people[0]
	order := slices.Clone(people)
	sort.SliceStable(order, func(i, j int) bool { return !m.may(order[i], "stop") && m.may(order[j], "stop") })
	stopped := false
	for _, p := range order {
		if m.may(p, "stop") && stopped {
			name = startCluster(t, base, owner, false)
			share(name)
			stopped = false
		}
		code, body := call(t, base, "DELETE", "/api/v1/clusters/"+name, p.token, "")
		want := http.StatusNoContent // dask-gateway's answer for unknown names too
		switch {
		case p.readOnly:
			want = http.StatusForbidden
		case m.reaches(p) && !m.may(p, "stop"):
			want = http.StatusForbidden
		}
		if code != want {
			t.Errorf("%s: stop: %d %s, want %d", p.name, code, body, want)
		}
		_, out := call(t, base, "GET", "/api/v1/clusters/"+name, owner.token, "")
		var c apitype.Cluster
		_ = json.Unmarshal([]byte(out), &c)
		live := c.Status == "RUNNING" || c.Status == "PENDING"
		if live == m.may(p, "stop") {
			t.Errorf("%s: after their stop the cluster is %s", p.name, c.Status)
		}
		stopped = stopped || !live
	}
}

// checkAudit: the audit rows of the matrix's clusters: ann's shares (not
// her own use), and what bob and carol did through them.
func checkAudit(t *testing.T, base string, m matrixCase, people []sharer, admin sharer) {
	t.Helper()
	code, body := call(t, base, "GET", "/api/v1/admin/audit?limit=1000", admin.token, "")
	var rows []apitype.AuditJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rows) != nil {
		t.Fatalf("audit: %d %s", code, body)
	}
	got := map[string]int{}
	for _, r := range rows {
		for _, p := range people {
			if r.ActorID == p.id {
				got[p.name+" "+r.Action]++
				break // carol's two tokens are one person
			}
		}
	}
	want := map[string]int{}
	owner, carol := people[0], people[2]
	if m.setting != "off" {
		want[owner.name+" cluster.share"] = 1 // group:ops; user:bob under any only
		if m.setting == "any" {
			want[owner.name+" cluster.share"] = 2
		}
	}
	clusters := 0 // one per person who may stop it (checkStops)
	for _, p := range people {
		if m.may(p, "stop") {
			clusters++
		}
	}
	want[owner.name+" cluster.share"] *= clusters
	for _, p := range people[1:] {
		who := p.name
		if p.readOnly {
			who = carol.name // one person, two tokens
		}
		if !m.reaches(p) {
			continue
		}
		if !p.readOnly {
			want[who+" cluster.connect"]++
		}
		want[who+" cluster.dashboard"] = 1 // once a minute
		if m.may(p, "scale") {
			want[who+" cluster.scale"]++
		}
		if m.may(p, "stop") {
			want[who+" cluster.stop"]++
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("audit rows %q: %d, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("audit rows %q: %d, want none", k, n)
		}
	}
}

// TestUnshareEndsAccess: once ann unshares, bob's next API request and
// dashboard request are refused at once (no cache between them and the
// store), his list no longer shows the cluster, and the dashboard stream
// he held open (the scheduler's health watch, which never ends by itself)
// is closed by the gateway within its recheck.
func TestUnshareEndsAccess(t *testing.T) {
	g, base := sharingGateway(t, "any")
	ann := addSharer(t, g, "owner", "ann", []string{"ops"}, false)
	bob := addSharer(t, g, "bob", "bob", nil, false)
	name := startCluster(t, base, ann, true)
	if code, body := call(t, base, "POST", "/api/v1/clusters/"+name+"/share", ann.token, `{"with":["user:bob"],"allow":["scale"]}`); code != http.StatusOK {
		t.Fatalf("share: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", base+"/clusters/"+name+"/gateway-health/watch?beat=1", nil)
	req.Header.Set("Authorization", "Bearer "+bob.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	if first, err := lines.ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("bob's dashboard stream: %d %q %v", resp.StatusCode, first, err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, lines)
		ended <- err
	}()

	code, body := call(t, base, "POST", "/api/v1/clusters/"+name+"/unshare", ann.token, `{"with":["user:bob"]}`)
	var out apitype.Shares
	if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Removed) != 1 || len(out.Shares) != 0 {
		t.Fatalf("unshare: %d %s", code, body)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/clusters/" + name, ""},
		{"POST", "/api/v1/clusters/" + name + "/scale", `{"count":1}`},
		{"GET", "/clusters/" + name + "/health", ""},
	} {
		if code, body := call(t, base, r.method, r.path, bob.token, r.body); code != http.StatusNotFound {
			t.Errorf("bob's %s %s right after the unshare: %d %s, want 404", r.method, r.path, code, body)
		}
	}
	if _, body := call(t, base, "GET", "/api/v1/clusters/", bob.token, ""); strings.Contains(body, name) {
		t.Errorf("bob's list still shows the cluster: %s", body)
	}
	select {
	case <-ended:
	case <-time.After(testutil.HangBound):
		t.Fatal("bob's open dashboard stream was not closed after the unshare")
	}
}
