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

	"github.com/gatewayhq/gateway/internal/quietnet"
	"github.com/gatewayhq/gateway/internal/testutil"
)

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
			writer, src := testutil.MustTCPPair(t)
			dst, reader := testutil.MustTCPPair(t)
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
			go func() { done <- copyConn(dst, src, nil, nil) }()
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
// allocates nothing per message (pooled buffers, one read closure per
// copy).
func TestCopyConnAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	writer, src := testutil.MustTCPPair(t)
	dst, reader := testutil.MustTCPPair(t)
	go copyConn(dst, src, nil, nil)
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

// scanOnly is an inspector over a handshakeScan that counts everything
// as said after the server spoke.
type scanOnly struct{ h *handshakeScan }

func (s scanOnly) next() (int, bool) {
	if s.h.remaining > 0 {
		return s.h.remaining, false
	}
	return len(s.h.hdr) - s.h.hn, true
}
func (s scanOnly) saw(b []byte)  { s.h.feed(b, true) }
func (s scanOnly) skipped(n int) { s.h.skip(n) }
func (s scanOnly) done() bool    { return s.h.done }

// copyInspecting passes on exactly the records up to and including the
// first whole application-data record, reports that, and leaves what
// follows unread, for copyConn; a stream that ends first is not finished.
func TestCopyInspecting(t *testing.T) {
	big := make([]byte, 3000)
	handshake := append(append([]byte{22, 3, 3, 0x0b, 0xb8}, big...), 20, 3, 3, 0, 1, 1)
	finished := []byte{23, 3, 3, 0, 4, 'f', 'i', 'n', '!'}
	after := []byte("after the handshake")
	for _, kind := range []string{"tcp", "pipe"} {
		for _, whole := range []bool{true, false} {
			name := kind + map[bool]string{true: "/in one write", false: "/byte by byte"}[whole]
			t.Run(name, func(t *testing.T) {
				var writer, src, dst, reader net.Conn
				if kind == "tcp" {
					writer, src = testutil.MustTCPPair(t)
					dst, reader = testutil.MustTCPPair(t)
				} else {
					writer, src = net.Pipe()
					dst, reader = net.Pipe()
					t.Cleanup(func() { writer.Close(); src.Close(); dst.Close(); reader.Close() })
				}
				all := append(append(append([]byte(nil), handshake...), finished...), after...)
				go func() {
					if whole {
						_, _ = writer.Write(all)
						return
					}
					for i := range all {
						_, _ = writer.Write(all[i : i+1])
					}
				}()
				want := len(handshake) + len(finished)
				got := make(chan []byte, 1)
				go func() {
					b := make([]byte, want)
					_, _ = io.ReadFull(reader, b)
					got <- b
				}()
				var h handshakeScan
				_ = src.SetReadDeadline(time.Now().Add(ioTimeout))
				ok, err := copyInspecting(dst, src, nil, scanOnly{&h})
				if !ok || err != nil {
					t.Fatalf("copyInspecting = %t, %v; want finished", ok, err)
				}
				if b := <-got; !bytes.Equal(b, all[:want]) {
					t.Fatal("the handshake bytes arrived changed")
				}
				rest := make([]byte, len(after))
				if _, err := io.ReadFull(src, rest); err != nil || !bytes.Equal(rest, after) {
					t.Fatalf("left for copyConn: %q, %v; want %q", rest, err, after)
				}
			})
		}
	}
	t.Run("ends first", func(t *testing.T) {
		writer, src := testutil.MustTCPPair(t)
		dst, _ := testutil.MustTCPPair(t)
		_, _ = writer.Write(handshake)
		writer.Close()
		var h handshakeScan
		_ = src.SetReadDeadline(time.Now().Add(ioTimeout))
		if ok, err := copyInspecting(dst, src, nil, scanOnly{&h}); ok || err != nil {
			t.Fatalf("copyInspecting = %t, %v; want not finished, no error", ok, err)
		}
	})
}

// TestRawWriter: the copy's write (write(2) without the runtime's syscall
// bookkeeping) writes all of a buffer the socket cannot take at once,
// waiting in the poller while the peer is slow; it stops at the write
// deadline, and fails rather than hangs on a peer that reset the
// connection.
func TestRawWriter(t *testing.T) {
	big := make([]byte, 16<<20) // far more than a socket's buffers
	rand.Read(big)
	t.Run("slow reader", func(t *testing.T) {
		w, r := testutil.MustTCPPair(t)
		got := make(chan []byte, 1)
		go func() {
			time.Sleep(50 * time.Millisecond) // the writer fills the buffers first
			_ = r.SetReadDeadline(time.Now().Add(ioTimeout))
			b := make([]byte, len(big))
			_, _ = io.ReadFull(r, b)
			got <- b
		}()
		rc, _ := quietnet.RawConn(w)
		n, err := quietnet.Writer(rc)(big)
		if n != len(big) || err != nil {
			t.Fatalf("write = %d, %v; want %d, nil", n, err, len(big))
		}
		if !bytes.Equal(<-got, big) {
			t.Fatal("the bytes arrived changed")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		w, _ := testutil.MustTCPPair(t) // the peer never reads
		_ = w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		rc, _ := quietnet.RawConn(w)
		n, err := quietnet.Writer(rc)(big)
		if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= len(big) {
			t.Fatalf("write = %d, %v; want part of %d and the deadline", n, err, len(big))
		}
	})
	t.Run("reset", func(t *testing.T) {
		w, r := testutil.MustTCPPair(t)
		_ = r.(*net.TCPConn).SetLinger(0)
		r.Close() // a reset
		time.Sleep(20 * time.Millisecond)
		_ = w.SetWriteDeadline(time.Now().Add(ioTimeout))
		rc, _ := quietnet.RawConn(w)
		write := quietnet.Writer(rc)
		var err error
		for i := 0; i < 3 && err == nil; i++ { // the first write may land before the reset is seen
			_, err = write(big[:1000])
		}
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a reset connection = %v, want its error", err)
		}
	})
}
