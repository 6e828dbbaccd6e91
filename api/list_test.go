package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// genCore is fakeCore with per-owner generations, counting its lists.
type genCore struct {
	fakeCore
	mu    sync.Mutex
	gen   map[string]int64
	lists int
}

func (g *genCore) ClustersGeneration(_ context.Context, owner string) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen[owner], nil
}

func (g *genCore) List(ctx context.Context, owner string, st []store.Status) ([]*store.Cluster, error) {
	g.mu.Lock()
	g.lists++
	g.mu.Unlock()
	return g.fakeCore.List(ctx, owner, st)
}

func (g *genCore) listed() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists
}

// newCachedServer is one API server (its list cache lives across
// requests) over a genCore holding newTestServer's clusters.
func newCachedServer(t *testing.T) (*httptest.Server, *genCore) {
	t.Helper()
	core := &genCore{gen: map[string]int64{"alice": 1, "bob": 1}}
	core.fakeCore = fakeCore{clusters: map[string]*store.Cluster{
		"run1": {Name: "run1", Owner: "alice", Status: store.Running, Options: `{"workers":1}`, DashboardAddress: "http://127.0.0.1:1",
			TLSCert: []byte("CERT"), TLSKey: []byte("KEY"), CreatedAt: time.UnixMilli(5000), DesiredWorkers: 1, ReadyWorkers: 1},
		"bob1": {Name: "bob1", Owner: "bob", Status: store.Running, Options: `{}`, TLSCert: []byte("BOBCERT"), TLSKey: []byte("BOBKEY"), CreatedAt: time.UnixMilli(7000)},
	}, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = New(Config{Version: "test", PublicURL: "http://" + srv.Listener.Addr().String()}, core, a, nil, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, core
}

func listOf(t *testing.T, srv *httptest.Server, path, token string) map[string]map[string]any {
	t.Helper()
	code, hdr, body := do(t, srv, "GET", path, token, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("GET %s: headers %v", path, hdr)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	return m
}

// TestListCarriesNoCredentials: list entries have exactly dask-gateway's
// fields, with tls_cert and tls_key null even for a running cluster (its
// client then reports security None, as for a list upstream made without
// them); the cluster's own answer carries them, to its owner.
func TestListCarriesNoCredentials(t *testing.T) {
	for _, cached := range []bool{false, true} {
		var srv *httptest.Server
		if cached {
			srv, _ = newCachedServer(t)
		} else {
			srv, _, _ = newTestServer(t)
		}
		for _, path := range []string{"/api/v1/clusters/", "/api/v1/clusters?status=all", "/api/v1/clusters/?view=detail"} {
			m := listOf(t, srv, path, "alice-token-000000")
			run, ok := m["run1"]
			if !ok {
				t.Fatalf("cached %v, %s: no run1 in %v", cached, path, m)
			}
			if v, ok := run["tls_key"]; !ok || v != nil {
				t.Errorf("cached %v, %s: tls_key %v (present %v), want null", cached, path, v, ok)
			}
			if v, ok := run["tls_cert"]; !ok || v != nil {
				t.Errorf("cached %v, %s: tls_cert %v (present %v), want null", cached, path, v, ok)
			}
			if !strings.Contains(path, "detail") {
				var keys []string
				for k := range run {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				if got := strings.Join(keys, ","); got != "dashboard_route,name,options,start_time,status,stop_time,tls_cert,tls_key" {
					t.Errorf("cached %v, %s: keys %s", cached, path, got)
				}
			}
		}
		code, _, body := do(t, srv, "GET", "/api/v1/clusters/run1", "alice-token-000000", "")
		if code != 200 || !strings.Contains(string(body), `"tls_key":"KEY"`) {
			t.Errorf("cached %v: the cluster's own answer lost its key: %d %s", cached, code, body)
		}
	}
}

// TestListCache: a list is answered again without asking the core while
// the owner's generation stands; a change (a new generation) shows at
// once; and one owner's kept list is never another's answer, even when
// their generations are equal.
func TestListCache(t *testing.T) {
	srv, core := newCachedServer(t)
	first := listOf(t, srv, "/api/v1/clusters/", "alice-token-000000")
	if len(first) != 1 || first["run1"]["status"] != "RUNNING" {
		t.Fatalf("first list %v", first)
	}
	n := core.listed()
	again := listOf(t, srv, "/api/v1/clusters/", "alice-token-000000")
	if core.listed() != n {
		t.Error("an unchanged list was made again")
	}
	if len(again) != 1 {
		t.Errorf("kept list %v", again)
	}

	// Bob, at the same generation number: his own clusters only.
	bob := listOf(t, srv, "/api/v1/clusters/", "bob-token-00000000")
	if _, ok := bob["run1"]; ok || len(bob) != 1 {
		t.Fatalf("bob's list %v, want bob1 only", bob)
	}
	// Another query of alice's is another answer.
	if all := listOf(t, srv, "/api/v1/clusters/?status=stopped", "alice-token-000000"); len(all) != 0 {
		t.Errorf("alice's stopped clusters %v, want none", all)
	}

	// The cluster stops; the store moves the generation with the write.
	core.mu.Lock()
	core.clusters["run1"].Status = store.Stopped
	core.gen["alice"]++
	core.mu.Unlock()
	if after := listOf(t, srv, "/api/v1/clusters/", "alice-token-000000"); len(after) != 0 {
		t.Errorf("after the stop, alice's active list is %v, want empty", after)
	}
	if stopped := listOf(t, srv, "/api/v1/clusters/?status=stopped", "alice-token-000000"); stopped["run1"]["status"] != "STOPPED" {
		t.Errorf("after the stop, alice's stopped list is %v", stopped)
	}
}

// TestListCacheBounded: the kept answers stay within their budget.
func TestListCacheBounded(t *testing.T) {
	var c listCache
	body := make([]byte, listCacheBytes/8)
	for i := range 40 {
		c.put(listKey{owner: string(rune('a' + i))}, 1, body)
		if c.bytes > listCacheBytes {
			t.Fatalf("after %d answers %d bytes kept, budget %d", i+1, c.bytes, listCacheBytes)
		}
	}
	c.put(listKey{owner: "huge"}, 1, make([]byte, listCacheBytes/2))
	if _, ok := c.get(listKey{owner: "huge"}, 1); ok {
		t.Error("an answer over a quarter of the budget was kept")
	}
	// An older answer does not replace a newer one.
	c.put(listKey{owner: "z"}, 5, []byte("new"))
	c.put(listKey{owner: "z"}, 4, []byte("old"))
	if b, ok := c.get(listKey{owner: "z"}, 5); !ok || string(b) != "new" {
		t.Errorf("kept %q, %v; want the newer answer", b, ok)
	}
}
