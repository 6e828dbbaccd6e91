package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
)

// call sends one API request with a bearer token and returns the status
// and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConcurrentAdmission: 200 concurrent new-cluster requests from one
// user, spread over three gateway replicas sharing one database, against
// a limit of 5 clusters set through the admin API: exactly 5 are admitted,
// on SQLite and on PostgreSQL. Non-admins are refused on every admin route.
func TestConcurrentAdmission(t *testing.T) {
	t.Parallel()
	requireDask(t)
	type db struct{ name, url string }
	dbs := []db{{"sqlite", ""}}
	for _, s := range testdb.URLs(t) {
		if s.Name == "postgres" {
			dbs = append(dbs, db{"postgres", s.URL})
		}
	}
	if len(dbs) == 1 && os.Getenv("GATEWAY_TEST_REQUIRE_POSTGRES") != "" {
		t.Fatal("PostgreSQL is required (GATEWAY_TEST_REQUIRE_POSTGRES) but GATEWAY_TEST_POSTGRES_URL is not set")
	}
	for _, d := range dbs {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel() // its own data directory, gateway id and database
			shared := filepath.Join(t.TempDir(), "shared")
			url := d.url
			if url == "" {
				url = "sqlite://" + filepath.Join(shared, "gateway.db")
			}
			gatewayID := "gw-admission-" + d.name[:2]
			replica := func(id string) *env {
				e := newEnv(t, "GATEWAY_DATABASE_URL="+url, "GATEWAY_DATA_DIR="+shared, "GATEWAY_GATEWAY_ID="+gatewayID,
					"GATEWAY_REPLICA_ID="+id, "GATEWAY_CLUSTER_LEASE_TTL=2s", "GATEWAY_CLUSTER_POLL_INTERVAL=500ms")
				e.startGateway()
				return e
			}
			a, b, c := replica("replica-a"), replica("replica-b"), replica("replica-c")
			urls := []string{a.url, b.url, c.url}

			// Tokens from the database work on every replica (each dev
			// gateway embeds its own issuer).
			var dev struct{ Token string }
			a.gwJSON(&dev, "token", "create", "--name", "admission", "--expires", "1h")
			var adm struct{ Token string }
			a.userEnv(t, "admin").gwJSON(&adm, "token", "create", "--name", "admin", "--expires", "1h")

			checkAdminRoutesRefused(t, b.url, dev.Token)

			status, body := call(t, http.MethodPatch, b.url+"/api/v1/admin/quotas/user:dev", adm.Token, `{"max_clusters": 5}`)
			if status != http.StatusOK || !strings.Contains(body, `"max_clusters":"api"`) {
				t.Fatalf("set quota: %d %s", status, body)
			}

			const n = 200
			codes := make([]int, n)
			bodies := make([]string, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					codes[i], bodies[i] = call(t, http.MethodPost, urls[i%3]+"/api/v1/clusters", dev.Token, `{"cluster_options": {}}`)
				}()
			}
			close(start)
			wg.Wait()
			admitted, refused := 0, 0
			for i := range n {
				switch {
				case codes[i] == http.StatusCreated:
					admitted++
				case codes[i] == http.StatusForbidden && strings.Contains(bodies[i], `"code":"quota_exceeded"`) &&
					strings.Contains(bodies[i], "would run 6 clusters of your 5 (max_clusters, from user:dev (api))"):
					refused++
				default:
					t.Errorf("request %d: %d %s", i, codes[i], bodies[i])
				}
			}
			figure(t, "admission test (%s, 3 replicas): %d concurrent requests, limit 5: admitted %d, refused %d", d.name, n, admitted, refused)
			if admitted != 5 || refused != n-5 {
				t.Fatalf("admitted %d, refused %d; want 5 and %d", admitted, refused, n-5)
			}

			// What an admin sees agrees, from another replica.
			status, body = call(t, http.MethodGet, c.url+"/api/v1/admin/clusters", adm.Token, "")
			var all []struct {
				Name      string `json:"name"`
				OwnerName string `json:"owner_name"`
				TLSKey    *string
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &all) != nil {
				t.Fatalf("admin clusters: %d %s", status, body)
			}
			if len(all) != 5 {
				t.Errorf("admin sees %d live clusters, want 5", len(all))
			}
			for _, cl := range all {
				if cl.OwnerName != "dev" || cl.TLSKey != nil {
					t.Errorf("admin listing of %s: owner %q, key present %v; want dev and no key", cl.Name, cl.OwnerName, cl.TLSKey != nil)
				}
			}
			viaB := &env{t: t, bin: b.bin, home: t.TempDir(), gwLog: b.gwLog, url: b.url}
			viaB.vars = append(filterEnv(os.Environ()), "HOME="+viaB.home, "XDG_CONFIG_HOME="+filepath.Join(viaB.home, "config"),
				"GATEWAY_URL="+b.url, "GATEWAY_TOKEN="+dev.Token)
			viaB.gwOK("stop", "--all")
			for _, cl := range all {
				waitNoMembers(t, cl.Name)
			}
		})
	}
}

// checkAdminRoutesRefused: every admin route, known or not, answers 403
// to a user who is not an admin, and 401 without credentials.
func checkAdminRoutesRefused(t *testing.T, base, userToken string) {
	t.Helper()
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/admin/quotas", ""},
		{http.MethodGet, "/api/v1/admin/quotas/user:dev", ""},
		{http.MethodPatch, "/api/v1/admin/quotas/user:dev", `{"max_clusters": 100}`},
		{http.MethodDelete, "/api/v1/admin/quotas/user:dev", ""},
		{http.MethodGet, "/api/v1/admin/clusters", ""},
		{http.MethodDelete, "/api/v1/admin/clusters/0123456789abcdef", ""},
		{http.MethodGet, "/api/v1/admin/usage", ""},
		{http.MethodGet, "/api/v1/admin/usage?format=csv", ""},
		{http.MethodGet, "/api/v1/admin/audit", ""},
		{http.MethodGet, "/api/v1/admin/no-such-route", ""},
	}
	for _, r := range routes {
		if status, body := call(t, r.method, base+r.path, userToken, r.body); status != http.StatusForbidden || !strings.Contains(body, "admin only") {
			t.Errorf("%s %s as a user: %d %s; want 403 admin only", r.method, r.path, status, body)
		}
		if status, _ := call(t, r.method, base+r.path, "", r.body); status != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials: %d, want 401", r.method, r.path, status)
		}
	}
}

// TestAdminQuotaFlow is the operator's path, with the CLI: as the dev
// admin, set a quota for the dev user; the user's next request is refused
// with a message naming the limit; a scale beyond it is clamped; usage by
// user comes out as CSV; the audit log shows who changed what.
func TestAdminQuotaFlow(t *testing.T) {
	t.Parallel()
	requireDask(t)
	e := newEnv(t)
	e.startGateway()
	admin := e.userEnv(t, "admin")

	var first struct{ Name string }
	e.gwJSON(&first, "new-cluster", "--workers", "1")

	// A user is not an admin.
	if out, err := e.gw("admin", "clusters"); err == nil || !strings.Contains(out, "admin only") {
		t.Errorf("gateway admin clusters as dev: %v\n%s", err, out)
	}

	out := admin.gwOK("admin", "quota", "set", "user:dev", "--max-clusters", "1", "--max-vcpus", "3")
	if !strings.Contains(out, "max_clusters") {
		t.Errorf("quota set printed:\n%s", out)
	}
	out, err := e.gw("new-cluster", "--workers", "1")
	if err == nil || !strings.Contains(out, "would run 2 clusters of your 1 (max_clusters, from user:dev (api))") {
		t.Errorf("new-cluster over quota: %v\n%s", err, out)
	}
	out = e.gwOK("scale", first.Name, "--workers", "5")
	if !strings.Contains(out, "scaling to 3 instead") || !strings.Contains(out, "would use 5 vCPUs of your 3") {
		t.Errorf("scale over quota:\n%s", out)
	}
	var q struct {
		Sources map[string]string `json:"sources"`
	}
	e.gwJSON(&q, "quota")
	if q.Sources["max_vcpus"] != "user:dev (api)" {
		t.Errorf("gateway quota sources %v", q.Sources)
	}

	csvOut := admin.gwOK("admin", "usage", "-o", "csv")
	lines := strings.Split(strings.TrimSpace(csvOut), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "user,user_id,clusters,vcpu_hours") || !strings.HasPrefix(lines[1], "dev,") {
		t.Errorf("admin usage csv:\n%s", csvOut)
	}

	var all []struct {
		Name      string `json:"name"`
		OwnerName string `json:"owner_name"`
	}
	admin.gwJSON(&all, "admin", "clusters")
	if len(all) != 1 || all[0].Name != first.Name || all[0].OwnerName != "dev" {
		t.Errorf("admin clusters: %+v", all)
	}
	admin.gwOK("admin", "stop", first.Name)
	waitNoMembers(t, first.Name)

	var audit []struct {
		Actor, Action, Target string
		Before, After         json.RawMessage
	}
	admin.gwJSON(&audit, "admin", "audit")
	for i := range audit { // the CLI indents its JSON
		var b bytes.Buffer
		if json.Compact(&b, audit[i].After) == nil {
			audit[i].After = b.Bytes()
		}
	}
	if len(audit) != 2 || audit[0].Action != "cluster.stop" || audit[1].Action != "quota.set" || audit[1].Actor != "admin" ||
		audit[1].Target != "user:dev" || string(audit[1].Before) != "null" || !strings.Contains(string(audit[1].After), `"max_clusters":1`) {
		t.Errorf("audit log: %+v", audit)
	}
	// Past the quota a user can still stop; after the stop, there is room.
	e.gwOK("new-cluster", "--no-wait")
	e.gwOK("stop", "--all")
}
