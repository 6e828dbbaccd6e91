package health

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/quietnet"
	"github.com/gatewayhq/gateway/store"
)

// countsPool asks schedulers for their counts.json over one kept-alive
// HTTP/1.1 connection per cluster, in the asking goroutine. At 10,000
// running clusters the health checks are most of what an idle gateway
// does, and net/http's client costs per request two goroutine hand-offs
// (its connection's read and write loops) and per idle connection two
// parked goroutines with their stacks, which every garbage collection
// scans. Here an idle connection is a file descriptor and a few words.
//
// A cluster's connection is verified against that cluster's own
// certificate (pki.MemberTLS) and used for no other cluster.
type countsPool struct {
	now func() time.Time

	mu        sync.Mutex
	m         map[string]*countsEntry
	lastSweep time.Time
}

// countsEntry is one cluster's target and its idle connection.
type countsEntry struct {
	addr string // the DashboardAddress the rest was made from
	cert []byte
	tls  *tls.Config // nil for plain http
	host string      // host:port to dial
	req  []byte      // the whole request
	// prefix is the cluster's dashboard path, hostHeader the Host the
	// requests carry (watch.go).
	prefix, hostHeader string
	err                error    // why the target cannot be asked (bad address, no certificate)
	idle               net.Conn // nil while in use or not yet dialled
	used               time.Time
}

// countsIdle is how long a cluster's connection is kept unused (a
// cluster another replica took over, or stopped here unseen).
const countsIdle = 10 * time.Minute

// countsMax bounds what is read of a counts.json answer.
const countsMax = 1 << 20

var countsReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1024) }}

func newCountsPool() *countsPool {
	return &countsPool{now: time.Now, m: map[string]*countsEntry{}}
}

// counts asks cl's scheduler for its counts.json, within PollTimeout.
func (p *countsPool) counts(ctx context.Context, cl *store.Cluster) (Counts, error) {
	e, conn := p.take(cl)
	if e.err != nil {
		return Counts{}, e.err
	}
	deadline := time.Now().Add(PollTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	reused := conn != nil
	for {
		if conn == nil {
			var err error
			if conn, err = e.dial(ctx, deadline); err != nil {
				return Counts{}, err
			}
		}
		body, answered, keep, err := e.ask(ctx, conn, deadline)
		if keep {
			p.put(cl.Name, e, conn)
		} else {
			conn.Close()
		}
		if err != nil && !answered && reused && ctx.Err() == nil && time.Now().Before(deadline) {
			// The scheduler may have closed the connection while it
			// was idle: ask once more on a new one.
			conn, reused = nil, false
			continue
		}
		if err != nil {
			return Counts{}, err
		}
		var c Counts
		if err := json.Unmarshal(body, &c); err != nil {
			return Counts{}, fmt.Errorf("counts: %w", err)
		}
		return c, nil
	}
}

// take returns cl's entry, made anew when its address or certificate
// changed, and its idle connection if it has one.
func (p *countsPool) take(cl *store.Cluster) (*countsEntry, net.Conn) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) > time.Minute {
		p.lastSweep = now
		for name, e := range p.m {
			if now.Sub(e.used) > countsIdle {
				e.close()
				delete(p.m, name)
			}
		}
	}
	e, ok := p.m[cl.Name]
	if !ok || e.addr != cl.DashboardAddress || !bytes.Equal(e.cert, cl.TLSCert) {
		if ok {
			e.close()
		}
		e = newCountsEntry(cl)
		p.m[cl.Name] = e
	}
	e.used = now
	conn := e.idle
	e.idle = nil
	return e, conn
}

// put keeps conn as the cluster's idle connection, unless the entry was
// replaced or dropped meanwhile or another is kept already.
func (p *countsPool) put(name string, e *countsEntry, conn net.Conn) {
	p.mu.Lock()
	if p.m[name] == e && e.idle == nil {
		e.idle, conn = conn, nil
	}
	p.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

// Drop forgets cluster's connection.
func (p *countsPool) Drop(cluster string) {
	p.mu.Lock()
	e, ok := p.m[cluster]
	delete(p.m, cluster)
	p.mu.Unlock()
	if ok {
		e.close()
	}
}

// Len is the number of clusters with an entry.
func (p *countsPool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// close closes the idle connection (the caller holds the pool's lock).
func (e *countsEntry) close() {
	if e.idle != nil {
		e.idle.Close()
		e.idle = nil
	}
}

func newCountsEntry(cl *store.Cluster) *countsEntry {
	e := &countsEntry{addr: cl.DashboardAddress, cert: bytes.Clone(cl.TLSCert)}
	if cl.DashboardAddress == "" {
		e.err = errors.New("no dashboard address")
		return e
	}
	u, err := url.Parse(cl.DashboardAddress + "/clusters/" + cl.Name + "/json/counts.json")
	if err != nil {
		e.err = fmt.Errorf("counts: %w", err)
		return e
	}
	port := u.Port()
	switch u.Scheme {
	case "http":
		port = orDefault(port, "80")
	case "https":
		port = orDefault(port, "443")
		if e.tls, err = pki.MemberTLS(cl.TLSCert, cl.TLSKey); err != nil {
			e.err = fmt.Errorf("counts: %w", err)
			return e
		}
	default:
		e.err = fmt.Errorf("counts: dashboard address %q is neither http nor https", cl.DashboardAddress)
		return e
	}
	if u.Hostname() == "" {
		e.err = fmt.Errorf("counts: dashboard address %q has no host", cl.DashboardAddress)
		return e
	}
	e.host = net.JoinHostPort(u.Hostname(), port)
	e.prefix, e.hostHeader = strings.TrimSuffix(u.EscapedPath(), "/json/counts.json"), u.Host
	e.req = []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: gateway-health\r\nAccept: application/json\r\n\r\n")
	return e
}

// dial connects to the cluster's dashboard (and shakes hands, for https).
func (e *countsEntry) dial(ctx context.Context, deadline time.Time) (net.Conn, error) {
	return e.dialKeepAlive(ctx, deadline, net.KeepAliveConfig{})
}

// dialKeepAlive is dial with the connection's TCP keepalive set to ka
// (unless disabled there: Go's default).
func (e *countsEntry) dialKeepAlive(ctx context.Context, deadline time.Time, ka net.KeepAliveConfig) (net.Conn, error) {
	d := net.Dialer{Deadline: deadline}
	if ka.Enable {
		d.KeepAliveConfig = ka
	}
	conn, err := d.DialContext(ctx, "tcp", e.host)
	if err != nil {
		return nil, err
	}
	// Read and written without the runtime's syscall bookkeeping: a
	// heartbeat read of an otherwise idle gateway would wake its monitor
	// thread (internal/quietnet).
	conn = quietnet.Wrap(conn)
	if e.tls == nil {
		return conn, nil
	}
	tc := tls.Client(conn, e.tls)
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// ask sends the request on conn and reads the answer's body; answered
// says whether an answer's status line came, keep whether conn may serve
// the next request.
func (e *countsEntry) ask(ctx context.Context, conn net.Conn, deadline time.Time) (body []byte, answered, keep bool, err error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, false, false, err
	}
	// Cancelling ctx ends the wait at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			keep = false // the deadline was cut short: do not reuse
		}
	}()
	if _, err := conn.Write(e.req); err != nil {
		return nil, false, false, err
	}
	br := countsReaders.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		br.Reset(nil)
		countsReaders.Put(br)
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, false, false, err
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, countsMax+1))
	if err != nil {
		return nil, true, false, err
	}
	if len(body) > countsMax {
		// Not drained: the connection is closed instead.
		return nil, true, false, fmt.Errorf("counts: answer larger than %d bytes", countsMax)
	}
	resp.Body.Close() // at its end already
	// Reuse only a connection with nothing left to read.
	keep = !resp.Close && br.Buffered() == 0
	if keep {
		_ = conn.SetDeadline(time.Time{})
	}
	if resp.StatusCode != http.StatusOK {
		return nil, true, keep, fmt.Errorf("counts: %s", resp.Status)
	}
	return body, true, keep, nil
}
