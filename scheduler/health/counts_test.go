package health

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// countsServer answers counts.json for cluster c1 and counts the
// connections it accepted and saw closed.
type countsServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountsServer(t *testing.T, h http.HandlerFunc) *countsServer {
	t.Helper()
	s := &countsServer{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/clusters/c1/json/counts.json" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, `{"workers": 2, "processing": 1, "clients": 1}`)
		}
	}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestCountsPoolKeepsOneConnection: the health checks of a cluster reuse
// one connection; a new address gets a new one, and Drop closes it.
func TestCountsPoolKeepsOneConnection(t *testing.T) {
	srv := newCountsServer(t, nil)
	p := newCountsPool()
	cl := &store.Cluster{Name: "c1", DashboardAddress: srv.URL}
	for range 5 {
		c, err := p.counts(t.Context(), cl)
		if err != nil || c.Workers != 2 || c.Processing != 1 {
			t.Fatalf("counts = %+v, %v; want 2 workers, 1 processing", c, err)
		}
	}
	if n := srv.opened.Load(); n != 1 {
		t.Errorf("5 checks opened %d connections, want 1", n)
	}

	other := newCountsServer(t, nil)
	moved := &store.Cluster{Name: "c1", DashboardAddress: other.URL}
	if _, err := p.counts(t.Context(), moved); err != nil {
		t.Fatal(err)
	}
	if other.opened.Load() != 1 {
		t.Errorf("the new address got %d connections, want 1", other.opened.Load())
	}
	waitFor(t, "the old address's connection to close", func() bool { return srv.closed.Load() == 1 })

	p.Drop("c1")
	waitFor(t, "Drop to close the connection", func() bool { return other.closed.Load() == 1 })
	if p.Len() != 0 {
		t.Errorf("%d entries after Drop", p.Len())
	}
}

// TestCountsPoolAsksAgainOnANewConnection: a scheduler that closed the
// kept connection while it was idle is asked again on a new one, within
// the same check.
func TestCountsPoolAsksAgainOnANewConnection(t *testing.T) {
	// A server that answers one request per connection and then closes
	// it without saying so (no "Connection: close").
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)               // runs last:
	t.Cleanup(func() { ln.Close() }) // this ends the accept loop
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			r := bufio.NewReader(conn)
			if _, err := http.ReadRequest(r); err == nil {
				body := `{"workers": 4}`
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}
			conn.Close()
		}
	}()
	p := newCountsPool()
	cl := &store.Cluster{Name: "c1", DashboardAddress: "http://" + ln.Addr().String()}
	for i := range 3 {
		c, err := p.counts(t.Context(), cl)
		if err != nil || c.Workers != 4 {
			t.Fatalf("check %d: %+v, %v; want 4 workers", i, c, err)
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections for 3 checks, want 3", n)
	}
}

// TestCountsPoolErrors: every way a check fails says why, and leaves no
// connection that would answer the next check with the wrong bytes.
func TestCountsPoolErrors(t *testing.T) {
	big := newCountsServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"workers": 1, "pad": "`+strings.Repeat("x", countsMax)+`"}`)
	})
	missing := newCountsServer(t, http.NotFound)
	garbled := newCountsServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") })
	for _, tc := range []struct {
		name, addr, want string
		cert             []byte
	}{
		{"no address", "", "no dashboard address", nil},
		{"other scheme", "ftp://127.0.0.1:1", "neither http nor https", nil},
		{"no host", "http://", "no host", nil},
		{"https without a certificate", "https://127.0.0.1:1", "certificate", nil},
		{"not found", missing.URL, "404", nil},
		{"too large", big.URL, "larger than", nil},
		{"not json", garbled.URL, "counts:", nil},
		{"nobody listening", "http://" + closedAddr(t), "refused", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCountsPool()
			cl := &store.Cluster{Name: "c1", DashboardAddress: tc.addr, TLSCert: tc.cert}
			for range 2 { // the second check meets what the first left
				if _, err := p.counts(t.Context(), cl); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want one saying %q", err, tc.want)
				}
			}
		})
	}
}

// TestCountsPoolEndsWithTheContext: a scheduler that accepts and never
// answers holds a check until its context ends, not longer.
func TestCountsPoolEndsWithTheContext(t *testing.T) {
	release := make(chan struct{})
	hung := newCountsServer(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	p := newCountsPool()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.counts(ctx, &store.Cluster{Name: "c1", DashboardAddress: hung.URL})
		done <- err
	}()
	waitFor(t, "the request to reach the scheduler", func() bool { return hung.opened.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a check whose context ended succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the check went on after its context ended")
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitFor polls cond (bounded) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
