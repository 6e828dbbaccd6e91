// Package proxy is the gateway's single public listener.
//
// It peeks at the first bytes of each connection. A TLS ClientHello whose
// server name is "daskgateway-<cluster>" is spliced, untouched, to that
// cluster's scheduler: TLS stays end to end between the Dask client and the
// scheduler, which checks the client's certificate. Everything else (the
// gateway's own HTTPS, or plain HTTP where allowed) goes to one HTTP server
// that serves the API and proxies each cluster's dashboard under
// /clusters/<name>/.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/internal/park"
	"github.com/gatewayhq/gateway/internal/reqbound"
	"github.com/gatewayhq/gateway/proxy/routes"
	"github.com/gatewayhq/gateway/proxy/sni"
)

// SNIPrefix names a cluster in a TLS server name (dask-gateway's convention).
const SNIPrefix = "daskgateway-"

// Config configures the listener.
type Config struct {
	// TLS serves the gateway's own HTTPS; nil serves no HTTPS.
	TLS *tls.Config
	// AllowPlainHTTP serves plain HTTP on the same port (development).
	AllowPlainHTTP bool
	// ClusterDomain, when set, also routes "<cluster>.<ClusterDomain>".
	ClusterDomain string
	// PeekTimeout bounds how long a new connection may take to send its
	// first bytes.
	PeekTimeout time.Duration
	// DialTimeout bounds connecting to a scheduler.
	DialTimeout time.Duration
	// HandshakeTimeout bounds a passthrough's TLS handshake: the client
	// must send a whole application-data record (TLS 1.3: its Finished;
	// TLS 1.2: its first data, which Dask clients send at once) within it
	// of the ClientHello reaching the scheduler. 0: 10 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a passthrough pair that moved no bytes either way
	// for this long. 0: 4 h.
	IdleTimeout time.Duration
	// MaxConnections caps passthrough pairs in total (each holds two
	// descriptors). 0: a third of the descriptor limit, so that pairs can
	// take at most two thirds and the API keeps the rest.
	MaxConnections int
	// MaxConnectionsPerCluster and MaxConnectionsPerSource cap pairs to one
	// cluster and from one client IP address. 0: no cap.
	MaxConnectionsPerCluster int
	MaxConnectionsPerSource  int
	// MaxHTTPConnections and MaxHTTPConnectionsPerSource cap the other
	// connections: HTTP, over TLS or plain, and those still sending their
	// first bytes, which are not sorted yet. Over a cap a new connection
	// is closed at once. 0: DefaultMaxHTTPConnections and
	// DefaultMaxHTTPConnectionsPerSource.
	MaxHTTPConnections          int
	MaxHTTPConnectionsPerSource int
	// ParkAfter parks a passthrough pair that moved no bytes either way
	// for this long: its goroutines end and one shared poller watches its
	// two sockets until either has something to say: an idle pair costs
	// about 2.5 KiB instead of about 15 (two goroutine stacks). The first
	// byte after a pause pays for the resume (tens of µs). 0: 1 s;
	// negative: never.
	ParkAfter time.Duration
	Logger    *slog.Logger
}

// Reasons a passthrough connection is refused or closed by the gateway,
// as counted by Counted.
const (
	RefusedTotal     = "refused_total"      // MaxConnections reached
	RefusedCluster   = "refused_cluster"    // MaxConnectionsPerCluster reached
	RefusedSource    = "refused_source"     // MaxConnectionsPerSource reached
	HandshakeExpired = "handshake_timeout"  // closed: no handshake within HandshakeTimeout
	IdleExpired      = "idle_timeout"       // closed: idle for IdleTimeout
	RefusedEarlyData = "refused_early_data" // the ClientHello offered 0-RTT data
	// HTTPEvicted counts HTTP connections closed at the total cap to make
	// room: the oldest one waiting on its client (CountedHTTP).
	HTTPEvicted = "evicted"
)

var (
	countedReasons = []string{RefusedTotal, RefusedCluster, RefusedSource, HandshakeExpired, IdleExpired, RefusedEarlyData}
	httpReasons    = []string{RefusedTotal, RefusedSource, HTTPEvicted}
)

// Reasons lists every reason Counted knows, for metrics.
func Reasons() []string { return slices.Clone(countedReasons) }

// HTTPReasons lists every reason CountedHTTP knows, for metrics.
func HTTPReasons() []string { return slices.Clone(httpReasons) }

// Server accepts connections and sorts them.
type Server struct {
	cfg    Config
	routes *routes.Table
	http   *chanListener
	log    *slog.Logger
	bufs   sync.Pool

	mu     sync.Mutex
	pairs  map[*pair]struct{} // passthrough pairs, closed on Close
	closed bool

	pairCaps    *caps // admitted pairs, dialing ones included
	httpCaps    *caps // HTTP connections and unsorted ones
	httpWaiting waiting

	passthrough atomic.Int64
	// clock is a coarse "now" (Unix nanoseconds) that the sweeper
	// refreshes: pairs stamp their activity with it, which costs an atomic
	// load and store per message instead of a timer reset.
	clock      atomic.Int64
	counts     *tally // passthrough refusals and closings, by reason
	httpCounts *tally // HTTP refusals, by reason

	parker *park.Set[*pair] // idle pairs, parked without goroutines

	loginRedirect func(next string) string
	publicURL     string        // for the dashboards' cross-site check (SetPublicURL)
	viewers       Viewers       // nil: dashboards for owners only (SetViewers)
	viewerRecheck time.Duration // how often shared viewers' open requests are checked again
	dashProblem   func(ctx context.Context, cluster string) (DashboardProblem, bool)
}

// SetDashboardProblem tells the dashboards why a cluster's dashboard
// cannot work (fn's known is false while that is not known yet: asked
// again on the next request). Call before DashboardHandler.
func (s *Server) SetDashboardProblem(fn func(ctx context.Context, cluster string) (p DashboardProblem, known bool)) {
	s.dashProblem = fn
}

// SetLoginRedirect makes dashboards send browsers without a session to
// login(next) instead of answering 401. Call before DashboardHandler.
func (s *Server) SetLoginRedirect(login func(next string) string) { s.loginRedirect = login }

// SetPublicURL names the gateway's public origin ("https://host[:port]"),
// which dashboard requests a browser makes with its own credentials must
// come from (see crosssite.Reason); unset, the request's own origin.
// Call before DashboardHandler.
func (s *Server) SetPublicURL(u string) { s.publicURL = u }

// New makes a listener around an HTTP handler.
func New(cfg Config, rt *routes.Table) *Server {
	if cfg.PeekTimeout <= 0 {
		cfg.PeekTimeout = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 4 * time.Hour
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections()
	}
	if cfg.MaxHTTPConnections <= 0 {
		cfg.MaxHTTPConnections = DefaultMaxHTTPConnections()
	}
	if cfg.MaxHTTPConnectionsPerSource <= 0 {
		cfg.MaxHTTPConnectionsPerSource = DefaultMaxHTTPConnectionsPerSource(cfg.MaxHTTPConnections)
	}
	if cfg.ParkAfter == 0 {
		cfg.ParkAfter = time.Second
	}
	cfg.ClusterDomain = strings.ToLower(strings.Trim(cfg.ClusterDomain, ".")) // server names arrive lowercased
	s := &Server{cfg: cfg, routes: rt, log: cfg.Logger, http: newChanListener(), pairs: map[*pair]struct{}{},
		pairCaps: newCaps(cfg.MaxConnections, RefusedTotal).per(cfg.MaxConnectionsPerCluster, RefusedCluster).
			per(cfg.MaxConnectionsPerSource, RefusedSource),
		httpCaps:   newCaps(cfg.MaxHTTPConnections, RefusedTotal).per(cfg.MaxHTTPConnectionsPerSource, RefusedSource),
		counts:     newTally(countedReasons),
		httpCounts: newTally(httpReasons)}
	s.clock.Store(time.Now().UnixNano())
	s.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	s.parker = park.New(s.resume)
	return s
}

// Limits are the passthrough bounds in effect (defaults resolved).
func (s *Server) Limits() (handshake, idle time.Duration, total, perCluster, perSource int) {
	c := s.cfg
	return c.HandshakeTimeout, c.IdleTimeout, c.MaxConnections, c.MaxConnectionsPerCluster, c.MaxConnectionsPerSource
}

// HTTPLimits are the HTTP connection caps in effect (defaults resolved).
func (s *Server) HTTPLimits() (total, perSource int) {
	return s.cfg.MaxHTTPConnections, s.cfg.MaxHTTPConnectionsPerSource
}

// Counted is how many passthrough connections were refused or closed for
// reason (one of the Refused* or *Expired constants) since the start.
func (s *Server) Counted(reason string) int64 { return s.counts.get(reason) }

// CountedHTTP is how many HTTP connections were refused for reason
// (RefusedTotal or RefusedSource: over MaxHTTPConnections or
// MaxHTTPConnectionsPerSource), or closed to make room (HTTPEvicted),
// since the start.
func (s *Server) CountedHTTP(reason string) int64 { return s.httpCounts.get(reason) }

// ActiveHTTP is the number of open HTTP connections, unsorted ones
// included.
func (s *Server) ActiveHTTP() int { return s.httpCaps.count() }

// HTTPListener is the listener an http.Server serves: it yields the
// connections that are not for a scheduler, TLS already set up for HTTPS.
func (s *Server) HTTPListener(addr net.Addr) net.Listener {
	s.http.setAddr(addr)
	return s.http
}

// ActivePassthrough is the number of open scheduler connections.
func (s *Server) ActivePassthrough() int64 { return s.passthrough.Load() }

// Serve accepts connections from ln until ctx ends or ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.http.setAddr(ln.Addr())
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	sweepCtx, endSweep := context.WithCancel(ctx)
	defer endSweep()
	go s.sweep(sweepCtx)
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				// Out of descriptors: back off instead of spinning (as net/http does).
				delay = min(max(delay*2, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go s.handle(conn)
	}
}

// Close closes the HTTP listener and every passthrough connection.
func (s *Server) Close() {
	s.http.Close()
	s.mu.Lock()
	s.closed = true
	open := make([]*pair, 0, len(s.pairs))
	for p := range s.pairs {
		open = append(open, p)
	}
	s.mu.Unlock()
	// Outside the lock: ending a parked pair forgets it (track).
	for _, p := range open {
		s.closePair(p)
	}
	s.parker.Stop()
}

// sweep refreshes the coarse clock and closes pairs idle for IdleTimeout,
// until ctx ends.
func (s *Server) sweep(ctx context.Context) {
	interval := min(max(s.cfg.IdleTimeout/8, 10*time.Millisecond), 30*time.Second)
	parking := s.cfg.ParkAfter > 0 && s.cfg.ParkAfter < s.cfg.IdleTimeout
	if parking {
		interval = min(interval, max(s.cfg.ParkAfter/2, 5*time.Millisecond))
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var idle, quiet []*pair
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.clock.Store(now.UnixNano())
			cutoff := now.Add(-s.cfg.IdleTimeout).UnixNano()
			parkCutoff := now.Add(-s.cfg.ParkAfter).UnixNano()
			idle, quiet = idle[:0], quiet[:0]
			s.mu.Lock()
			for p := range s.pairs {
				switch last := p.last.Load(); {
				case last < cutoff:
					idle = append(idle, p)
				case parking && last < parkCutoff && p.parkable():
					quiet = append(quiet, p)
				}
			}
			s.mu.Unlock()
			for _, p := range idle {
				s.counts.add(IdleExpired)
				s.log.Debug("closing idle scheduler connection", "cluster", p.cluster, "remote", p.client.RemoteAddr())
				s.closePair(p)
			}
			for _, p := range quiet {
				p.pause()
			}
		}
	}
}

// closePair closes a pair; a parked one, which no goroutine runs, is also
// forgotten here.
func (s *Server) closePair(p *pair) {
	parked := s.parker.Unpark(p)
	p.close()
	if parked {
		s.finish(p)
	}
}

func (s *Server) handle(conn net.Conn) {
	// Counted from the start: a connection that sends nothing holds a
	// descriptor for PeekTimeout as well as a slow request does.
	source := sourceOf(conn.RemoteAddr())
	hc, ok := s.admitHTTP(conn, source)
	if !ok {
		return
	}
	bp := s.bufs.Get().(*[]byte)
	_ = conn.SetReadDeadline(time.Now().Add(s.cfg.PeekTimeout))
	hello, consumed, err := sni.Peek(conn, (*bp)[:0], sni.DefaultMaxBytes)
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, sni.ErrNotTLS):
		if !s.cfg.AllowPlainHTTP {
			s.refusePlain(hc, consumed)
			s.putBuf(bp, consumed)
			return
		}
		s.toHTTP(&prefixConn{Conn: hc.wrapQuiet(), prefix: clone(consumed)})
		s.putBuf(bp, consumed)
	case err != nil:
		s.log.Debug("dropping connection: no usable TLS ClientHello", "remote", conn.RemoteAddr(), "err", err)
		hc.Close()
		s.putBuf(bp, consumed)
	default:
		if cluster, ok := s.clusterFor(hello.ServerName); ok {
			// From here the passthrough's caps count it.
			hc.free()
			if hello.EarlyData {
				// 0-RTT records would pass the handshake check without a
				// handshake; Dask's clients never offer early data.
				s.putBuf(bp, consumed)
				s.refuse(conn, cluster, source, RefusedEarlyData)
				return
			}
			// The buffer goes back to the pool once the ClientHello is
			// sent on, not when the connection ends: an idle connection
			// holds no user-space buffer.
			s.passthroughTo(conn, cluster, consumed, func() { s.putBuf(bp, consumed) })
			return
		}
		if s.cfg.TLS == nil {
			s.log.Debug("dropping TLS connection: HTTPS is not configured", "remote", conn.RemoteAddr(), "sni", hello.ServerName)
			hc.Close()
			s.putBuf(bp, consumed)
			return
		}
		s.toHTTP(tls.Server(&prefixConn{Conn: hc.wrapQuiet(), prefix: clone(consumed)}, s.cfg.TLS))
		s.putBuf(bp, consumed)
	}
}

func (s *Server) putBuf(bp *[]byte, used []byte) {
	if cap(used) > cap(*bp) && cap(used) <= 64<<10 {
		*bp = used[:0] // keep the grown buffer
	}
	s.bufs.Put(bp)
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// clusterFor extracts the cluster name from a server name.
func (s *Server) clusterFor(serverName string) (string, bool) {
	if name, ok := strings.CutPrefix(serverName, SNIPrefix); ok && name != "" {
		return name, true
	}
	if d := s.cfg.ClusterDomain; d != "" {
		if name, ok := strings.CutSuffix(serverName, "."+d); ok && name != "" && !strings.Contains(name, ".") {
			return name, true
		}
	}
	return "", false
}

func (s *Server) toHTTP(c net.Conn) {
	if !s.http.deliver(c) {
		c.Close()
	}
}

// refusePlain answers a plain-HTTP request on a TLS-only port the way
// net/http does, so curl users see why.
func (s *Server) refusePlain(conn net.Conn, first []byte) {
	defer conn.Close()
	if len(first) == 0 || first[0] < 'A' || first[0] > 'Z' {
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nThis gateway speaks HTTPS only: use an https:// URL.\n")
	// Closing with the request still unread would make the kernel send a
	// reset, and the client could lose the answer: finish writing, then
	// read (a bounded amount, briefly) until the client closes.
	closeWrite(conn)
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
}

func (s *Server) passthroughTo(conn net.Conn, cluster string, hello []byte, release func()) {
	rt, ok := s.routes.Lookup(cluster)
	if !ok {
		release()
		s.log.Debug("no route for cluster", "cluster", cluster, "remote", conn.RemoteAddr())
		conn.Close()
		return
	}
	source := sourceOf(conn.RemoteAddr())
	if reason := s.pairCaps.admit(cluster, source); reason != "" {
		release()
		s.refuse(conn, cluster, source, reason)
		return
	}
	backend, err := net.DialTimeout("tcp", rt.Scheduler, s.cfg.DialTimeout)
	if err != nil {
		release()
		s.pairCaps.release(cluster, source)
		s.log.Warn("cannot reach scheduler", "cluster", cluster, "addr", rt.Scheduler, "err", err)
		conn.Close()
		return
	}
	p := &pair{client: conn, backend: backend, cluster: cluster, source: source, clock: &s.clock}
	p.touch()
	// The ClientHello may have come with more records: the handshake
	// check reads records from its first byte.
	p.hs.feed(hello, false)
	_, err = backend.Write(hello)
	release()
	if err != nil || !s.track(p, true) {
		p.close()
		s.pairCaps.release(cluster, source)
		return
	}
	s.passthrough.Add(1)
	s.pipe(p, true)
}

// finish forgets a pair that has ended (once, whoever ends it).
func (s *Server) finish(p *pair) {
	if !p.finished.CompareAndSwap(false, true) {
		return
	}
	s.passthrough.Add(-1)
	s.track(p, false)
	s.pairCaps.release(p.cluster, p.source)
}

// sourceOf is the client's IP address, the unit of the per-source cap.
func sourceOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refuse closes a passthrough connection over a cap at once (existing
// pairs are kept), counts it, and logs refusals now and then.
func (s *Server) refuse(conn net.Conn, cluster, source, reason string) {
	// Counted before the close, so that whoever sees the connection end
	// also sees it counted.
	logNow, n := s.counts.refused(reason)
	conn.Close()
	if logNow {
		s.log.Warn("refusing scheduler connections", "reason", reason, "cluster", cluster, "source", source,
			"refused_since_last_log", n)
	}
}

// admitHTTP counts a new connection against the HTTP caps. At the total
// cap a connection that waits on its client, from the address holding
// the most such places if that is more than the newcomer's holds, is
// closed to make room (see waiting); otherwise a connection over a cap
// is refused.
func (s *Server) admitHTTP(conn net.Conn, source string) (*heldConn, bool) {
	reason := s.httpCaps.admit(source)
	if reason == RefusedTotal {
		if victim := s.httpWaiting.takeVictim(source); victim != nil {
			s.httpCounts.add(HTTPEvicted)
			s.log.Debug("closing a waiting HTTP connection to make room", "remote", victim.RemoteAddr())
			// Its place passes to the newcomer directly: released and
			// taken again, another newcomer could take it in between.
			victim.once.Do(func() {})
			reason = s.httpCaps.swap([]string{victim.source}, source)
			victim.Close()
		}
	}
	if reason != "" {
		s.refuseHTTP(conn, source, reason)
		return nil, false
	}
	hc := &heldConn{Conn: conn, source: source}
	hc.release = func() {
		s.httpWaiting.remove(hc)
		s.httpCaps.release(source)
	}
	s.httpWaiting.add(hc)
	return hc, true
}

// ConnContext tells the requests of an HTTP connection's handlers which
// connection they are on (for http.Server.ConnContext), so that
// reqbound.Handler can mark it serving.
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if pc, ok := c.(*prefixConn); ok {
		if hc, ok := pc.Conn.(*heldConn); ok {
			return reqbound.WithConn(ctx, hc)
		}
	}
	return ctx
}

// refuseHTTP is refuse for a connection over an HTTP cap: closed before
// anything is read from it, which is the cheapest answer.
func (s *Server) refuseHTTP(conn net.Conn, source, reason string) {
	logNow, n := s.httpCounts.refused(reason)
	conn.Close()
	if logNow {
		s.log.Warn("refusing HTTP connections", "reason", reason, "source", source,
			"refused_since_last_log", n)
	}
}

// track records (or forgets) a passthrough pair; after Close it refuses new
// pairs, so a connection still peeking when the server closed cannot slip
// through.
func (s *Server) track(p *pair, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.pairs, p)
		return true
	}
	if s.closed {
		return false
	}
	s.pairs[p] = struct{}{}
	return true
}

// pair is one passthrough: the client's connection and the scheduler's.
type pair struct {
	client, backend net.Conn
	cluster, source string
	clock           *atomic.Int64
	last            atomic.Int64 // the clock when bytes last moved
	serverSpoke     atomic.Bool  // the scheduler has sent its first bytes
	hs              handshakeScan
	// waiting: each direction (toBackend, toClient) waits for bytes in
	// copyConn. pausing: the pair is being parked or is parked. ended:
	// a direction has ended (a half-closed pair is not parked).
	waiting  [2]atomic.Bool
	pausing  atomic.Bool
	ended    atomic.Bool
	finished atomic.Bool
}

const (
	toBackend = iota
	toClient
)

// touch stamps activity (see Server.clock).
func (p *pair) touch() { p.last.Store(p.clock.Load()) }

// parkable says whether both directions wait for bytes, past the
// handshake check and neither ended: the state a pair is parked in.
func (p *pair) parkable() bool {
	return p.waiting[toBackend].Load() && p.waiting[toClient].Load() && !p.pausing.Load() && !p.ended.Load()
}

// pause asks the pair's goroutines to stop waiting and end, so that the
// pair can be parked: a read deadline in the past wakes them.
func (p *pair) pause() {
	if !p.pausing.CompareAndSwap(false, true) {
		return
	}
	past := time.Unix(1, 0)
	_ = p.client.SetReadDeadline(past)
	_ = p.backend.SetReadDeadline(past)
}

func (p *pair) close() {
	p.client.Close()
	p.backend.Close()
}

// pipe copies both ways until both directions end, passing half-closes on
// (copyConn: holding nothing while idle), or until the sweeper pauses a
// pair that has been quiet for ParkAfter, which is then parked (no
// goroutine) until either side has something to say. The client's bytes
// go through the handshake check first (handshake). Once one direction has
// ended, the other gets halfCloseGrace to finish, so a peer that never
// closes cannot pin the pair.
// One direction runs in the caller's goroutine: a pair that waits costs
// two goroutine stacks, not three.
func (s *Server) pipe(p *pair, handshake bool) {
	paused := make(chan bool, 1)
	go func() {
		if handshake {
			if ok, err := s.clientHandshake(p); !ok {
				s.endHalf(p, p.backend, err)
				paused <- false
				return
			}
			// The long copy gets a fresh goroutine: the handshake may
			// have grown this one's stack, which would otherwise stay
			// with the pair.
			go func() { paused <- s.half(p, p.backend, p.client, toBackend, p.touch) }()
			return
		}
		paused <- s.half(p, p.backend, p.client, toBackend, p.touch)
	}()
	fromServer := func() {
		p.touch()
		if !p.serverSpoke.Load() {
			p.serverSpoke.Store(true)
		}
	}
	toClientPaused := s.half(p, p.client, p.backend, toClient, fromServer)
	toBackendPaused := <-paused
	switch {
	case toClientPaused && toBackendPaused:
		if s.parker.Park(p, p.client, p.backend) {
			return
		}
	case toClientPaused || toBackendPaused:
		// One direction ended while the other was paused: no parking;
		// the paused one finishes under the half-close grace.
		dst, src, dir, onData := p.client, p.backend, toClient, fromServer
		if toBackendPaused {
			dst, src, dir, onData = p.backend, p.client, toBackend, p.touch
		}
		_ = src.SetReadDeadline(time.Now().Add(halfCloseGrace))
		p.pausing.Store(false)
		s.half(p, dst, src, dir, onData)
	}
	p.close()
	s.finish(p)
}

// half copies src to dst until src ends, then passes the half-close on,
// or returns true when the pair was paused while it waited.
func (s *Server) half(p *pair, dst, src net.Conn, dir int, onData func()) (paused bool) {
	err := copyConn(dst, src, onData, &p.waiting[dir])
	if errors.Is(err, os.ErrDeadlineExceeded) && p.pausing.Load() {
		return true
	}
	s.endHalf(p, dst, err)
	return false
}

// endHalf passes one direction's end on and starts the other's grace.
func (s *Server) endHalf(p *pair, dst net.Conn, _ error) {
	closeWrite(dst)
	if !p.ended.Swap(true) {
		deadline := time.Now().Add(halfCloseGrace)
		_ = p.client.SetReadDeadline(deadline)
		_ = p.backend.SetReadDeadline(deadline)
	}
}

// resume runs a parked pair again (the parker saw one of its sockets
// readable, or closed).
func (s *Server) resume(p *pair) {
	p.touch()
	_ = p.client.SetReadDeadline(time.Time{})
	_ = p.backend.SetReadDeadline(time.Time{})
	p.pausing.Store(false)
	s.pipe(p, false)
}

// clientHandshake passes the client's bytes on until its handshake is
// finished (true), within HandshakeTimeout, or the client's side ends.
func (s *Server) clientHandshake(p *pair) (bool, error) {
	if p.hs.done {
		return true, nil
	}
	a, b := p.client, p.backend
	_ = a.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	finished, err := copyInspecting(b, a, p.touch, clientScan{p})
	switch {
	case !finished && !p.ended.Load() && errors.Is(err, os.ErrDeadlineExceeded):
		s.handshakeTimedOut(p)
	case finished && !p.ended.Load():
		_ = a.SetReadDeadline(time.Time{})
	}
	return finished, err
}

// handshakeTimedOut ends a pair whose client did not finish its handshake
// within HandshakeTimeout.
func (s *Server) handshakeTimedOut(p *pair) {
	s.counts.add(HandshakeExpired)
	s.log.Debug("closing scheduler connection: TLS handshake not finished in time",
		"cluster", p.cluster, "remote", p.client.RemoteAddr(), "timeout", s.cfg.HandshakeTimeout)
	p.close()
}

// clientScan watches the client's side of a pair for the end of its
// handshake (an inspector for copyInspecting).
type clientScan struct{ p *pair }

func (c clientScan) next() (int, bool) {
	h := &c.p.hs
	if h.remaining > 0 {
		return h.remaining, false
	}
	return len(h.hdr) - h.hn, true
}

func (c clientScan) saw(b []byte) { c.p.hs.feed(b, c.p.serverSpoke.Load()) }

func (c clientScan) skipped(n int) { c.p.hs.skip(n) }

func (c clientScan) done() bool { return c.p.hs.done }

// handshakeScan follows TLS record boundaries in the client's stream until
// a whole application-data record has passed. A record counts only if the
// scheduler had spoken when it began, so 0-RTT early data sent with the
// ClientHello does not end the check. A server that skips records it
// cannot decrypt after refusing early data (OpenSSL does) would let a
// client that offered early data pass with a junk record sent after the
// ServerHello: such a pair is still bounded by the idle timeout and the
// caps.
type handshakeScan struct {
	hdr       [5]byte
	hn        int // header bytes collected
	remaining int // body bytes left in the current record
	typ       byte
	counts    bool // the current record counts (the scheduler had spoken)
	done      bool
}

const recordApplicationData = 23

// skip passes over n bytes of record bodies (which feed would only count).
func (h *handshakeScan) skip(n int) {
	if h.done || n <= 0 {
		return
	}
	h.remaining -= min(h.remaining, n) // next never offers more
	if h.remaining == 0 {
		h.done = h.typ == recordApplicationData && h.counts
	}
}

// feed scans b; serverSpoke says whether the scheduler had sent anything
// when b arrived (early data, before that, does not count).
func (h *handshakeScan) feed(b []byte, serverSpoke bool) bool {
	for len(b) > 0 && !h.done {
		if h.remaining == 0 && h.hn < len(h.hdr) {
			k := copy(h.hdr[h.hn:], b)
			h.hn += k
			b = b[k:]
			if h.hn < len(h.hdr) {
				return false
			}
			h.typ = h.hdr[0]
			h.remaining = int(h.hdr[3])<<8 | int(h.hdr[4])
			h.counts = serverSpoke
			h.hn = 0
			if h.remaining == 0 {
				h.done = h.typ == recordApplicationData && h.counts
			}
			continue
		}
		k := min(h.remaining, len(b))
		h.remaining -= k
		b = b[k:]
		if h.remaining == 0 {
			h.done = h.typ == recordApplicationData && h.counts
		}
	}
	return h.done
}

const halfCloseGrace = 30 * time.Second

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// prefixConn replays bytes already read before reading from the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// chanListener is a net.Listener fed by the sorter.
type chanListener struct {
	mu     sync.Mutex
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) setAddr(a net.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addr == nil {
		l.addr = a
	}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}
