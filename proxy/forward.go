package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/quietnet"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// forwarder sends a dashboard's plain GET and HEAD requests (its pages,
// scripts and JSON) to the cluster's scheduler from the handler's own
// goroutine, over keep-alive connections pooled per cluster. net/http's
// Transport hands every request to two goroutines of its own (a writer and
// a reader per connection) and the reverse proxy clones the request and
// its headers; on two cores those wake-ups and copies cost as much again
// as the rest of the proxying. Anything else (bodies, upgrades, Expect)
// still goes through httputil.ReverseProxy, which handles it all.
type forwarder struct {
	dialer         *net.Dialer
	tlsTimeout     time.Duration
	headerTimeout  time.Duration
	idleTimeout    time.Duration
	maxIdle        int // per cluster
	now            func() time.Time
	bufs           *copyBuffers
	onBackendError func(w http.ResponseWriter, r *http.Request, err error) // logs and answers 502

	mu        sync.Mutex
	idle      map[string][]*backendConn // by cluster, most recently used last
	lastSweep time.Time
}

// backendConn is one keep-alive connection to a cluster's dashboard.
type backendConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	target string // scheme://host it was dialled for
	cert   []byte // the cluster certificate an https dashboard was verified with
	used   time.Time
}

// forwardable says whether the fast path takes r: a GET or HEAD without a
// body, an upgrade or an expectation.
func forwardable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ContentLength == 0 &&
		len(r.TransferEncoding) == 0 && r.Header.Get("Upgrade") == "" && r.Header.Get("Expect") == "" &&
		(r.Body == nil || r.Body == http.NoBody)
}

// Drop closes a cluster's idle connections (its route went away or changed).
func (f *forwarder) Drop(cluster string) {
	f.mu.Lock()
	conns := f.idle[cluster]
	delete(f.idle, cluster)
	f.mu.Unlock()
	for _, c := range conns {
		c.conn.Close()
	}
}

// get returns an idle connection to rt's dashboard, or nil.
func (f *forwarder) get(cluster string, rt routes.Route) *backendConn {
	target := rt.Dashboard.Scheme + "://" + rt.Dashboard.Host
	now := f.now()
	var stale []*backendConn
	var found *backendConn
	f.mu.Lock()
	conns := f.idle[cluster]
	for len(conns) > 0 {
		c := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if c.target != target || !bytes.Equal(c.cert, rt.ClusterCert) || now.Sub(c.used) > f.idleTimeout {
			stale = append(stale, c)
			continue
		}
		found = c
		break
	}
	if len(conns) == 0 {
		delete(f.idle, cluster)
	} else {
		f.idle[cluster] = conns
	}
	f.mu.Unlock()
	for _, c := range stale {
		c.conn.Close()
	}
	return found
}

// put keeps c for the cluster's next request.
func (f *forwarder) put(cluster string, c *backendConn) {
	now := f.now()
	c.used = now
	var closing []*backendConn
	f.mu.Lock()
	if now.Sub(f.lastSweep) > time.Minute {
		// Connections of clusters nobody asks for any more.
		f.lastSweep = now
		for name, conns := range f.idle {
			kept := conns[:0]
			for _, ic := range conns {
				if now.Sub(ic.used) > f.idleTimeout {
					closing = append(closing, ic)
				} else {
					kept = append(kept, ic)
				}
			}
			if len(kept) == 0 {
				delete(f.idle, name)
			} else {
				f.idle[name] = kept
			}
		}
	}
	if len(f.idle[cluster]) < f.maxIdle {
		f.idle[cluster] = append(f.idle[cluster], c)
	} else {
		closing = append(closing, c)
	}
	f.mu.Unlock()
	for _, ic := range closing {
		ic.conn.Close()
	}
}

// dial opens a connection to rt's dashboard; an https one must present
// the cluster's certificate (pki.MemberTLS).
func (f *forwarder) dial(ctx context.Context, rt routes.Route) (*backendConn, error) {
	u := rt.Dashboard
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	raw, err := f.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	raw = quietnet.Wrap(raw)
	conn := raw
	if u.Scheme == "https" {
		cfg, err := pki.MemberTLS(rt.ClusterCert, rt.ClusterKey)
		if err != nil {
			raw.Close()
			return nil, err
		}
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, f.tlsTimeout)
		err = tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return nil, err
		}
		conn = tc
	}
	return &backendConn{conn: conn, br: bufio.NewReaderSize(conn, 4<<10), bw: bufio.NewWriterSize(conn, 4<<10),
		target: u.Scheme + "://" + u.Host, cert: bytes.Clone(rt.ClusterCert)}, nil
}

// errNoAnswer marks a failure before any byte of an answer arrived: on a
// reused connection the scheduler may have closed it meanwhile, and the
// (idempotent) request is sent again on a new one.
var errNoAnswer = errors.New("no answer")

// serve forwards r to the cluster's dashboard and copies the answer to w.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, cluster string, rt routes.Route) {
	ctx := r.Context()
	c := f.get(cluster, rt)
	reused := c != nil
	for {
		if c == nil {
			var err error
			if c, err = f.dial(ctx, rt); err != nil {
				f.onBackendError(w, r, err)
				return
			}
		}
		// A client that goes away cancels the request: unblock whatever
		// waits on the scheduler. The connection is not reused after.
		conn := c.conn
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
		resp, err := f.roundTrip(ctx, c, r, rt)
		if err != nil {
			stop()
			c.conn.Close()
			if reused && errors.Is(err, errNoAnswer) && ctx.Err() == nil {
				c, reused = nil, false
				continue
			}
			f.onBackendError(w, r, err)
			return
		}
		if f.answer(w, c, resp, stop) {
			f.put(cluster, c)
		} else {
			c.conn.Close()
		}
		return
	}
}

// roundTrip writes r's request line and headers to c and reads the
// answer's status line and headers.
func (f *forwarder) roundTrip(ctx context.Context, c *backendConn, r *http.Request, rt routes.Route) (*http.Response, error) {
	writeRequest(c.bw, r, rt.Dashboard)
	if err := c.bw.Flush(); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	// Deadlines are set, then the context checked: a cancellation's
	// deadline in the past is never overwritten unnoticed.
	_ = c.conn.SetReadDeadline(f.now().Add(f.headerTimeout))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	for range 8 {
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("the dashboard switched protocols on a request that asked for no upgrade")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue // informational (103 Early Hints): not passed on; the answer follows
		}
		_ = c.conn.SetReadDeadline(time.Time{})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return resp, nil
	}
	return nil, errors.New("the dashboard sent too many informational answers")
}

// answer copies resp to w and says whether c may serve another request:
// the answer ended cleanly and the client is still there.
func (f *forwarder) answer(w http.ResponseWriter, c *backendConn, resp *http.Response, stop func() bool) bool {
	removeHopByHop(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = append(h[k], vv...)
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	flush := resp.ContentLength == -1 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	buf := f.bufs.Get()
	defer f.bufs.Put(buf)
	var failed bool
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				failed = true
				break
			}
			if flush {
				_ = http.NewResponseController(w).Flush()
			}
		}
		if err != nil {
			failed = err != io.EOF
			break
		}
	}
	if failed {
		stop()
		c.conn.Close()
		// As httputil.ReverseProxy does: a half-sent answer must not look whole.
		panic(http.ErrAbortHandler)
	}
	for k, vv := range resp.Trailer {
		if len(resp.Trailer) != announced {
			k = http.TrailerPrefix + k
		}
		h[k] = vv
	}
	resp.Body.Close()
	return stop() && !resp.Close && c.br.Buffered() == 0
}

// writeRequest writes r's request line and headers for the dashboard at
// u: the client's headers less hop-by-hop ones and the gateway's own
// credentials, with X-Forwarded-For, -Host and -Proto set (as
// ProxyRequest.SetXForwarded does) and a same-origin Origin rewritten (see
// DashboardHandler).
func writeRequest(bw *bufio.Writer, r *http.Request, u *url.URL) {
	host := u.Host
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	connTokens := r.Header["Connection"]
	for k, vv := range r.Header {
		switch k {
		case "Host", "Authorization", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
			"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
			"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
			continue
		case "Cookie":
			writeCookies(bw, vv)
			continue
		case "Origin":
			if len(vv) > 0 {
				if o, err := url.Parse(vv[0]); err == nil && o.Host != "" && strings.EqualFold(o.Host, r.Host) {
					writeHeader(bw, k, u.Scheme+"://"+host)
					continue
				}
			}
		}
		if listed(connTokens, k) {
			continue
		}
		for _, v := range vv {
			writeHeader(bw, k, v)
		}
	}
	if tokensContain(r.Header["Te"], "trailers") {
		writeHeader(bw, "Te", "trailers")
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		writeHeader(bw, "X-Forwarded-For", ip)
	}
	writeHeader(bw, "X-Forwarded-Host", r.Host)
	if r.TLS == nil {
		writeHeader(bw, "X-Forwarded-Proto", "http")
	} else {
		writeHeader(bw, "X-Forwarded-Proto", "https")
	}
	bw.WriteString("\r\n")
}

// writeHeader writes one header line; a value with a line break (which
// net/http's server never lets through) is dropped rather than split.
func writeHeader(bw *bufio.Writer, k, v string) {
	if strings.ContainsAny(v, "\r\n") || strings.ContainsAny(k, "\r\n: ") {
		return
	}
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// writeCookies writes the Cookie headers without the gateway's session
// cookie, leaving every other byte as the browser sent it (removeCookie).
func writeCookies(bw *bufio.Writer, vals []string) {
	for _, v := range vals {
		if !strings.Contains(v, auth.SessionCookie) {
			writeHeader(bw, "Cookie", v)
			continue
		}
		parts := strings.Split(v, ";")
		kept := parts[:0]
		for _, p := range parts {
			if n, _, _ := strings.Cut(strings.TrimSpace(p), "="); n != auth.SessionCookie {
				kept = append(kept, p)
			}
		}
		if joined := strings.TrimSpace(strings.Join(kept, ";")); joined != "" {
			writeHeader(bw, "Cookie", joined)
		}
	}
}

// hopByHop are the headers of one connection, not of the message.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop removes hop-by-hop headers, and those the Connection
// header names, from an answer.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// listed says whether a Connection header names k.
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), k) {
				return true
			}
		}
	}
	return false
}

func tokensContain(vals []string, tok string) bool { return listed(vals, tok) }
