package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatewayhq/gateway/proxy"
	"github.com/gatewayhq/gateway/store"
)

// clusterCollector reports clusters by status from the store at each
// scrape, so every replica reports the same, whole picture.
type clusterCollector struct {
	st   *store.DB
	desc *prometheus.Desc
}

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cls, err := c.st.ListClusters(ctx, store.Filter{Statuses: store.ActiveStatuses})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[store.Status]int{}
	for _, cl := range cls {
		counts[cl.Status]++
	}
	for _, s := range store.ActiveStatuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// metricsRegistry gathers the gateway's metrics.
func (g *Gateway) metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		clusterCollector{st: g.store, desc: prometheus.NewDesc("gateway_clusters", "Active clusters by status.", []string{"status"}, nil)},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_reaped_total",
			Help: "Clusters whose leftover resources the reaper stopped (or, in a dry run, found)."},
			func() float64 { return float64(g.core.Reaped()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_scheduler_connections",
			Help: "Open Dask connections passed through to schedulers."},
			func() float64 { return float64(g.proxy.ActivePassthrough()) }),
	)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_http_connections",
		Help: "Open HTTP connections on the public port (HTTPS or plain, and those not sorted yet), counted against proxy.max_http_connections."},
		func() float64 { return float64(g.proxy.ActiveHTTP()) }))
	for _, reason := range proxy.HTTPReasons() {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_http_connections_refused_total",
			Help:        "HTTP connections the gateway closed at once over a proxy.max_http_connections* cap, or closed at the total cap to make room (evicted: the oldest one waiting on its client), by reason.",
			ConstLabels: prometheus.Labels{"reason": reason}},
			func() float64 { return float64(g.proxy.CountedHTTP(reason)) }))
	}
	for _, reason := range proxy.Reasons() {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_scheduler_connections_ended_total",
			Help:        "Dask connections the gateway refused (over a cap, or offering 0-RTT data) or closed (handshake or idle timeout), by reason.",
			ConstLabels: prometheus.Labels{"reason": reason}},
			func() float64 { return float64(g.proxy.Counted(reason)) }))
	}
	return reg
}

// serveMetrics serves /metrics on its own listener: operational data for
// the operator's monitoring, not for the gateway's users. /health there is
// /api/health with its details (which check failed, the data directory,
// PostgreSQL's host), which the public port tells admins only.
func (g *Gateway) serveMetrics(addr string, health http.Handler) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g.metricsRegistry(), promhttp.HandlerOpts{}))
	mux.Handle("GET /health", health)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	g.metricsServer = srv
	return ln, nil
}
