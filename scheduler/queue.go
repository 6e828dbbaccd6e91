package scheduler

import (
	"sync"
	"time"
)

// queue hands out cluster names to reconcile. A name is never processed by
// two goroutines at once, and a name added while it is being processed is
// processed again afterwards, so no change is ever missed (the same contract
// as client-go's workqueue, without its rate limiting).
type delayed struct {
	timer *time.Timer
	due   time.Time
}

type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	items      []string
	dirty      map[string]bool
	processing map[string]bool
	timers     map[string]*delayed
	shutdown   bool
}

func newQueue() *queue {
	q := &queue{dirty: map[string]bool{}, processing: map[string]bool{}, timers: map[string]*delayed{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add schedules name now.
func (q *queue) Add(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(name)
}

func (q *queue) addLocked(name string) {
	if q.shutdown || q.dirty[name] {
		return
	}
	if t := q.timers[name]; t != nil {
		t.timer.Stop()
		delete(q.timers, name)
	}
	q.dirty[name] = true
	if q.processing[name] {
		return // Done will queue it again
	}
	q.items = append(q.items, name)
	q.cond.Signal()
}

// AddAfter schedules name after d, unless it is scheduled sooner.
func (q *queue) AddAfter(name string, d time.Duration) {
	if d <= 0 {
		q.Add(name)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown || q.dirty[name] {
		return
	}
	due := time.Now().Add(d)
	if t := q.timers[name]; t != nil {
		if !t.due.After(due) {
			return // already due sooner: a later recheck must not delay a retry
		}
		t.timer.Stop()
	}
	t := &delayed{due: due}
	t.timer = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.timers[name] == t {
			delete(q.timers, name)
			q.addLocked(name)
		}
	})
	q.timers[name] = t
}

// Get blocks until a name is ready; ok is false after Shutdown.
func (q *queue) Get() (name string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	name = q.items[0]
	q.items[0] = ""
	q.items = q.items[1:]
	q.processing[name] = true
	delete(q.dirty, name)
	return name, true
}

// Done marks name processed, queueing it again if it was added meanwhile.
func (q *queue) Done(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, name)
	if q.dirty[name] && !q.shutdown {
		q.items = append(q.items, name)
		q.cond.Signal()
	}
}

// Len is the number of names waiting (not counting timers).
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Shutdown wakes every Get with ok=false and stops the timers.
func (q *queue) Shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	for n, t := range q.timers {
		t.timer.Stop()
		delete(q.timers, n)
	}
	q.cond.Broadcast()
}
