package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"golang.org/x/sync/singleflight"
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

// watch is one user's: its streams, each told by a channel of one, and
// the generation they were last told of.
type watch struct {
	subs map[chan struct{}]struct{}
	stop context.CancelFunc
	gen  int64 // under hub.mu
}

func newHub(gen func(context.Context, string) (int64, error), every time.Duration, log *slog.Logger) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{gen: gen, every: every, log: log, watches: map[string]*watch{}, ctx: ctx, cancel: cancel}
}

// subscribe returns a channel told whenever owner's clusters change, the
// function that ends the subscription, and the function that says the
// generation last told. ok is false after close.
func (h *hub) subscribe(owner string) (ch chan struct{}, done func(), gen func() int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shutdown {
		return nil, nil, nil, false
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
		}, func() int64 {
			h.mu.Lock()
			defer h.mu.Unlock()
			return w.gen
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
		w.gen = gen
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
// them) and then "logs" with each read's new lines. A build's page asks
// for its build (?build=HASH, buildStream): its event is "build", the
// page's live part rendered anew. The list of builds asks for it
// (?builds=1): its event is "builds", the list rendered anew.
func (s *Server) events(w http.ResponseWriter, r *http.Request, u *auth.User) {
	q := r.URL.Query()
	name := q.Get("cluster")
	// next renders the page's update, given the generation the hub told
	// (-1 at the start: read it then).
	all := q.Get("all") == "1"
	next := func(ctx context.Context, gen int64) (string, string, error) {
		frag, _, err := s.clustersTable(ctx, u, gen, all)
		return "clusters", frag, err
	}
	// shown is the generation of the list the page shows (-1: unknown).
	// The page says which it was made at (?since=): the stream starts
	// with the table only if it has moved since, and sends it again only
	// when it moves (a large list is not sent twice for every page
	// opened, nor again when a new watch's first read finds nothing new).
	shown := int64(-1)
	watches, key := s.hub, u.Owner()
	switch {
	case q.Has("build"):
		hash, g, ok := s.buildStream(w, r, u, q.Get("build"))
		if !ok {
			return
		}
		watches, key, shown = s.envs.builds, hash, g
		next = func(_ context.Context, gen int64) (string, string, error) {
			frag, err := s.buildFragment(r, u, hash, gen)
			return "build", frag, err
		}
	case q.Has("builds"):
		if s.envs.envs == nil {
			http.Error(w, envsOff, http.StatusNotFound)
			return
		}
		g, err := s.envs.envs.BuildsGeneration(r.Context(), whoOf(u).ID)
		if err != nil {
			if status, msg, ok := s.cfg.Explain(r, err); ok {
				http.Error(w, msg, status)
			}
			return
		}
		watches, key, shown = s.envs.lists, whoOf(u).ID, g
		next = func(ctx context.Context, gen int64) (string, string, error) {
			frag, err := s.buildsFragment(ctx, u, gen)
			return "builds", frag, err
		}
	case name == "":
		if g, err := s.listGeneration(r.Context(), u.Owner()); err == nil {
			shown = g
		}
	}
	since, err := strconv.ParseInt(q.Get("since"), 10, 64)
	fresh := err == nil && shown >= 0 && since == shown
	var logs *logStream
	if name != "" {
		owner, ok := s.clusterStream(w, r, u, name)
		if !ok {
			return
		}
		next = func(ctx context.Context, _ int64) (string, string, error) {
			frag, err := s.clusterFragment(ctx, u, name)
			return "cluster", frag, err
		}
		if q.Get("follow") != "" {
			var ok bool
			if logs, ok = s.followLogs(w, r, u, owner, name, q.Get("tail")); !ok {
				return
			}
			defer logs.close()
		}
	}
	s.noteGroups(u)
	rc := http.NewResponseController(w)
	ch, done, gen, ok := watches.subscribe(key)
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
	if !fresh {
		if event, frag, err := next(r.Context(), shown); err == nil && !send(sseEvent(event, frag)) {
			return
		}
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
			g := gen()
			if name == "" && shown >= 0 && g == shown {
				continue // already shown
			}
			shown = g
			event, frag, err := next(r.Context(), g)
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

// fragments keeps the clusters table last rendered for each user (and
// read-only or not), by generation: a user's open pages are told of a
// change at once, and render it once between them.
type fragments struct {
	flight singleflight.Group
	mu     sync.Mutex
	last   map[fragKey]string
}

type fragKey struct {
	owner    string
	readOnly bool
	all      bool // the whole list, not its first page
	gen      int64
	at       int64 // see Server.fragKey
}

// get returns the fragment for k, rendering it (once, however many pages
// ask at the same time) if it is not the one kept.
func (f *fragments) get(k fragKey, render func() (string, error)) (string, error) {
	f.mu.Lock()
	html, ok := f.last[k]
	f.mu.Unlock()
	if ok {
		return html, nil
	}
	v, err, _ := f.flight.Do(fmt.Sprintf("%q %t %t %d %d", k.owner, k.readOnly, k.all, k.gen, k.at), func() (any, error) {
		html, err := render()
		if err != nil {
			return "", err
		}
		f.keep(k, html)
		return html, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (f *fragments) keep(k fragKey, html string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[fragKey]string{}
	}
	for old := range f.last {
		if old.owner == k.owner && old.readOnly == k.readOnly && old.all == k.all {
			delete(f.last, old)
		}
	}
	if len(f.last) >= maxFragments {
		clear(f.last) // a bound; rendering again is correct, only slower
	}
	f.last[k] = html
}

// maxFragments bounds the fragments kept: one per user with an open page.
const maxFragments = 4096
