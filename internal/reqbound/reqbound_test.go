package reqbound

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// outcome is what the handler saw reading the body.
type outcome struct {
	n       int
	err     error
	ctxDone bool // the request's context ended while the handler waited after the body
}

// serve runs Handler(b, h) on a loopback listener with the server bounds
// the gateway uses, and reports each request's outcome.
func serve(t *testing.T, b Bounds, wait time.Duration) (string, <-chan outcome) {
	t.Helper()
	out := make(chan outcome, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "good" {
			Authenticated(r)
		}
		data, err := io.ReadAll(r.Body)
		o := outcome{n: len(data), err: err}
		if err == nil && wait > 0 {
			select {
			case <-r.Context().Done():
				o.ctxDone = true
			case <-time.After(wait):
			}
		}
		out <- o
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d", len(data))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(b, h), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: b.Authenticated}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), out
}

// Regression test for issue 32 finding 2: a body sent without (good)
// credentials could take the whole two-minute ReadTimeout and be as large
// as the handler would read; authenticated bodies keep the long bound.
func TestBodyBounds(t *testing.T) {
	const short, max = 300 * time.Millisecond, 64
	b := Bounds{Unauthenticated: short, MaxUnauthenticated: max, Authenticated: time.Minute}
	for _, tc := range []struct {
		name      string
		auth      string
		size      int           // Content-Length
		stallAt   int           // bytes sent before a pause (size: none)
		stall     time.Duration // the pause
		wait      time.Duration // the handler's work after the body
		wantN     int
		wantErr   func(error) bool
		wantTimed bool // the handler saw the body time out
	}{
		{name: "unauthenticated slow body is cut at the short bound", size: 40, stallAt: 10, stall: 20 * short, wantN: 10, wantTimed: true},
		{name: "authenticated slow body may pause", auth: "good", size: 40, stallAt: 10, stall: 3 * short, wantN: 40},
		{name: "bad credentials do not lift the bound", auth: "bad", size: 40, stallAt: 10, stall: 20 * short, wantN: 10, wantTimed: true},
		{name: "unauthenticated body over the size bound", size: 1000, stallAt: 1000, wantN: max,
			wantErr: func(err error) bool { var mb *http.MaxBytesError; return errors.As(err, &mb) && mb.Limit == max }},
		{name: "authenticated body of any size", auth: "good", size: 100_000, stallAt: 100_000, wantN: 100_000},
		{name: "a whole unauthenticated body leaves the answer unbounded", size: 40, stallAt: 40, wait: 3 * short, wantN: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, out := serve(t, b, tc.wait)
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			auth := ""
			if tc.auth != "" {
				auth = "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: t\r\n%sContent-Length: %d\r\n\r\n%s", auth, tc.size, strings.Repeat("a", tc.stallAt)); err != nil {
				t.Fatal(err)
			}
			if tc.stallAt < tc.size {
				// The slow client: the rest comes after the pause, unless
				// the server gave up by then.
				select {
				case o := <-out:
					out = replay(o)
				case <-time.After(tc.stall):
				}
				_, _ = io.WriteString(c, strings.Repeat("a", tc.size-tc.stallAt))
			}
			var o outcome
			select {
			case o = <-out:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler did not finish within 30 s")
			}
			timedOut := errors.Is(o.err, os.ErrDeadlineExceeded)
			switch {
			case o.n != tc.wantN:
				t.Fatalf("handler read %d bytes (err %v), want %d", o.n, o.err, tc.wantN)
			case tc.wantTimed != timedOut:
				t.Fatalf("handler's read error %v; timed out: %t, want %t", o.err, timedOut, tc.wantTimed)
			case tc.wantErr != nil && !tc.wantErr(o.err):
				t.Fatalf("handler's read error %v", o.err)
			case tc.wantErr == nil && !tc.wantTimed && o.err != nil:
				t.Fatalf("handler's read error %v, want none", o.err)
			case o.ctxDone:
				t.Fatal("the request's context ended while the handler answered after its body")
			}
			if o.err == nil {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("answered %s", resp.Status)
				}
			}
		})
	}
}

// replay is a channel that yields o again.
func replay(o outcome) <-chan outcome {
	ch := make(chan outcome, 1)
	ch <- o
	return ch
}

// Requests without a body, or served without Handler, are left alone.
func TestAuthenticatedWithoutHandler(t *testing.T) {
	r, err := http.NewRequest(http.MethodGet, "http://t/", nil)
	if err != nil {
		t.Fatal(err)
	}
	Authenticated(r) // no panic, nothing to lift
}

// Regression test: Handler replaced the server's own request's body, so
// after a handler refused a large declared body without reading it (the
// sign-in form's 413) net/http read what was left, slowly sent, up to
// the deadline before answering, instead of answering and closing.
func TestRefusalWithoutReadingAnswersAtOnce(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Deadlines far past the hang bound: only an answer that does not
	// wait for the body arrives within it.
	b := Bounds{Unauthenticated: 5 * time.Minute, MaxUnauthenticated: 64, Authenticated: 5 * time.Minute}
	srv := &http.Server{Handler: Handler(b, h), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: b.Authenticated}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // the hang bound
	if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\nt="); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer while the body was not sent: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("answered %s", resp.Status)
	}
}

// recordingConn records what Handler tells a connection.
type recordingConn struct{ n atomic.Int32 }

func (c *recordingConn) Serving(on bool) {
	if on {
		c.n.Add(1)
	} else {
		c.n.Add(-1)
	}
}

// A connection serves while its handler runs, except while the handler
// waits for a body sent without accepted credentials: such a connection
// waits on its client, and the proxy may close it to make room.
func TestServingMarks(t *testing.T) {
	b := Bounds{Unauthenticated: time.Minute, MaxUnauthenticated: 1 << 20, Authenticated: time.Minute}
	for _, tc := range []struct {
		name        string
		body        string
		auth        bool
		beforeRead  int32 // marks when the handler starts
		afterRead   int32
		afterHandle int32
	}{
		{name: "no body", beforeRead: 1, afterRead: 1},
		{name: "unauthenticated body", body: "t=x", beforeRead: 0, afterRead: 1},
		{name: "authenticated body", body: "{}", auth: true, beforeRead: 1, afterRead: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &recordingConn{}
			var before, after int32
			h := Handler(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.auth {
					Authenticated(r)
				}
				before = conn.n.Load()
				_, _ = io.ReadAll(r.Body)
				after = conn.n.Load()
			}))
			var body io.Reader = http.NoBody
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r := httptest.NewRequest(http.MethodPost, "/x", body)
			h.ServeHTTP(httptest.NewRecorder(), r.WithContext(WithConn(r.Context(), conn)))
			if before != tc.beforeRead || after != tc.afterRead || conn.n.Load() != tc.afterHandle {
				t.Fatalf("serving marks %d before the body, %d after, %d after the handler; want %d %d %d",
					before, after, conn.n.Load(), tc.beforeRead, tc.afterRead, tc.afterHandle)
			}
		})
	}
}

// A body read to its end after the handler returned (a proxy's transport
// may) does not mark the connection serving for good.
func TestLateReadLeavesConnWaiting(t *testing.T) {
	conn := &recordingConn{}
	var late io.Reader
	h := Handler(Bounds{Unauthenticated: time.Minute, MaxUnauthenticated: 64, Authenticated: time.Minute},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { late = r.Body }))
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("t=x"))
	h.ServeHTTP(httptest.NewRecorder(), r.WithContext(WithConn(r.Context(), conn)))
	if _, err := io.ReadAll(late); err != nil {
		t.Fatal(err)
	}
	if got := conn.n.Load(); got != 0 {
		t.Fatalf("serving marks %d after the handler returned and its body was read; want 0", got)
	}
}
