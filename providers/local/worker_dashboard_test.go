package local_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/proxy"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// A worker's HTTP server (real Dask) is served over TLS with the
// cluster's certificate, under the gateway's worker path: the provider
// reports its URL, the dashboard proxy reaches it for the owner, another
// user gets 404, and a client without the cluster's certificate fails at
// TLS.
func TestWorkerDashboardThroughTheGateway(t *testing.T) {
	const cluster = "workerdash"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, own, dash, addr := startTLSScheduler(ctx, t, cluster)
	spec := tlsSpec("gw-"+cluster+"-local", cluster, own)
	if err := p.StartWorker(ctx, spec, "w1", addr); err != nil {
		t.Fatal(err)
	}
	var wurl string
	for wurl == "" {
		ms, err := p.Describe(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == "w1" && m.Role == providers.RoleWorker {
				wurl = m.DashboardURL
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the worker's dashboard URL was never reported")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(wurl, "https://127.0.0.1:") {
		t.Fatalf("worker DashboardURL %q, want https on loopback", wurl)
	}
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := plain.Get(wurl + "/clusters/" + cluster + "/worker/w1/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("the worker answered a client without the cluster's certificate: %s", resp.Status)
	}

	rt := routes.New()
	rt.SetRoute(cluster, "alice", addr, dash, own.CertPEM, own.KeyPEM)
	rt.SetWorkers(cluster, map[string]string{"w1": wurl})
	users := func(r *http.Request) (*auth.User, error) { return &auth.User{Name: r.Header.Get("X-User")}, nil }
	front := httptest.NewServer(proxy.New(proxy.Config{DialTimeout: 10 * time.Second}, rt).DashboardHandler(users))
	defer front.Close()
	get := func(user, path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, front.URL+path, nil)
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/health", "/metrics"} {
		if code, body := get("alice", "/clusters/"+cluster+"/worker/w1"+path); code != 200 {
			t.Errorf("owner: GET worker %s: %d %q, want 200", path, code, body)
		}
		if code, _ := get("bob", "/clusters/"+cluster+"/worker/w1"+path); code != 404 {
			t.Errorf("another user: GET worker %s: %d, want 404", path, code)
		}
	}
}
