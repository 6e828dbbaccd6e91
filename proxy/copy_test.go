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
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestCopyConn: bytes arrive whole and in order, including bytes that were
// waiting before the copy began (the poller is edge-triggered) and more
// than one pooled buffer's worth; the end of the stream ends the copy
// without error, and a read deadline ends it with one.
func TestCopyConn(t *testing.T) {
	cases := []struct {
		name   string
		early  int // bytes written before copyConn starts
		late   int // bytes written after
		closed bool
	}{
		{"waiting before the copy", 100, 0, true},
		{"bulk", 0, 5*copyBufSize + 17, true},
		{"both", 3000, 3 * copyBufSize, true},
		{"deadline", 10, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writer, src := tcpPair(t)
			dst, reader := tcpPair(t)
			want := make([]byte, c.early+c.late)
			rand.Read(want)
			if _, err := writer.Write(want[:c.early]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // let the early bytes land
			if !c.closed {
				_ = src.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			}
			done := make(chan error, 1)
			go func() { done <- copyConn(dst, src) }()
			go func() {
				_, _ = writer.Write(want[c.early:])
				if c.closed {
					writer.(*net.TCPConn).CloseWrite()
				}
			}()
			got := make([]byte, len(want))
			_ = reader.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(reader, got); err != nil {
				t.Fatalf("read %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the bytes differ")
			}
			select {
			case err := <-done:
				if c.closed && err != nil {
					t.Errorf("copyConn = %v at the end of the stream", err)
				}
				if !c.closed && !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("copyConn = %v, want the deadline", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("copyConn did not return")
			}
		})
	}
}

// TestCopyConnAllocations: in steady state a passthrough direction
// allocates nothing per message (pooled buffers, one wait closure per
// connection).
func TestCopyConnAllocations(t *testing.T) {
	writer, src := tcpPair(t)
	dst, reader := tcpPair(t)
	go copyConn(dst, src)
	msg, back := make([]byte, 1000), make([]byte, 1000)
	round := func() {
		if _, err := writer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(reader, back); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		round() // warm the pool up
	}
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Errorf("%v allocations per message, want 0", n)
	}
}
