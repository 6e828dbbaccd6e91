package proxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// TestQuietConnIsANetConn: a quietConn (reads and writes without the
// runtime's syscall bookkeeping) keeps net.Conn's contract: nettest's
// conformance suite (ordering, concurrent reads and writes, deadlines
// past and future, Close unblocking both, io.EOF at the end), with both
// ends quiet.
func TestQuietConnIsANetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b, err := dialPair()
		if err != nil {
			return nil, nil, nil, err
		}
		c1, c2 = quiet(a), quiet(b)
		if _, ok := c1.(*quietConn); !ok {
			t.Fatalf("quiet(%T) = %T, want a *quietConn", a, c1)
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
	a, b := tcpPair(t)
	qa, qb := quiet(a), quiet(b)
	want := make([]byte, 3*copyBufSize)
	rand.Read(want)
	go func() {
		_, _ = qb.Write(want)
		qb.(*quietConn).CloseWrite()
	}()
	_ = qa.SetReadDeadline(time.Now().Add(ioTimeout))
	got, err := io.ReadAll(qa)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want %d and the end", len(got), err, len(want))
	}
	if n, err := qa.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v; want io.EOF", n, err)
	}

	c, _ := tcpPair(t)
	qc := quiet(c)
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
	if quiet(p1) != p1 {
		t.Fatal("quiet wrapped a connection that is not TCP")
	}
}
