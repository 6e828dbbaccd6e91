package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// newAdminServer serves the API with a real quota service and store (a
// SQLite file), an admin ("root") and a user ("alice").
func newAdminServer(t *testing.T) (*httptest.Server, *store.DB) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfgLimits, _ := quota.ParseLimits([]byte(`{"max_clusters": 3, "monthly_vcpu_hours": 100}`))
	q, err := quota.NewService(st, []quota.ConfigEntry{{Subject: quota.DefaultSubject, Limits: cfgLimits}}, quota.Clamp)
	if err != nil {
		t.Fatal(err)
	}
	core := &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{
		"root-token-0000000": {Name: "root", Admin: true},
		"alice-token-000000": {Name: "alice", Groups: []string{"analysts"}},
		"root-readonly-0000": {Name: "root", Admin: true, ReadOnly: true},
	})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := New(Config{Version: "test", PublicURL: srv.URL, OnExceed: "clamp"}, core, a, nil, nil)
		s.SetAdmin(q, st)
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, st
}

func TestAdminQuotaErrors(t *testing.T) {
	srv, _ := newAdminServer(t)
	const root = "root-token-0000000"
	tests := []struct {
		name, method, path, token, body string
		code                            int
		want                            string
	}{
		{"bad subject", "PATCH", "/api/v1/admin/quotas/team:x", root, `{"max_clusters":1}`, 422, "must be default, user:<name> or group:<name>"},
		{"unknown limit", "PATCH", "/api/v1/admin/quotas/user:alice", root, `{"max_clsters":1}`, 422, `unknown limit \"max_clsters\"; known limits are max_clusters`},
		{"negative", "PATCH", "/api/v1/admin/quotas/user:alice", root, `{"max_clusters":-1}`, 422, "at least 0"},
		{"wrong type", "PATCH", "/api/v1/admin/quotas/user:alice", root, `{"allowed_providers":"ec2"}`, 422, "allowed_providers"},
		{"empty patch", "PATCH", "/api/v1/admin/quotas/user:alice", root, `{}`, 422, "nothing to set"},
		{"not JSON", "PATCH", "/api/v1/admin/quotas/user:alice", root, `max_clusters=1`, 400, "not valid JSON"},
		{"unset unknown field", "DELETE", "/api/v1/admin/quotas/user:alice?fields=nope", root, "", 422, "unknown limit(s) nope"},
		{"unset nothing stored", "DELETE", "/api/v1/admin/quotas/default", root, "", 404, "only entries set through the API can be unset"},
		{"read-only admin", "PATCH", "/api/v1/admin/quotas/user:alice", "root-readonly-0000", `{"max_clusters":1}`, 403, "read-only"},
		{"bad usage date", "GET", "/api/v1/admin/usage?since=yesterday", root, "", 422, "not a date like 2026-12-01"},
		{"bad usage window", "GET", "/api/v1/admin/usage?since=2026-12-02&until=2026-12-01", root, "", 422, "must be before until"},
		{"bad usage by", "GET", "/api/v1/admin/usage?by=team", root, "", 422, "by must be user or cluster"},
		{"bad usage format", "GET", "/api/v1/admin/usage?format=xml", root, "", 422, "format must be json or csv"},
		{"bad audit limit", "GET", "/api/v1/admin/audit?limit=0", root, "", 422, "limit must be"},
		{"bad status", "GET", "/api/v1/admin/clusters?status=sleeping", root, "", 422, "unknown status"},
		{"stop unknown", "DELETE", "/api/v1/admin/clusters/0123456789abcdef", root, "", 404, "not found"},
		{"user route: quota", "GET", "/api/v1/quota", "alice-token-000000", "", 200, `"max_clusters":3`},
		{"user route: usage", "GET", "/api/v1/usage?since=soon", "alice-token-000000", "", 422, "since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, srv, tt.method, tt.path, tt.token, tt.body)
			if code != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("%s %s = %d %s; want %d containing %q", tt.method, tt.path, code, body, tt.code, tt.want)
			}
		})
	}
}

func TestAdminQuotaRoundTrip(t *testing.T) {
	srv, st := newAdminServer(t)
	const root = "root-token-0000000"
	code, _, body := do(t, srv, "PATCH", "/api/v1/admin/quotas/group:analysts", root, `{"max_clusters": 10, "max_gpus_by_type": {"a100": 2}}`)
	if code != 200 {
		t.Fatalf("set: %d %s", code, body)
	}
	// A user's effective quota, from the groups of their latest cluster
	// (none: the request's), names each limit's source.
	code, _, body = do(t, srv, "GET", "/api/v1/admin/quotas/user:alice?groups=analysts", root, "")
	var got struct {
		Effective  quota.Effective `json:"effective"`
		GroupsFrom string          `json:"groups_from"`
	}
	if code != 200 || json.Unmarshal(body, &got) != nil {
		t.Fatalf("get: %d %s", code, body)
	}
	if got.Effective.Sources["max_clusters"] != "group:analysts (api)" || got.Effective.Sources["monthly_vcpu_hours"] != "default (config)" ||
		got.Effective.Sources["max_gpus_by_type.a100"] != "group:analysts (api)" || got.GroupsFrom != "the request" {
		t.Errorf("effective sources %v, groups from %q", got.Effective.Sources, got.GroupsFrom)
	}
	// The user sees the same through their own route.
	code, _, body = do(t, srv, "GET", "/api/v1/quota", "alice-token-000000", "")
	if code != 200 || !strings.Contains(string(body), `"max_clusters":"group:analysts (api)"`) || !strings.Contains(string(body), `"on_exceed":"clamp"`) {
		t.Errorf("own quota: %d %s", code, body)
	}
	code, _, body = do(t, srv, "DELETE", "/api/v1/admin/quotas/group:analysts?fields=max_gpus_by_type.a100", root, "")
	if code != 200 || strings.Contains(string(body), "a100") {
		t.Errorf("unset one GPU type: %d %s", code, body)
	}
	code, _, body = do(t, srv, "GET", "/api/v1/admin/quotas", root, "")
	if code != 200 || !strings.Contains(string(body), `"subject":"default"`) || !strings.Contains(string(body), `"max_clusters":"config"`) {
		t.Errorf("list: %d %s", code, body)
	}
	code, _, body = do(t, srv, "GET", "/api/v1/admin/audit", root, "")
	var audit []apitype.AuditJSON
	if code != 200 || json.Unmarshal(body, &audit) != nil || len(audit) != 2 {
		t.Fatalf("audit: %d %s", code, body)
	}
	if audit[0].Action != "quota.unset" || audit[0].Actor != "root" || audit[0].Target != "group:analysts" ||
		!strings.Contains(string(audit[0].Before), "a100") || strings.Contains(string(audit[0].After), "a100") {
		t.Errorf("newest audit entry %+v", audit[0])
	}
	if string(audit[1].Before) != "null" || !strings.Contains(string(audit[1].After), `"max_clusters":10`) {
		t.Errorf("first audit entry %+v, want nothing before and the entry after", audit[1])
	}
	_ = st
}

func TestAdminUsageCSV(t *testing.T) {
	srv, st := newAdminServer(t)
	ctx := context.Background()
	start := time.Now().Add(-2 * time.Hour)
	st.SetClock(func() time.Time { return start })
	for _, c := range []struct{ name, owner, ownerName string }{{"c1", "oidc:a", "=alice"}, {"c2", "oidc:b", "bob"}} {
		if err := st.CreateCluster(ctx, &store.Cluster{Name: c.name, Owner: c.owner, OwnerName: c.ownerName, Status: store.Running, Provider: "local"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateCluster(ctx, c.name, func(*store.Cluster) (store.Event, error) {
			return store.Event{Ledger: []store.LedgerEntry{{Member: "worker-0", Kind: store.LedgerStart, VCPUs: 2, PriceHour: 0.1}}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	st.SetClock(func() time.Time { return start.Add(time.Hour) })
	if err := st.RecordLedger(ctx, "c1", store.LedgerEntry{Member: "worker-0", Kind: store.LedgerStop}); err != nil {
		t.Fatal(err)
	}
	st.SetClock(time.Now)
	code, hdr, body := do(t, srv, "GET", "/api/v1/admin/usage?format=csv&since="+start.Add(-time.Minute).UTC().Format(time.RFC3339), "root-token-0000000", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][0] != "user" || rows[0][3] != "vcpu_hours" {
		t.Fatalf("csv rows %v", rows)
	}
	// A name that a spreadsheet would run as a formula is defused.
	if rows[1][0] != "'=alice" || rows[1][3] != "2.0000" || rows[1][7] != "0.1000" || rows[1][8] != "false" {
		t.Errorf("alice's row %v, want 2 vCPU-hours, 0.1 USD, finished", rows[1])
	}
	if rows[2][0] != "bob" || rows[2][8] != "true" || !strings.HasPrefix(rows[2][3], "3.99") && !strings.HasPrefix(rows[2][3], "4.00") {
		t.Errorf("bob's row %v, want about 4 vCPU-hours, still running", rows[2])
	}
	code, _, body = do(t, srv, "GET", "/api/v1/admin/usage?user=bob&by=cluster&since=2000-01-01", "root-token-0000000", "")
	var rep apitype.UsageReport
	if code != 200 || json.Unmarshal(body, &rep) != nil || len(rep.Rows) != 1 || rep.Rows[0].Cluster != "c2" {
		t.Errorf("bob by cluster: %d %s", code, body)
	}
}

// TestAdminRoutesRefuseNonAdmins: every admin path, known or not, with any
// method, answers 403 to a user and 401 to nobody; a read-only admin may
// read but not change.
func TestAdminRoutesRefuseNonAdmins(t *testing.T) {
	srv, _ := newAdminServer(t)
	paths := []string{"/api/v1/admin/quotas", "/api/v1/admin/quotas/user:alice", "/api/v1/admin/quotas/group:org/team",
		"/api/v1/admin/clusters", "/api/v1/admin/clusters/0123456789abcdef", "/api/v1/admin/usage", "/api/v1/admin/usage?format=csv",
		"/api/v1/admin/audit", "/api/v1/admin/", "/api/v1/admin/nope", "/api/v1/admin/%61udit"}
	for _, p := range paths {
		for _, m := range []string{"GET", "PATCH", "PUT", "POST", "DELETE", "HEAD"} {
			code, _, body := do(t, srv, m, p, "alice-token-000000", `{"max_clusters": 100}`)
			if code != http.StatusForbidden || (m != "HEAD" && !strings.Contains(string(body), "admin only")) {
				t.Errorf("%s %s as a user = %d %s; want 403 admin only", m, p, code, body)
			}
			if code, _, _ := do(t, srv, m, p, "", ""); code != http.StatusUnauthorized {
				t.Errorf("%s %s unauthenticated = %d, want 401", m, p, code)
			}
		}
	}
	if code, _, _ := do(t, srv, "GET", "/api/v1/admin/audit", "root-readonly-0000", ""); code != http.StatusOK {
		t.Errorf("a read-only admin reading the audit log: %d", code)
	}
	if code, _, body := do(t, srv, "DELETE", "/api/v1/admin/clusters/0123456789abcdef", "root-readonly-0000", ""); code != http.StatusForbidden || !strings.Contains(string(body), "read-only") {
		t.Errorf("a read-only admin stopping a cluster: %d %s", code, body)
	}
}

// TestUnreadableQuotaEntry: a stored entry this version cannot read makes
// quota decisions wait (503, saying which entry and how to fix it) rather
// than drop a limit; the admin can still remove it.
func TestUnreadableQuotaEntry(t *testing.T) {
	srv, st := newAdminServer(t)
	ctx := context.Background()
	if _, _, err := st.UpdateQuota(ctx, "group:analysts", store.Actor{Name: "future"}, "quota.set", func(string, bool) (string, error) {
		return `{"max_clusters": 1, "max_tpus": 4}`, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, token, body string }{
		{"GET", "/api/v1/quota", "alice-token-000000", ""},
		{"GET", "/api/v1/options", "alice-token-000000", ""},
		{"GET", "/api/v1/admin/quotas", "root-token-0000000", ""},
	} {
		code, _, body := do(t, srv, r.method, r.path, r.token, r.body)
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "group:analysts") || !strings.Contains(string(body), "gateway admin quota unset group:analysts") {
			t.Errorf("%s %s = %d %s; want 503 naming the entry and the fix", r.method, r.path, code, body)
		}
	}
	if code, _, body := do(t, srv, "DELETE", "/api/v1/admin/quotas/group:analysts", "root-token-0000000", ""); code != http.StatusOK {
		t.Fatalf("removing the entry: %d %s", code, body)
	}
	if code, _, body := do(t, srv, "GET", "/api/v1/quota", "alice-token-000000", ""); code != http.StatusOK {
		t.Errorf("after removing it: %d %s", code, body)
	}
}
