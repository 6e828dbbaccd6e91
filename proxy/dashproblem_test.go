package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/proxy/routes"
)

// Issue 38: when a cluster's Dask has no usable bokeh, the gateway answers
// every bokeh page itself (what is missing, the command, links to what
// works), asks once per cluster, and passes the pages Dask serves without
// bokeh through. Other users still get the 404 of a cluster not theirs.
func TestDashboardMissingBokeh(t *testing.T) {
	var asked, seen atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		_, _ = w.Write([]byte("from the scheduler"))
	}))
	defer backend.Close()
	rt := routes.New()
	rt.SetRoute("c1", "alice", "127.0.0.1:1", backend.URL, nil, nil)
	rt.SetRoute("c2", "bob", "127.0.0.1:1", backend.URL, nil, nil)
	s := New(Config{DialTimeout: ioTimeout}, rt)
	s.SetDashboardProblem(func(_ context.Context, cluster string) (DashboardProblem, bool) {
		asked.Add(1)
		return DashboardProblem{Missing: "/usr/bin/python3 has distributed 2022.12.1 without bokeh, and it needs bokeh >=2.4.2,<=2.4.3",
			Fix: "/usr/bin/python3 -m pip install --user --break-system-packages 'bokeh>=2.4.2,<=2.4.3'"}, true
	})
	h := s.DashboardHandler(sessionAuthn)
	get := func(path string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Accept", chromiumAccept)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, p := range []string{"/clusters/c1", "/clusters/c1/", "/clusters/c1/status", "/clusters/c1/workers", "/clusters/c1/graph",
		"/clusters/c1/individual-task-stream", "/clusters/c1/status/ws"} {
		rec := get(p, alice)
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "This dashboard needs bokeh") ||
			!strings.Contains(body, "--break-system-packages &#39;bokeh&gt;=2.4.2,&lt;=2.4.3&#39;") ||
			!strings.Contains(body, `href="/clusters/c1/info/main/workers.html"`) {
			t.Errorf("%s: %d\n%s", p, rec.Code, body)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("asked %d times for one cluster, want once", n)
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the scheduler got %d of the bokeh pages", n)
	}
	for _, p := range []string{"/clusters/c1/info/main/workers.html", "/clusters/c1/json/counts.json", "/clusters/c1/metrics", "/clusters/c1/health"} {
		if rec := get(p, alice); rec.Code != http.StatusOK || rec.Body.String() != "from the scheduler" {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body.String())
		}
	}
	if rec := get("/clusters/c2/status", alice); rec.Code != http.StatusNotFound {
		t.Errorf("another user's cluster: %d, want 404", rec.Code)
	}
	rt.DeleteRoute("c1")
	rt.SetRoute("c1", "alice", "127.0.0.1:1", backend.URL, nil, nil)
	get("/clusters/c1/status", alice)
	if n := asked.Load(); n != 2 {
		t.Errorf("asked %d times after the route changed, want again", n)
	}
}
