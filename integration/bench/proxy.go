package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/proxy"
	"github.com/gatewayhq/gateway/proxy/routes"
	"github.com/gatewayhq/gateway/store"
	"golang.org/x/net/websocket"
)

// The proxy figures run the gateway's real proxy (proxy.Server: SNI peek,
// route lookup, passthrough, dashboard reverse proxy) in a process of its
// own, so that its memory can be read apart from the load generator's, in
// front of backends that stand in for a Dask scheduler: a TLS server
// speaking a tiny protocol (another process) and, for dashboards, tornado
// (the web server Dask's dashboards run on) with a page and a websocket
// echo. Each baseline is the same client talking to the same backend
// directly.

const (
	childFlag   = "__proxy-child"
	backendFlag = "__backend-child"
	countsFlag  = "__counts-child"
	benchRoute  = "bench"
	benchToken  = auth.APITokenPrefix + "bench-token" // an API token, checked against the child's store
	serverName  = proxy.SNIPrefix + benchRoute
	modeSink    = 'S' // read an 8-byte length, discard that many bytes, answer 'K'
	modeEcho    = 'E' // echo 4-byte-length-prefixed messages until EOF
	maxEchoSize = 1 << 20
)

// testbed is the backends, the proxy child and TLS settings for clients.
type testbed struct {
	backend   string // TLS backend (the "scheduler")
	dashboard string // HTTP backend (the "dashboard")
	proxyAddr string
	statsURL  string
	client    *tls.Config
	children
}

func newTestbed(o Options) (*testbed, error) {
	raiseFileLimit()
	tb := &testbed{}
	// The backend's certificate, for the name clients ask the proxy for;
	// the backend process loads the same files.
	cert, err := pki.LoadOrCreateServing(o.Dir, []string{serverName}, time.Now())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	tb.client = &tls.Config{ServerName: serverName, RootCAs: pool, MinVersion: tls.VersionTLS13}
	// The backends and the proxy run in processes of their own: each holds
	// one socket per connection for its side, which keeps every process
	// within its descriptor limit at 10,000 connections.
	backend, err := tb.self(backendFlag, o.Dir)
	if err != nil {
		tb.close()
		return nil, err
	}
	tb.backend = backend
	// The dashboard is served by tornado, the web server of Dask's own
	// dashboards, so that figure 4 compares against what users reach.
	if tb.dashboard, err = tb.start(python, "-c", tornadoDashboard); err != nil {
		tb.close()
		return nil, fmt.Errorf("tornado dashboard (python3-distributed brings tornado): %w", err)
	}
	if tb.proxyAddr, err = tb.self(childFlag, tb.backend, tb.dashboard, o.Dir); err != nil {
		tb.close()
		return nil, err
	}
	tb.statsURL = "http://" + tb.proxyAddr + "/bench/stats"
	return tb, nil
}

// dial opens a TLS connection to the backend, through the proxy or not,
// and says which mode it wants.
func (tb *testbed) dial(proxied bool, mode byte) (*tls.Conn, error) {
	addr := tb.backend
	if proxied {
		addr = tb.proxyAddr
	}
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, tb.client)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte{mode}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type stats struct {
	Active   int64 `json:"active"`
	RSSBytes int64 `json:"rss_bytes"`
	// Where the proxy's memory is (runtime/metrics): goroutine stacks,
	// live heap objects, and goroutines.
	StackBytes int64 `json:"stack_bytes"`
	HeapBytes  int64 `json:"heap_bytes"`
	Goroutines int64 `json:"goroutines"`
}

func (tb *testbed) stats() (stats, error) {
	var s stats
	resp, err := http.Get(tb.statsURL)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// serveBackend is the stand-in scheduler.
func serveBackend(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReaderSize(c, 64<<10)
			mode, err := r.ReadByte()
			if err != nil {
				return
			}
			switch mode {
			case modeSink:
				var n uint64
				if binary.Read(r, binary.BigEndian, &n) != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
					return
				}
				_, _ = c.Write([]byte{'K'})
			case modeEcho:
				buf := make([]byte, 4+maxEchoSize)
				for {
					if _, err := io.ReadFull(r, buf[:4]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(buf[:4])
					if n > maxEchoSize {
						return
					}
					if _, err := io.ReadFull(r, buf[4:4+n]); err != nil {
						return
					}
					if _, err := c.Write(buf[:4+n]); err != nil {
						return
					}
				}
			}
		}()
	}
}

// tornadoDashboard serves a small page and a websocket echo under the
// bench cluster's prefix with tornado, as a Dask scheduler's dashboard
// does, on a free loopback port it prints; it ends when stdin closes.
const tornadoDashboard = `
import asyncio, socket, sys, threading
import tornado.web, tornado.websocket
PAGE = "<!DOCTYPE html><html><head><title>Dask: status</title></head><body>" + "<div class=\"bk-root\"></div>\n" * 60 + "</body></html>"
class Status(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.write(PAGE)
class Echo(tornado.websocket.WebSocketHandler):
    def check_origin(self, origin):
        return True
    def on_message(self, m):
        self.write_message(m, binary=isinstance(m, bytes))
async def main():
    app = tornado.web.Application([(r"/clusters/bench/status", Status), (r"/clusters/bench/ws", Echo)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets([sock])
    print("127.0.0.1:%d" % sock.getsockname()[1], flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(done.set)), daemon=True).start()
    await done.wait()
import tornado.httpserver
asyncio.run(main())
`

// runBackend is the backend's process: the stand-in scheduler (TLS, with
// the certificate in dir), until its stdin closes.
func runBackend(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "backend child: want the certificate directory")
		return 2
	}
	raiseFileLimit()
	cert, err := pki.LoadOrCreateServing(args[0], []string{serverName}, time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, "backend child:", err)
		return 1
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		fmt.Fprintln(os.Stderr, "backend child:", err)
		return 1
	}
	defer ln.Close()
	go serveBackend(ln)
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// runChild is the proxy process: the gateway's proxy.Server routing the
// bench cluster to the backends, until its stdin closes.
func runChild(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "proxy child: want the backend and dashboard addresses and a directory")
		return 2
	}
	raiseFileLimit()
	// GATEWAY_BENCH_CPUPROFILE=<prefix>: the proxy's profile over its whole
	// life, in <prefix>-proxy-child.pprof (run one figure with -only).
	defer cpProfile(Options{Log: slog.Default()}, "proxy child")()
	rt := routes.New()
	rt.SetRoute(benchRoute, "bench-owner", args[0], "http://"+args[1], nil, nil)
	// The figures are of many established, idle connections from one
	// address to one cluster: the gateway's caps (which would refuse most
	// of them) are raised for this run, the HTTP ones too since connections
	// count as HTTP until their ClientHello sorts them; the timeouts stay
	// as in production.
	srv := proxy.New(proxy.Config{AllowPlainHTTP: true, MaxConnections: 1 << 20,
		MaxHTTPConnections: 1 << 20, MaxHTTPConnectionsPerSource: 1 << 20}, rt)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy child:", err)
		return 1
	}
	authn, err := dashboardAuthn(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy child:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle(proxy.DashboardPrefix, srv.DashboardHandler(authn))
	mux.HandleFunc("/bench/stats", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		st := stats{Active: srv.ActivePassthrough(), RSSBytes: rss()}
		st.StackBytes, st.HeapBytes, st.Goroutines = runtimeMemory()
		json.NewEncoder(w).Encode(st)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	go hs.Serve(srv.HTTPListener(ln.Addr()))
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Println(ln.Addr().String())
	_ = srv.Serve(ctx, ln)
	srv.Close()
	hs.Close()
	return 0
}

// runtimeMemory is the bytes in goroutine stacks and in live heap
// objects, and the number of goroutines.
func runtimeMemory() (stack, heap, goroutines int64) {
	ss := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/sched/goroutines:goroutines"}}
	metrics.Read(ss)
	v := func(i int) int64 {
		if ss[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(ss[i].Value.Uint64())
	}
	return v(0), v(1), v(2)
}

// dashboardAuthn is the gateway's dashboard authentication
// (auth.FromRequest: failure limiter, API tokens, browser sessions) over a
// real SQLite store in dir that holds benchToken, so that figure 4 pays for
// authentication what a gateway pays.
func dashboardAuthn(dir string) (func(*http.Request) (*auth.User, error), error) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, fmt.Sprintf("proxy-child-%d.db", os.Getpid())))
	if err != nil {
		return nil, err
	}
	if err := db.CreateToken(ctx, &store.APIToken{ID: "bench", Owner: "bench-owner", OwnerName: "bench", Name: "bench",
		Hash: auth.HashToken(benchToken), ExpiresAt: time.Now().Add(24 * time.Hour)}); err != nil {
		return nil, err
	}
	sessions, err := auth.NewSessions([]byte(auth.NewToken("")), time.Hour, false)
	if err != nil {
		return nil, err
	}
	sessions.SetStore(db, auth.Access{})
	return auth.FromRequest(auth.Chain{auth.NewAPITokens(db, nil, nil)}, sessions, auth.NewFailureLimiter(cpFailedPerMinute)), nil
}

// rss is this process's resident memory.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// raiseFileLimit lifts the descriptor limit as far as allowed: 10,000
// proxied connections hold 20,000 sockets in the proxy alone.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return
	}
	want := uint64(1 << 17)
	if l.Max < want {
		// Root may raise the hard limit; others keep theirs.
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
			return
		}
	}
	l.Cur = max(l.Cur, min(l.Max, want))
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// fileLimit is this process's descriptor limit (children get the same).
func fileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 1024
	}
	return l.Cur
}

// median of a few repetitions, alternating direct and proxied runs so that
// drift (thermal, other load) hits both alike.
func alternate(reps int, f func(proxied bool) (float64, error)) (direct, proxied float64, err error) {
	ds, ps, err := alternateSamples(reps, f)
	if err != nil {
		return 0, 0, err
	}
	return median(ds), median(ps), nil
}

// alternateSamples is alternate's repetitions themselves, direct and
// proxied, for Result.Samples.
func alternateSamples(reps int, f func(proxied bool) (float64, error)) (direct, proxied []float64, err error) {
	for range reps {
		for _, p := range []bool{false, true} {
			v, err := f(p)
			if err != nil {
				return nil, nil, err
			}
			if p {
				proxied = append(proxied, v)
			} else {
				direct = append(direct, v)
			}
		}
	}
	return direct, proxied, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchProxy is figure 1: bulk TLS streams client -> scheduler, through the
// SNI passthrough against direct, with 1, 16 and 256 concurrent streams.
// Each run sends a fixed number of bytes in all and ends when the backend
// has acknowledged every stream's last byte.
func benchProxy(ctx context.Context, o Options) ([]Result, error) {
	tb, err := newTestbed(o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	// Five repetitions (three in -quick) each way: -compare needs at
	// least four on each side for a change to be significant at 5%.
	total := int64(512 << 20)
	reps := 5
	if o.Quick {
		total, reps = 64<<20, 3
	}
	var out []Result
	for _, streams := range []int{1, 16, 256} {
		// Where the CPU goes in the proxied runs: on a machine whose cores
		// the client, the proxy and the backend share, the proxy's share
		// is what the throughput loses.
		var client, backend, prox time.Duration
		ds, ps, err := alternateSamples(reps, func(p bool) (float64, error) {
			c0, b0, p0 := cpSelfCPU(), cpProcCPU(tb.pid(0)), cpProcCPU(tb.pid(2))
			v, err := bulk(ctx, tb, p, streams, total)
			if p {
				client += cpSelfCPU() - c0
				backend += cpProcCPU(tb.pid(0)) - b0
				prox += cpProcCPU(tb.pid(2)) - p0
			}
			return v, err
		})
		if err != nil {
			return out, fmt.Errorf("%d streams: %w", streams, err)
		}
		direct, proxied := median(ds), median(ps)
		ratio := proxied / direct
		all := float64(client + backend + prox)
		out = append(out, Result{Figure: "1 proxy throughput", Case: fmt.Sprintf("%d streams", streams), Unit: "B/s",
			Value: proxied, Baseline: direct, Ratio: ratio, Target: ">= 0.90 of direct", Met: ratio >= 0.90,
			Note: fmt.Sprintf("CPU of the proxied runs: client (TLS) %.0f%%, backend (TLS) %.0f%%, proxy %.0f%%",
				100*float64(client)/all, 100*float64(backend)/all, 100*float64(prox)/all),
			Samples: ps, BaselineSamples: ds})
	}
	return out, nil
}

func bulk(ctx context.Context, tb *testbed, proxied bool, streams int, total int64) (float64, error) {
	per := total / int64(streams)
	chunk := make([]byte, 256<<10)
	conns := make([]*tls.Conn, streams)
	for i := range conns {
		c, err := tb.dial(proxied, modeSink)
		if err != nil {
			closeAll(conns)
			return 0, err
		}
		conns[i] = c
	}
	defer closeAll(conns)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			if err := binary.Write(c, binary.BigEndian, uint64(per)); err != nil {
				errs <- err
				return
			}
			for left := per; left > 0; {
				n := min(left, int64(len(chunk)))
				if _, err := c.Write(chunk[:n]); err != nil {
					errs <- err
					return
				}
				left -= n
				if ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
			}
			ack := make([]byte, 1)
			if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 'K' {
				errs <- fmt.Errorf("no acknowledgement: %v", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(per*int64(streams)) / time.Since(start).Seconds(), nil
}

func closeAll(cs []*tls.Conn) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// benchLatency is figure 2: round trips of Dask-sized messages on one
// connection through the proxy and on one direct, interleaved round trip
// by round trip (alternating which goes first) so that a burst of other
// work on the machine hits both alike, in repetitions on fresh
// connections; p50 and p99 (medians over the repetitions, each repetition
// a sample), and what the proxy adds to each. The tail target is on small
// messages (64 B: heartbeats and task updates), where the proxy's
// wake-ups are all there is.
func benchLatency(ctx context.Context, o Options) ([]Result, error) {
	tb, err := newTestbed(o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	n, reps := 2000, 10
	if o.Quick {
		n, reps = 400, 5
	}
	var out []Result
	for _, size := range []int{64, 1 << 10, 10 << 10} {
		var d50s, p50s, d99s, p99s []float64
		for range reps {
			direct, proxied, err := roundTrips(ctx, tb, size, n)
			if err != nil {
				return out, fmt.Errorf("%d B: %w", size, err)
			}
			d50s, d99s = append(d50s, us(percentile(direct, 0.50))), append(d99s, us(percentile(direct, 0.99)))
			p50s, p99s = append(p50s, us(percentile(proxied, 0.50))), append(p99s, us(percentile(proxied, 0.99)))
		}
		d50, p50 := median(d50s), median(p50s)
		d99, p99 := median(d99s), median(p99s)
		added50, added99 := p50-d50, p99-d99
		target99, met99 := "info", true
		if size == 64 {
			target99, met99 = "added p99 <= 100 µs", added99 <= 100
		}
		name := fmt.Sprintf("%s messages", humanSize(int64(size)))
		out = append(out,
			Result{Figure: "2 proxy latency", Case: name + ", p50", Unit: "µs", Value: p50, Baseline: d50, Ratio: p50 / d50,
				Target: "added p50 < 50 µs", Met: added50 < 50, Note: fmt.Sprintf("added %.1f µs", added50),
				Samples: p50s, BaselineSamples: d50s},
			Result{Figure: "2 proxy latency", Case: name + ", p99", Unit: "µs", Value: p99, Baseline: d99, Ratio: p99 / d99,
				Target: target99, Met: met99, Note: fmt.Sprintf("added %.1f µs (%d repetitions of %d round trips each way)", added99, reps, n),
				Samples: p99s, BaselineSamples: d99s})
	}
	// The first message after a pause: the proxy parks a pair quiet for a
	// second (its goroutines end) and resumes it on its next byte.
	k := 40
	if o.Quick {
		k = 16
	}
	ds, ps, err := firstAfterIdle(ctx, tb, k, 2500*time.Millisecond)
	if err != nil {
		return out, fmt.Errorf("after idle: %w", err)
	}
	d, p := median(ds), median(ps)
	out = append(out, Result{Figure: "2 proxy latency", Case: "64 B, first after 2.5 s idle, p50", Unit: "µs", Value: p, Baseline: d,
		Ratio: p / d, Target: "info", Met: true,
		Note:    fmt.Sprintf("added %.1f µs; %d connections each way (the proxy parks a pair quiet for a second: the first byte resumes it)", p-d, k),
		Samples: ps, BaselineSamples: ds})
	return out, nil
}

// firstAfterIdle opens k connections each way, makes one round trip on
// each, leaves them idle for idle, then times one 64-byte round trip on
// each, direct and proxied in turn (µs).
func firstAfterIdle(ctx context.Context, tb *testbed, k int, idle time.Duration) (direct, proxied []float64, err error) {
	var conns [2][]*tls.Conn
	defer func() { closeAll(conns[0]); closeAll(conns[1]) }()
	for i := range k {
		for j, p := range []bool{false, true} {
			c, err := tb.dial(p, modeEcho)
			if err != nil {
				return nil, nil, err
			}
			conns[j] = append(conns[j], c)
			if err := echo(c, 64); err != nil {
				return nil, nil, fmt.Errorf("connection %d: %w", i, err)
			}
		}
	}
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	for i := range k {
		for j := range conns {
			t0 := time.Now()
			if err := echo(conns[j][i], 64); err != nil {
				return nil, nil, fmt.Errorf("connection %d after idle: %w", i, err)
			}
			if j == 0 {
				direct = append(direct, us(time.Since(t0)))
			} else {
				proxied = append(proxied, us(time.Since(t0)))
			}
		}
	}
	return direct, proxied, nil
}

// roundTrips times n round trips of size-byte messages each way, on a
// new direct connection and a new proxied one, interleaved: round trip i
// goes direct then proxied, or the other way round, in turn. The first
// tenth warms up.
func roundTrips(ctx context.Context, tb *testbed, size, n int) (direct, proxied []time.Duration, err error) {
	var conns [2]*tls.Conn
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, p := range []bool{false, true} {
		if conns[i], err = tb.dial(p, modeEcho); err != nil {
			return nil, nil, err
		}
		_ = conns[i].SetDeadline(time.Now().Add(2 * time.Minute))
	}
	msg := make([]byte, 4+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	back := make([]byte, len(msg))
	var rtts [2][]time.Duration
	for i := range n + n/10 {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		for k := range 2 {
			j := (i + k) % 2
			t0 := time.Now()
			if _, err := conns[j].Write(msg); err != nil {
				return nil, nil, err
			}
			if _, err := io.ReadFull(conns[j], back); err != nil {
				return nil, nil, err
			}
			if i >= n/10 {
				rtts[j] = append(rtts[j], time.Since(t0))
			}
		}
	}
	return rtts[0], rtts[1], nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// benchConns is figure 3: 10,000 concurrent idle proxied connections,
// opened in batches. It reads the proxy process's resident memory (after
// a GC) before and after each batch has been open and idle for a while
// (each batch's growth per connection is a sample), then checks that
// every connection still carries a round trip end to end.
func benchConns(ctx context.Context, o Options) ([]Result, error) {
	tb, err := newTestbed(o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	n, batches := 10000, 4
	hold := 3 * time.Second
	if o.Quick {
		n, batches, hold = 1000, 4, 2*time.Second
	}
	// The proxy holds two sockets per connection; where the descriptor
	// limit cannot be raised (no CAP_SYS_RESOURCE), measure what fits.
	limitNote := ""
	if fit := int(fileLimit()-100) / 2; fit < n {
		limitNote = fmt.Sprintf(" (%d asked; the descriptor limit here is %d and cannot be raised)", n, fileLimit())
		n = fit
	}
	// Warm the proxy up (pools, first allocations) before the baseline.
	if warm, err := tb.dial(true, modeEcho); err == nil {
		echo(warm, 100)
		warm.Close()
	}
	time.Sleep(200 * time.Millisecond)
	before, err := tb.stats()
	if err != nil {
		return nil, err
	}
	conns := make([]*tls.Conn, 0, n)
	defer func() { closeAll(conns) }()
	var samples []float64
	prev := before
	for b := range batches {
		k := n / batches
		if b == batches-1 {
			k = n - len(conns)
		}
		opened, err := openIdle(ctx, tb, k)
		conns = append(conns, opened...)
		if err != nil {
			return nil, fmt.Errorf("opened %d of %d: %w", len(conns), n, err)
		}
		time.Sleep(hold)
		st, err := tb.stats()
		if err != nil {
			return nil, err
		}
		samples = append(samples, float64(st.RSSBytes-prev.RSSBytes)/float64(k))
		prev = st
	}
	with := prev
	alive := 0
	for _, c := range conns {
		if c != nil && echo(c, 16) == nil {
			alive++
		}
	}
	per := float64(with.RSSBytes-before.RSSBytes) / float64(n)
	return []Result{
		{Figure: "3 connection scale", Case: fmt.Sprintf("%d idle connections", n), Unit: "B/conn", Value: per,
			Target: "<= 8 KiB per connection, all open", Met: per <= 8<<10 && alive == n && with.Active == int64(n) && limitNote == "",
			Note: fmt.Sprintf("proxy RSS %s -> %s (per connection: stacks %s, heap objects %s, %.2f goroutines); %d passthroughs active; %d of %d answered a round trip after %s idle%s",
				humanSize(before.RSSBytes), humanSize(with.RSSBytes),
				humanSize((with.StackBytes-before.StackBytes)/int64(n)), humanSize((with.HeapBytes-before.HeapBytes)/int64(n)),
				float64(with.Goroutines-before.Goroutines)/float64(n),
				with.Active, alive, n, hold, limitNote),
			Samples: samples},
	}, nil
}

// openIdle opens k proxied connections (64 at a time) and leaves them
// idle.
func openIdle(ctx context.Context, tb *testbed, k int) ([]*tls.Conn, error) {
	conns := make([]*tls.Conn, k)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for i := range conns {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := tb.dial(true, modeEcho)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	conns = slices.DeleteFunc(conns, func(c *tls.Conn) bool { return c == nil })
	select {
	case err := <-errs:
		return conns, err
	default:
		return conns, ctx.Err()
	}
}

func echo(c *tls.Conn, size int) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	msg := make([]byte, 4+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err := io.ReadFull(c, msg)
	return err
}

// benchDashboard is figure 4: requests/s of a small dashboard page and of
// websocket echo messages, through the gateway's dashboard proxy (with its
// authentication, an API token in a real store, and route lookup) against
// direct, and the proxy process's CPU per proxied request and message.
// Both sides are plain HTTP on loopback, so the ratio is the proxy's own
// cost, not TLS's.
func benchDashboard(ctx context.Context, o Options) ([]Result, error) {
	tb, err := newTestbed(o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	// Five repetitions a side: -compare needs at least four for a change
	// to be significant at 5%.
	dur := 2 * time.Second
	reps := 5
	if o.Quick {
		dur, reps = time.Second, 2
	}
	const clients = 8
	// perOp keeps, for each proxied run, the proxy process's CPU per
	// request or message, in µs.
	measured := func(load func(host string) (float64, error), perOp *[]float64) func(bool) (float64, error) {
		return func(p bool) (float64, error) {
			if !p {
				return load(tb.dashboard)
			}
			c0 := cpProcCPU(tb.pid(2))
			v, err := load(tb.proxyAddr)
			if n := v * dur.Seconds(); err == nil && n > 0 {
				*perOp = append(*perOp, float64((cpProcCPU(tb.pid(2))-c0).Microseconds())/n)
			}
			return v, err
		}
	}
	var pageCPU, wsCPU []float64
	page := measured(func(host string) (float64, error) {
		return httpLoad(ctx, "http://"+host+"/clusters/"+benchRoute+"/status", clients, dur)
	}, &pageCPU)
	ws := measured(func(host string) (float64, error) { return wsLoad(ctx, host, clients, dur) }, &wsCPU)
	var out []Result
	for _, c := range []struct {
		name string
		f    func(bool) (float64, error)
		unit string
	}{{"status page, 8 clients", page, "req/s"}, {"websocket echo, 8 connections", ws, "msg/s"}} {
		ds, ps, err := alternateSamples(reps, c.f)
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.name, err)
		}
		direct, proxied := median(ds), median(ps)
		ratio := proxied / direct
		out = append(out, Result{Figure: "4 dashboard proxy", Case: c.name, Unit: c.unit, Value: proxied, Baseline: direct,
			Ratio: ratio, Target: ">= 0.80 of direct", Met: ratio >= 0.80, Samples: ps, BaselineSamples: ds})
	}
	if len(pageCPU) > 0 && len(wsCPU) > 0 {
		v := median(pageCPU)
		out = append(out, Result{Figure: "4 dashboard proxy", Case: "proxy CPU per status page request", Unit: "µs", Value: v,
			Target: "<= 40 µs", Met: v <= 40,
			Note:    fmt.Sprintf("the proxy process's CPU (user+system, all of it) over its proxied requests; per websocket message %.1f µs", median(wsCPU)),
			Samples: pageCPU})
	}
	return out, nil
}

func httpLoad(ctx context.Context, url string, clients int, dur time.Duration) (float64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+benchToken)
				resp, err := hc.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s: %s", url, resp.Status)
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / dur.Seconds(), nil
}

func wsLoad(ctx context.Context, host string, conns int, dur time.Duration) (float64, error) {
	cfg, err := websocket.NewConfig("ws://"+host+"/clusters/"+benchRoute+"/ws", "http://"+host)
	if err != nil {
		return 0, err
	}
	cfg.Header.Set("Authorization", "Bearer "+benchToken)
	var done atomic.Int64
	errs := make(chan error, conns)
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	msg := []byte(strings.Repeat("x", 100))
	for range conns {
		wg.Go(func() {
			ws, err := websocket.DialConfig(cfg)
			if err != nil {
				errs <- err
				return
			}
			defer ws.Close()
			back := make([]byte, len(msg))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := ws.Write(msg); err != nil {
					errs <- err
					return
				}
				if _, err := io.ReadFull(ws, back); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return float64(done.Load()) / dur.Seconds(), nil
}
