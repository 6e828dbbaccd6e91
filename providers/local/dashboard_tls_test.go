package local_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/providers/local/localtest"
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
	get := func(cert []byte, base string) (int, error) {
		pool := routes.NewPool(func(tc *tls.Config) *http.Transport { return &http.Transport{TLSClientConfig: tc} })
		client := &http.Client{Transport: pool.Transport(cluster, cert), Timeout: 10 * time.Second}
		var resp *http.Response
		var err error
		// The dashboard may start a moment after the scheduler file is written.
		for range 50 {
			if resp, err = client.Get(base + "/clusters/" + cluster + "/json/counts.json"); err == nil || ctx.Err() != nil {
				break
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
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

// startTLSScheduler starts cluster's scheduler on the local provider with
// real Dask and a certificate of its own, and waits for it: the provider,
// the spec it started with, and the dashboard and scheduler addresses.
func startTLSScheduler(ctx context.Context, t *testing.T, cluster string) (*local.Provider, pki.Pair, string, string) {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import distributed").CombinedOutput(); err != nil {
		t.Fatalf("this test runs real Dask at %s (on Debian: apt-get install python3-distributed): %v\n%s", python, err, out)
	}
	gatewayID := "gw-" + cluster + "-local"
	p, err := local.New(local.Config{Dir: t.TempDir(), Python: python, GatewayID: gatewayID, StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background(), false) })
	cert, err := pki.ClusterCert(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.StartScheduler(ctx, tlsSpec(gatewayID, cluster, cert)); err != nil {
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
