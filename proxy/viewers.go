package proxy

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
)

// Viewers decides whether someone other than a cluster's owner may view
// its dashboard: the cluster is shared with them. With note, the viewing
// is one to record (a request arriving); without, a check of one already
// open.
type Viewers interface {
	MayView(ctx context.Context, cluster string, u *auth.User, note bool) (bool, error)
}

// DefaultViewerRecheck is how often the dashboard requests still open of
// someone a cluster is shared with (a websocket, a long poll) are checked
// again: unsharing ends them within it, and new requests at once (the
// check reads the store every time, with no cache).
const DefaultViewerRecheck = 250 * time.Millisecond

// SetViewers lets people a cluster is shared with open its dashboard
// (without it only owners may), and checks their open requests again
// every recheck (0: DefaultViewerRecheck). Call before DashboardHandler.
func (s *Server) SetViewers(v Viewers, recheck time.Duration) {
	if recheck <= 0 {
		recheck = DefaultViewerRecheck
	}
	s.viewers, s.viewerRecheck = v, recheck
}

// viewerWatch holds the open dashboard requests of people who do not own
// their cluster, and ends them when their access ends: one goroutine per
// person and cluster while any of their requests is open.
type viewerWatch struct {
	viewers Viewers
	every   time.Duration

	mu    sync.Mutex
	holds map[viewerKey]*viewerHold
}

type viewerKey struct {
	cluster, user string
	groups        string // a request with other groups may differ in access
}

type viewerHold struct {
	u       *auth.User
	next    uint64
	cancels map[uint64]context.CancelFunc
}

// hold registers a request of u to cluster: the returned context ends
// when u may no longer view it, and done must be called when the request
// ends.
func (v *viewerWatch) hold(parent context.Context, cluster string, u *auth.User) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	k := viewerKey{cluster: cluster, user: u.Owner(), groups: strings.Join(slices.Sorted(slices.Values(u.Groups)), "\x00")}
	v.mu.Lock()
	if v.holds == nil {
		v.holds = map[viewerKey]*viewerHold{}
	}
	h, ok := v.holds[k]
	if !ok {
		h = &viewerHold{u: u, cancels: map[uint64]context.CancelFunc{}}
		v.holds[k] = h
		go v.watch(k, h)
	}
	id := h.next
	h.next++
	h.cancels[id] = cancel
	v.mu.Unlock()
	return ctx, func() {
		v.mu.Lock()
		delete(h.cancels, id)
		v.mu.Unlock()
		cancel()
	}
}

// watch checks k's access every v.every while it holds requests, and ends
// them all when it is gone. A check that fails (the database away) ends
// nothing: an outage must not cut every shared dashboard.
func (v *viewerWatch) watch(k viewerKey, h *viewerHold) {
	t := time.NewTicker(v.every)
	defer t.Stop()
	for range t.C {
		v.mu.Lock()
		if len(h.cancels) == 0 {
			delete(v.holds, k)
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := v.viewers.MayView(ctx, k.cluster, h.u, false)
		cancel()
		if err != nil || ok {
			continue
		}
		v.mu.Lock()
		for _, c := range h.cancels {
			c()
		}
		delete(v.holds, k)
		v.mu.Unlock()
		return
	}
}
