package local_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/dashtest"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/providers/local/localtest"
	"github.com/gatewayhq/gateway/proxy"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// The scheduler's dashboard is served over TLS with the cluster's own
// certificate (real Dask): the gateway's check (pki.MemberTLS) accepts
// it, another cluster's certificate does not, and nothing answers in plain
// HTTP.
func TestDashboardServedOverTLS(t *testing.T) {
	const cluster = "dashtls"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, own, dash, _ := startTLSScheduler(ctx, t, cluster)
	other, err := pki.ClusterCert("other", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dash, "https://") {
		t.Fatalf("DashboardURL %q is not https", dash)
	}
	// The gateway's client for the member: it verifies the member with
	// cert and presents the cluster's own certificate and key.
	get := func(cert []byte, base string) (int, error) {
		key := own.KeyPEM
		if !bytes.Equal(cert, own.CertPEM) {
			key = nil // the pair must match
		}
		pool := routes.NewPool(func(tc *tls.Config) *http.Transport { return &http.Transport{TLSClientConfig: tc} })
		client := &http.Client{Transport: pool.Transport(cluster, cert, key), Timeout: 10 * time.Second}
		resp, err := retryRefused(ctx, func() (*http.Response, error) {
			return client.Get(base + "/clusters/" + cluster + "/json/counts.json")
		})
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if code, err := get(own.CertPEM, dash); err != nil || code != http.StatusOK {
		t.Fatalf("with the cluster's certificate: %d, %v; want 200", code, err)
	}
	if _, err := get(other.CertPEM, dash); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("with another cluster's certificate: %v, want a certificate error", err)
	}
	if code, err := get(own.CertPEM, "http://"+strings.TrimPrefix(dash, "https://")); err == nil && code == http.StatusOK {
		t.Fatal("the dashboard answers in plain HTTP")
	}
}

// retryRefused calls do again while the dashboard refuses connections:
// it may start a moment after the scheduler file is written.
func retryRefused(ctx context.Context, do func() (*http.Response, error)) (*http.Response, error) {
	for {
		resp, err := do()
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			return resp, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The scheduler's dashboard answers the gateway alone (issue 32, finding
// 5): on every path of its port (Dask's pages, JSON, metrics and health,
// a websocket upgrade, the gateway's watch and bench endpoints), a client
// without a certificate, or with another cluster's certificate and key,
// fails at TLS; the gateway, which presents the cluster's own, gets its
// answers, directly (the health watch) and through the dashboard proxy.
func TestDashboardAnswersTheGatewayOnly(t *testing.T) {
	const cluster = "dashmtls"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, own, dash, _ := startTLSScheduler(ctx, t, cluster)
	dashtest.GatewayOnly(ctx, t, cluster, dash+"/clusters/"+cluster, own.CertPEM, own.KeyPEM)

	// The dashboard proxy, as the gateway serves it to the cluster's owner.
	rt := routes.New()
	rt.SetRoute(cluster, "alice", "127.0.0.1:1", dash, own.CertPEM, own.KeyPEM)
	owner := func(*http.Request) (*auth.User, error) { return &auth.User{Name: "alice"}, nil }
	front := httptest.NewServer(proxy.New(proxy.Config{DialTimeout: 10 * time.Second}, rt).DashboardHandler(owner))
	defer front.Close()
	for _, path := range []string{"/json/counts.json", "/info/main/workers.html"} {
		resp, err := http.Get(front.URL + "/clusters/" + cluster + path)
		if err != nil {
			t.Fatalf("through the dashboard proxy: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("through the dashboard proxy: GET %s: %s, want 200", path, resp.Status)
		}
	}
}

// startTLSScheduler starts cluster's scheduler on the local provider with
// real Dask and a certificate of its own, and waits for it: the provider,
// the spec it started with, and the dashboard and scheduler addresses.
// Options change the provider's configuration and the spec first.
func startTLSScheduler(ctx context.Context, t *testing.T, cluster string, opts ...func(*local.Config, *providers.ClusterSpec)) (*local.Provider, pki.Pair, string, string) {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import distributed").CombinedOutput(); err != nil {
		t.Fatalf("this test runs real Dask at %s (on Debian: apt-get install python3-distributed): %v\n%s", python, err, out)
	}
	gatewayID := "gw-" + cluster + "-local"
	cert, err := pki.ClusterCert(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := local.Config{Dir: t.TempDir(), Python: python, GatewayID: gatewayID, StopGrace: 5 * time.Second}
	spec := tlsSpec(gatewayID, cluster, cert)
	for _, o := range opts {
		o(&cfg, &spec)
	}
	p, err := local.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background(), false) })
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })
	dash, addr := localtest.WaitScheduler(ctx, t, p, cluster)
	return p, cert, dash, addr
}

func tlsSpec(gatewayID, cluster string, cert pki.Pair) providers.ClusterSpec {
	return providers.ClusterSpec{Name: cluster, Owner: "alice", GatewayID: gatewayID, TLSCert: cert.CertPEM, TLSKey: cert.KeyPEM,
		DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30}
}
