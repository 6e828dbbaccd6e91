package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth/devissuer"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// emptyQuotaStore is a database with no stored quota entries.
type emptyQuotaStore struct{}

func (emptyQuotaStore) QuotaEntries(context.Context) ([]store.QuotaRow, error) { return nil, nil }
func (emptyQuotaStore) UpdateQuota(context.Context, string, store.Actor, string, store.QuotaChange) (string, string, error) {
	return "", "", errors.New("read-only")
}

// runGateway builds and serves a gateway on loopback until the test ends.
func runGateway(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the gateway did not stop")
		}
	})
	return g
}

// hostStatus sends method url with the given Host header and returns the
// status and body.
func hostStatus(t *testing.T, method, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, url, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func devConfig(t *testing.T) *config.Config {
	t.Helper()
	v := ConfigSchema().New()
	v.Set("dev", true)
	v.Set("listen", "127.0.0.1:0")
	v.Set("data_dir", t.TempDir())
	v.Set("cluster.on_shutdown", "stop")
	cfg, err := ConfigSchema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDevRefusesOtherHosts: in gateway dev, a page that re-points its own
// name at 127.0.0.1 (DNS rebinding) reaches neither the gateway (API,
// dashboards, browser sign-in) nor the embedded issuer; the loopback
// names on the right port still work (issue 14, finding 10).
func TestDevRefusesOtherHosts(t *testing.T) {
	g := runGateway(t, devConfig(t))
	_, port, _ := net.SplitHostPort(g.Addr().String())
	base := "http://" + g.Addr().String()
	paths := []struct {
		method, path string
		okStatus     int
	}{
		{http.MethodGet, "/api/health", http.StatusOK},
		{http.MethodGet, "/api/v1/clusters/", http.StatusUnauthorized},
		{http.MethodPost, "/api/v1/clusters/", http.StatusUnauthorized},
		{http.MethodGet, "/auth/login", http.StatusFound},
		{http.MethodGet, "/clusters/nope/status", 0}, // any answer but the refusal
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1" + port, "127.0.0.1.nip.io:" + port} {
		for _, p := range paths {
			status, body := hostStatus(t, p.method, base+p.path, host)
			if status != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS rebinding") || !strings.Contains(body, `"error"`) {
				t.Errorf("Host %s %s %s: %d %s; want 421 saying why", host, p.method, p.path, status, body)
			}
		}
	}
	for _, host := range devissuer.LoopbackHosts(port) {
		for _, p := range paths {
			status, body := hostStatus(t, p.method, base+p.path, host)
			if status == http.StatusMisdirectedRequest || (p.okStatus != 0 && status != p.okStatus) {
				t.Errorf("Host %s %s %s: %d %s; want %d", host, p.method, p.path, status, body, p.okStatus)
			}
		}
	}

	// The embedded issuer, on its own port.
	issuerHost := strings.TrimPrefix(g.Issuer, "http://")
	_, issuerPort, _ := net.SplitHostPort(issuerHost)
	for _, tt := range []struct {
		host string
		want int
	}{
		{"evil.example:" + issuerPort, http.StatusMisdirectedRequest},
		{"localhost:" + port, http.StatusMisdirectedRequest}, // the gateway's port, not the issuer's
		{issuerHost, http.StatusOK},
		{"localhost:" + issuerPort, http.StatusOK},
	} {
		if status, body := hostStatus(t, http.MethodGet, g.Issuer+"/.well-known/openid-configuration", tt.host); status != tt.want {
			t.Errorf("issuer, Host %s: %d %s; want %d", tt.host, status, body, tt.want)
		}
	}
}

// startIdP serves the development issuer, as an OIDC provider of a
// gateway serve, until the test ends.
func startIdP(t *testing.T) *httptest.Server {
	t.Helper()
	idp := httptest.NewUnstartedServer(nil)
	iss, err := devissuer.New(devissuer.Config{Issuer: "http://" + idp.Listener.Addr().String(), ClientID: "gateway", Users: DevUsers()})
	if err != nil {
		t.Fatal(err)
	}
	idp.Config.Handler = iss.Handler()
	idp.Start()
	t.Cleanup(idp.Close)
	return idp
}

// TestServeAnswersAnyHost: outside dev the gateway is reached by its public
// name, through load balancers: the dev check must not apply.
func TestServeAnswersAnyHost(t *testing.T) {
	idp := startIdP(t)
	v := ConfigSchema().New()
	v.Set("listen", "127.0.0.1:0")
	v.Set("public_url", "http://gateway.example:8000")
	v.Set("data_dir", t.TempDir())
	v.Set("tls.allow_plain_http", true)
	v.Set("auth.oidc.issuer", idp.URL)
	v.Set("providers.local.trust_users", true)
	cfg, err := ConfigSchema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	g := runGateway(t, cfg)
	for _, host := range []string{"gateway.example:8000", "evil.example", g.Addr().String()} {
		if status, body := hostStatus(t, http.MethodGet, "http://"+g.Addr().String()+"/api/health", host); status != http.StatusOK {
			t.Errorf("serve, Host %s: %d %s", host, status, body)
		}
	}
}

// TestQuotaDefaults: a fresh serve configuration gives every user the
// built-in defaults, said to be built in; the configuration file raises
// them field by field; gateway dev has none (issue 14, finding 11).
func TestQuotaDefaults(t *testing.T) {
	load := func(t *testing.T, dev bool, file string) *config.Config {
		t.Helper()
		v := ConfigSchema().New()
		v.Set("dev", dev)
		v.Set("data_dir", t.TempDir())
		v.Set("auth.oidc.issuer", "https://idp.example")
		v.Set("providers.local.trust_users", true)
		path := ""
		if file != "" {
			path = t.TempDir() + "/gateway.yaml"
			if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := ConfigSchema().Load(v, path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	tests := []struct {
		name    string
		dev     bool
		file    string
		want    map[string]string // limit -> value@source
		wantErr string
	}{
		{"serve", false, "", map[string]string{"max_clusters": "5@" + quota.BuiltinSource, "max_builds": "2@" + quota.BuiltinSource}, ""},
		{"serve, entries without a default", false, "quotas:\n  entries:\n    - {subject: user:bob, max_clusters: 50}\n",
			map[string]string{"max_clusters": "5@" + quota.BuiltinSource, "max_builds": "2@" + quota.BuiltinSource}, ""},
		{"serve, default raised", false, "quotas:\n  entries:\n    - {subject: default, max_clusters: 20}\n",
			map[string]string{"max_clusters": "20@default (config)", "max_builds": "2@" + quota.BuiltinSource}, ""},
		{"serve, default lifted", false, "quotas:\n  entries:\n    - {subject: default, max_clusters: unlimited, max_builds: unlimited}\n",
			map[string]string{"max_clusters": "unlimited@default (config)", "max_builds": "unlimited@default (config)"}, ""},
		{"dev", true, "", map[string]string{}, ""},
		{"bad entry", false, "quotas:\n  entries:\n    - {subject: default, max_clusters: -1}\n", nil, "entry 1 (default): max_clusters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := load(t, tt.dev, tt.file)
			s, err := newQuotas(cfg, emptyQuotaStore{})
			if tt.wantErr != "" {
				if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("newQuotas = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			eff, err := s.Effective(context.Background(), quota.Who{ID: "id-ann", Name: "ann"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			if l := eff.Limits.MaxClusters; l != nil {
				got["max_clusters"] = l.String() + "@" + eff.Source("max_clusters")
			}
			if l := eff.Limits.MaxBuilds; l != nil {
				got["max_builds"] = l.String() + "@" + eff.Source("max_builds")
			}
			if len(got) != len(tt.want) || len(eff.Sources) != len(tt.want) {
				t.Errorf("limits %v (sources %q), want %v", got, eff.Sources, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %s, want %s", k, got[k], v)
				}
			}
		})
	}
}
