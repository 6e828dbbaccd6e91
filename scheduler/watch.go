package scheduler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// A settled cluster's health comes from its scheduler, pushed: the
// gateway's preload (images/scripts/bench_preload.py) serves
// .../gateway-health/watch, a response that never ends, with a JSON line
// of the scheduler's counts at once and whenever they change and an empty
// line at every multiple of the beat on the wall clock otherwise, so that
// the heartbeats of all clusters arrive together and are read in one
// wake-up of the gateway. The core keeps one such request open per
// settled cluster, so that an idle cluster costs the gateway a heartbeat
// read every beat (a few microseconds) rather than a request every
// HealthInterval, and a change (a worker lost, the first task) arrives at
// once instead of at the next poll:
//
//   - a line with other workers than the store says, or the stream
//     ending (the scheduler's process died, its connection reset), queues
//     a full pass at once;
//   - no line for a beat and a half of what remains of the heartbeat
//     timeout (the beat is two thirds of it) queues a full pass too, which
//     asks counts.json and fails the cluster once HeartbeatTimeout has
//     passed since the last line, as before;
//   - busy counts keep the idle clock at now for as long as they last.
//
// A scheduler without the endpoint (started before the preload had it, or
// by a backend's stand-in) answers 404, and its cluster is polled as
// before (countsPool); so is every cluster while its watch is not live.

// watchState is where a cluster's watch stands.
type watchState int32

const (
	watchDialing     watchState = iota // not yet streaming
	watchLive                          // streaming
	watchUnsupported                   // the scheduler has no watch endpoint: poll it
	watchEnded                         // the stream ended or failed; the cluster was queued
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

// clusterWatch is one cluster's open watch.
type clusterWatch struct {
	addr    string // what it was made from
	cert    []byte
	made    time.Time
	cancel  context.CancelFunc
	state   atomic.Int32
	heard   atomic.Int64 // time.Now().UnixNano() of the last line, or of the start
	live    atomic.Int64 // time.Now().UnixNano() when it began to stream; 0 before
	busy    atomic.Bool  // the last counts said busy
	workers atomic.Int64 // the last counts' workers; -1 before the first
}

func (w *clusterWatch) State() watchState { return watchState(w.state.Load()) }

// silentFor is how long it has been since the last line.
func (w *clusterWatch) silentFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, w.heard.Load()))
}

// watchPool holds the open watches.
type watchPool struct {
	beat    time.Duration // between heartbeats
	silence time.Duration // without a line, after which the cluster gets a full pass
	// lines is told of each counts line of a cluster's stream, on its
	// watch's goroutine (heartbeats only move the watch's heard).
	lines func(cluster string, c *schedulerCounts)
	// ended is told once when a live watch ends.
	ended func(cluster string, err error)
	// live is told when a watch starts streaming: the cluster's pooled
	// counts.json connection is then not needed (nil: nothing to do).
	live func(cluster string)

	mu   sync.Mutex
	ctx  context.Context // the core's run; nil before Run
	m    map[string]*clusterWatch
	wg   sync.WaitGroup
	open atomic.Int64 // watches streaming now (tests, the benchmark)
}

// newWatchPool makes the pool for a heartbeat timeout: a beat of two
// thirds of it, and silence after a beat and half the rest (1.5s at
// least), so that the full pass a silence queues starts before the
// timeout has passed.
func newWatchPool(timeout time.Duration, lines func(string, *schedulerCounts), ended func(string, error)) *watchPool {
	beat := max(timeout*2/3, time.Second)
	// The preload looks at the clock once a second, so a heartbeat may
	// come a second late: short timeouts get that margin and more.
	margin := max(max(timeout-beat, 0)/2, 1500*time.Millisecond)
	return &watchPool{beat: beat, silence: beat + margin, lines: lines, ended: ended, m: map[string]*clusterWatch{}}
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
	})
}

// ensure has cl's scheduler watched and returns its watch: the one open
// already unless it ended or cl's address or certificate changed. Nil
// before run.
func (p *watchPool) ensure(cl *store.Cluster) *clusterWatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return nil
	}
	if w, ok := p.m[cl.Name]; ok {
		st := w.State()
		retry := st == watchEnded || st == watchUnsupported && time.Since(w.made) > watchRetry
		if w.addr == cl.DashboardAddress && bytes.Equal(w.cert, cl.TLSCert) && !retry {
			return w
		}
		w.cancel()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	w := &clusterWatch{addr: cl.DashboardAddress, cert: bytes.Clone(cl.TLSCert), cancel: cancel, made: time.Now()}
	w.heard.Store(time.Now().UnixNano())
	w.workers.Store(-1)
	p.m[cl.Name] = w
	target := newCountsEntry(cl)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		err := p.stream(ctx, cl.Name, target, w)
		if ctx.Err() != nil {
			return // dropped on purpose
		}
		if w.State() != watchLive {
			// Never streamed (no endpoint, refused, an error page): the
			// cluster is polled, and the watch tried again later.
			w.state.Store(int32(watchUnsupported))
			return
		}
		if time.Since(time.Unix(0, w.live.Load())) < p.beat {
			// A stream that ends at once, or says something wrong, would
			// otherwise have a pass and a new stream follow each other
			// as fast as they run: the cluster is polled for a while.
			w.state.Store(int32(watchUnsupported))
		} else {
			w.state.Store(int32(watchEnded))
		}
		p.ended(cl.Name, err)
	}()
	return w
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
func (p *watchPool) dropIf(cluster string, w *clusterWatch) {
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

// stream runs one watch until its stream ends or ctx does.
func (p *watchPool) stream(ctx context.Context, cluster string, e *countsEntry, w *clusterWatch) error {
	if e.err != nil {
		return e.err
	}
	deadline := time.Now().Add(pollTimeout)
	conn, err := e.dial(ctx, deadline)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer conn.Close()
	// Closing the connection is what ends a read that waits for a line.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if _, err := conn.Write(e.watchRequest(p.beat)); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	// The body is not closed: closing it would read the rest of a stream
	// that need not end. Closing the connection (deferred) ends it.
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-ndjson") {
		// Something else answered (a server that says 200 to any path):
		// its body would end at once, and a pass follow every end.
		return fmt.Errorf("watch: the answer is %q, not a stream", ct)
	}
	// From here the scheduler writes when it likes: the heartbeat check
	// (the sweep, on silence) replaces the read deadline, which would
	// otherwise cost a timer reset per line.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	w.live.Store(time.Now().UnixNano())
	w.state.Store(int32(watchLive))
	if p.live != nil {
		p.live(cluster)
	}
	p.open.Add(1)
	defer p.open.Add(-1)
	lines := bufio.NewReaderSize(resp.Body, 256)
	var long []byte
	var window time.Time
	inWindow := 0
	for {
		line, err := lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if long = append(long, line...); len(long) > watchMaxLine {
				return fmt.Errorf("watch: a line longer than %d bytes", watchMaxLine)
			}
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errWatchEOF
			}
			return fmt.Errorf("watch: %w", err)
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		now := time.Now()
		w.heard.Store(now.UnixNano())
		if now.Sub(window) > time.Second {
			window, inWindow = now, 0
		}
		if inWindow++; inWindow > watchMaxLinesPerSecond {
			return fmt.Errorf("watch: more than %d lines in a second", watchMaxLinesPerSecond)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // a heartbeat: heard is all it says
		}
		var c schedulerCounts
		if err := json.Unmarshal(line, &c); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		w.busy.Store(c.busy())
		w.workers.Store(int64(c.Workers))
		p.lines(cluster, &c)
	}
}

// watchRequest is the request that opens a watch.
func (e *countsEntry) watchRequest(beat time.Duration) []byte {
	beatS := strconv.FormatFloat(beat.Seconds(), 'f', -1, 64)
	return []byte("GET " + e.prefix + "/gateway-health/watch?beat=" + beatS + " HTTP/1.1\r\nHost: " + e.hostHeader +
		"\r\nUser-Agent: gateway-health\r\nAccept: application/x-ndjson\r\n\r\n")
}

// watchLine takes a counts line of cluster's stream: an answer (the
// heartbeat clock), the idle clock's news, and, with workers other than
// the store's, a reason for a full pass.
func (c *Core) watchLine(cluster string, counts *schedulerCounts) {
	c.mu.Lock()
	now := c.now()
	c.answered[cluster] = now
	s := c.settled[cluster]
	if _, seen := c.active[cluster]; !seen || counts.busy() {
		c.active[cluster] = now
	}
	c.mu.Unlock()
	if s != nil && counts.Workers != s.cl.ReadyWorkers {
		c.requeue(cluster)
	}
}

// watchEnded queues a full pass for a cluster whose stream ended: it asks
// counts.json and describes the members, and fails the cluster if its
// scheduler is gone.
func (c *Core) watchEnded(cluster string, err error) {
	c.log.Debug("health watch ended", "cluster", cluster, "err", err)
	c.mu.Lock()
	_, settled := c.settled[cluster]
	c.mu.Unlock()
	if settled {
		c.requeue(cluster)
	}
}
