// Package routes is the live table of where each running cluster's
// scheduler and dashboard are. The scheduling core writes it as clusters
// start and stop; the proxy reads it on every new connection, so it favours
// readers.
package routes

import (
	"bytes"
	"net/url"
	"sync"
	"time"
)

// Route is one cluster's destinations.
type Route struct {
	Owner     string
	Scheduler string   // host:port of the scheduler's TLS listener
	Dashboard *url.URL // base URL of the scheduler's HTTP server; nil when it has none
	// ClusterCert is the cluster's certificate (PEM): an https dashboard
	// must present it (see pki.MemberTLS).
	ClusterCert []byte
	// ClusterKey is the cluster's private key (PEM), with which the
	// gateway presents ClusterCert to the dashboard. A secret: never
	// logged, never sent but in a TLS handshake with the member.
	ClusterKey []byte
	// Workers maps a worker's name to the base URL of its HTTP server,
	// from the gateway's own record of the cluster's members: the only
	// places a worker page may be proxied to, whatever a URL names.
	Workers map[string]*url.URL
}

// Table maps cluster names to routes. The zero value is not usable; call New.
type Table struct {
	mu sync.RWMutex
	m  map[string]Route

	// fallback answers for clusters this process does not reconcile (with
	// several replicas, another one may); answers are kept for cacheTTL.
	fallback func(cluster string) (Route, bool)
	cacheMu  sync.Mutex
	cache    map[string]cached

	onGone []func(cluster string)
}

type cached struct {
	r   Route
	ok  bool
	exp time.Time
}

const cacheTTL = 2 * time.Second

// New returns an empty table.
func New() *Table { return &Table{m: map[string]Route{}, cache: map[string]cached{}} }

// SetFallback sets where to look up clusters missing from the table.
func (t *Table) SetFallback(fn func(cluster string) (Route, bool)) { t.fallback = fn }

// OnGone registers fn to be called with a cluster's name when its route
// is deleted, or replaced by one with another dashboard or certificate
// (so that what was kept for the old one, such as a connection pool, can be
// dropped). Call before the table is used.
func (t *Table) OnGone(fn func(cluster string)) { t.onGone = append(t.onGone, fn) }

// SetRoute adds or replaces a cluster's route. An unparsable dashboard URL
// leaves the cluster without a dashboard route rather than failing the
// scheduler route. clusterCert and clusterKey are the cluster's
// certificate and key (PEM).
func (t *Table) SetRoute(cluster, owner, scheduler, dashboard string, clusterCert, clusterKey []byte) {
	r := RouteFrom(owner, scheduler, dashboard, clusterCert, clusterKey)
	t.mu.Lock()
	old, had := t.m[cluster]
	if had && bytes.Equal(old.ClusterCert, r.ClusterCert) {
		r.Workers = old.Workers // the same cluster: its workers stay
	}
	t.m[cluster] = r
	t.mu.Unlock()
	if had && (!sameURL(old.Dashboard, r.Dashboard) || !bytes.Equal(old.ClusterCert, r.ClusterCert) || !bytes.Equal(old.ClusterKey, r.ClusterKey)) {
		t.gone(cluster)
	}
}

func sameURL(a, b *url.URL) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.String() == b.String()
}

// SetWorkers records the base URLs of a cluster's workers' HTTP servers
// (worker name to URL), replacing the previous record; a cluster without
// a route is left alone, and an unparsable URL leaves its worker out.
func (t *Table) SetWorkers(cluster string, workers map[string]string) {
	m := make(map[string]*url.URL, len(workers))
	for name, raw := range workers {
		if u, err := url.Parse(raw); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
			m[name] = u
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.m[cluster]; ok {
		r.Workers = m
		t.m[cluster] = r
	}
}

// DeleteRoute removes a cluster's route; a missing one is not an error.
func (t *Table) DeleteRoute(cluster string) {
	t.mu.Lock()
	delete(t.m, cluster)
	t.mu.Unlock()
	t.gone(cluster)
}

func (t *Table) gone(cluster string) {
	for _, fn := range t.onGone {
		fn(cluster)
	}
}

// Lookup returns a cluster's route.
func (t *Table) Lookup(cluster string) (Route, bool) {
	t.mu.RLock()
	r, ok := t.m[cluster]
	t.mu.RUnlock()
	if ok || t.fallback == nil {
		return r, ok
	}
	now := time.Now()
	t.cacheMu.Lock()
	c, hit := t.cache[cluster]
	t.cacheMu.Unlock()
	if hit && now.Before(c.exp) {
		return c.r, c.ok
	}
	r, ok = t.fallback(cluster)
	t.cacheMu.Lock()
	if len(t.cache) > 10000 { // a flood of made-up names must not grow it without bound
		t.cache = map[string]cached{}
	}
	t.cache[cluster] = cached{r: r, ok: ok, exp: now.Add(cacheTTL)}
	t.cacheMu.Unlock()
	return r, ok
}

// RouteFrom builds a route from stored addresses, as SetRoute does.
func RouteFrom(owner, scheduler, dashboard string, clusterCert, clusterKey []byte) Route {
	var du *url.URL
	if dashboard != "" {
		if u, err := url.Parse(dashboard); err == nil && u.Host != "" {
			du = u
		}
	}
	return Route{Owner: owner, Scheduler: scheduler, Dashboard: du, ClusterCert: clusterCert, ClusterKey: clusterKey}
}

// Len is the number of routes.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
