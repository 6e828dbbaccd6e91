package console

import (
	"context"
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
// rendered anew, which console.js puts in place.
func (s *Server) events(w http.ResponseWriter, r *http.Request, u *auth.User) {
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
		case <-ch:
			// A session ended elsewhere stops its streams at the next change.
			if _, err := s.user(r); err != nil {
				send([]byte("event: signedout\ndata: \n\n"))
				return
			}
			frag, err := s.clustersFragment(r.Context(), u)
			if err != nil {
				s.log.Debug("console: rendering the clusters for a stream", "err", err)
				continue
			}
			if !send(sseEvent("clusters", frag)) {
				return
			}
		}
	}
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
