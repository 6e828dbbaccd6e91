package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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
	last, err := h.gen(ctx, owner)
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

// keepAlive is how often a quiet stream sends a comment, so that proxies
// in between do not close it as idle.
const keepAlive = 25 * time.Second

// writeBound is how long one write to a stream may take: a client that
// stopped reading is let go.
const writeBound = 30 * time.Second

// events is the page's event stream (text/event-stream): on each change
// of the user's clusters, an event "clusters" with the clusters table
// rendered anew, which console.js puts in place. A build's page asks for
// its build instead (?build=HASH, buildEvents).
func (s *Server) events(w http.ResponseWriter, r *http.Request, u *auth.User) {
	if r.URL.Query().Has("build") {
		s.buildEvents(w, r, u)
		return
	}
	ch, done, gen, ok := s.hub.subscribe(u.Owner())
	if !ok {
		http.Error(w, "the gateway is stopping", http.StatusServiceUnavailable)
		return
	}
	defer done()
	s.stream(w, r, ch, false, func(ctx context.Context) (string, string, error) {
		frag, err := s.frags.get(s.fragKey(u, gen()), func() (string, error) {
			return s.clustersFragment(ctx, u)
		})
		return "clusters", frag, err
	})
}

// stream serves an event stream: each time ch tells of a change (and
// once at the start, if now), the event next renders, until the page
// goes away, its session ends, or the console closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, ch <-chan struct{}, now bool, next func(ctx context.Context) (event, data string, err error)) {
	rc := http.NewResponseController(w)
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
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	changed := ch
	if now {
		told := make(chan struct{}, 1)
		told <- struct{}{}
		changed = told
	}
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
		case <-changed:
			changed = ch
			// A session ended elsewhere stops its streams at the next change.
			if _, err := s.user(r); err != nil {
				send([]byte("event: signedout\ndata: \n\n"))
				return
			}
			event, data, err := next(r.Context())
			if err != nil {
				s.log.Debug("console: rendering a page's update for its stream", "event", event, "err", err)
				continue
			}
			if !send(sseEvent(event, data)) {
				return
			}
		}
	}
}

// fragment executes one template of a page's set (a part its stream
// sends) to a string.
func (s *Server) fragment(page, tmpl string, v view) (string, error) {
	var buf strings.Builder
	if err := s.pages[page].ExecuteTemplate(&buf, tmpl, v); err != nil {
		return "", fmt.Errorf("console: %w", err)
	}
	return buf.String(), nil
}

// sseEvent frames data (HTML) as one event: each line its own "data:".
func sseEvent(name, data string) []byte {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimSuffix(line, "\r") + "\n")
	}
	b.WriteString("\n")
	return []byte(b.String())
}

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
	v, err, _ := f.flight.Do(fmt.Sprintf("%q %t %d %d", k.owner, k.readOnly, k.gen, k.at), func() (any, error) {
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
		if old.owner == k.owner && old.readOnly == k.readOnly {
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
