package health

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/internal/park"
	"github.com/gatewayhq/gateway/internal/quietnet"
	"github.com/gatewayhq/gateway/store"
)

// A settled cluster's health comes from its scheduler, pushed: the
// gateway's preload (images/scripts/bench_preload.py) serves
// .../gateway-health/watch, a response that never ends, with a JSON line
// of the scheduler's counts at once and whenever they change, and an
// empty line every HeartbeatInterval (5 minutes) otherwise. The core keeps
// one such request open per settled cluster, so that an idle cluster
// costs the gateway nothing but a heartbeat read every few minutes, and a
// change (a worker lost, the first task) arrives at once instead of at
// the next poll. What would have needed frequent heartbeats is found
// without them, each within HeartbeatTimeout:
//
//   - the scheduler's process died: its stream ends (the kernel closes
//     its socket);
//   - its host or the network between went away: TCP keepalive, which
//     the kernel runs without waking the gateway, ends the stream;
//   - its event loop is blocked: the preload's watchdog thread ends the
//     stream (?stall=, a third of the timeout).
//
// And then:
//
//   - a line with other workers than the store says, or the stream
//     ending, queues a full pass at once, which asks counts.json and
//     fails the cluster once HeartbeatTimeout has passed since the stream
//     ended without an answer;
//   - no line for the heartbeat interval and a margin (a frozen process,
//     which none of the above sees) queues a full pass too;
//   - busy counts keep the idle clock at now for as long as they last.
//
// A scheduler without the endpoint (started before the preload had it, or
// by a backend's stand-in) answers 404, and its cluster is polled as
// before (countsPool); so is every cluster while its watch is not live.

// State is where a cluster's watch stands.
type State int32

const (
	Dialing     State = iota // not yet streaming
	Live                     // streaming
	Unsupported              // the scheduler has no watch endpoint: poll it
	Ended                    // the stream ended or failed; the cluster was queued
)

// watchRetry is how long a cluster whose watch never streamed is polled
// before its watch is tried again.
const watchRetry = 10 * time.Minute

// watchMaxLinesPerSecond bounds what a stream may say: a scheduler says a
// line when its counts change, which a busy one may do every second, and
// a heartbeat now and then; one that floods is polled instead.
const watchMaxLinesPerSecond = 20

// watchMaxLine bounds one line of the stream.
const watchMaxLine = 64 << 10

// Watch is one cluster's open watch.
type Watch struct {
	addr    string // what it was made from
	cert    []byte
	made    time.Time
	cancel  context.CancelFunc
	state   atomic.Int32
	heard   atomic.Int64 // time.Now().UnixNano() of the last line, or of the start
	live    atomic.Int64 // time.Now().UnixNano() when it began to stream; 0 before
	busy    atomic.Bool  // the last counts said busy
	workers atomic.Int64 // the last counts' workers; -1 before the first

	// The stream, used by one goroutine at a time: the one reading it,
	// or, once parked, whoever takes it from the park set.
	ctx      context.Context
	name     string
	conn     net.Conn // the connection (TLS over raw, or raw)
	raw      net.Conn // its socket, for the park set
	nonblock bool     // raw's reads do not wait: the watch parks
	br       *bufio.Reader
	body     watchBody
	line     []byte // a line begun
	window   time.Time
	inWindow int
}

func (w *Watch) State() State { return State(w.state.Load()) }

// Workers is what the stream's last counts said of the workers; -1
// before the first.
func (w *Watch) Workers() int { return int(w.workers.Load()) }

// Heard is when the stream last said something (or, before it did, when
// the watch began).
func (w *Watch) Heard() time.Time { return time.Unix(0, w.heard.Load()) }

// Busy is whether the stream's last counts said busy.
func (w *Watch) Busy() bool { return w.busy.Load() }

// RetryDue says whether the watch never streamed and has been polled for
// long enough that it is to be tried again.
func (w *Watch) RetryDue(now time.Time) bool {
	return w.State() == Unsupported && now.Sub(w.made) > watchRetry
}

// SilentFor is how long it has been since the last line.
func (w *Watch) SilentFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, w.heard.Load()))
}

// watchPool holds the open watches.
type watchPool struct {
	beat    time.Duration // between heartbeats
	silence time.Duration // without a line, after which the cluster gets a full pass
	stall   time.Duration // the scheduler's event loop blocked this long ends its stream
	quick   time.Duration // a stream that ends sooner after it began is polled instead
	// keepAlive has the kernel end a stream whose host stopped answering
	// (lostAfter at most after its last packet).
	keepAlive net.KeepAliveConfig
	lostAfter time.Duration
	// lines is told of each counts line of a cluster's stream, on its
	// watch's goroutine, and whether the line before said busy
	// (heartbeats only move the watch's heard).
	lines func(cluster string, c *Counts, wasBusy bool)
	// ended is told once when a live watch ends.
	ended func(cluster string, err error)
	// live is told when a watch starts streaming: the cluster's pooled
	// counts.json connection is then not needed (nil: nothing to do).
	live func(cluster string)

	parked *park.Set[*Watch] // live streams with nothing to read

	mu   sync.Mutex
	ctx  context.Context // the core's run; nil before Run
	m    map[string]*Watch
	wg   sync.WaitGroup
	open atomic.Int64 // watches streaming now (tests, the benchmark)
}

// newWatchPool makes the pool for a heartbeat timeout and interval.
func newWatchPool(timeout, beat time.Duration, lines func(string, *Counts, bool), ended func(string, error)) *watchPool {
	beat = max(beat, time.Second)
	// The preload looks at the clock once a second, so a heartbeat may
	// come a second late: a margin of 1.5s at least. A beat shorter than
	// the timeout leaves the full pass half the rest to run in.
	margin := max(max(timeout-beat, 0)/2, 1500*time.Millisecond, beat/20)
	ka := net.KeepAliveConfig{Enable: true, Idle: max(timeout/3, time.Second), Interval: max(timeout/6, time.Second), Count: 2}
	p := &watchPool{
		beat: beat, silence: beat + margin, stall: max(timeout/3, time.Second), quick: max(min(beat, timeout), time.Second),
		keepAlive: ka, lostAfter: ka.Idle + time.Duration(ka.Count)*ka.Interval,
		lines: lines, ended: ended, m: map[string]*Watch{},
	}
	p.parked = park.NewInline(p.follow)
	return p
}

// run makes ensure start watches under ctx; they end with it.
func (p *watchPool) run(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	context.AfterFunc(ctx, func() {
		p.mu.Lock()
		for name, w := range p.m {
			w.cancel()
			delete(p.m, name)
		}
		p.mu.Unlock()
		// The watches' own ends take what is parked out (Unpark works on
		// a stopped set).
		p.parked.Stop()
	})
}

// ensure has cl's scheduler watched and returns its watch: the one open
// already unless it ended or cl's address or certificate changed. Nil
// before run.
func (p *watchPool) ensure(cl *store.Cluster) *Watch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return nil
	}
	if w, ok := p.m[cl.Name]; ok {
		st := w.State()
		retry := st == Ended || st == Unsupported && time.Since(w.made) > watchRetry
		if w.addr == cl.DashboardAddress && bytes.Equal(w.cert, cl.TLSCert) && !retry {
			return w
		}
		w.cancel()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	w := &Watch{addr: cl.DashboardAddress, cert: bytes.Clone(cl.TLSCert), cancel: cancel, made: time.Now()}
	w.heard.Store(time.Now().UnixNano())
	w.workers.Store(-1)
	p.m[cl.Name] = w
	target := newCountsEntry(cl)
	w.ctx, w.name = ctx, cl.Name
	p.wg.Add(1) // until finish
	go func() {
		if err := p.dialStream(ctx, target, w); err != nil {
			p.finish(w, err)
			return
		}
		p.follow(w)
	}()
	return w
}

// finish ends a watch whose stream ended or failed (err), or that was
// dropped: it is called once, by the watch's owner (the goroutine that
// read it last, or the drop that unparked it).
func (p *watchPool) finish(w *Watch, err error) {
	defer p.wg.Done()
	dropped := w.ctx.Err() != nil
	w.cancel()
	if w.conn != nil {
		w.conn.Close()
	}
	if w.live.Load() != 0 {
		p.open.Add(-1)
	}
	if dropped {
		return
	}
	if w.State() != Live {
		// Never streamed (no endpoint, refused, an error page): the
		// cluster is polled, and the watch tried again later.
		w.state.Store(int32(Unsupported))
		return
	}
	// An open stream said the scheduler was there until it ended (the
	// heartbeat clock of the full pass that follows), or, lost to
	// keepalive, until the kernel's probes began.
	if end := p.endedAt(time.Now(), err); end.UnixNano() > w.heard.Load() {
		w.heard.Store(end.UnixNano())
	}
	if time.Since(time.Unix(0, w.live.Load())) < p.quick {
		// A stream that ends at once, or says something wrong, would
		// otherwise have a pass and a new stream follow each other as
		// fast as they run: the cluster is polled for a while.
		w.state.Store(int32(Unsupported))
	} else {
		w.state.Store(int32(Ended))
	}
	p.ended(w.name, err)
}

// endedAt is the last moment a stream that ended at now with err said its
// scheduler was there: now, unless TCP keepalive ended it (the host went
// silent before the kernel's probes began).
func (p *watchPool) endedAt(now time.Time, err error) time.Time {
	if errors.Is(err, syscall.ETIMEDOUT) {
		return now.Add(-p.lostAfter)
	}
	return now
}

// drop ends cluster's watch.
func (p *watchPool) drop(cluster string) {
	p.mu.Lock()
	w, ok := p.m[cluster]
	delete(p.m, cluster)
	p.mu.Unlock()
	if ok {
		w.cancel()
	}
}

// dropIf ends cluster's watch if it is still w (a full pass may have
// opened a new one meanwhile).
func (p *watchPool) dropIf(cluster string, w *Watch) {
	p.mu.Lock()
	ok := p.m[cluster] == w
	if ok {
		delete(p.m, cluster)
	}
	p.mu.Unlock()
	if ok {
		w.cancel()
	}
}

// lastHeard is when cluster's stream last said something, if it streams.
func (p *watchPool) lastHeard(cluster string) (time.Time, bool) {
	p.mu.Lock()
	w, ok := p.m[cluster]
	p.mu.Unlock()
	if !ok || w.live.Load() == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, w.heard.Load()), true
}

// keepOnly ends the watches of clusters keep does not name.
func (p *watchPool) keepOnly(keep func(cluster string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, w := range p.m {
		if !keep(name) {
			w.cancel()
			delete(p.m, name)
		}
	}
}

// Len is the number of watches held.
func (p *watchPool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

var errWatchEOF = errors.New("watch: the scheduler ended the stream")

// dialStream dials w's scheduler and reads the answer's head; on success the
// stream is live and w holds its connection.
func (p *watchPool) dialStream(ctx context.Context, e *countsEntry, w *Watch) error {
	if e.err != nil {
		return e.err
	}
	deadline := time.Now().Add(PollTimeout)
	conn, err := e.dialKeepAlive(ctx, deadline, p.keepAlive)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	w.conn, w.raw = conn, conn
	if tc, ok := conn.(*tls.Conn); ok {
		w.raw = tc.NetConn()
	}
	qc, nonblock := w.raw.(*quietnet.Conn)
	// Dropping the watch closes its connection, which ends a read or a
	// park (then the drop owns the watch and finishes it).
	context.AfterFunc(ctx, func() {
		conn.Close()
		if p.parked.Unpark(w) {
			p.finish(w, ctx.Err())
		}
	})
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if _, err := conn.Write(e.watchRequest(p.beat, p.stall)); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	w.br = bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	// The body is read here, not through resp.Body: its chunked reader
	// keeps a read's timeout as its error for good, and a parked watch
	// ends every read with one.
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-ndjson") {
		// Something else answered (a server that says 200 to any path):
		// its body would end at once, and a pass follow every end.
		return fmt.Errorf("watch: the answer is %q, not a stream", ct)
	}
	switch {
	case slices.Equal(resp.TransferEncoding, []string{"chunked"}):
		w.body.chunked = true
	case resp.ContentLength >= 0:
		return fmt.Errorf("watch: the answer has a length (%d bytes), not a stream", resp.ContentLength)
	}
	// From here the scheduler writes when it likes: the heartbeat check
	// (the sweep, on silence) replaces the read deadline.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if nonblock {
		qc.SetNonblocking(true)
		w.nonblock = true
	}
	w.live.Store(time.Now().UnixNano())
	w.state.Store(int32(Live))
	if p.live != nil {
		p.live(w.name)
	}
	p.open.Add(1)
	return nil
}

// follow reads w's stream until nothing more has come, then parks it: no
// goroutine waits on an idle stream. The park set calls follow again, on
// its own goroutine, when the socket is readable or closed; the socket's
// reads then never wait (quietnet's nonblocking mode: a TLS record not
// all here yet parks the watch again until the rest comes). It finishes
// w when the stream ends. A connection that cannot read without waiting
// (not TCP) keeps its goroutine, reading as usual.
func (p *watchPool) follow(w *Watch) {
	var buf [512]byte
	for {
		n, err := w.br.Read(buf[:])
		if n > 0 {
			if err := p.take(w, buf[:n]); err != nil {
				p.finish(w, err)
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && w.nonblock:
			if !p.parked.Park(w, w.raw) {
				// The set is stopped (the core's run ended) or the
				// connection closed (the watch was dropped).
				p.finish(w, fmt.Errorf("watch: %w", net.ErrClosed))
			}
			return
		case errors.Is(err, io.EOF):
			p.finish(w, errWatchEOF)
			return
		default:
			p.finish(w, fmt.Errorf("watch: %w", err))
			return
		}
	}
}

// take decodes bytes of w's stream (chunked or not) and handles each
// line they complete.
func (p *watchPool) take(w *Watch, b []byte) error {
	d := &w.body
	for len(b) > 0 {
		if !d.chunked {
			return p.lineBytes(w, b)
		}
		switch d.state {
		case chunkSize:
			c := b[0]
			b = b[1:]
			switch {
			case c == '\n':
				if d.size == 0 {
					return errWatchEOF // the last chunk
				}
				d.left, d.size, d.ext, d.state = d.size, 0, false, chunkData
			case c == '\r' || d.ext:
			case c == ';':
				d.ext = true
			default:
				v, ok := unhex(c)
				if !ok || d.size > watchMaxLine {
					return fmt.Errorf("watch: a bad chunk size")
				}
				d.size = d.size<<4 | int64(v)
			}
		case chunkData:
			n := min(int64(len(b)), d.left)
			if err := p.lineBytes(w, b[:n]); err != nil {
				return err
			}
			b, d.left = b[n:], d.left-n
			if d.left == 0 {
				d.state = chunkEnd
			}
		case chunkEnd:
			if b[0] == '\n' {
				d.state = chunkSize
			}
			b = b[1:]
		}
	}
	return nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lineBytes adds stream data to w's line, handling each line it ends.
func (p *watchPool) lineBytes(w *Watch, b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.line)+len(b) > watchMaxLine {
				return fmt.Errorf("watch: a line longer than %d bytes", watchMaxLine)
			}
			w.line = append(w.line, b...)
			return nil
		}
		line := b[:i+1]
		if len(w.line) > 0 {
			line = append(w.line, line...)
		}
		b = b[i+1:]
		err := p.handleLine(w, line)
		w.line = w.line[:0]
		if cap(w.line) > 1024 {
			w.line = nil // a long line's buffer is not kept
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// handleLine takes one line of w's stream: a heartbeat (only heard
// moves) or counts.
func (p *watchPool) handleLine(w *Watch, line []byte) error {
	now := time.Now()
	w.heard.Store(now.UnixNano())
	if now.Sub(w.window) > time.Second {
		w.window, w.inWindow = now, 0
	}
	if w.inWindow++; w.inWindow > watchMaxLinesPerSecond {
		return fmt.Errorf("watch: more than %d lines in a second", watchMaxLinesPerSecond)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil // a heartbeat: heard is all it says
	}
	var c Counts
	if err := json.Unmarshal(line, &c); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	wasBusy := w.busy.Swap(c.Busy())
	w.workers.Store(int64(c.Workers))
	p.lines(w.name, &c, wasBusy)
	return nil
}

// chunkState is where the decoding of a chunked body stands.
type chunkState uint8

const (
	chunkSize chunkState = iota // reading a chunk's size line
	chunkData                   // reading a chunk's data
	chunkEnd                    // reading the line end after a chunk's data
)

// watchBody is the decoding state of a stream's body.
type watchBody struct {
	chunked bool
	state   chunkState
	ext     bool  // in the size line's extension
	size    int64 // the size line so far
	left    int64 // of the chunk's data
}

// watchRequest is the request that opens a watch.
func (e *countsEntry) watchRequest(beat, stall time.Duration) []byte {
	beatS := strconv.FormatFloat(beat.Seconds(), 'f', -1, 64)
	stallS := strconv.FormatFloat(stall.Seconds(), 'f', -1, 64)
	return []byte("GET " + e.prefix + "/gateway-health/watch?beat=" + beatS + "&stall=" + stallS + " HTTP/1.1\r\nHost: " + e.hostHeader +
		"\r\nUser-Agent: gateway-health\r\nAccept: application/x-ndjson\r\n\r\n")
}
