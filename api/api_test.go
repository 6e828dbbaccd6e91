package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// fakeCore stands in for the scheduling core: this tests the HTTP layer
// (routing, JSON shapes, status codes), not the core, which has its own tests.
type fakeCore struct {
	clusters map[string]*store.Cluster
	scaled   map[string]int
}

func (f *fakeCore) get(owner, name string) (*store.Cluster, error) {
	c, ok := f.clusters[name]
	if !ok || c.Owner != owner {
		return nil, scheduler.ErrNotFound
	}
	return c, nil
}

func (f *fakeCore) Create(_ context.Context, who quota.Who, raw map[string]json.RawMessage) (*store.Cluster, error) {
	owner := who.ID
	if _, err := (scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8}).ParseOptions(raw); err != nil {
		return nil, err
	}
	c := &store.Cluster{Name: "new0", Owner: owner, Status: store.Pending, CreatedAt: time.UnixMilli(1000)}
	f.clusters[c.Name] = c
	return c, nil
}
func (f *fakeCore) Get(_ context.Context, owner, name string) (*store.Cluster, error) {
	return f.get(owner, name)
}
func (f *fakeCore) Wait(_ context.Context, owner, name string, _ time.Duration) (*store.Cluster, error) {
	return f.get(owner, name)
}
func (f *fakeCore) List(_ context.Context, owner string, st []store.Status) ([]*store.Cluster, error) {
	var out []*store.Cluster
	for _, c := range f.clusters {
		ok := len(st) == 0
		for _, s := range st {
			ok = ok || s == c.Status
		}
		if c.Owner == owner && ok {
			out = append(out, c)
		}
	}
	return out, nil
}
func (f *fakeCore) Events(_ context.Context, owner, name string) ([]store.Event, error) {
	if _, err := f.get(owner, name); err != nil {
		return nil, err
	}
	return []store.Event{{At: time.UnixMilli(1000), Kind: "created", Message: "by " + owner}}, nil
}
func (f *fakeCore) Scale(_ context.Context, who quota.Who, name string, n int) (string, error) {
	owner := who.ID
	if _, err := f.get(owner, name); err != nil {
		return "", err
	}
	f.scaled[name] = n
	if n > 10 {
		return "clamped to 10", nil
	}
	return "", nil
}
func (f *fakeCore) Adapt(_ context.Context, who quota.Who, name string, lo, hi int, active bool) (string, error) {
	owner := who.ID
	if _, err := f.get(owner, name); err != nil {
		return "", err
	}
	if active && (lo < 0 || hi < lo) {
		return "", scheduler.ErrInvalid
	}
	if hi > 10 {
		return "clamped to 10", nil
	}
	return "", nil
}
func (f *fakeCore) Stop(_ context.Context, owner, name, _ string) error {
	_, err := f.get(owner, name)
	return err
}
func (f *fakeCore) Logs(_ context.Context, owner, name string, _ int, w io.Writer) error {
	if _, err := f.get(owner, name); err != nil {
		return err
	}
	_, err := io.WriteString(w, "[scheduler] hello\n")
	return err
}

// The sharing methods of the fake reach the owner's clusters only: the
// real core's sharing is tested with the real core (server's sharing
// matrix).
func (f *fakeCore) Reach(_ context.Context, who quota.Who, name string, _ sharing.Action) (*store.Cluster, sharing.Grant, error) {
	c, err := f.get(who.ID, name)
	return c, sharing.Grant{Owner: err == nil}, err
}
func (f *fakeCore) WaitAs(ctx context.Context, who quota.Who, name string, _ time.Duration) (*store.Cluster, sharing.Grant, error) {
	return f.Reach(ctx, who, name, sharing.View)
}
func (f *fakeCore) StopAs(ctx context.Context, who quota.Who, name string) error {
	return f.Stop(ctx, who.ID, name, "")
}
func (f *fakeCore) SharedWith(context.Context, quota.Who, []store.Status) ([]scheduler.Shared, error) {
	return nil, nil
}
func (f *fakeCore) CreateShared(ctx context.Context, who quota.Who, raw map[string]json.RawMessage, _ scheduler.ShareRequest) (*store.Cluster, error) {
	return f.Create(ctx, who, raw)
}
func (f *fakeCore) Shares(_ context.Context, who quota.Who, name string) ([]store.Share, error) {
	_, err := f.get(who.ID, name)
	return nil, err
}
func (f *fakeCore) Share(context.Context, quota.Who, string, scheduler.ShareRequest) ([]store.Share, error) {
	return nil, scheduler.ErrForbidden
}
func (f *fakeCore) Unshare(context.Context, quota.Who, string, []string) ([]store.Share, []store.Share, error) {
	return nil, nil, scheduler.ErrForbidden
}
func (f *fakeCore) NoteAccess(context.Context, quota.Who, *store.Cluster, sharing.Grant, string) error {
	return nil
}
func (f *fakeCore) Sharing() sharing.Setting { return sharing.Off }

func (f *fakeCore) Limits() scheduler.Limits {
	return scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8}
}

func newTestServer(t *testing.T) (*httptest.Server, *fakeCore, *auth.Sessions) {
	t.Helper()
	core := &fakeCore{clusters: map[string]*store.Cluster{
		"run1": {Name: "run1", Owner: "alice", Status: store.Running, Options: `{"workers":1}`, DashboardAddress: "http://127.0.0.1:1",
			TLSCert: []byte("CERT"), TLSKey: []byte("KEY"), CreatedAt: time.UnixMilli(5000), DesiredWorkers: 1, ReadyWorkers: 1, Phase: "running"},
		"start1": {Name: "start1", Owner: "alice", Status: store.Starting, Options: `{}`, TLSCert: []byte("CERT2"), TLSKey: []byte("KEY2"), CreatedAt: time.UnixMilli(6000)},
		"bob1":   {Name: "bob1", Owner: "bob", Status: store.Running, Options: `{}`, TLSCert: []byte("BOBCERT"), TLSKey: []byte("BOBKEY"), CreatedAt: time.UnixMilli(7000)},
	}, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}})
	sessions, _ := authtest.StoredSessions(t)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		New(Config{Version: "test", PublicURL: srv.URL}, core, a, sessions, nil).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, core, sessions
}

func do(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The server's transport: it trusts an HTTPS test server's certificate.
	resp, err := (&http.Client{Transport: srv.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestClusterJSONIsDaskGatewayCompatible: dask-gateway's client passes every
// field of a cluster to a constructor that rejects unknown ones, so the
// default view must carry exactly its fields.
func TestClusterJSONIsDaskGatewayCompatible(t *testing.T) {
	srv, _, _ := newTestServer(t)
	want := []string{"dashboard_route", "name", "options", "start_time", "status", "stop_time", "tls_cert", "tls_key"}
	for _, path := range []string{"/api/v1/clusters/run1", "/api/v1/clusters/start1"} {
		code, _, body := do(t, srv, "GET", path, "alice-token-000000", "")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Errorf("%s keys %v, want exactly %v", path, keys, want)
		}
		if path == "/api/v1/clusters/run1" {
			if m["status"] != "RUNNING" || m["dashboard_route"] != "/clusters/run1/status" || m["tls_key"] != "KEY" || m["start_time"] != 5000.0 {
				t.Errorf("running cluster: %v", m)
			}
		} else if m["status"] != "PENDING" || m["tls_key"] != nil || m["dashboard_route"] != nil {
			t.Errorf("a STARTING cluster must look PENDING to dask-gateway, without credentials: %v", m)
		}
	}
	code, _, body := do(t, srv, "GET", "/api/v1/clusters/run1?view=detail", "alice-token-000000", "")
	var d apitype.ClusterDetail
	if code != 200 || json.Unmarshal(body, &d) != nil {
		t.Fatalf("detail: %d %s", code, body)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if d.State != "RUNNING" || d.SchedulerAddress != "tls://"+host || d.GatewayAddress != "gateway://"+host+"/run1" ||
		d.ServerName != "daskgateway-run1" || d.DashboardURL != srv.URL+"/clusters/run1/status" || d.Workers.Ready != 1 {
		t.Errorf("detail view: %+v", d)
	}
}

func TestTenancyAndStatusCodes(t *testing.T) {
	srv, core, _ := newTestServer(t)
	cases := []struct {
		name, method, path, token, body string
		status                          int
		contains                        string
	}{
		{"health needs no auth", "GET", "/api/health", "", "", 200, `"pass"`},
		{"version", "GET", "/api/version", "", "", 200, `"test"`},
		{"list needs auth", "GET", "/api/v1/clusters/", "", "", 401, "authentication required"},
		{"bad token", "GET", "/api/v1/clusters/", "nope", "", 401, "authentication failed"},
		{"alice lists hers only", "GET", "/api/v1/clusters/", "alice-token-000000", "", 200, `"run1"`},
		{"bob cannot see alice's", "GET", "/api/v1/clusters/run1", "bob-token-00000000", "", 404, "cluster_not_found"},
		{"bob cannot scale alice's", "POST", "/api/v1/clusters/run1/scale", "bob-token-00000000", `{"count":3}`, 404, "cluster_not_found"},
		{"bob cannot read alice's logs", "GET", "/api/v1/clusters/run1/logs", "bob-token-00000000", "", 404, "cluster_not_found"},
		{"bob cannot get a dashboard link", "POST", "/api/v1/clusters/run1/dashboard-link", "bob-token-00000000", "{}", 404, "cluster_not_found"},
		{"delete of another's is a silent 204", "DELETE", "/api/v1/clusters/run1", "bob-token-00000000", "", 204, ""},
		{"options", "GET", "/api/v1/options", "alice-token-000000", "", 200, `"field":"workers"`},
		{"create", "POST", "/api/v1/clusters/", "alice-token-000000", `{"cluster_options":{"workers":2}}`, 201, `"name":"new0"`},
		{"create without slash", "POST", "/api/v1/clusters", "alice-token-000000", `{}`, 201, `"name"`},
		{"create bad option", "POST", "/api/v1/clusters/", "alice-token-000000", `{"cluster_options":{"workers":99}}`, 422, "between 0 and 10"},
		{"trailing data", "POST", "/api/v1/clusters/", "alice-token-000000", `{} {}`, 400, "after the JSON"},
		{"scale", "POST", "/api/v1/clusters/run1/scale", "alice-token-000000", `{"count":3}`, 200, `{"msg":null,"ok":true}`},
		{"scale clamped", "POST", "/api/v1/clusters/run1/scale", "alice-token-000000", `{"count":30}`, 200, `"ok":false`},
		{"scale missing count", "POST", "/api/v1/clusters/run1/scale", "alice-token-000000", `{}`, 422, "count"},
		{"scale negative", "POST", "/api/v1/clusters/run1/scale", "alice-token-000000", `{"count":-1}`, 422, "non-negative"},
		{"scale fraction", "POST", "/api/v1/clusters/run1/scale", "alice-token-000000", `{"count":1.5}`, 422, "count must be a whole number"},
		{"adapt with server defaults", "POST", "/api/v1/clusters/run1/adapt", "alice-token-000000", `{"minimum": null, "maximum": null, "active": true}`, 200, `"ok":true`},
		{"adapt clamped", "POST", "/api/v1/clusters/run1/adapt", "alice-token-000000", `{"minimum": 1, "maximum": 50}`, 200, `"ok":false`},
		{"adapt bad bounds", "POST", "/api/v1/clusters/run1/adapt", "alice-token-000000", `{"minimum": 5, "maximum": 2}`, 422, "invalid"},
		{"bob cannot adapt alice's", "POST", "/api/v1/clusters/run1/adapt", "bob-token-00000000", `{}`, 404, "cluster_not_found"},
		{"logs", "GET", "/api/v1/clusters/run1/logs?tail=5", "alice-token-000000", "", 200, "[scheduler] hello"},
		{"logs bad tail", "GET", "/api/v1/clusters/run1/logs?tail=x", "alice-token-000000", "", 422, "tail"},
		{"events", "GET", "/api/v1/clusters/run1/events", "alice-token-000000", "", 200, `"kind":"created"`},
		{"status filter", "GET", "/api/v1/clusters/?status=pending", "alice-token-000000", "", 200, `"start1"`},
		{"bad status filter", "GET", "/api/v1/clusters/?status=sleeping", "alice-token-000000", "", 422, "unknown status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := do(t, srv, tc.method, tc.path, tc.token, tc.body)
			if code != tc.status || !strings.Contains(string(body), tc.contains) {
				t.Fatalf("got %d %s, want %d containing %q", code, body, tc.status, tc.contains)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if strings.Contains(string(body), "BOBKEY") || (tc.token == "alice-token-000000" && strings.Contains(string(body), "bob1")) {
				t.Errorf("another user's data leaked: %s", body)
			}
		})
	}
	if _, ok := core.scaled["run1"]; !ok {
		t.Error("scale never reached the core")
	}
}

func TestDashboardLinkFlow(t *testing.T) {
	srv, _, sessions := newTestServer(t)
	code, _, body := do(t, srv, "POST", "/api/v1/clusters/run1/dashboard-link", "alice-token-000000", "{}")
	var v struct{ URL string }
	if code != 200 || json.Unmarshal(body, &v) != nil || !strings.HasPrefix(v.URL, srv.URL+"/auth/ticket?") {
		t.Fatalf("link: %d %s", code, body)
	}
	u, _ := url.Parse(v.URL)
	code, _, page := do(t, srv, "GET", u.RequestURI(), "", "")
	if code != http.StatusOK || !strings.Contains(string(page), "Sign in as alice") || !strings.Contains(string(page), `method="post"`) {
		t.Fatalf("confirm page: %d %s", code, page)
	}
	post := func(origin string) (int, http.Header) {
		form := url.Values{"t": {u.Query().Get("t")}, "next": {u.Query().Get("next")}}
		req, _ := http.NewRequest("POST", srv.URL+"/auth/ticket", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	if code, _ := post("https://evil.example"); code != http.StatusForbidden {
		t.Fatalf("cross-site sign-in: %d, want 403", code)
	}
	code, hdr := post(srv.URL)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/clusters/run1/status" {
		t.Fatalf("redeem: %d %v", code, hdr)
	}
	req := httptest.NewRequest("GET", "/", nil)
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		req.AddCookie(c)
	}
	if who, err := sessions.FromRequest(req); err != nil || who.Name != "alice" {
		t.Fatalf("cookie: %v %v", who, err)
	}
	if code, _ := post(srv.URL); code != 401 {
		t.Errorf("ticket reused: %d", code)
	}
	// Open redirects are refused.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/api/v1/clusters/", "/clusters/../api", `\\evil`, "/auth/logout", "/c/x/..", "relative"} {
		q := url.Values{"t": {"whatever"}, "next": {next}}
		if code, _, _ := do(t, srv, "GET", "/auth/ticket?"+q.Encode(), "", ""); code != 400 {
			t.Errorf("next=%q: %d, want 400", next, code)
		}
	}
	// Logout from another site is refused; from the gateway it clears the cookie.
	req2, _ := http.NewRequest("POST", srv.URL+"/auth/logout", nil)
	req2.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site logout: %d", resp.StatusCode)
	}
	req3, _ := http.NewRequest("POST", srv.URL+"/auth/logout", nil)
	req3.Header.Set("Origin", srv.URL)
	resp, err = http.DefaultClient.Do(req3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

func (f *fakeCore) InstanceTypes(context.Context, quota.Who) ([]catalog.InstanceType, error) {
	return nil, fmt.Errorf("%w: the fake provider has no instance types", scheduler.ErrInvalid)
}
func (f *fakeCore) ListAll(_ context.Context, _ []store.Status) ([]*store.Cluster, error) {
	return nil, nil
}
func (f *fakeCore) AdminStop(_ context.Context, _ store.Actor, name string) error {
	return fmt.Errorf("%w: %s", scheduler.ErrNotFound, name)
}
