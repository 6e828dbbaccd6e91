package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// pingDB is a real SQLite store whose Ping answers what the test says:
// PostgreSQL cannot be stopped from a unit test, and the answers to
// outages are what is tested here (the store's tests classify the real
// errors; integration/dboutage_test.go stops a real server).
type pingDB struct {
	*store.DB
	mu    sync.Mutex
	err   error
	pings atomic.Int64
}

func (p *pingDB) Ping(context.Context) error {
	p.pings.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pingDB) set(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

func newPingDB(t *testing.T) *pingDB {
	t.Helper()
	db, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &pingDB{DB: db}
}

var pgDown = &store.UnavailableError{
	Msg: "the database is unavailable: cannot reach PostgreSQL at 127.0.0.1:5432: connection refused",
	Err: syscall.ECONNREFUSED,
}

// TestHealthReportsTheDatabase: /api/health passes while the database
// answers and fails with 503 while it does not. Anyone gets the status
// alone; what failed and where (a full disk's directory, PostgreSQL's host)
// goes to an admin's request and to the metrics port's handler, never to
// an anonymous caller, a user, or a failed credential (issue 32, finding
// 6), and never a secret. A flood of checks pings the database about once.
func TestHealthReportsTheDatabase(t *testing.T) {
	db := newPingDB(t)
	core := &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{
		"admin-token-000000": {Name: "root", Admin: true},
		"alice-token-000000": {Name: "alice"},
	})
	s := New(Config{Version: "test"}, core, a, nil, nil)
	s.SetDatabase(db)
	srv := httptest.NewServer(s)
	defer srv.Close()
	metrics := httptest.NewServer(s.HealthDetails())
	defer metrics.Close()

	audiences := []struct {
		name    string
		srv     *httptest.Server
		token   string
		details bool
	}{
		{"anonymous", srv, "", false},
		{"a user", srv, "alice-token-000000", false},
		{"a wrong token", srv, "wrong-token-000000", false},
		{"an admin", srv, "admin-token-000000", true},
		{"the metrics port", metrics, "", true},
	}
	get := func(srv *httptest.Server, token string) (int, healthJSON, http.Header, string) {
		t.Helper()
		code, h, body := do(t, srv, "GET", "/api/health", token, "")
		var out healthJSON
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("health body %q: %v", body, err)
		}
		return code, out, h, string(body)
	}
	expire := func() {
		s.dbHealth.mu.Lock()
		s.dbHealth.checked = s.dbHealth.checked.AddDate(0, 0, -1) // as if the cache had expired
		s.dbHealth.mu.Unlock()
	}
	for _, au := range audiences {
		code, out, _, body := get(au.srv, au.token)
		if code != 200 || out.Status != "pass" {
			t.Fatalf("%s: health with the database up: %d %s", au.name, code, body)
		}
		if got := len(out.Checks["database"]) == 1 && out.Checks["database"][0].Status == "pass"; got != au.details {
			t.Errorf("%s: health with the database up shows its checks: %v, want %v (%s)", au.name, got, au.details, body)
		}
	}

	// A flood of checks within the cache's life costs one ping at most.
	before := db.pings.Load()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/api/health")
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := db.pings.Load() - before; n > 2 {
		t.Errorf("50 health checks pinged the database %d times", n)
	}

	cases := []struct {
		name     string
		err      error
		want     string   // in the details
		internal []string // never to those who get no details
	}{
		{"PostgreSQL down", pgDown, "cannot reach PostgreSQL at 127.0.0.1:5432: connection refused", []string{"127.0.0.1", "5432", "PostgreSQL", "database"}},
		{"disk full", &store.UnavailableError{DiskFull: true, Msg: "the database's disk is full (/var/lib/gateway): free space there"}, "disk is full (/var/lib/gateway)", []string{"/var/lib/gateway", "disk", "database"}},
		// An error the store did not describe may carry anything: it is
		// not shown, even to admins.
		{"unexplained", errors.New("dial postgres://gw:s3cret@db:5432: boom"), "the gateway's log has the details", []string{"db:5432", "log"}},
	}
	for _, c := range cases {
		for _, au := range audiences {
			t.Run(c.name+"/"+au.name, func(t *testing.T) {
				db.set(c.err)
				expire()
				code, out, h, body := get(au.srv, au.token)
				if code != http.StatusServiceUnavailable || out.Status != "fail" || h.Get("Retry-After") == "" {
					t.Fatalf("health with the database down: %d %s %v", code, body, h)
				}
				if strings.Contains(body, "s3cret") {
					t.Errorf("health leaks a secret: %s", body)
				}
				if !au.details {
					if strings.TrimSpace(body) != `{"status":"fail"}` {
						t.Errorf("health tells %s more than its status: %s", au.name, body)
					}
					for _, in := range c.internal {
						if strings.Contains(body, in) {
							t.Errorf("health tells %s %q: %s", au.name, in, body)
						}
					}
					return
				}
				checks := out.Checks["database"]
				if len(checks) != 1 || checks[0].Status != "fail" || !strings.Contains(checks[0].Output, c.want) {
					t.Errorf("database check %+v, want fail with %q", checks, c.want)
				}
			})
		}
	}

	db.set(nil)
	expire()
	if code, out, _, body := get(srv, ""); code != 200 || out.Status != "pass" || strings.TrimSpace(body) != `{"status":"pass"}` {
		t.Fatalf("health once the database is back: %d %+v %s", code, out, body)
	}
}

// downCore fails every call with err, as the core does while the store
// is away.
type downCore struct {
	*fakeCore
	err error
}

func (d downCore) Create(context.Context, quota.Who, map[string]json.RawMessage) (*store.Cluster, error) {
	return nil, d.err
}
func (d downCore) Get(context.Context, string, string) (*store.Cluster, error) { return nil, d.err }
func (d downCore) List(context.Context, string, []store.Status) ([]*store.Cluster, error) {
	return nil, d.err
}
func (d downCore) Scale(context.Context, quota.Who, string, int) (string, error) { return "", d.err }
func (d downCore) Stop(context.Context, string, string, string) error            { return d.err }
func (d downCore) StopAs(context.Context, quota.Who, string) error               { return d.err }
func (d downCore) Reach(context.Context, quota.Who, string, sharing.Action) (*store.Cluster, sharing.Grant, error) {
	return nil, sharing.Grant{}, d.err
}
func (d downCore) SharedWith(context.Context, quota.Who, []store.Status) ([]scheduler.Shared, error) {
	return nil, d.err
}

// downAuth fails every check of a credential with err, as API tokens do
// while the store is away.
type downAuth struct{ err error }

func (d downAuth) Authenticate(context.Context, string) (*auth.User, error) { return nil, d.err }

// TestStoreOutageIs503: requests that need the store while it is away get
// 503 database_unavailable saying what is wrong, not a 500; other errors
// are unchanged.
func TestStoreOutageIs503(t *testing.T) {
	db := newPingDB(t)
	full := &store.UnavailableError{DiskFull: true, Msg: "the database's disk is full (/data): free space there; nothing of this request was kept"}
	requests := []struct{ method, path, body string }{
		{"POST", "/api/v1/clusters/", `{"cluster_options":{}}`},
		{"GET", "/api/v1/clusters/c1", ""},
		{"GET", "/api/v1/clusters/", ""},
		{"POST", "/api/v1/clusters/c1/scale", `{"count":2}`},
		{"DELETE", "/api/v1/clusters/c1", ""},
	}
	cases := []struct {
		name     string
		coreErr  error
		authErr  error
		wantCode int
		wantText string
	}{
		{"PostgreSQL down", fmt.Errorf("scheduler: %w", pgDown), nil, 503, "cannot reach PostgreSQL at 127.0.0.1:5432"},
		{"disk full", fmt.Errorf("scheduler: store: create cluster: %w", full), nil, 503, "disk is full (/data)"},
		// The caller is nobody yet: not told where the database is.
		{"credentials unreadable", nil, fmt.Errorf("auth: look up token: %w", pgDown), 503, "the database is unavailable (try again)"},
		{"another failure", errors.New("scheduler: something else"), nil, 500, "internal error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a auth.Authenticator = auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}})
			if c.authErr != nil {
				a = downAuth{c.authErr}
			}
			core := downCore{&fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}, c.coreErr}
			s := New(Config{Version: "test"}, core, a, nil, nil)
			s.SetDatabase(db)
			srv := httptest.NewServer(s)
			defer srv.Close()
			for _, r := range requests {
				code, h, body := do(t, srv, r.method, r.path, "alice-token-000000", r.body)
				var e apitype.Error
				_ = json.Unmarshal(body, &e)
				if code != c.wantCode || !strings.Contains(e.Error, c.wantText) {
					t.Errorf("%s %s: %d %s, want %d with %q", r.method, r.path, code, body, c.wantCode, c.wantText)
				}
				if c.authErr != nil && strings.Contains(string(body), "127.0.0.1") {
					t.Errorf("%s %s: a caller whose credential could not be checked is told where the database is: %s", r.method, r.path, body)
				}
				if c.wantCode == 503 && (e.Code != "database_unavailable" || h.Get("Retry-After") == "") {
					t.Errorf("%s %s: code %q, Retry-After %q", r.method, r.path, e.Code, h.Get("Retry-After"))
				}
			}
		})
	}
}
