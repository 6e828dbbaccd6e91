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
	families, err := g.metricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "gateway_scheduler_connections_ended_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					reasons[l.GetValue()] = true
				}
			}
		}
	}
	for _, r := range []string{proxy.RefusedTotal, proxy.RefusedCluster, proxy.RefusedSource, proxy.HandshakeExpired, proxy.IdleExpired} {
		if !reasons[r] {
			t.Errorf("no gateway_scheduler_connections_ended_total{reason=%q} in the metrics", r)
		}
	}

	// 0 derives the total from the descriptor limit.
	v.Set("proxy.max_connections", 0)
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
}
