// Package dashtest checks, against a real scheduler, that a member's
// dashboard answers the gateway alone: the tests of every provider that
// runs schedulers on this host share it.
package dashtest

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
)

// request is one request to a path of the dashboard's port.
type request struct {
	method, path string
	header       http.Header
	body         string
	gateway      int // the gateway's answer; 0: any
}

// requests cover every kind of path on the port: Dask's pages, JSON,
// metrics and health, a websocket upgrade (404 without bokeh), the
// gateway's watch and its bench agent (unsigned: 403).
var requests = []request{
	{"GET", "/status", nil, "", http.StatusOK},
	{"GET", "/info/main/workers.html", nil, "", http.StatusOK},
	{"GET", "/json/identity.json", nil, "", http.StatusOK},
	{"GET", "/json/counts.json", nil, "", http.StatusOK},
	{"GET", "/metrics", nil, "", http.StatusOK},
	{"GET", "/health", nil, "", http.StatusOK},
	{"GET", "/status/ws", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, "", 0},
	{"GET", "/gateway-health/watch?beat=3600", nil, "", http.StatusOK},
	{"POST", "/gateway-bench/load", nil, "import os; os._exit(3)", http.StatusForbidden},
}

// GatewayOnly checks the dashboard at base (the scheduler's URL with its
// dashboard prefix) of the cluster whose certificate and key these are:
// a client without a certificate, or with another cluster's, fails at
// TLS (or gets 403) on every path; the gateway's client, which presents
// the cluster's own (pki.MemberTLS with the key, as the gateway's pools
// do), gets the dashboard's answers. It waits for the dashboard to accept
// connections first.
func GatewayOnly(ctx context.Context, t *testing.T, cluster, base string, certPEM, keyPEM []byte) {
	t.Helper()
	own, err := pki.MemberTLS(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	gateway := &http.Client{Transport: &http.Transport{TLSClientConfig: own}, Timeout: 30 * time.Second}
	defer gateway.CloseIdleConnections()
	for {
		resp, err := gateway.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			t.Fatalf("the gateway's client: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Clients that reach the port but are not the gateway. Each checks
	// the member's certificate as the gateway does, so what fails is the
	// member refusing them.
	noCert, err := pki.MemberTLS(certPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.ClusterCert("other", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherPair, err := tls.X509KeyPair(other.CertPEM, other.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	withOther := noCert.Clone()
	withOther.Certificates = []tls.Certificate{otherPair}

	do := func(client *http.Client, rq request) (int, error) {
		req, err := http.NewRequestWithContext(ctx, rq.method, base+rq.path, strings.NewReader(rq.body))
		if err != nil {
			return 0, err
		}
		for k, v := range rq.header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close() // the watch streams: its status is enough
		return resp.StatusCode, nil
	}
	for name, tc := range map[string]*tls.Config{"no certificate": noCert, "another cluster's certificate": withOther} {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
		for _, rq := range requests {
			code, err := do(client, rq)
			if err == nil && code != http.StatusForbidden {
				t.Errorf("%s: %s %s: %d, want a TLS failure or 403", name, rq.method, rq.path, code)
			} else if err != nil && !strings.Contains(err.Error(), "tls") && !strings.Contains(err.Error(), "certificate") &&
				!errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
				t.Errorf("%s: %s %s: %v, want a TLS failure", name, rq.method, rq.path, err)
			}
		}
		client.CloseIdleConnections()
	}
	for _, rq := range requests {
		code, err := do(gateway, rq)
		switch {
		case err != nil:
			t.Errorf("the gateway: %s %s: %v", rq.method, rq.path, err)
		case rq.gateway != 0 && code != rq.gateway:
			t.Errorf("the gateway: %s %s: %d, want %d", rq.method, rq.path, code, rq.gateway)
		}
	}
}
