package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/park"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// Parking: a pair quiet for ParkAfter loses its goroutines and is watched
// by the parker until either side speaks. These tests drive a pair past the
// handshake check over plain TCP (a real ClientHello, a byte from the
// "scheduler", then one application-data record from the client), so that
// every byte after that is under the test's control.

// parked is how many pairs the parker holds.
func (s *Server) parked() int {
	return s.parker.Len()
}

// parkedPair is a client and a scheduler connection joined by the proxy,
// past the handshake check.
type parkedPair struct {
	client  *net.TCPConn
	backend net.Conn
}

// openPassthrough starts a scheduler listener routed as cluster "c1" and
// joins a client to it through p.
func openPassthrough(t *testing.T, p *harness, ln net.Listener) parkedPair {
	t.Helper()
	hello := captureHello(t, SNIPrefix+"c1")
	client := dialRaw(t, p.addr)
	if _, err := client.Write(hello); err != nil {
		t.Fatal(err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(ioTimeout))
	backend, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	_ = backend.SetDeadline(time.Now().Add(30 * time.Second))
	readExactly(t, backend, hello, "the ClientHello at the scheduler")
	writeAll(t, backend, []byte("S")) // the scheduler speaks first
	readExactly(t, client, []byte("S"), "the scheduler's first byte at the client")
	finished := []byte{recordApplicationData, 3, 3, 0, 1, 'f'}
	writeAll(t, client, finished) // ends the handshake check
	readExactly(t, backend, finished, "the client's first record at the scheduler")
	return parkedPair{client: client, backend: backend}
}

func writeAll(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func readExactly(t *testing.T, c net.Conn, want []byte, what string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

// readToEOF reads what is left and checks that the stream then ends.
func readToEOF(t *testing.T, c net.Conn, want []byte, what string) {
	t.Helper()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %q, want %q then the end", what, got, want)
	}
}

func schedulerListener(t *testing.T, rt *routes.Table) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rt.SetRoute("c1", "alice", ln.Addr().String(), "", nil, nil)
	return ln
}

// A parked pair carries bytes either way as soon as they come (each wakes
// it), and passes a half-close on: the scheduler still answers after the
// client's FIN, and the pair is forgotten once both sides are done.
func TestParkedPairResumes(t *testing.T) {
	rt := routes.New()
	ln := schedulerListener(t, rt)
	p := startProxy(t, Config{ParkAfter: 50 * time.Millisecond}, rt, nil)
	pp := openPassthrough(t, p, ln)
	waitParked := func(what string) {
		waitFor(t, ioTimeout, "the pair to park "+what, func() bool { return p.srv.parked() == 1 })
	}

	waitParked("after the handshake")
	writeAll(t, pp.client, []byte("ping"))
	readExactly(t, pp.backend, []byte("ping"), "the client's bytes after parking")
	writeAll(t, pp.backend, []byte("pong"))
	readExactly(t, pp.client, []byte("pong"), "the scheduler's answer")

	waitParked("after a round trip")
	writeAll(t, pp.backend, []byte("unasked")) // the scheduler wakes it
	readExactly(t, pp.client, []byte("unasked"), "the scheduler's bytes after parking")

	waitParked("before the half-close")
	if err := pp.client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	readToEOF(t, pp.backend, nil, "the scheduler after the client's FIN")
	writeAll(t, pp.backend, []byte("bye"))
	pp.backend.Close()
	readToEOF(t, pp.client, []byte("bye"), "the client after its half-close")
	waitFor(t, ioTimeout, "the pair to be forgotten", func() bool { return p.srv.ActivePassthrough() == 0 })
	if n := p.srv.parked(); n != 0 {
		t.Fatalf("%d pairs still parked", n)
	}
}

// A parked pair, which no goroutine runs, is still closed by the idle
// timeout and counted, and gives its place under the caps back.
func TestParkedPairIdleTimeout(t *testing.T) {
	rt := routes.New()
	ln := schedulerListener(t, rt)
	p := startProxy(t, Config{ParkAfter: 20 * time.Millisecond, IdleTimeout: 500 * time.Millisecond,
		MaxConnectionsPerSource: 1}, rt, nil)
	pp := openPassthrough(t, p, ln)
	waitFor(t, ioTimeout, "the pair to park", func() bool { return p.srv.parked() == 1 })

	readToEOF(t, pp.client, nil, "the client of an idle pair")
	readToEOF(t, pp.backend, nil, "the scheduler of an idle pair")
	if got := p.srv.Counted(IdleExpired); got != 1 {
		t.Fatalf("idle closes counted: %d, want 1", got)
	}
	waitFor(t, ioTimeout, "the pair to be forgotten", func() bool { return p.srv.ActivePassthrough() == 0 })
	// Its place under the per-source cap of 1 is free again.
	again := openPassthrough(t, p, ln)
	writeAll(t, again.client, []byte("x"))
	readExactly(t, again.backend, []byte("x"), "a new pair after the idle one")
	if got := p.srv.Counted(RefusedSource); got != 0 {
		t.Fatalf("refused by the per-source cap: %d, want 0", got)
	}
}

// Close ends parked pairs too, and a pair that parks after Close is
// ended instead.
func TestCloseEndsParkedPairs(t *testing.T) {
	rt := routes.New()
	ln := schedulerListener(t, rt)
	p := startProxy(t, Config{ParkAfter: 20 * time.Millisecond}, rt, nil)
	pp := openPassthrough(t, p, ln)
	waitFor(t, ioTimeout, "the pair to park", func() bool { return p.srv.parked() == 1 })

	p.srv.Close()
	readToEOF(t, pp.client, nil, "the client after Close")
	if p.srv.ActivePassthrough() != 0 || p.srv.parked() != 0 {
		t.Fatalf("after Close: %d active, %d parked; want none", p.srv.ActivePassthrough(), p.srv.parked())
	}
	if park.Stopped[*pair]().Park(&pair{}) {
		t.Fatal("a stopped parker took a pair")
	}
}

// Parking does not reach a pair in its handshake check (the handshake
// timeout keeps bounding it) nor one half-closed (the grace bounds it).
func TestParkingWaitsForHandshake(t *testing.T) {
	rt := routes.New()
	ln := schedulerListener(t, rt)
	p := startProxy(t, Config{ParkAfter: 10 * time.Millisecond, HandshakeTimeout: 400 * time.Millisecond}, rt, nil)
	hello := captureHello(t, SNIPrefix+"c1")
	client := dialRaw(t, p.addr)
	writeAll(t, client, hello)
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(ioTimeout))
	backend, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	readToEOF(t, client, nil, "a client that never finishes its handshake")
	if got := p.srv.Counted(HandshakeExpired); got != 1 {
		t.Fatalf("handshake timeouts counted: %d, want 1", got)
	}
	if p.srv.parked() != 0 {
		t.Fatal("a pair in its handshake was parked")
	}
}

// A pair paused while one direction has ended finishes under the grace
// instead of parking: the direction still open carries its bytes.
func TestPauseAfterHalfClose(t *testing.T) {
	rt := routes.New()
	ln := schedulerListener(t, rt)
	p := startProxy(t, Config{ParkAfter: -1}, rt, nil)
	pp := openPassthrough(t, p, ln)
	if err := pp.client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	readToEOF(t, pp.backend, nil, "the scheduler after the client's FIN")
	// The sweeper would not pause an ended pair; pause it by hand, as a
	// sweep racing the FIN could.
	var target *pair
	p.srv.mu.Lock()
	for q := range p.srv.pairs {
		target = q
	}
	p.srv.mu.Unlock()
	if target == nil {
		t.Fatal("no pair")
	}
	target.pause()
	time.Sleep(50 * time.Millisecond)
	writeAll(t, pp.backend, []byte("late answer"))
	pp.backend.Close()
	readToEOF(t, pp.client, []byte("late answer"), "the client after its half-close")
	if p.srv.parked() != 0 {
		t.Fatal("a half-closed pair was parked")
	}
	waitFor(t, ioTimeout, "the pair to be forgotten", func() bool { return p.srv.ActivePassthrough() == 0 })
}

// copyConn reports waiting only while it waits, and a paused copy returns
// the deadline, leaving the bytes that came meanwhile unread.
func TestCopyConnPauses(t *testing.T) {
	writer, src := testutil.MustTCPPair(t)
	dst, reader := testutil.MustTCPPair(t)
	var waiting atomic.Bool
	done := make(chan error, 1)
	go func() { done <- copyConn(dst, src, nil, &waiting) }()
	waitFor(t, ioTimeout, "copyConn to wait", waiting.Load)
	_ = src.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("copyConn = %v, want the deadline", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("copyConn did not return")
	}
	if waiting.Load() {
		t.Fatal("still waiting after it returned")
	}
	writeAll(t, writer, []byte("kept"))
	_ = src.SetReadDeadline(time.Time{})
	go func() { done <- copyConn(dst, src, nil, nil) }()
	_ = reader.SetReadDeadline(time.Now().Add(ioTimeout))
	readExactly(t, reader, []byte("kept"), "bytes written while paused")
}
