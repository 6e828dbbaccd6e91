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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	Logger      *slog.Logger
}

// Server accepts connections and sorts them.
type Server struct {
	cfg    Config
	routes *routes.Table
	http   *chanListener
	log    *slog.Logger
	bufs   sync.Pool

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // passthrough connections, closed on Close
	closed bool

	passthrough atomic.Int64

	loginRedirect func(next string) string
}

// SetLoginRedirect makes dashboards send browsers without a session to
// login(next) instead of answering 401. Call before DashboardHandler.
func (s *Server) SetLoginRedirect(login func(next string) string) { s.loginRedirect = login }

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
	cfg.ClusterDomain = strings.ToLower(strings.Trim(cfg.ClusterDomain, ".")) // server names arrive lowercased
	s := &Server{cfg: cfg, routes: rt, log: cfg.Logger, conns: map[net.Conn]struct{}{}, http: newChanListener()}
	s.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	return s
}

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
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
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
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

func (s *Server) handle(conn net.Conn) {
	bp := s.bufs.Get().(*[]byte)
	_ = conn.SetReadDeadline(time.Now().Add(s.cfg.PeekTimeout))
	hello, consumed, err := sni.Peek(conn, (*bp)[:0], sni.DefaultMaxBytes)
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, sni.ErrNotTLS):
		if !s.cfg.AllowPlainHTTP {
			s.refusePlain(conn, consumed)
			s.putBuf(bp, consumed)
			return
		}
		s.toHTTP(&prefixConn{Conn: conn, prefix: clone(consumed)})
		s.putBuf(bp, consumed)
	case err != nil:
		s.log.Debug("dropping connection: no usable TLS ClientHello", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		s.putBuf(bp, consumed)
	default:
		if cluster, ok := s.clusterFor(hello.ServerName); ok {
			// The buffer goes back to the pool once the ClientHello is
			// sent on, not when the connection ends: an idle connection
			// holds no user-space buffer.
			s.passthroughTo(conn, cluster, consumed, func() { s.putBuf(bp, consumed) })
			return
		}
		if s.cfg.TLS == nil {
			s.log.Debug("dropping TLS connection: HTTPS is not configured", "remote", conn.RemoteAddr(), "sni", hello.ServerName)
			conn.Close()
			s.putBuf(bp, consumed)
			return
		}
		s.toHTTP(tls.Server(&prefixConn{Conn: conn, prefix: clone(consumed)}, s.cfg.TLS))
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
	backend, err := net.DialTimeout("tcp", rt.Scheduler, s.cfg.DialTimeout)
	if err != nil {
		release()
		s.log.Warn("cannot reach scheduler", "cluster", cluster, "addr", rt.Scheduler, "err", err)
		conn.Close()
		return
	}
	_, err = backend.Write(hello)
	release()
	if err != nil {
		conn.Close()
		backend.Close()
		return
	}
	if !s.track(conn, backend, true) {
		conn.Close()
		backend.Close()
		return
	}
	s.passthrough.Add(1)
	pipe(conn, backend)
	s.passthrough.Add(-1)
	s.track(conn, backend, false)
}

// track records (or forgets) a passthrough pair; after Close it refuses new
// pairs, so a connection still peeking when the server closed cannot slip
// through.
func (s *Server) track(a, b net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, a)
		delete(s.conns, b)
		return true
	}
	if s.closed {
		return false
	}
	s.conns[a], s.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies both ways until both directions end, passing half-closes on
// (copyConn: spliced, holding nothing while idle). Once one direction has
// ended, the other gets halfCloseGrace to finish, so a peer that never
// closes cannot pin the pair.
// One direction runs in the caller's goroutine: an idle connection costs
// two goroutine stacks, not three.
func pipe(a, b net.Conn) {
	var ended atomic.Bool
	half := func(dst, src net.Conn) {
		_ = copyConn(dst, src)
		closeWrite(dst)
		if !ended.Swap(true) {
			deadline := time.Now().Add(halfCloseGrace)
			_ = a.SetReadDeadline(deadline)
			_ = b.SetReadDeadline(deadline)
		}
	}
	done := make(chan struct{})
	go func() {
		half(b, a)
		close(done)
	}()
	half(a, b)
	<-done
	a.Close()
	b.Close()
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
