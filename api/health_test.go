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
// answers and fails with 503 and the draft's shape while it does not,
// saying why without authentication and without secrets; a flood of
// checks pings the database about once.
func TestHealthReportsTheDatabase(t *testing.T) {
	db := newPingDB(t)
	core := &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}
	s := New(Config{Version: "test"}, core, auth.NewStaticTokens(nil), nil, nil)
	s.SetDatabase(db)
	srv := httptest.NewServer(s)
	defer srv.Close()

	get := func() (int, healthJSON, http.Header) {
		t.Helper()
		code, h, body := do(t, srv, "GET", "/api/health", "", "")
		var out healthJSON
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("health body %q: %v", body, err)
		}
		return code, out, h
	}
	if code, out, _ := get(); code != 200 || out.Status != "pass" || out.Checks["database"][0].Status != "pass" {
		t.Fatalf("health with the database up: %d %+v", code, out)
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
		name string
		err  error
		want string
	}{
		{"PostgreSQL down", pgDown, "cannot reach PostgreSQL at 127.0.0.1:5432: connection refused"},
		{"disk full", &store.UnavailableError{DiskFull: true, Msg: "the database's disk is full (/var/lib/gateway): free space there"}, "disk is full (/var/lib/gateway)"},
		// An error the store did not describe may carry anything: it is
		// not shown.
		{"unexplained", errors.New("dial postgres://gw:s3cret@db:5432: boom"), "the gateway's log has the details"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db.set(c.err)
			s.dbHealth.mu.Lock()
			s.dbHealth.checked = s.dbHealth.checked.AddDate(0, 0, -1) // as if the cache had expired
			s.dbHealth.mu.Unlock()
			code, out, h := get()
			if code != http.StatusServiceUnavailable || out.Status != "fail" || h.Get("Retry-After") == "" {
				t.Fatalf("health with the database down: %d %+v %v", code, out, h)
			}
			checks := out.Checks["database"]
			if len(checks) != 1 || checks[0].Status != "fail" || !strings.Contains(checks[0].Output, c.want) {
				t.Errorf("database check %+v, want fail with %q", checks, c.want)
			}
			if strings.Contains(fmt.Sprint(out), "s3cret") {
				t.Errorf("health leaks a secret: %+v", out)
			}
		})
	}

	db.set(nil)
	s.dbHealth.mu.Lock()
	s.dbHealth.checked = s.dbHealth.checked.AddDate(0, 0, -1)
	s.dbHealth.mu.Unlock()
	if code, out, _ := get(); code != 200 || out.Status != "pass" {
		t.Fatalf("health once the database is back: %d %+v", code, out)
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
		{"credentials unreadable", nil, fmt.Errorf("auth: look up token: %w", pgDown), 503, "cannot reach PostgreSQL"},
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
				if c.wantCode == 503 && (e.Code != "database_unavailable" || h.Get("Retry-After") == "") {
					t.Errorf("%s %s: code %q, Retry-After %q", r.method, r.path, e.Code, h.Get("Retry-After"))
				}
			}
		})
	}
}
