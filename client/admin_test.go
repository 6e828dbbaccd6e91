package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/quota"
)

// request is what the test server saw of one request.
type request struct {
	method, subject, name, query, body string
}

// adminServer routes like the API's admin routes and answers with
// canned JSON in the API's shapes, recording each request.
func adminServer(t *testing.T) (*Client, func() request) {
	t.Helper()
	var mu sync.Mutex
	var last request
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		last = request{r.Method, r.PathValue("subject"), r.PathValue("name"), r.URL.RawQuery, string(b)}
	}
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			record(r)
			if r.Header.Get("Authorization") != "Bearer admin" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":"admin only: your account is not an admin of this gateway","code":"forbidden","message":"admin only: your account is not an admin of this gateway"}`)
				return
			}
			if strings.Contains(r.URL.RawQuery, "format=csv") {
				w.Header().Set("Content-Type", "text/csv; charset=utf-8")
				_, _ = io.WriteString(w, "user,user_id\nann,id-ann\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if body == "" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			_, _ = io.WriteString(w, body)
		}
	}
	entry := `{"subject":"group:org/team","limits":{"max_gpus":4,"max_lifetime":"8h0m0s"},"sources":{"max_gpus":"api","max_lifetime":"config"},` +
		`"config":{"max_lifetime":"8h0m0s"},"stored":{"max_gpus":4},"updated_at":"2026-12-01T09:00:00Z","updated_by":"root"}`
	m := http.NewServeMux()
	m.HandleFunc("GET /api/v1/admin/quotas", answer(`{"entries":[`+entry+`],"limits":[["max_clusters","clusters running at once"]]}`))
	m.HandleFunc("GET /api/v1/admin/quotas/{subject...}", answer(`{"entry":{"subject":"user:ann","limits":{},"sources":{}},`+
		`"effective":{"limits":{"max_vcpus":"unlimited","max_gpus_by_type":{"a100":2}},"sources":{"max_vcpus":"group:gpu (api)","max_gpus_by_type.a100":"default (config)"}},`+
		`"groups":["gpu"],"groups_from":"the request"}`))
	m.HandleFunc("PATCH /api/v1/admin/quotas/{subject...}", answer(entry))
	m.HandleFunc("DELETE /api/v1/admin/quotas/{subject...}", answer(entry))
	m.HandleFunc("GET /api/v1/admin/clusters", answer(`[{"name":"c1","status":"RUNNING","dashboard_route":null,"start_time":1,"stop_time":null,"options":{},`+
		`"tls_cert":null,"tls_key":null,"phase":"","state":"RUNNING","reason":"","owner":"id-ann","owner_name":"ann","provider":"local",`+
		`"workers":{"requested":2,"ready":1},"tls_server_name":"daskgateway-c1","created_at":"2026-12-01T09:00:00Z"}]`))
	m.HandleFunc("DELETE /api/v1/admin/clusters/{name}", answer(""))
	m.HandleFunc("GET /api/v1/admin/usage", answer(`{"since":"2026-12-01T00:00:00Z","until":"2026-12-02T00:00:00Z","by":"user",`+
		`"rows":[{"user":"ann","user_id":"id-ann","clusters":1,"running":true,"vcpu_hours":1.5,"memory_gib_hours":3,"gpu_hours":0,"gpu_hours_by_type":{},"estimated_cost_usd":0.25}]}`))
	m.HandleFunc("GET /api/v1/admin/audit", answer(`[{"id":1,"at":"2026-12-01T09:00:00Z","actor":"root","actor_id":"id-root","action":"quota.set","target":"user:ann","before":null,"after":{"max_vcpus":8}}]`))
	m.HandleFunc("GET /api/v1/quota", answer(`{"limits":{"max_clusters":2},"sources":{"max_clusters":"default (config)"},`+
		`"in_use":{"clusters":1,"vcpus":2.5,"memory_gib":4,"gpus":1,"gpus_by_type":{"t4":1}},"on_exceed":"clamp"}`))
	m.HandleFunc("GET /api/v1/usage", answer(`{"since":"2026-12-01T00:00:00Z","until":"2026-12-02T00:00:00Z",`+
		`"total":{"user":"ann","user_id":"id-ann","clusters":1,"running":false,"vcpu_hours":2,"memory_gib_hours":4,"gpu_hours":1,"gpu_hours_by_type":{"t4":1},"estimated_cost_usd":1},`+
		`"clusters":[{"user":"ann","user_id":"id-ann","cluster":"c1","clusters":1,"running":false,"vcpu_hours":2,"memory_gib_hours":4,"gpu_hours":1,"gpu_hours_by_type":{"t4":1},"estimated_cost_usd":1}],`+
		`"budgets":{"monthly_vcpu_hours":{"limit":100,"source":"default (config)"},"monthly_gpu_hours":{"limit":"unlimited","source":"group:gpu (api)"}}}`))
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, func() request {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

func TestAdminQuotaRequests(t *testing.T) {
	c, last := adminServer(t)
	ctx := context.Background()

	l, err := c.AdminQuotas(ctx)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Stored == nil || *l.Entries[0].Stored.MaxGPUs != 4 || l.Limits[0][0] != "max_clusters" {
		t.Fatalf("AdminQuotas: %+v %v", l, err)
	}

	d, err := c.AdminQuota(ctx, "user:ann", []string{"gpu", "org/team"})
	if err != nil {
		t.Fatal(err)
	}
	if r := last(); r.subject != "user:ann" || r.query != "groups=gpu%2Corg%2Fteam" {
		t.Errorf("AdminQuota sent %+v", r)
	}
	if d.Effective == nil || !d.Effective.Limits.MaxVCPUs.IsUnlimited() || d.Effective.Limits.MaxGPUsByType["a100"] != 2 ||
		d.Effective.Source("max_gpus_by_type.a100") != "default (config)" || d.GroupsFrom != "the request" || len(d.Groups) != 1 {
		t.Errorf("AdminQuota: %+v", d)
	}

	// Subjects with "/" and other characters reach the server whole.
	for _, subj := range []string{"group:org/team", "group:a/../b", "user:ann smith", "group:x?y#z%"} {
		if _, err := c.AdminQuota(ctx, subj, nil); err != nil {
			t.Fatal(err)
		}
		if r := last(); r.subject != subj || r.query != "" {
			t.Errorf("%q arrived as %+v", subj, r)
		}
	}

	e, err := c.AdminSetQuota(ctx, "group:org/team", quota.Limits{MaxGPUs: amountOf(4), MaxLifetime: durationOf(quota.UnlimitedDuration)})
	if err != nil || e.Subject != "group:org/team" || e.UpdatedBy != "root" {
		t.Fatalf("AdminSetQuota: %+v %v", e, err)
	}
	if r := last(); r.method != http.MethodPatch || r.subject != "group:org/team" || r.body != `{"max_gpus":4,"max_lifetime":"unlimited"}` {
		t.Errorf("AdminSetQuota sent %+v", r)
	}
	before := last()
	if _, err := c.AdminSetQuota(ctx, "user:ann", quota.Limits{}); err == nil {
		t.Error("empty patch accepted")
	}
	if last() != before {
		t.Error("an empty patch was sent")
	}

	if _, err := c.AdminUnsetQuota(ctx, "group:org/team", []string{"max_gpus", "max_gpus_by_type.a100"}); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != http.MethodDelete || r.subject != "group:org/team" || r.query != "fields=max_gpus%2Cmax_gpus_by_type.a100" {
		t.Errorf("AdminUnsetQuota sent %+v", r)
	}
	if _, err := c.AdminUnsetQuota(ctx, "default", nil); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.subject != "default" || r.query != "" {
		t.Errorf("AdminUnsetQuota (all) sent %+v", r)
	}
}

func amountOf(v float64) *quota.Amount            { a := quota.Amount(v); return &a }
func durationOf(d quota.Duration) *quota.Duration { return &d }

func TestAdminOtherRequests(t *testing.T) {
	c, last := adminServer(t)
	ctx := context.Background()

	cls, err := c.AdminClusters(ctx, []string{"RUNNING", "PENDING"})
	if err != nil || len(cls) != 1 || cls[0].OwnerName != "ann" || cls[0].Workers.Ready != 1 {
		t.Fatalf("AdminClusters: %+v %v", cls, err)
	}
	if r := last(); r.query != "status=RUNNING%2CPENDING" {
		t.Errorf("AdminClusters sent %+v", r)
	}
	if _, err := c.AdminClusters(ctx, nil); err != nil || last().query != "" {
		t.Errorf("AdminClusters(nil): %v %+v", err, last())
	}

	if err := c.AdminStop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != http.MethodDelete || r.name != "c1" {
		t.Errorf("AdminStop sent %+v", r)
	}

	f := UsageFilter{User: "ann", Since: "2026-12-01", By: "cluster"}
	rep, err := c.AdminUsage(ctx, f)
	if err != nil || len(rep.Rows) != 1 || rep.Rows[0].VCPUHours != 1.5 || !rep.Rows[0].Running {
		t.Fatalf("AdminUsage: %+v %v", rep, err)
	}
	if r := last(); r.query != "by=cluster&format=json&since=2026-12-01&user=ann" {
		t.Errorf("AdminUsage sent %+v", r)
	}
	b, err := c.AdminUsageRaw(ctx, f, "csv")
	if err != nil || string(b) != "user,user_id\nann,id-ann\n" {
		t.Errorf("AdminUsageRaw: %q %v", b, err)
	}
	if _, err := c.AdminUsageRaw(ctx, f, "xml"); err == nil {
		t.Error("format xml accepted")
	}

	entries, err := c.AdminAudit(ctx, AuditFilter{Since: "2026-12-01", Target: "user:ann", Limit: 5})
	if err != nil || len(entries) != 1 || string(entries[0].After) != `{"max_vcpus":8}` || string(entries[0].Before) != "null" {
		t.Fatalf("AdminAudit: %+v %v", entries, err)
	}
	if r := last(); r.query != "limit=5&since=2026-12-01&target=user%3Aann" {
		t.Errorf("AdminAudit sent %+v", r)
	}

	q, err := c.MyQuota(ctx)
	if err != nil || *q.Limits.MaxClusters != 2 || q.InUse.VCPUs != 2.5 || q.InUse.GPUsByType["t4"] != 1 || q.OnExceed != "clamp" {
		t.Fatalf("MyQuota: %+v %v", q, err)
	}
	u, err := c.MyUsage(ctx, "2026-12-01", "")
	if err != nil || u.Total.GPUHours != 1 || len(u.Clusters) != 1 || u.Clusters[0].Cluster != "c1" ||
		u.Budgets["monthly_vcpu_hours"].Limit != 100 || !u.Budgets["monthly_gpu_hours"].Limit.IsUnlimited() {
		t.Fatalf("MyUsage: %+v %v", u, err)
	}
	if r := last(); r.query != "since=2026-12-01" {
		t.Errorf("MyUsage sent %+v", r)
	}
}

func TestAdminForbidden(t *testing.T) {
	c, _ := adminServer(t)
	c.token = "ann"
	_, err := c.AdminQuotas(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "forbidden" || ae.Error() != "admin only: your account is not an admin of this gateway" {
		t.Errorf("403: %#v", err)
	}
	if _, err := c.AdminUsageRaw(context.Background(), UsageFilter{}, "csv"); !errors.As(err, &ae) || ae.Code != "forbidden" {
		t.Errorf("403 for CSV: %v", err)
	}
}

func TestQuotaDetailJSON(t *testing.T) {
	for _, tc := range []struct {
		d    QuotaDetail
		want string
	}{
		{QuotaDetail{Entry: apitype.QuotaEntryJSON{Subject: "group:x", Sources: map[string]string{}}},
			`{"entry":{"subject":"group:x","limits":{},"sources":{}}}`},
		{QuotaDetail{Entry: apitype.QuotaEntryJSON{Subject: "user:ann", Sources: map[string]string{}}, Effective: &quota.Effective{Sources: map[string]string{}}, GroupsFrom: "none known"},
			`{"entry":{"subject":"user:ann","limits":{},"sources":{}},"effective":{"limits":{},"sources":{}},"groups_from":"none known","groups":[]}`},
	} {
		b, err := json.Marshal(tc.d)
		if err != nil || string(b) != tc.want {
			t.Errorf("got %s %v, want %s", b, err, tc.want)
		}
	}
}
