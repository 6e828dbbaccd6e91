package quietnet

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"golang.org/x/net/nettest"
)

// TestQuietConnIsANetConn: a Conn (reads and writes without the
// runtime's syscall bookkeeping) keeps net.Conn's contract: nettest's
// conformance suite (ordering, concurrent reads and writes, deadlines
// past and future, Close unblocking both, io.EOF at the end), with both
// ends quiet.
func TestQuietConnIsANetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b, err := testutil.TCPPair()
		if err != nil {
			return nil, nil, nil, err
		}
		c1, c2 = Wrap(a), Wrap(b)
		if _, ok := c1.(*Conn); !ok {
			t.Fatalf("Wrap(%T) = %T, want a *Conn", a, c1)
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// TestQuietConnEnds: the errors net/http and the dashboard proxy act on
// come through as from a TCP connection: io.EOF after the peer's end
// (once the bytes before it are read), the deadline as
// os.ErrDeadlineExceeded (a net.Error that is a Timeout), net.ErrClosed
// after Close; a connection that is not TCP is left as it is.
func TestQuietConnEnds(t *testing.T) {
	a, b := testutil.MustTCPPair(t)
	qa, qb := Wrap(a), Wrap(b)
	want := make([]byte, 3*32<<10)
	rand.Read(want)
	go func() {
		_, _ = qb.Write(want)
		qb.(*Conn).CloseWrite()
	}()
	_ = qa.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(qa)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want %d and the end", len(got), err, len(want))
	}
	if n, err := qa.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v; want io.EOF", n, err)
	}

	c, _ := testutil.MustTCPPair(t)
	qc := Wrap(c)
	_ = qc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = qc.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v; want a timeout", err)
	}
	qc.Close()
	if _, err := qc.Read(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v; want net.ErrClosed", err)
	}
	if _, err := qc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v; want net.ErrClosed", err)
	}

	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if Wrap(p1) != p1 {
		t.Fatal("quiet wrapped a connection that is not TCP")
	}
}

// In nonblocking mode a read returns at once: os.ErrDeadlineExceeded
// (a Timeout and Temporary net.Error) when nothing is there, what is
// there otherwise, io.EOF once the other end closed; back in blocking
// mode it waits again, under its deadline.
func TestNonblockingRead(t *testing.T) {
	a, b := testutil.MustTCPPair(t)
	qa := Wrap(a).(*Conn)
	qa.SetNonblocking(true)
	buf := make([]byte, 16)
	n, err := qa.Read(buf)
	var ne net.Error
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("empty socket: %d, %v; want os.ErrDeadlineExceeded at once", n, err)
	}
	if _, err := b.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n == 0 && time.Now().Before(deadline) {
		n, err = qa.Read(buf)
		if n == 0 && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("waiting for data: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	qa.SetNonblocking(false)
	_ = qa.SetReadDeadline(time.Now().Add(10 * time.Second))
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = b.Write([]byte("w"))
	}()
	if n, err := qa.Read(buf); string(buf[:n]) != "w" {
		t.Fatalf("blocking mode: %q, %v; want it to wait for the data", buf[:n], err)
	}
	_ = qa.SetReadDeadline(time.Time{})
	qa.SetNonblocking(true)
	b.Close()
	for err = nil; time.Now().Before(deadline); {
		if _, err = qa.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}
}
