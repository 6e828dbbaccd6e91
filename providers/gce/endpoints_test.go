package gce

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"

	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// hostRecorder records the host of every request and sends none: nothing
// leaves the process.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return nil, errors.New("test transport: recorded, not sent")
}

func (h *hostRecorder) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.hosts...)
}

// TestStandardEndpointSettings: with no endpoint configured, the Compute
// Engine and Secret Manager clients both go where Google's standard
// settings say (here the universe domain of GOOGLE_CLOUD_UNIVERSE_DOMAIN);
// a configured endpoint replaces them. The transport records and sends
// nothing.
func TestStandardEndpointSettings(t *testing.T) {
	srv := gcetest.New(t, gcetest.Options{})
	for _, tc := range []struct {
		name                      string
		endpoint, secretsEndpoint string
		wantCompute, wantSecrets  string
	}{
		{"universe domain from the environment", "", "", "compute.universe.test", "secretmanager.universe.test"},
		{"configured endpoints", "http://127.0.0.1:9/", "http://127.0.0.2:9/", "127.0.0.1:9", "127.0.0.2:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOOGLE_CLOUD_UNIVERSE_DOMAIN", "universe.test")
			rec := &hostRecorder{}
			cfg := testConfig(srv, &sleeps{})
			cfg.Endpoint, cfg.SecretManagerEndpoint = tc.endpoint, tc.secretsEndpoint
			cfg.ClientOptions = []option.ClientOption{option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{Transport: rec})}
			p, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer p.closeClients()
			ctx := context.Background()
			_, _ = p.firewalls.Get(ctx, &computepb.GetFirewallRequest{Project: cfg.Project, Firewall: "gw-x"})
			_, _ = p.secrets.get(ctx, "gw-x")
			got := rec.seen()
			if len(got) != 2 || got[0] != tc.wantCompute || got[1] != tc.wantSecrets {
				t.Errorf("requests went to %v; want [%s %s]", got, tc.wantCompute, tc.wantSecrets)
			}
		})
	}
}
