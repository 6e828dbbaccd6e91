// Package routes is the live table of where each running cluster's
// scheduler and dashboard are. The scheduling core writes it as clusters
// start and stop; the proxy reads it on every new connection, so it favours
// readers.
package routes

import (
	"net/url"
	"sync"
)

// Route is one cluster's destinations.
type Route struct {
	Owner     string
	Scheduler string   // host:port of the scheduler's TLS listener
	Dashboard *url.URL // base URL of the scheduler's HTTP server; nil when it has none
}

// Table maps cluster names to routes. The zero value is not usable; call New.
type Table struct {
	mu sync.RWMutex
	m  map[string]Route
}

// New returns an empty table.
func New() *Table { return &Table{m: map[string]Route{}} }

// SetRoute adds or replaces a cluster's route. An unparsable dashboard URL
// leaves the cluster without a dashboard route rather than failing the
// scheduler route.
func (t *Table) SetRoute(cluster, owner, scheduler, dashboard string) {
	var du *url.URL
	if dashboard != "" {
		if u, err := url.Parse(dashboard); err == nil && u.Host != "" {
			du = u
		}
	}
	t.mu.Lock()
	t.m[cluster] = Route{Owner: owner, Scheduler: scheduler, Dashboard: du}
	t.mu.Unlock()
}

// DeleteRoute removes a cluster's route; a missing one is not an error.
func (t *Table) DeleteRoute(cluster string) {
	t.mu.Lock()
	delete(t.m, cluster)
	t.mu.Unlock()
}

// Lookup returns a cluster's route.
func (t *Table) Lookup(cluster string) (Route, bool) {
	t.mu.RLock()
	r, ok := t.m[cluster]
	t.mu.RUnlock()
	return r, ok
}

// Len is the number of routes.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
