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
	return c.admitLocked(keys)
}

// release forgets a connection admit counted under keys.
func (c *caps) release(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(keys)
}

// swap gives the place of a connection counted under old to a new one
// under keys, at once, so that no other newcomer takes it in between; if
// a keyed cap refuses the new one (its reason), the old place is freed.
func (c *caps) swap(old []string, keys ...string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(old)
	return c.admitLocked(keys)
}

func (c *caps) admitLocked(keys []string) string {
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

func (c *caps) releaseLocked(keys []string) {
	c.held--
	for i, k := range keys {
		b := &c.by[i]
		if b.held[k]--; b.held[k] <= 0 {
			delete(b.held, k)
		}
	}
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
	source  string
	w       *waiting
	// Under w.mu. serving: requests of this connection being served
	// (reqbound.Conn); a connection serving none waits on its client, is
	// listed in w (elem), and may be evicted. gone: closed or evicted,
	// never listed again.
	serving int
	elem    *list.Element
	gone    bool
}

func (c *heldConn) free() { c.once.Do(c.release) }

// Serving implements reqbound.Conn.
func (c *heldConn) Serving(on bool) { c.w.serving(c, on) }

// waiting keeps the HTTP connections that wait on their client (for
// their first bytes, headers, a body without accepted credentials, or
// the next request of a keep-alive), by source, so that at the total cap
// a newcomer takes the place of one from the address that holds the most
// waiting places, if that is more than the newcomer's address holds: a
// flood cannot keep others out by holding places, a client with a single
// connection keeps it (even brand new, before its first bytes: a flood
// that arrives faster than the cap turns over would otherwise close
// every connection before it could speak), and a connection being served
// keeps its place. Finding the victim is O(1): sources are kept in
// buckets by their count of waiting connections.
type waiting struct {
	mu       sync.Mutex
	bySource map[string]*list.List // source -> its waiting connections, oldest first
	buckets  map[int]map[string]struct{}
	most     int // the largest count with a source in its bucket, 0 when none waits
}

func (w *waiting) init() {
	if w.bySource == nil {
		w.bySource = map[string]*list.List{}
		w.buckets = map[int]map[string]struct{}{}
	}
}

// add lists c as waiting (a newly admitted connection).
func (w *waiting) add(c *heldConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.w = w
	w.list(c)
}

// remove forgets c for good (closed, or handed over).
func (w *waiting) remove(c *heldConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.gone = true
	w.unlist(c)
}

// serving moves c out of the waiting places while it serves a request,
// and back (as the newest) once it serves none.
func (w *waiting) serving(c *heldConn, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		if c.serving++; c.serving == 1 {
			w.unlist(c)
		}
		return
	}
	if c.serving--; c.serving == 0 && !c.gone {
		w.list(c)
	}
}

func (w *waiting) list(c *heldConn) {
	w.init()
	l := w.bySource[c.source]
	if l == nil {
		l = list.New()
		w.bySource[c.source] = l
	}
	c.elem = l.PushBack(c)
	w.move(c.source, l.Len()-1, l.Len())
}

func (w *waiting) unlist(c *heldConn) {
	if c.elem == nil {
		return
	}
	l := w.bySource[c.source]
	l.Remove(c.elem)
	c.elem = nil
	w.move(c.source, l.Len()+1, l.Len())
	if l.Len() == 0 {
		delete(w.bySource, c.source)
	}
}

// move takes source from the bucket of count from to that of count to
// (they differ by one) and keeps most.
func (w *waiting) move(source string, from, to int) {
	if b := w.buckets[from]; b != nil {
		delete(b, source)
		if len(b) == 0 {
			delete(w.buckets, from)
		}
	}
	if to > 0 {
		b := w.buckets[to]
		if b == nil {
			b = map[string]struct{}{}
			w.buckets[to] = b
		}
		b[source] = struct{}{}
	}
	switch {
	case to > w.most:
		w.most = to
	case from == w.most && w.buckets[from] == nil:
		w.most = to
	}
}

// takeVictim removes and returns the oldest waiting connection of a
// source with the most waiting connections, if it holds more than
// newcomer's source does (nil: none). Newcomers arriving together each
// get a victim of their own.
func (w *waiting) takeVictim(newcomer string) *heldConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.most == 0 || w.most <= w.count(newcomer) {
		return nil
	}
	var source string
	for source = range w.buckets[w.most] {
		break
	}
	c := w.bySource[source].Front().Value.(*heldConn)
	c.gone = true
	w.unlist(c)
	return c
}

func (w *waiting) count(source string) int {
	if l := w.bySource[source]; l != nil {
		return l.Len()
	}
	return 0
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
