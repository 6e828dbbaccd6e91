package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
)

// hub watches the cluster generation of each user with an open page, one
// read per user per interval however many pages they have open, and
// tells their streams when it moves.
type hub struct {
	gen   func(ctx context.Context, owner string) (int64, error)
	every time.Duration
	log   *slog.Logger

	mu       sync.Mutex
	watches  map[string]*watch
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	shutdown bool
}

// watch is one user's: its streams, each told by a channel of one.
type watch struct {
	subs map[chan struct{}]struct{}
	stop context.CancelFunc
}

func newHub(gen func(context.Context, string) (int64, error), every time.Duration, log *slog.Logger) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{gen: gen, every: every, log: log, watches: map[string]*watch{}, ctx: ctx, cancel: cancel}
}

// subscribe returns a channel told whenever owner's clusters change, and
// the function that ends the subscription. ok is false after close.
func (h *hub) subscribe(owner string) (ch chan struct{}, done func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shutdown {
		return nil, nil, false
	}
	w := h.watches[owner]
	if w == nil {
		ctx, stop := context.WithCancel(h.ctx)
		w = &watch{subs: map[chan struct{}]struct{}{}, stop: stop}
		h.watches[owner] = w
		h.wg.Add(1)
		go h.run(ctx, owner, w)
	}
	ch = make(chan struct{}, 1)
	w.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(w.subs, ch)
		if len(w.subs) == 0 && h.watches[owner] == w {
			delete(h.watches, owner)
			w.stop()
		}
	}, true
}

// run reads owner's generation every interval while anyone watches.
func (h *hub) run(ctx context.Context, owner string, w *watch) {
	defer h.wg.Done()
	t := time.NewTicker(h.every)
	defer t.Stop()
	// The first tick tells the streams whatever it reads: a change made
	// between a page's rendering and a first read would otherwise wait
	// for the next change.
	var last int64
	err := errFirstRead
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gen, gerr := h.gen(ctx, owner)
		if gerr != nil {
			if ctx.Err() == nil {
				h.log.Debug("console: reading the cluster generation", "err", gerr)
			}
			continue
		}
		if err == nil && gen == last {
			continue
		}
		last, err = gen, nil
		h.mu.Lock()
		for ch := range w.subs {
			select {
			case ch <- struct{}{}:
			default: // already told, not yet read
			}
		}
		h.mu.Unlock()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.shutdown = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

var errFirstRead = errors.New("console: the generation was not compared yet")

// keepAlive is how often a quiet stream sends a comment, so that proxies
// in between do not close it as idle.
const keepAlive = 25 * time.Second

// writeBound is how long one write to a stream may take: a client that
// stopped reading is let go.
const writeBound = 30 * time.Second

// events is the page's event stream (text/event-stream): on each change
// of the user's clusters, an event "clusters" with the clusters table
// rendered anew, which console.js puts in place. A cluster's page asks
// for its cluster (?cluster=NAME): its events are "cluster", the page's
// facts rendered anew, and, while the page follows the logs (&follow=1),
// "logs-reset" with the logs' last lines (&tail=, as the page showed
// them) and then "logs" with each read's new lines.
func (s *Server) events(w http.ResponseWriter, r *http.Request, u *auth.User) {
	q := r.URL.Query()
	name := q.Get("cluster")
	next := func(ctx context.Context) (string, string, error) {
		frag, err := s.clustersFragment(ctx, u)
		return "clusters", frag, err
	}
	var logs *logStream
	if name != "" {
		if !s.clusterStream(w, r, u, name) {
			return
		}
		next = func(ctx context.Context) (string, string, error) {
			frag, err := s.clusterFragment(ctx, u, name)
			return "cluster", frag, err
		}
		if q.Get("follow") != "" {
			var ok bool
			if logs, ok = s.followLogs(w, r, u, name, q.Get("tail")); !ok {
				return
			}
			defer logs.close()
		}
	}
	rc := http.NewResponseController(w)
	ch, done, ok := s.hub.subscribe(u.Owner())
	if !ok {
		http.Error(w, "the gateway is stopping", http.StatusServiceUnavailable)
		return
	}
	defer done()
	// The stream outlives the server's read timeout (which would end its
	// context) and write timeout; each write has a bound of its own.
	_ = rc.SetReadDeadline(time.Time{})
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeBound))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !send([]byte("retry: 3000\n\n")) {
		return
	}
	// The page as it is now: it may have changed since it was rendered,
	// before this stream was told of changes.
	if event, frag, err := next(r.Context()); err == nil && !send(sseEvent(event, frag)) {
		return
	}
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.hub.ctx.Done():
			return
		case <-ping.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		case <-logs.tick():
			if ev := logs.read(r.Context()); ev != nil && !send(ev) {
				return
			}
		case <-ch:
			// A session ended elsewhere stops its streams at the next change.
			if _, err := s.user(r); err != nil {
				send([]byte("event: signedout\ndata: \n\n"))
				return
			}
			event, frag, err := next(r.Context())
			if err != nil {
				s.log.Debug("console: rendering a page's update for a stream", "event", event, "err", err)
				continue
			}
			if !send(sseEvent(event, frag)) {
				return
			}
		}
	}
}

// sseEvent frames data (HTML or text) as one event: each line its own
// "data:". A carriage return ends a line in the stream's framing as a
// newline does, so it ends one here too: a log line or a cluster's
// reason cannot add fields (an event name) of its own.
func sseEvent(name, data string) []byte {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(sseLines.Replace(data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return []byte(b.String())
}

var sseLines = strings.NewReplacer("\r\n", "\n", "\r", "\n")
