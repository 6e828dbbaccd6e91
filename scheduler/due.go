package scheduler

import (
	"container/heap"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// The sweep does not look at every settled cluster whose scheduler
// streams (watch.go) at every interval: nothing about such a cluster
// changes with time alone but two deadlines, kept in two heaps so that a
// sweep looks only at the clusters whose deadline came:
//
//   - silence (real time): its stream's last line plus the silence
//     allowance. A heartbeat only moves the stream's clock; the entry is
//     checked when its old deadline comes and pushed again with the new.
//   - expiry (the core's clock, which tests step): its maximum lifetime
//     or the end of its idle timeout, whichever is first. Lines move the
//     idle clock (watchLine); the entry is checked when its deadline comes
//     and pushed again if the cluster was busy meanwhile.
//
// Everything else arrives as an event and queues a full pass at once: a
// line with other workers (watchLine), the stream ending (watchEnded),
// the store changing (the lease scan). Entries are not removed when their
// cluster leaves the sweep; a popped entry whose cluster is no longer
// settled as it was is dropped.

// dueItem is a settled cluster and when to look at it.
type dueItem struct {
	at time.Time
	s  *settled
}

// dueHeap is a min-heap of dueItems by at.
type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = dueItem{}
	*h = old[:len(old)-1]
	return it
}

func (h *dueHeap) add(at time.Time, s *settled) { heap.Push(h, dueItem{at: at, s: s}) }

// popDue takes the next item due by now, if any.
func (h *dueHeap) popDue(now time.Time) (*settled, bool) {
	if h.Len() == 0 || (*h)[0].at.After(now) {
		return nil, false
	}
	return heap.Pop(h).(dueItem).s, true
}

// lifetimeOf is the maximum lifetime that applies to a cluster with
// options o, and whose it is (0: none).
func (c *Core) lifetimeOf(o Options) (time.Duration, string) {
	lifetime, whose := c.cfg.MaxLifetime, "the"
	if q := time.Duration(o.MaxLifetime) * time.Second; q > 0 && (lifetime <= 0 || q < lifetime) {
		lifetime, whose = q, "your quota's"
	}
	return lifetime, whose
}

// nextExpiry is when expiredAt will first say cl is to stop, on the
// core's clock, if its idle clock stays at last (seen false: not started,
// counted from now); zero if never.
func (c *Core) nextExpiry(cl *store.Cluster, o Options, now, last time.Time, seen bool) time.Time {
	var at time.Time
	if lifetime, _ := c.lifetimeOf(o); lifetime > 0 && !cl.StartedAt.IsZero() {
		at = cl.StartedAt.Add(lifetime)
	}
	if o.IdleTimeout > 0 {
		if !seen {
			last = now
		}
		if idle := last.Add(time.Duration(o.IdleTimeout) * time.Second); at.IsZero() || idle.Before(at) {
			at = idle
		}
	}
	return at
}

// IdleLeft is how long the running cluster may stay idle before the loop
// stops it, on this replica's idle clock. ok is false when the cluster
// has no idle timeout or is not running, or when this replica keeps no
// idle clock for it (another replica runs it, or its scheduler was not
// asked yet): the console then shows the timeout alone.
func (c *Core) IdleLeft(cl *store.Cluster) (left time.Duration, ok bool) {
	if cl.Status != store.Running {
		return 0, false
	}
	o, err := optionsOf(cl)
	if err != nil || o.IdleTimeout <= 0 {
		return 0, false
	}
	c.mu.Lock()
	now, last := c.now(), c.lastBusy(cl.Name)
	if s := c.clusters.settledOf(cl.Name); s != nil && s.watch != nil && s.watch.Busy() {
		last = now // its stream says busy all along (as popExpired reads it)
	}
	c.mu.Unlock()
	if last.IsZero() {
		return 0, false
	}
	return max(0, time.Duration(o.IdleTimeout)*time.Second-now.Sub(last)), true
}
