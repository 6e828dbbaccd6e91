package scheduler

import "sync"

// waiters are the API's waits for a cluster's next change (Core.Wait):
// kept apart from the loop's records, since a wait may name a cluster the
// loop never sees.
type waiters struct {
	mu sync.Mutex
	m  map[string]*watch // per cluster, closed on its next change
}

type watch struct {
	ch      chan struct{}
	waiters int
}

func newWaiters() *waiters { return &waiters{m: map[string]*watch{}} }

// notify wakes the cluster's waiters.
func (w *waiters) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x, ok := w.m[name]; ok {
		close(x.ch)
		delete(w.m, name)
	}
}

// watch returns a channel closed on the cluster's next change, and a
// function to call when no longer waiting, so that waits on names that never
// change leave nothing behind.
func (w *waiters) watch(name string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x, ok := w.m[name]
	if !ok {
		x = &watch{ch: make(chan struct{})}
		w.m[name] = x
	}
	x.waiters++
	return x.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		x.waiters--
		if x.waiters == 0 && w.m[name] == x {
			delete(w.m, name)
		}
	}
}
