package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/proxy/routes"
)

// fwdFixture is a dashboard backend that counts its connections, behind
// the dashboard proxy as cluster "k" of alice.
type fwdFixture struct {
	p       *harness
	backend string // its URL
	opened  atomic.Int64
	closed  atomic.Int64
	srv     *http.Server
	release chan struct{} // lets /stream finish
	held    chan struct{} // /hold has its request
	gone    chan struct{} // /hold saw its request cancelled
	client  *http.Client
	base    string
}

func startFwd(t *testing.T) *fwdFixture {
	t.Helper()
	f := &fwdFixture{release: make(chan struct{}), held: make(chan struct{}, 1), gone: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/clusters/k/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "page")
	})
	mux.HandleFunc("/clusters/k/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	mux.HandleFunc("/clusters/k/stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		select {
		case <-f.release:
			io.WriteString(w, "second")
		case <-time.After(ioTimeout):
			io.WriteString(w, "late") // the client never saw "first" on its own
		}
	})
	mux.HandleFunc("/clusters/k/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
	})
	mux.HandleFunc("/clusters/k/short", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		// Chunked, cut off before the last chunk: passed on as it came,
		// it would end cleanly at the client.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		c.Close()
	})
	mux.HandleFunc("/clusters/k/hold", func(w http.ResponseWriter, r *http.Request) {
		f.held <- struct{}{}
		select {
		case <-r.Context().Done():
			f.gone <- struct{}{}
		case <-time.After(ioTimeout):
		}
	})
	mux.HandleFunc("/clusters/k/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "after hints")
	})
	mux.HandleFunc("/clusters/k/hop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Private")
		w.Header().Set("X-Private", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Saw-Client-Hop", r.Header.Get("X-Client-Hop"))
		w.Header().Set("X-Saw-Forwarded", r.Header.Get("Forwarded"))
		io.WriteString(w, "hop")
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: ioTimeout, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			f.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			f.closed.Add(1)
		}
	}}
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { f.srv.Close() })
	f.backend = "http://" + ln.Addr().String()
	rt := routes.New()
	rt.SetRoute("k", "alice", "127.0.0.1:1", f.backend, nil, nil)
	f.p = startProxy(t, Config{AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(testAuthn))
		return mux
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{Transport: tr, Timeout: ioTimeout}
	f.base = "http://" + f.p.addr + "/clusters/k/"
	return f
}

func (f *fwdFixture) do(t *testing.T, method, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.base+path, nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return resp, string(b)
}

// TestForwarderKeepsConnections: requests to a dashboard share one
// connection to it, kept until the cluster's route goes away.
func TestForwarderKeepsConnections(t *testing.T) {
	f := startFwd(t)
	for i := range 5 {
		if resp, body := f.do(t, "GET", "page", nil); resp.StatusCode != 200 || body != "page" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	resp, body := f.do(t, "HEAD", "page", nil)
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 4 {
		t.Fatalf("HEAD: %d %q, length %d", resp.StatusCode, body, resp.ContentLength)
	}
	if n := f.opened.Load(); n != 1 {
		t.Fatalf("6 requests opened %d connections to the dashboard, want 1", n)
	}
	f.p.rt.DeleteRoute("k")
	waitFor(t, ioTimeout, "the idle connection closed once the route is gone", func() bool { return f.closed.Load() == 1 })
}

// TestForwarderReconnects: a kept connection that the dashboard closed
// meanwhile costs the client nothing (the request is sent again on a new
// one), and an answer with "Connection: close" is not followed by another
// request on its connection.
func TestForwarderReconnects(t *testing.T) {
	f := startFwd(t)
	f.do(t, "GET", "page", nil)
	f.srv.SetKeepAlivesEnabled(false) // closes the idle connection
	waitFor(t, ioTimeout, "the dashboard closed its idle connection", func() bool { return f.closed.Load() == 1 })
	f.srv.SetKeepAlivesEnabled(true)
	if resp, body := f.do(t, "GET", "page", nil); resp.StatusCode != 200 || body != "page" {
		t.Fatalf("after the dashboard closed the kept connection: %d %q", resp.StatusCode, body)
	}
	for i := range 2 {
		if resp, body := f.do(t, "GET", "close", nil); resp.StatusCode != 200 || body != "bye" {
			t.Fatalf("close %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// page, page again (new), close (reusing that one, which then closes), close (new).
	if n := f.opened.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

// TestForwarderAnswers: streamed answers reach the client as they come,
// trailers and informational answers are handled, hop-by-hop headers do
// not cross in either direction, and a truncated answer is not passed off
// as whole.
func TestForwarderAnswers(t *testing.T) {
	f := startFwd(t)

	t.Run("streamed", func(t *testing.T) {
		req, _ := http.NewRequest("GET", f.base+"stream", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, len("first"))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
			t.Fatalf("first part before the rest was written: %q %v", first, err)
		}
		close(f.release)
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "second" {
			t.Fatalf("rest: %q %v", rest, err)
		}
	})

	t.Run("trailers", func(t *testing.T) {
		req, _ := http.NewRequest("GET", f.base+"trailer", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "body" || resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("%q %v, trailer %v", body, err, resp.Trailer)
		}
	})

	t.Run("early hints", func(t *testing.T) {
		if resp, body := f.do(t, "GET", "hints", nil); resp.StatusCode != 200 || body != "after hints" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})

	t.Run("hop-by-hop headers", func(t *testing.T) {
		resp, body := f.do(t, "GET", "hop", map[string]string{"Connection": "X-Client-Hop", "X-Client-Hop": "1", "Forwarded": "for=6.6.6.6"})
		if resp.StatusCode != 200 || body != "hop" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		for _, h := range []string{"X-Private", "Keep-Alive", "X-Saw-Client-Hop", "X-Saw-Forwarded"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("%s crossed the proxy: %q", h, v)
			}
		}
	})

	t.Run("truncated", func(t *testing.T) {
		req, _ := http.NewRequest("GET", f.base+"short", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := f.client.Do(req)
		if err != nil {
			return // refused outright: not passed off as whole either
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("a truncated answer reached the client as whole: %d %q", resp.StatusCode, body)
		}
	})
}

// TestForwarderClientGone: a client that gives up cancels the request at
// the dashboard too (its connection is closed, not kept).
func TestForwarderClientGone(t *testing.T) {
	f := startFwd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.base+"hold", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := f.client.Do(req); !errors.Is(err, context.Canceled) {
			t.Errorf("client: %v", err)
		}
	})
	select {
	case <-f.held:
	case <-time.After(ioTimeout):
		t.Fatal("the dashboard never got the request")
	}
	cancel()
	select {
	case <-f.gone:
	case <-time.After(ioTimeout):
		t.Fatal("the dashboard's request was not cancelled when the client went away")
	}
	wg.Wait()
	if resp, body := f.do(t, "GET", "page", nil); resp.StatusCode != 200 || body != "page" {
		t.Fatalf("next request: %d %q", resp.StatusCode, body)
	}
}

// TestForwardable: only plain GET and HEAD take the fast path.
func TestForwardable(t *testing.T) {
	for _, tc := range []struct {
		method string
		hdr    map[string]string
		body   string
		want   bool
	}{
		{"GET", nil, "", true},
		{"HEAD", nil, "", true},
		{"POST", nil, "x", false},
		{"GET", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, "", false},
		{"GET", map[string]string{"Expect": "100-continue"}, "", false},
		{"GET", nil, "a body", false},
		{"OPTIONS", nil, "", false},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		r, _ := http.NewRequest(tc.method, "http://gw/clusters/k/", body)
		if r.Body == nil {
			r.Body = http.NoBody
		}
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		if got := forwardable(r); got != tc.want {
			t.Errorf("%s %v body %q: %v, want %v", tc.method, tc.hdr, tc.body, got, tc.want)
		}
	}
}
