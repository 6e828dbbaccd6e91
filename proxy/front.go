package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// front serves the dashboards' plain GET and HEAD requests on the
// gateway's HTTP connections itself, with the http.Server's own handler
// and timeouts. net/http's server starts, for every request, a goroutine
// that reads ahead to notice a client going away, and wakes it again when
// the handler returns; on two cores those wake-ups cost about a third of
// a proxied dashboard request (figure 4 of integration/bench). Everything
// else (the API, bodies, websocket upgrades, HTTP/1.0, heads over
// frontHeadMax, anything unusual) is handed to net/http at the first such
// request, unread, together with the rest of the connection: the front
// answers only requests that need none of what it leaves out.
//
// What it does differently: a request's context is cancelled when its
// client goes away only once the handler has run for frontWatchAfter (a
// dashboard page takes a millisecond or two; the watch costs a goroutine
// and two wake-ups), and 1xx answers from a handler are not sent.
type front struct {
	srv     *http.Server
	handOff func(net.Conn)
	log     func(msg string, args ...any)
	base    context.Context

	served atomic.Int64 // requests answered (tests)

	mu       sync.Mutex
	conns    map[*frontConn]bool // true while waiting for a request
	draining bool
	done     chan struct{} // closed when draining and no connection is left
}

// frontHeadMax bounds the request head the front reads; a longer one
// (large cookies, say) goes to net/http, which allows a megabyte.
const frontHeadMax = 8 << 10

// frontBodyBuffer is how much of an answer is held back before its head
// is written: an answer that ends within it gets a Content-Length, a
// longer one without one is sent chunked (net/http holds 2 KiB).
const frontBodyBuffer = 4 << 10

type frontConn struct {
	c   net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	tls *tls.ConnectionState
}

// handedConn is a connection the front gave to net/http: the bytes the
// front read but did not serve come first, and a TLS connection's state
// travels with it (net/http sets r.TLS only for a *tls.Conn it was given;
// the handler that SetHTTPServer installs sets it from this).
type handedConn struct {
	prefixConn
	tls *tls.ConnectionState
}

type tlsStateKey struct{}

// SetHTTPServer makes the proxy serve the dashboards' plain GET and HEAD
// requests itself with hs's handler, base context and timeouts; hs serves
// the listener from HTTPListener as before and gets every other request.
// It changes hs: ConnContext and Handler are wrapped so that a TLS
// connection handed over after the front read from it still has r.TLS
// set. Call before hs.Serve and Serve; ShutdownHTTP drains what the front
// serves, as hs.Shutdown does its own.
func (s *Server) SetHTTPServer(hs *http.Server) {
	base := context.Background()
	if hs.BaseContext != nil {
		base = hs.BaseContext(s.http)
	}
	f := &front{srv: hs, handOff: s.toNetHTTP, log: s.log.Warn, conns: map[*frontConn]bool{}, done: make(chan struct{}),
		base: context.WithValue(base, http.ServerContextKey, hs)}
	connCtx := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if hc, ok := c.(*handedConn); ok && hc.tls != nil {
			ctx = context.WithValue(ctx, tlsStateKey{}, hc.tls)
		}
		if connCtx != nil {
			ctx = connCtx(ctx, c)
		}
		return ctx
	}
	inner := hs.Handler
	if inner == nil {
		inner = http.DefaultServeMux
	}
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		inner.ServeHTTP(w, r)
	})
	s.front = f
}

// ShutdownHTTP stops the front taking requests: idle connections close at
// once, busy ones after their answer. It returns when none is left or ctx
// ends (the rest are then closed).
func (s *Server) ShutdownHTTP(ctx context.Context) {
	f := s.front
	if f == nil {
		return
	}
	f.mu.Lock()
	if !f.draining {
		f.draining = true
		for fc, idle := range f.conns {
			if idle {
				fc.c.Close()
			}
		}
		if len(f.conns) == 0 {
			close(f.done)
		}
	}
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		f.mu.Lock()
		for fc := range f.conns {
			fc.c.Close()
		}
		f.mu.Unlock()
	}
}

func (f *front) track(fc *frontConn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, fc)
		if f.draining && len(f.conns) == 0 {
			close(f.done)
		}
		return false
	}
	if f.draining {
		return false
	}
	f.conns[fc] = false
	return true
}

func (f *front) isDraining() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining
}

// setIdle marks fc waiting for a request, or busy with one; false when
// the front is draining and fc should close.
func (f *front) setIdle(fc *frontConn, idle bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.conns[fc] = idle
	return true
}

// headTimeout is net/http's for a request head (and a TLS handshake).
func (f *front) headTimeout() time.Duration {
	if d := f.srv.ReadHeaderTimeout; d > 0 {
		return d
	}
	return f.srv.ReadTimeout
}

// idleTimeout is net/http's for waiting for the next request.
func (f *front) idleTimeout() time.Duration {
	if d := f.srv.IdleTimeout; d > 0 {
		return d
	}
	return f.srv.ReadTimeout
}

func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// serve answers c's requests until one is for net/http, c ends or breaks,
// or the front drains.
func (f *front) serve(c net.Conn) {
	fc := &frontConn{c: c}
	if !f.track(fc, true) {
		c.Close()
		return
	}
	handed := false
	defer func() {
		f.track(fc, false)
		if !handed {
			c.Close()
		}
	}()
	if tc, ok := c.(*tls.Conn); ok {
		// As net/http bounds it: by the shortest of its timeouts.
		_ = c.SetDeadline(deadline(f.handshakeTimeout()))
		if err := tc.HandshakeContext(f.base); err != nil {
			return
		}
		_ = c.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		fc.tls = &st
	}
	fc.br = bufio.NewReaderSize(c, frontHeadMax)
	wait := f.headTimeout()
	for {
		if !f.setIdle(fc, true) {
			return
		}
		_ = c.SetReadDeadline(deadline(wait))
		_, err := fc.br.Peek(1)
		if !f.setIdle(fc, false) || err != nil {
			return
		}
		wait = f.idleTimeout()
		_ = c.SetReadDeadline(deadline(f.headTimeout()))
		n, err := headLen(fc.br)
		if err != nil {
			return
		}
		var req *http.Request
		if n > 0 {
			req = f.request(fc, n)
		}
		if req == nil {
			// Unread from here on: net/http reads the same bytes.
			_ = c.SetReadDeadline(time.Time{})
			buffered, _ := fc.br.Peek(fc.br.Buffered())
			handed = true
			f.handOff(&handedConn{prefixConn: prefixConn{Conn: c, prefix: bytes.Clone(buffered)}, tls: fc.tls})
			return
		}
		if !f.answer(fc, req) {
			return
		}
	}
}

func (f *front) handshakeTimeout() time.Duration {
	var d time.Duration
	for _, t := range []time.Duration{f.srv.ReadHeaderTimeout, f.srv.ReadTimeout, f.srv.WriteTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d
}

// headLen is the length of the request head at the start of br, blank line
// included, reading until it is there; 0 if it would not fit.
func headLen(br *bufio.Reader) (int, error) {
	for {
		b, _ := br.Peek(br.Buffered())
		if i := headEnd(b); i > 0 {
			return i, nil
		}
		if len(b) >= frontHeadMax {
			return 0, nil
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return 0, err
		}
	}
}

// headEnd is where the head in b ends (after its blank line, with or
// without CR, as textproto reads it), or 0.
func headEnd(b []byte) int {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
	return 0
}

// request parses the n-byte head at the start of fc.br if the front
// serves it, consuming it; nil (nothing consumed) if net/http should.
func (f *front) request(fc *frontConn, n int) *http.Request {
	head, _ := fc.br.Peek(n)
	if !bytes.HasPrefix(head, []byte("GET "+DashboardPrefix)) && !bytes.HasPrefix(head, []byte("HEAD "+DashboardPrefix)) {
		return nil
	}
	req, err := http.ReadRequest(bufio.NewReaderSize(bytes.NewReader(head), n))
	if err != nil || req.ProtoMajor != 1 || req.ProtoMinor != 1 || req.URL.Host != "" || !forwardable(req) {
		return nil
	}
	// What net/http's server checks beyond http.ReadRequest, which keeps
	// only the first Host header (in req.Host).
	if hostLines(head) != 1 || !httpguts.ValidHostHeader(req.Host) {
		return nil
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil
			}
		}
	}
	_, _ = fc.br.Discard(n)
	req.RemoteAddr = fc.c.RemoteAddr().String()
	req.TLS = fc.tls
	return req
}

// frontWatchAfter is how long a handler runs before the front watches its
// client for going away.
const frontWatchAfter = 100 * time.Millisecond

// clientWatch cancels a request whose client goes away while the handler
// runs: after frontWatchAfter, a goroutine waits for the connection to
// end (or for the client's next request, which stays buffered).
type clientWatch struct {
	fc       *frontConn
	timer    *time.Timer
	mu       sync.Mutex
	finished bool
	started  bool
	done     chan struct{}
}

func watchClient(fc *frontConn, cancel context.CancelFunc) *clientWatch {
	cw := &clientWatch{fc: fc, done: make(chan struct{})}
	cw.timer = time.AfterFunc(frontWatchAfter, func() {
		cw.mu.Lock()
		if cw.finished {
			cw.mu.Unlock()
			return
		}
		cw.started = true
		_ = fc.c.SetReadDeadline(time.Time{}) // the head's is still set
		cw.mu.Unlock()
		defer close(cw.done)
		if _, err := fc.br.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			cancel()
		}
	})
	return cw
}

// stop ends the watch; once it returns, the reader is the front's again.
func (cw *clientWatch) stop() {
	if cw.timer.Stop() {
		return
	}
	cw.mu.Lock()
	cw.finished = true
	started := cw.started
	cw.mu.Unlock()
	if started {
		_ = cw.fc.c.SetReadDeadline(time.Unix(1, 0))
		<-cw.done
	}
}

// hostLines counts the Host header lines in a request head.
func hostLines(head []byte) int {
	n := 0
	for line := range bytes.Lines(head) {
		if len(line) > 5 && line[4] == ':' && bytes.EqualFold(line[:4], []byte("host")) {
			n++
		}
	}
	return n
}

// answer runs the handler for req and writes its answer; false if the
// connection must close after it.
func (f *front) answer(fc *frontConn, req *http.Request) (keep bool) {
	ctx, cancel := context.WithCancel(context.WithValue(f.base, http.LocalAddrContextKey, fc.c.LocalAddr()))
	defer cancel()
	req = req.WithContext(ctx)
	if fc.bw == nil {
		fc.bw = bufio.NewWriterSize(fc.c, 4<<10)
	}
	w := &frontWriter{bw: fc.bw, req: req, h: http.Header{}, contentLength: -1, closeAfter: req.Close, draining: f.isDraining}
	defer func() {
		if v := recover(); v != nil {
			// As net/http does: the connection ends; a half-written answer
			// must not look whole. ErrAbortHandler is the quiet way out.
			if v != http.ErrAbortHandler {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				f.log("http: panic serving", "remote", req.RemoteAddr, "panic", fmt.Sprint(v), "stack", string(buf))
			}
			keep = false
		}
	}()
	f.served.Add(1)
	defer watchClient(fc, cancel).stop() // before the next request is read
	f.srv.Handler.ServeHTTP(w, req)
	if err := w.finish(); err != nil {
		return false
	}
	return !w.closeAfter
}

// frontWriter is the http.ResponseWriter of a request the front serves:
// HTTP/1.1, the head written when the answer ends or outgrows
// frontBodyBuffer or is flushed, as net/http's response does.
type frontWriter struct {
	bw  *bufio.Writer
	req *http.Request
	h   http.Header // the handler's
	// From WriteHeader on.
	status        int
	sent          http.Header // h as it was at WriteHeader
	contentLength int64       // -1: not given
	noBody        bool        // HEAD, or a status without a body
	// From the head's writing on.
	headDone   bool
	chunked    bool
	written    int64
	held       []byte // body (or, for HEAD, what would be) before the head
	closeAfter bool
	err        error
	draining   func() bool
}

func (w *frontWriter) Header() http.Header { return w.h }

func (w *frontWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 || code < 200 {
		return // a repeat, or informational (not sent)
	}
	w.status = code
	w.sent = w.h.Clone()
	if cl := w.sent.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			w.sent.Del("Content-Length")
		}
	}
	w.noBody = w.req.Method == http.MethodHead || !bodyAllowed(code)
}

func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

func (w *frontWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody && w.req.Method != http.MethodHead {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.headDone {
		if len(w.held)+len(p) <= frontBodyBuffer {
			w.held = append(w.held, p...)
			return len(p), nil
		}
		if w.writeHead(false); w.err != nil {
			return 0, w.err
		}
	}
	w.body(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush sends what was written so far (http.Flusher, and what
// http.ResponseController.Flush calls).
func (w *frontWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headDone {
		w.writeHead(false)
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
}

// body writes p framed as the head said (nothing for HEAD).
func (w *frontWriter) body(p []byte) {
	if len(p) == 0 || w.noBody || w.err != nil {
		return
	}
	if w.chunked {
		_, _ = w.bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		_, _ = w.bw.WriteString("\r\n")
	}
	_, _ = w.bw.Write(p)
	if w.chunked {
		_, w.err = w.bw.WriteString("\r\n")
	}
	if w.err == nil {
		_, w.err = w.bw.Write(nil) // a write error, once the buffer has been sent
	}
}

// writeHead writes the status line and headers, and the body held so far;
// done says the handler has returned (so a held body is all of it).
func (w *frontWriter) writeHead(done bool) {
	w.headDone = true
	h := w.sent
	_, haveType := h["Content-Type"]
	if !haveType && len(w.held) > 0 && bodyAllowed(w.status) && h.Get("Content-Encoding") == "" {
		h.Set("Content-Type", http.DetectContentType(w.held))
	}
	if _, ok := h["Date"]; !ok {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	h.Del("Transfer-Encoding") // the framing is the front's
	_, trailers := h["Trailer"]
	switch {
	case w.contentLength >= 0:
	case done && !trailers && bodyAllowed(w.status) && (w.req.Method != http.MethodHead || len(w.held) > 0):
		w.contentLength = int64(len(w.held))
		h.Set("Content-Length", strconv.FormatInt(w.contentLength, 10))
	case !w.noBody:
		w.chunked = true
		h.Set("Transfer-Encoding", "chunked")
	}
	if tokensContain(h["Connection"], "close") {
		w.closeAfter = true
	} else if w.closeAfter || w.draining() {
		w.closeAfter = true
		h.Set("Connection", "close")
	}
	text := http.StatusText(w.status)
	if text == "" {
		text = "status code " + strconv.Itoa(w.status)
	}
	fmt.Fprintf(w.bw, "HTTP/1.1 %03d %s\r\n", w.status, text)
	var prefixed map[string]bool
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			if prefixed == nil {
				prefixed = map[string]bool{}
			}
			prefixed[k] = true
		}
	}
	if w.err = h.WriteSubset(w.bw, prefixed); w.err != nil {
		return
	}
	_, _ = w.bw.WriteString("\r\n")
	held := w.held
	w.held = nil
	w.body(held)
}

// finish ends the answer once the handler has returned.
func (w *frontWriter) finish() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headDone {
		w.writeHead(true)
	}
	if w.err != nil {
		return w.err
	}
	if w.chunked {
		_, _ = w.bw.WriteString("0\r\n")
		w.writeTrailers()
		_, _ = w.bw.WriteString("\r\n")
	}
	if !w.noBody && w.contentLength >= 0 && w.written < w.contentLength {
		w.closeAfter = true // fewer bytes than announced: the framing is broken
	}
	return w.bw.Flush()
}

// writeTrailers writes the trailers the handler announced in its
// "Trailer" header and those it set with http.TrailerPrefix.
func (w *frontWriter) writeTrailers() {
	t := http.Header{}
	for _, vv := range w.sent["Trailer"] {
		for k := range strings.SplitSeq(vv, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				if v, ok := w.h[k]; ok {
					t[k] = v
				}
			}
		}
	}
	for k, v := range w.h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			t[http.CanonicalHeaderKey(name)] = v
		}
	}
	_ = t.Write(w.bw)
}

// toNetHTTP gives c to the http.Server (closing it if that is shut down).
func (s *Server) toNetHTTP(c net.Conn) {
	if !s.http.deliver(c) {
		c.Close()
	}
}
