package routes

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
)

// Pool keeps one HTTP transport (and so one connection pool) per cluster,
// made for that cluster's certificate: connections verified for one
// cluster are never reused for another. Drop a cluster's transport when
// its route goes away (Table.OnGone); transports unused for poolIdle are
// dropped too, for clusters routed from elsewhere.
type Pool struct {
	newTransport func(*tls.Config) *http.Transport
	now          func() time.Time

	mu        sync.Mutex
	m         map[string]*poolEntry
	lastSweep time.Time
}

type poolEntry struct {
	cert []byte
	key  []byte
	rt   *http.Transport
	used time.Time
}

const poolIdle = 10 * time.Minute

// NewPool makes a pool; newTransport makes a cluster's transport around
// the TLS settings that verify its members.
func NewPool(newTransport func(*tls.Config) *http.Transport) *Pool {
	return &Pool{newTransport: newTransport, now: time.Now, m: map[string]*poolEntry{}}
}

// Transport returns cluster's transport for a member presenting
// clusterCert; it presents clusterCert with clusterKey in turn. Without a
// certificate, the transport refuses every https server (plain http still
// works, for providers whose dashboards have no TLS).
func (p *Pool) Transport(cluster string, clusterCert, clusterKey []byte) *http.Transport {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) > time.Minute {
		p.lastSweep = now
		for name, e := range p.m {
			if now.Sub(e.used) > poolIdle {
				e.rt.CloseIdleConnections()
				delete(p.m, name)
			}
		}
	}
	if e, ok := p.m[cluster]; ok && bytes.Equal(e.cert, clusterCert) && bytes.Equal(e.key, clusterKey) {
		e.used = now
		return e.rt
	}
	cfg, err := pki.MemberTLS(clusterCert, clusterKey)
	if err != nil {
		// Trust nothing: an empty pool verifies no server.
		cfg = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: pki.DaskInternalName, MinVersion: tls.VersionTLS12}
	}
	if old, ok := p.m[cluster]; ok {
		old.rt.CloseIdleConnections()
	}
	rt := p.newTransport(cfg)
	p.m[cluster] = &poolEntry{cert: bytes.Clone(clusterCert), key: bytes.Clone(clusterKey), rt: rt, used: now}
	return rt
}

// Drop forgets cluster's transport and closes its idle connections.
func (p *Pool) Drop(cluster string) {
	p.mu.Lock()
	e, ok := p.m[cluster]
	delete(p.m, cluster)
	p.mu.Unlock()
	if ok {
		e.rt.CloseIdleConnections()
	}
}

// Len is the number of clusters with a transport.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
