package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/proxy/routes"
)

// workerFixture is startDashboard's gateway with worker servers recorded
// for alice's c1 (w1) and bob's c2 (w1), and a server nobody recorded.
type workerFixture struct {
	*dashFixture
	aliceW1, bobW1, stray *dashBackend
}

func startWorkerDashboard(t *testing.T, problem DashboardProblem) *workerFixture {
	t.Helper()
	f := &workerFixture{dashFixture: &dashFixture{c1: startDashBackend(t, "c1"), c2: startDashBackend(t, "c2")},
		aliceW1: startDashBackend(t, "alice-w1"), bobW1: startDashBackend(t, "bob-w1"), stray: startDashBackend(t, "stray")}
	rt := routes.New()
	rt.SetRoute("c1", "alice", "127.0.0.1:1", f.c1.url(), nil, nil)
	rt.SetRoute("c2", "bob", "127.0.0.1:1", f.c2.url(), nil, nil)
	rt.SetWorkers("c1", map[string]string{"w1": f.aliceW1.url(), "bad": "http://[::1"})
	rt.SetWorkers("c2", map[string]string{"w1": f.bobW1.url()})
	gwTLS, _ := gatewayCert(t)
	f.p = startProxy(t, Config{TLS: gwTLS, AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		s.SetDashboardProblem(func(context.Context, string) (DashboardProblem, bool) { return problem, true })
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(testAuthn))
		return mux
	})
	f.client = &http.Client{Timeout: ioTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f.base = "http://" + f.p.addr
	return f
}

func TestDashboardWorkerPages(t *testing.T) {
	f := startWorkerDashboard(t, DashboardProblem{})
	for _, tc := range []struct {
		name, path string
		method     string
	}{
		{"plot page", "/clusters/c1/worker/w1/status", "GET"},
		{"health", "/clusters/c1/worker/w1/health", "GET"},
		{"metrics with query", "/clusters/c1/worker/w1/metrics?x=1", "GET"},
		{"post goes by the reverse proxy", "/clusters/c1/worker/w1/api/x", "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(t, tc.method, tc.path, alice, nil)
			if want := "dashboard alice-w1 " + tc.method + " " + tc.path; a.status != 200 || string(a.body) != want {
				t.Fatalf("%d %q, want 200 %q", a.status, a.body, want)
			}
		})
	}
	if n := len(f.c1.requests()); n != 0 {
		t.Fatalf("the scheduler got %d worker requests", n)
	}
	// The scheduler's own pages still go to the scheduler.
	if a := f.get(t, "/clusters/c1/workers", alice); a.status != 200 || string(a.body) != "dashboard c1 GET /clusters/c1/workers" {
		t.Fatalf("scheduler's workers page: %d %q", a.status, a.body)
	}
}

// TestRegressionWorkerDashboardIsolation: a worker page is only for the
// cluster's owner, and its address comes only from the gateway's record:
// no name, host:port or path trick in the URL reaches anything else.
func TestRegressionWorkerDashboardIsolation(t *testing.T) {
	f := startWorkerDashboard(t, DashboardProblem{})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		path string
	}{
		{"another user's worker", bob, "/clusters/c1/worker/w1/status"},
		{"another user's worker health", bob, "/clusters/c1/worker/w1/health"},
		{"own cluster, other cluster's worker name", alice, "/clusters/c1/worker/" + strings.TrimPrefix(f.bobW1.url(), "http://") + "/status"},
		{"host:port as the worker name", alice, "/clusters/c1/worker/" + strings.TrimPrefix(f.stray.url(), "http://") + "/status"},
		{"escaped host:port", alice, "/clusters/c1/worker/" + strings.Replace(strings.TrimPrefix(f.stray.url(), "http://"), ":", "%3A", 1) + "/status"},
		{"url as the worker name", alice, "/clusters/c1/worker/http:%2F%2F" + strings.TrimPrefix(f.stray.url(), "http://") + "/status"},
		{"unknown worker", alice, "/clusters/c1/worker/w2/status"},
		{"worker name missing before the page", alice, "/clusters/c1/worker/status"},
		{"no worker name", alice, "/clusters/c1/worker/"},
		{"unparsable recorded url", alice, "/clusters/c1/worker/bad/status"},
		{"bob's own worker name on alice's cluster", bob, "/clusters/c1/worker/w1/metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.get(t, tc.path, tc.hdr)
			if a.status != http.StatusNotFound {
				t.Fatalf("%d %q, want 404", a.status, a.body)
			}
		})
	}
	for _, b := range []*dashBackend{f.aliceW1, f.bobW1, f.stray, f.c1, f.c2} {
		if n := len(b.requests()); n != 0 {
			t.Fatalf("%s got %d requests", b.name, n)
		}
	}
	// Bob reaches his own worker of the same name.
	if a := f.get(t, "/clusters/c2/worker/w1/status", bob); a.status != 200 || !strings.HasPrefix(string(a.body), "dashboard bob-w1 ") {
		t.Fatalf("bob's own worker: %d %q", a.status, a.body)
	}
}

func TestDashboardWorkerMissingBokeh(t *testing.T) {
	f := startWorkerDashboard(t, DashboardProblem{Missing: "no bokeh", Fix: "pip install bokeh"})
	a := f.get(t, "/clusters/c1/worker/w1/status", map[string]string{"Authorization": alice["Authorization"], "Accept": "text/html"})
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "pip install bokeh") {
		t.Fatalf("worker plot page without bokeh: %d %q", a.status, a.body)
	}
	for _, p := range []string{"/clusters/c1/worker/w1/health", "/clusters/c1/worker/w1/metrics"} {
		if a := f.get(t, p, alice); a.status != 200 || string(a.body) != "dashboard alice-w1 GET "+p {
			t.Fatalf("%s: %d %q, want it passed through", p, a.status, a.body)
		}
	}
	if n := len(f.aliceW1.requests()); n != 2 {
		t.Fatalf("worker got %d requests, want the 2 non-plot ones", n)
	}
}

func TestRoutesWorkersKeptAcrossSameCluster(t *testing.T) {
	rt := routes.New()
	rt.SetRoute("c", "alice", "a:1", "http://127.0.0.1:9", []byte("cert"), nil)
	rt.SetWorkers("c", map[string]string{"w": "https://127.0.0.1:10", "ftp": "ftp://127.0.0.1:11", "nohost": "http://"})
	rt.SetWorkers("missing", map[string]string{"w": "https://127.0.0.1:10"})
	if _, ok := rt.Lookup("missing"); ok {
		t.Fatal("SetWorkers made a route")
	}
	r, _ := rt.Lookup("c")
	if len(r.Workers) != 1 || r.Workers["w"].Host != "127.0.0.1:10" {
		t.Fatalf("workers %v, want only w", r.Workers)
	}
	rt.SetRoute("c", "alice", "a:1", "http://127.0.0.1:9", []byte("cert"), nil)
	if r, _ := rt.Lookup("c"); len(r.Workers) != 1 {
		t.Fatal("re-setting the same cluster's route dropped its workers")
	}
	rt.SetRoute("c", "alice", "a:1", "http://127.0.0.1:9", []byte("other cert"), nil)
	if r, _ := rt.Lookup("c"); len(r.Workers) != 0 {
		t.Fatal("a new cluster of the same name kept the old one's workers")
	}
}

// The scheduler's own pages link a worker as proxy/<port>/<host>/status:
// a worker on record at that address is redirected to its gateway path,
// any other address goes on to the scheduler as before (never anywhere
// the URL names).
func TestDashboardSchedulerWorkerLinks(t *testing.T) {
	f := startWorkerDashboard(t, DashboardProblem{})
	hostPort := strings.TrimPrefix(f.aliceW1.url(), "http://")
	host, port, _ := strings.Cut(hostPort, ":")
	a := f.get(t, "/clusters/c1/proxy/"+port+"/"+host+"/status", alice)
	if a.status != http.StatusFound || a.header.Get("Location") != "/clusters/c1/worker/w1/status" {
		t.Fatalf("%d Location %q, want 302 to the worker's path", a.status, a.header.Get("Location"))
	}
	_, sp, _ := strings.Cut(strings.TrimPrefix(f.stray.url(), "http://"), ":")
	a = f.get(t, "/clusters/c1/proxy/"+sp+"/"+host+"/status", alice)
	if a.status != 200 || !strings.HasPrefix(string(a.body), "dashboard c1 ") {
		t.Fatalf("unrecorded address: %d %q, want the scheduler's answer", a.status, a.body)
	}
	if a := f.get(t, "/clusters/c1/proxy/"+port+"/"+host+"/status", bob); a.status != http.StatusNotFound {
		t.Fatalf("another user: %d, want 404", a.status)
	}
	if n := len(f.stray.requests()); n != 0 {
		t.Fatalf("the unrecorded server got %d requests", n)
	}
}
