package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/proxy"
)

// The proxy.* settings reach the proxy, and its refusals and timeouts are
// counted in /metrics (issue 14, finding 2).
func TestProxyLimitsWired(t *testing.T) {
	v := ConfigSchema().New()
	v.Set("dev", true)
	v.Set("listen", "127.0.0.1:0")
	v.Set("data_dir", t.TempDir())
	v.Set("proxy.handshake_timeout", "3s")
	v.Set("proxy.idle_timeout", "90m")
	v.Set("proxy.max_connections", 77)
	v.Set("proxy.max_connections_per_cluster", 55)
	v.Set("proxy.max_connections_per_source", 33)
	v.Set("proxy.max_http_connections", 66)
	v.Set("proxy.max_http_connections_per_source", 22)
	v.Set("proxy.http_header_timeout", "4s")
	v.Set("proxy.http_body_timeout", "90s")
	cfg, err := ConfigSchema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	hs, idle, total, perCluster, perSource := g.proxy.Limits()
	if hs != 3*time.Second || idle != 90*time.Minute || total != 77 || perCluster != 55 || perSource != 33 {
		t.Fatalf("proxy limits %v %v %d %d %d; want the configured 3s 1h30m 77 55 33", hs, idle, total, perCluster, perSource)
	}
	if total, perSource := g.proxy.HTTPLimits(); total != 66 || perSource != 22 {
		t.Fatalf("HTTP caps %d %d; want the configured 66 22", total, perSource)
	}
	if g.http.ReadHeaderTimeout != 4*time.Second || g.http.ReadTimeout != 90*time.Second {
		t.Fatalf("HTTP server's header and read timeouts %v %v; want the configured 4s 1m30s", g.http.ReadHeaderTimeout, g.http.ReadTimeout)
	}
	families, err := g.metricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					if reasons[f.GetName()] == nil {
						reasons[f.GetName()] = map[string]bool{}
					}
					reasons[f.GetName()][l.GetValue()] = true
				}
			}
		}
	}
	for metric, want := range map[string][]string{
		"gateway_scheduler_connections_ended_total": {proxy.RefusedTotal, proxy.RefusedCluster, proxy.RefusedSource, proxy.HandshakeExpired, proxy.IdleExpired},
		"gateway_http_connections_refused_total":    {proxy.RefusedTotal, proxy.RefusedSource, proxy.HTTPEvicted},
	} {
		for _, r := range want {
			if !reasons[metric][r] {
				t.Errorf("no %s{reason=%q} in the metrics", metric, r)
			}
		}
	}

	// 0 derives the totals from the descriptor limit.
	v.Set("proxy.max_connections", 0)
	v.Set("proxy.max_http_connections", 0)
	v.Set("proxy.max_http_connections_per_source", 0)
	v.Set("data_dir", t.TempDir())
	cfg, err = ConfigSchema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if _, _, total, _, _ := g2.proxy.Limits(); total != proxy.DefaultMaxConnections() || total <= 0 {
		t.Fatalf("derived total cap %d, want %d", total, proxy.DefaultMaxConnections())
	}
	httpTotal, perSource := g2.proxy.HTTPLimits()
	if httpTotal != proxy.DefaultMaxHTTPConnections() || perSource != proxy.DefaultMaxHTTPConnectionsPerSource(httpTotal) || perSource <= 0 || perSource > httpTotal {
		t.Fatalf("derived HTTP caps %d %d, want %d %d", httpTotal, perSource, proxy.DefaultMaxHTTPConnections(), proxy.DefaultMaxHTTPConnectionsPerSource(httpTotal))
	}
}
