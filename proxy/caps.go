package proxy

import (
	"container/list"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/internal/quietnet"
)

// caps counts the connections held against a cap in total and caps by
// key (cluster, source address): the passthrough pairs have one set, the
// HTTP connections another.
type caps struct {
	mu          sync.Mutex
	total, held int
	totalReason string
	by          []keyCap
}

// keyCap caps the connections held under each value of one key.
type keyCap struct {
	max    int // 0: no cap
	reason string
	held   map[string]int
}

func newCaps(total int, reason string) *caps { return &caps{total: total, totalReason: reason} }

// per adds a cap by key: admit and release take the keys in the order
// they were added.
func (c *caps) per(limit int, reason string) *caps {
	c.by = append(c.by, keyCap{max: limit, reason: reason, held: map[string]int{}})
	return c
}

// admit counts a new connection under keys, or says which cap refuses it.
func (c *caps) admit(keys ...string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held >= c.total {
		return c.totalReason
	}
	for i, k := range keys {
		if b := &c.by[i]; b.max > 0 && b.held[k] >= b.max {
			return b.reason
		}
	}
	c.held++
	for i, k := range keys {
		c.by[i].held[k]++
	}
	return ""
}

// release forgets a connection admit counted under keys.
func (c *caps) release(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	for i, k := range keys {
		b := &c.by[i]
		if b.held[k]--; b.held[k] <= 0 {
			delete(b.held, k)
		}
	}
}

// aboveAverage says whether key holds more than its even share of
// the connections under keyed cap i.
func (c *caps) aboveAverage(i int, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &c.by[i]
	return len(b.held) > 0 && b.held[key]*len(b.held) > c.held
}

// count is how many connections are admitted now.
func (c *caps) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// tally counts refusals and closings by reason, and spaces out the log
// lines about refusals, since a flood would otherwise flood the log too.
type tally struct {
	counts   map[string]*atomic.Int64 // fixed keys, read without a lock
	lastLog  atomic.Int64             // when a refusal was last logged
	unlogged atomic.Int64             // refusals since then
}

func newTally(reasons []string) *tally {
	t := &tally{counts: map[string]*atomic.Int64{}}
	for _, r := range reasons {
		t.counts[r] = new(atomic.Int64)
	}
	return t
}

func (t *tally) add(reason string) { t.counts[reason].Add(1) }

func (t *tally) get(reason string) int64 {
	if c, ok := t.counts[reason]; ok {
		return c.Load()
	}
	return 0
}

// refused counts a refusal for reason and says whether to log now (at
// most every refuseLogEvery), with the refusals since the last line.
func (t *tally) refused(reason string) (logNow bool, since int64) {
	t.add(reason)
	t.unlogged.Add(1)
	now := time.Now().UnixNano()
	last := t.lastLog.Load()
	if now-last < int64(refuseLogEvery) || !t.lastLog.CompareAndSwap(last, now) {
		return false, 0
	}
	return true, t.unlogged.Swap(0)
}

const refuseLogEvery = 10 * time.Second

// heldConn is an HTTP connection counted against the HTTP caps until it
// is closed (by net/http, or by whoever hijacked it) or handed over to a
// passthrough pair, which counts it against the passthrough's.
type heldConn struct {
	net.Conn
	once    sync.Once
	release func()
	// serving: requests of this connection being served (reqbound.Conn);
	// a connection serving none waits on its client, and may be evicted.
	serving atomic.Int32
	elem    *list.Element // in waiting's admission order
	source  string
}

func (c *heldConn) free() { c.once.Do(c.release) }

// Serving implements reqbound.Conn.
func (c *heldConn) Serving(on bool) {
	if on {
		c.serving.Add(1)
	} else {
		c.serving.Add(-1)
	}
}

// waiting lists the HTTP connections in the order they were admitted, so
// that at the total cap the oldest one that waits on its client (for its
// first bytes, headers, or a body without accepted credentials) makes
// room for a newcomer: a slow client cannot keep others out by holding
// places, and one that is being served keeps its place.
type waiting struct {
	mu sync.Mutex
	l  list.List
}

func (w *waiting) add(c *heldConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.elem = w.l.PushBack(c)
}

func (w *waiting) remove(c *heldConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.elem != nil {
		w.l.Remove(c.elem)
		c.elem = nil
	}
}

// takeOldestIdle removes the oldest connection serving nothing from the
// list and returns it (nil: none), preferring one whose source holds more
// than its share (heavy): a flood comes from fewer addresses than it
// holds connections, and a client with one connection keeps it longer.
// Newcomers arriving together each get a victim of their own.
func (w *waiting) takeOldestIdle(heavy func(source string) bool) *heldConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	var fallback *list.Element
	for e := w.l.Front(); e != nil; e = e.Next() {
		c := e.Value.(*heldConn)
		if c.serving.Load() != 0 {
			continue
		}
		if heavy(c.source) {
			fallback = e
			break
		}
		if fallback == nil {
			fallback = e
		}
	}
	if fallback == nil {
		return nil
	}
	w.l.Remove(fallback)
	c := fallback.Value.(*heldConn)
	c.elem = nil
	return c
}

// wrapQuiet reads and writes the socket through quietnet from now on
// (which needs the socket itself, not this wrapper).
func (c *heldConn) wrapQuiet() net.Conn {
	c.Conn = quietnet.Wrap(c.Conn)
	return c
}

// CloseWrite passes a half-close on (refusePlain finishes its answer
// with one).
func (c *heldConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.free()
	return err
}

// fileLimit is the soft descriptor limit (Go raises it to the hard limit
// at start), or 0 when unknown.
func fileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}

// DefaultMaxConnections is the total cap on passthrough pairs when none is
// configured: a third of the descriptor limit, since each pair holds two.
func DefaultMaxConnections() int {
	l := fileLimit()
	if l == 0 {
		return 1000
	}
	return int(min(max(l/3, 16), 1<<20))
}

// DefaultMaxHTTPConnections is the total cap on HTTP connections when none
// is configured: a sixth of the descriptor limit. Passthrough pairs may
// take two thirds (DefaultMaxConnections), so the last sixth stays for
// what the gateway opens itself: the listener, the store's connections,
// the schedulers' health watches, dashboards' backends and log files.
func DefaultMaxHTTPConnections() int {
	l := fileLimit()
	if l == 0 {
		return 500
	}
	return int(min(max(l/6, 16), 1<<20))
}

// DefaultMaxHTTPConnectionsPerSource is the cap on HTTP connections from
// one address when none is configured: a sixteenth of the total, at least
// 8 (a browser opens up to six per host), so that one address cannot
// take the whole budget.
func DefaultMaxHTTPConnectionsPerSource(total int) int { return max(total/16, 8) }
