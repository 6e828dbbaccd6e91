package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/proxy/routes"
	"github.com/gatewayhq/gateway/proxy/sni"
)

// Steady-state passthrough benchmarks: one long-lived connection per
// sub-benchmark, set up (ClientHello peeked, route looked up, scheduler
// dialled) before the timer starts, so that what is measured is the pipe
// alone, against the same traffic sent to the scheduler directly.
//
// Two modes:
//
//   - raw: the client sends a real crypto/tls ClientHello and then plain
//     bytes; the "scheduler" peeks the hello and then speaks plain TCP.
//     Client and backend loops use fixed buffers on *net.TCPConn and
//     allocate nothing, so every allocation counted is the proxy's.
//   - tls: a full mTLS handshake end to end through the proxy, then TLS
//     records both ways, as a Dask client and scheduler exchange them.
//
// Workloads: a bulk stream (1 MiB messages, each acknowledged with one
// byte) and echoes of small messages. MB/s counts payload bytes through the
// proxy (both directions for echoes); allocs/MB is allocations per 10^6
// such bytes. Everything listens on and dials 127.0.0.1 only.

type ssWorkload struct {
	name string
	size int  // bytes the client sends per op
	echo bool // the backend sends them back; otherwise it acknowledges with one byte
}

var ssWorkloads = []ssWorkload{
	{"bulk-1MiB", 1 << 20, false},
	{"echo-64B", 64, true},
	{"echo-1KiB", 1 << 10, true},
	{"echo-16KiB", 16 << 10, true},
}

// throughProxy is the payload that crosses the proxy per op.
func (w ssWorkload) throughProxy() int {
	if w.echo {
		return 2 * w.size
	}
	return w.size
}

// ssServe is the scheduler's side: it reads each message whole, checks its
// sequence stamp (the first 8 bytes), then echoes or acknowledges it. It
// returns nil when the client ends the stream between messages.
func ssServe(rw io.ReadWriter, refresh func(), w ssWorkload) error {
	buf := make([]byte, w.size)
	ack := make([]byte, 1)
	for seq := uint64(0); ; seq++ {
		refresh()
		if _, err := io.ReadFull(rw, buf); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("backend: message %d: %w", seq, err)
		}
		if got := binary.LittleEndian.Uint64(buf); got != seq {
			return fmt.Errorf("backend: message %d carries stamp %d", seq, got)
		}
		var err error
		if w.echo {
			_, err = rw.Write(buf)
		} else {
			ack[0] = byte(seq)
			_, err = rw.Write(ack)
		}
		if err != nil {
			return fmt.Errorf("backend: reply %d: %w", seq, err)
		}
	}
}

// rawBackend accepts plain TCP on 127.0.0.1, peeks the ClientHello like the
// proxy does, checks its server name, then runs ssServe on the connection.
type rawBackend struct {
	addr    string
	results chan error // one per connection
}

func startRawBackend(tb testing.TB, serverName string, w ssWorkload) *rawBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		tb.Fatal(err)
	}
	rb := &rawBackend{addr: ln.Addr().String(), results: make(chan error, 8)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				err := rawServe(c, serverName, w)
				select {
				case rb.results <- err:
				default:
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		if !waitGroupWithin(wg.Wait, ioTimeout) {
			tb.Error("raw backend goroutines did not end")
		}
	})
	return rb
}

func rawServe(c net.Conn, serverName string, w ssWorkload) error {
	refresh := func() { _ = c.SetDeadline(time.Now().Add(ioTimeout)) }
	refresh()
	h, _, err := sni.Peek(c, nil, 0)
	if err != nil {
		return fmt.Errorf("backend: peek: %w", err)
	}
	if h.ServerName != serverName {
		return fmt.Errorf("backend: ClientHello for %q, want %q", h.ServerName, serverName)
	}
	return ssServe(c, refresh, w)
}

// ssTarget is where a sub-benchmark connects: the scheduler or the proxy.
type ssTarget struct{ name, addr string }

// ssConn is the client's end after the handshake.
type ssConn struct {
	rw      io.ReadWriter
	refresh func()
	close   func()
}

// BenchmarkPassthroughSteadyState: see the comment at the top of the file.
func BenchmarkPassthroughSteadyState(b *testing.B) {
	rt := routes.New()
	p := startProxy(b, Config{}, rt, nil)
	for _, mode := range []string{"raw", "tls"} {
		for _, w := range ssWorkloads {
			cluster := mode + strings.ToLower(strings.NewReplacer("-", "", "MiB", "m", "KiB", "k", "B", "").Replace(w.name))
			serverName := SNIPrefix + cluster
			var (
				backendAddr string
				results     chan error
				dial        func(b *testing.B, addr string) ssConn
			)
			switch mode {
			case "raw":
				rb := startRawBackend(b, serverName, w)
				backendAddr, results = rb.addr, rb.results
				hello := captureHello(b, serverName)
				dial = func(b *testing.B, addr string) ssConn {
					c := dialRaw(b, addr)
					if _, err := c.Write(hello); err != nil {
						b.Fatal(err)
					}
					return ssConn{c, func() { _ = c.SetDeadline(time.Now().Add(ioTimeout)) }, func() { _ = c.CloseWrite() }}
				}
			case "tls":
				results = make(chan error, 8)
				be := startBackend(b, cluster, func(_ *backend, tc *tls.Conn, raw net.Conn) {
					err := ssServe(tc, func() { _ = raw.SetDeadline(time.Now().Add(ioTimeout)) }, w)
					select {
					case results <- err:
					default:
					}
				})
				backendAddr = be.addr
				cfg := be.clientConfig(serverName)
				dial = func(b *testing.B, addr string) ssConn {
					tc, raw, err := dialTLS(b, addr, cfg)
					if err != nil {
						b.Fatalf("mTLS handshake: %v", err)
					}
					return ssConn{tc, func() { _ = raw.SetDeadline(time.Now().Add(ioTimeout)) }, func() { _ = tc.Close() }}
				}
			}
			rt.SetRoute(cluster, "alice", backendAddr, "", nil, nil)
			for _, target := range []ssTarget{{"direct", backendAddr}, {"proxy", p.addr}} {
				b.Run(mode+"/"+w.name+"/"+target.name, func(b *testing.B) {
					runSteadyState(b, dial(b, target.addr), w, results)
				})
			}
		}
	}
}

func runSteadyState(b *testing.B, c ssConn, w ssWorkload, results chan error) {
	msg := make([]byte, w.size)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	reply := make([]byte, 1)
	if w.echo {
		reply = make([]byte, w.size)
	}
	seq := uint64(0)
	op := func() {
		binary.LittleEndian.PutUint64(msg, seq)
		c.refresh()
		if _, err := c.rw.Write(msg); err != nil {
			b.Fatalf("message %d: write: %v", seq, err)
		}
		if _, err := io.ReadFull(c.rw, reply); err != nil {
			b.Fatalf("message %d: read reply: %v", seq, err)
		}
		if w.echo && !bytes.Equal(reply, msg) || !w.echo && reply[0] != byte(seq) {
			b.Fatalf("message %d: wrong reply", seq)
		}
		seq++
	}
	// Warm up: buffers pooled, TLS state settled, TCP windows open.
	warm := 200
	if !w.echo {
		warm = 16
	}
	for range warm {
		op()
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := seq
	b.SetBytes(int64(w.throughProxy()))
	b.ReportAllocs()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	if ops := seq - start; ops > 0 {
		mb := float64(ops) * float64(w.throughProxy()) / 1e6
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/mb, "allocs/MB")
	}

	// The scheduler must have seen every message, in order, and the end of
	// the stream.
	c.close()
	select {
	case err := <-results:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(ioTimeout):
		b.Fatal("the backend did not see the end of the stream")
	}
}
