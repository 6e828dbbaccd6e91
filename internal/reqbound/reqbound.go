// Package reqbound bounds reading request bodies until the request is
// authenticated. Anyone may open a connection and start a request; a body
// sent before its credentials were checked (a sign-in form, say) is small
// and arrives quickly, so a slow or large one is cut short instead of
// holding the connection for the authenticated bound (uploads of user
// code). Handlers call Authenticated once the credentials are good.
package reqbound

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds are the limits on reading a request's body.
type Bounds struct {
	// Unauthenticated is how long a body may take to arrive, from the
	// handler's start, until the request is authenticated.
	Unauthenticated time.Duration
	// MaxUnauthenticated is the most bytes a body may have until the
	// request is authenticated.
	MaxUnauthenticated int64
	// Authenticated is how long an authenticated body may take, from the
	// authentication. Requests without a body keep the server's
	// ReadTimeout, which should be the same. Once a body has been read to
	// its end, neither applies.
	Authenticated time.Duration
}

// Handler applies b to the bodies of the requests h serves. It must wrap
// the server's own ResponseWriter (outermost), which sets the
// connection's read deadline.
func Handler(b Bounds, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _ := r.Context().Value(connKey{}).(Conn)
		if conn == nil {
			conn = noConn{}
		}
		if r.Body == nil || r.Body == http.NoBody {
			conn.Serving(true)
			defer conn.Serving(false)
			h.ServeHTTP(w, r)
			return
		}
		body := &body{rd: r.Body, b: b, rc: http.NewResponseController(w), conn: conn}
		defer body.finish()
		_ = body.rc.SetReadDeadline(time.Now().Add(b.Unauthenticated))
		// A copy: the server's own request keeps its body, by which it
		// decides after the handler whether to read what is left (up to
		// 256 KiB) or close the connection. Given this wrapper instead,
		// it would read a slow body it need not, delaying the answer.
		r = r.WithContext(context.WithValue(r.Context(), key{}, body))
		r.Body = body
		h.ServeHTTP(w, r)
	})
}

// Authenticated lifts the unauthenticated bounds from r's body: from now
// on it may take Bounds.Authenticated, and be of any size. Call it once
// the request's credentials have been checked and accepted, before its
// body is read. Requests Handler did not see are left alone.
func Authenticated(r *http.Request) {
	b, ok := r.Context().Value(key{}).(*body)
	if !ok || !b.authed.CompareAndSwap(false, true) {
		return
	}
	b.serving()
	if !b.ended.Load() {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.b.Authenticated))
	}
}

// Conn is told whether its connection serves a request (its handler runs,
// and waits for nothing from an unauthenticated client) or waits on its
// client: for headers, or for a body sent without accepted credentials.
// A connection that waits may be closed to make room (proxy).
type Conn interface{ Serving(on bool) }

// WithConn makes Handler tell c about the requests of its connection
// (for http.Server.ConnContext).
func WithConn(ctx context.Context, c Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

type noConn struct{}

func (noConn) Serving(bool) {}

type (
	key     struct{}
	connKey struct{}
)

// body reads a request body under the bounds.
type body struct {
	rd     io.ReadCloser
	b      Bounds
	rc     *http.ResponseController
	conn   Conn
	read   int64
	authed atomic.Bool
	ended  atomic.Bool
	// The body's end and the authentication may come from different
	// goroutines (a proxy's transport reads the body), even after the
	// handler returned: mu orders what conn is told.
	mu       sync.Mutex
	on, done bool
}

// serving tells conn that the request serves, once, unless the handler
// has returned.
func (b *body) serving() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on && !b.done {
		b.on = true
		b.conn.Serving(true)
	}
}

// finish tells conn the request is over (the handler returned).
func (b *body) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	if b.on {
		b.on = false
		b.conn.Serving(false)
	}
}

func (b *body) Read(p []byte) (int, error) {
	limited := !b.authed.Load()
	if limited {
		// One byte more than allowed tells a body at the limit from one
		// over it.
		if room := b.b.MaxUnauthenticated - b.read + 1; int64(len(p)) > room {
			p = p[:max(room, 0)]
		}
	}
	n, err := b.rd.Read(p)
	b.read += int64(n)
	if limited && b.read > b.b.MaxUnauthenticated {
		n -= int(b.read - b.b.MaxUnauthenticated)
		b.read = b.b.MaxUnauthenticated
		return n, &http.MaxBytesError{Limit: b.b.MaxUnauthenticated}
	}
	if err == io.EOF {
		// All of it is here: net/http has cleared the deadline for its
		// watch on the connection, which a deadline set now would end,
		// and with it the request's context.
		b.ended.Store(true)
		b.serving()
	}
	return n, err
}

func (b *body) Close() error { return b.rd.Close() }
