package store

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned for writes asked of a store being closed.
var ErrClosed = errors.New("store closed")

// writeQueue lets this process's writes reach SQLite one at a time, in the
// order they asked (see sqlitequeue.go for how every write passes it).
// SQLite has one writer per database; without the queue, concurrent
// writers each begin, meet SQLITE_BUSY and sleep in the busy handler (1,
// 2, 5, ... 100 ms, then 100 ms again and again), so that under load a
// write waited up to a second for a lock that was free most of that time.
// Waiting here costs nothing and is first come, first served, except that
// writes a person waits for (API requests, marked with Interactive) go
// before the reconcile loop's: at most interactiveStreak of them in a row
// while background writes wait, so the loop is slowed, never starved.
// Other processes on the same file still meet the busy handler.
//
// A nil *writeQueue (PostgreSQL, whose writers do not exclude each other)
// lets everything through at once.
type writeQueue struct {
	mu      sync.Mutex
	busy    bool
	closed  bool
	fg, bg  []*queuedWriter // waiting, in order of arrival
	streak  int             // interactive turns given in a row while background writes waited
	pending sync.WaitGroup  // writers queued or running
}

type queuedWriter struct{ turn chan struct{} }

// interactiveStreak bounds how many interactive writes go ahead of a
// waiting background write.
const interactiveStreak = 8

type interactiveKey struct{}

// Interactive marks ctx as a request someone waits for: its writes on
// SQLite go ahead of background ones.
func Interactive(ctx context.Context) context.Context {
	return context.WithValue(ctx, interactiveKey{}, true)
}

func isInteractive(ctx context.Context) bool {
	v, _ := ctx.Value(interactiveKey{}).(bool)
	return v
}

func newWriteQueue() *writeQueue { return &writeQueue{} }

// acquire waits for the writer's turn. The returned release must be
// called once the write is committed or abandoned. A cancelled ctx gives
// up the place in the queue; a closed queue refuses with ErrClosed.
func (q *writeQueue) acquire(ctx context.Context) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	q.pending.Add(1)
	var once sync.Once
	release = func() { once.Do(q.next) }
	if !q.busy && len(q.fg) == 0 && len(q.bg) == 0 {
		q.busy = true
		q.mu.Unlock()
		return release, nil
	}
	w := &queuedWriter{turn: make(chan struct{})}
	if isInteractive(ctx) {
		q.fg = append(q.fg, w)
	} else {
		q.bg = append(q.bg, w)
	}
	q.mu.Unlock()
	select {
	case <-w.turn:
		return release, nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if q.remove(w) {
		q.mu.Unlock()
		q.pending.Done()
		return nil, ctx.Err()
	}
	q.mu.Unlock()
	release() // the turn came meanwhile: pass it on
	return nil, ctx.Err()
}

// remove takes w out of the waiting lists, reporting whether it was there.
func (q *writeQueue) remove(w *queuedWriter) bool {
	for _, l := range []*[]*queuedWriter{&q.fg, &q.bg} {
		for i, x := range *l {
			if x == w {
				*l = append((*l)[:i], (*l)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// next ends a turn and gives the next one.
func (q *writeQueue) next() {
	q.mu.Lock()
	var w *queuedWriter
	switch {
	case len(q.fg) > 0 && (len(q.bg) == 0 || q.streak < interactiveStreak):
		w, q.fg = q.fg[0], q.fg[1:]
		if len(q.bg) > 0 {
			q.streak++
		}
	case len(q.bg) > 0:
		w, q.bg = q.bg[0], q.bg[1:]
		q.streak = 0
	}
	if w != nil {
		close(w.turn) // busy stays true: the turn passes
	} else {
		q.busy = false
	}
	q.mu.Unlock()
	q.pending.Done()
}

func (q *writeQueue) queued() (n int, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fg) + len(q.bg), q.closed
}

// close refuses new writers and waits until those already queued or
// running are done: a shutdown loses no write that was accepted.
func (q *writeQueue) close() {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.pending.Wait()
}
