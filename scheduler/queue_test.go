package scheduler

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Helpers here are prefixed with "qt" so they cannot collide with helpers in
// the package's other test files.

const (
	qtTimeout = 5 * time.Second        // upper bound for anything that must happen
	qtQuiet   = 150 * time.Millisecond // how long "nothing happens" is watched
)

type qtResult struct {
	name string
	ok   bool
}

// qtNewQueue returns a queue that is shut down when the test ends, which also
// releases any Get a failed test left blocked.
func qtNewQueue(t *testing.T) *queue {
	t.Helper()
	q := newQueue()
	t.Cleanup(q.Shutdown)
	return q
}

// qtGetAsync calls Get in a goroutine and delivers the result on the channel.
func qtGetAsync(q *queue) <-chan qtResult {
	ch := make(chan qtResult, 1)
	go func() {
		n, ok := q.Get()
		ch <- qtResult{n, ok}
	}()
	return ch
}

// qtRecv waits for a Get result, failing the test after qtTimeout.
func qtRecv(t *testing.T, ch <-chan qtResult) qtResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(qtTimeout):
		t.Fatalf("Get did not return within %v", qtTimeout)
		return qtResult{}
	}
}

// qtGet calls Get, failing the test if it does not return within qtTimeout.
func qtGet(t *testing.T, q *queue) (string, bool) {
	t.Helper()
	r := qtRecv(t, qtGetAsync(q))
	return r.name, r.ok
}

// qtMustGet calls Get and checks it returns want.
func qtMustGet(t *testing.T, q *queue, want string) {
	t.Helper()
	name, ok := qtGet(t, q)
	if !ok || name != want {
		t.Fatalf("Get = %q, %v; want %q, true", name, ok, want)
	}
}

// qtNoResult checks that a pending Get stays blocked for qtQuiet.
func qtNoResult(t *testing.T, ch <-chan qtResult, why string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: Get returned %q, %v; want it still blocked", why, r.name, r.ok)
	case <-time.After(qtQuiet):
	}
}

// qtLen is q.Len() checked against want.
func qtLen(t *testing.T, q *queue, want int) {
	t.Helper()
	if got := q.Len(); got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
}

func (q *queue) qtTimerCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.timers)
}

func TestQueueDedupAndOrder(t *testing.T) {
	tests := []struct {
		name string
		adds []string
		want []string // Get order
	}{
		{"single", []string{"a"}, []string{"a"}},
		{"twice before Get", []string{"a", "a"}, []string{"a"}},
		{"many times", []string{"a", "a", "a", "a", "a"}, []string{"a"}},
		{"FIFO", []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"re-add keeps first position", []string{"a", "b", "a", "c", "b"}, []string{"a", "b", "c"}},
		{"empty name is a name", []string{"", "x", ""}, []string{"", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := qtNewQueue(t)
			for _, n := range tt.adds {
				q.Add(n)
			}
			qtLen(t, q, len(tt.want))
			for i, w := range tt.want {
				qtMustGet(t, q, w)
				qtLen(t, q, len(tt.want)-i-1)
			}
			for _, w := range tt.want {
				q.Done(w)
			}
			qtLen(t, q, 0)
			// Nothing left: a further Get blocks.
			qtNoResult(t, qtGetAsync(q), "queue drained")
		})
	}
}

func TestQueueLen(t *testing.T) {
	q := qtNewQueue(t)
	steps := []struct {
		do   func()
		want int
	}{
		{func() {}, 0},
		{func() { q.Add("a") }, 1},
		{func() { q.Add("b") }, 2},
		{func() { q.Add("a") }, 2},
		{func() { q.AddAfter("c", time.Hour) }, 2}, // timers do not count
		{func() { qtMustGet(t, q, "a") }, 1},
		{func() { q.Add("a") }, 1}, // processing: waits for Done
		{func() { q.Done("a") }, 2},
		{func() { qtMustGet(t, q, "b"); q.Done("b") }, 1},
		{func() { qtMustGet(t, q, "a"); q.Done("a") }, 0},
		{func() { q.AddAfter("d", 0) }, 1}, // no delay: queued now
		{func() { q.AddAfter("e", -time.Second) }, 2},
	}
	for i, s := range steps {
		s.do()
		if got := q.Len(); got != s.want {
			t.Fatalf("step %d: Len = %d, want %d", i, got, s.want)
		}
	}
}

func TestQueueAddWhileProcessing(t *testing.T) {
	tests := []struct {
		name   string
		during func(q *queue) // while "a" is being processed
		again  bool           // "a" must be processed once more after Done
		other  bool           // "b" was added and must be served meanwhile
	}{
		{"no add", func(q *queue) {}, false, false},
		{"one add", func(q *queue) { q.Add("a") }, true, false},
		{"several adds", func(q *queue) { q.Add("a"); q.Add("a"); q.Add("a") }, true, false},
		{"add other name only", func(q *queue) { q.Add("b") }, false, true},
		{"other name and a", func(q *queue) { q.Add("b"); q.Add("a") }, true, true},
		{"AddAfter zero", func(q *queue) { q.AddAfter("a", 0) }, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := qtNewQueue(t)
			q.Add("a")
			qtMustGet(t, q, "a")

			// A second worker waits for work while "a" is being processed.
			tt.during(q)
			if tt.other { // other names are not held back by a
				qtMustGet(t, q, "b")
				q.Done("b")
			}
			waiting := qtGetAsync(q)
			qtNoResult(t, waiting, "a is still being processed")
			if tt.again {
				qtLen(t, q, 0) // held back, not queued
			}

			q.Done("a")
			if !tt.again {
				qtNoResult(t, waiting, "nothing was added during processing")
				qtLen(t, q, 0)
				return
			}
			r := qtRecv(t, waiting)
			if !r.ok || r.name != "a" {
				t.Fatalf("after Done: Get = %q, %v; want a, true", r.name, r.ok)
			}
			// Exactly once: however many Adds happened during processing.
			qtLen(t, q, 0)
			q.Done("a")
			qtNoResult(t, qtGetAsync(q), "a already reprocessed once")
		})
	}
}

// TestQueueNeverProcessesANameConcurrently hammers the queue with workers and
// adders and checks the two halves of the contract: a name is never held by
// two workers at once, and every Add is followed by a processing that starts
// after it (no change is missed).
func TestQueueNeverProcessesANameConcurrently(t *testing.T) {
	const (
		workers    = 8
		adders     = 4
		names      = 5
		addsPerOne = 300
	)
	q := qtNewQueue(t)
	var inFlight [names]atomic.Int32
	var added [names]atomic.Int64 // bumped before each Add
	var seen [names]atomic.Int64  // the value of added when processing last started
	var overlaps atomic.Int64
	var processed atomic.Int64

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				name, ok := q.Get()
				if !ok {
					return
				}
				var i int
				fmt.Sscanf(name, "n%d", &i)
				if inFlight[i].Add(1) != 1 {
					overlaps.Add(1)
				}
				seen[i].Store(added[i].Load())
				processed.Add(1)
				time.Sleep(time.Duration(i*50) * time.Microsecond) // some work
				inFlight[i].Add(-1)
				q.Done(name)
			}
		}()
	}
	var awg sync.WaitGroup
	for a := 0; a < adders; a++ {
		awg.Add(1)
		go func(a int) {
			defer awg.Done()
			for k := 0; k < addsPerOne; k++ {
				i := (k + a) % names
				added[i].Add(1)
				q.Add(fmt.Sprintf("n%d", i))
				if k%16 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}(a)
	}
	awg.Wait()

	// Every name must eventually be processed after its last Add.
	deadline := time.Now().Add(qtTimeout)
	for i := 0; i < names; i++ {
		for seen[i].Load() != added[i].Load() {
			if time.Now().After(deadline) {
				t.Fatalf("n%d: last processing saw %d adds, want %d: a change was missed", i, seen[i].Load(), added[i].Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	q.Shutdown()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(qtTimeout):
		t.Fatal("workers did not stop after Shutdown")
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("a name was processed by two workers at once %d times", n)
	}
	if p := processed.Load(); p < names || p > adders*addsPerOne {
		t.Fatalf("processed %d times, want between %d and %d", p, names, adders*addsPerOne)
	}
}

func TestQueueAddAfterDelay(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"short", 50 * time.Millisecond},
		{"longer", 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := qtNewQueue(t)
			start := time.Now()
			q.AddAfter("a", tt.delay)
			qtLen(t, q, 0)
			name, ok := qtGet(t, q)
			elapsed := time.Since(start)
			if !ok || name != "a" {
				t.Fatalf("Get = %q, %v; want a, true", name, ok)
			}
			if elapsed < tt.delay {
				t.Fatalf("delivered after %v, before the %v delay", elapsed, tt.delay)
			}
			if q.qtTimerCount() != 0 {
				t.Errorf("%d timers left after delivery", q.qtTimerCount())
			}
			q.Done("a")
			qtNoResult(t, qtGetAsync(q), "delivered once")
		})
	}
}

func TestQueueAddCancelsPendingAddAfter(t *testing.T) {
	t.Run("delivered promptly", func(t *testing.T) {
		q := qtNewQueue(t)
		q.AddAfter("a", time.Hour)
		q.Add("a")
		qtMustGet(t, q, "a") // within qtTimeout, not an hour
		if n := q.qtTimerCount(); n != 0 {
			t.Errorf("%d timers pending after Add, want 0", n)
		}
		q.Done("a")
	})
	t.Run("delivered once", func(t *testing.T) {
		const delay = 100 * time.Millisecond
		q := qtNewQueue(t)
		q.AddAfter("a", delay)
		q.Add("a")
		qtMustGet(t, q, "a")
		q.Done("a")
		// Watch well past the cancelled timer's deadline.
		waiting := qtGetAsync(q)
		select {
		case r := <-waiting:
			t.Fatalf("cancelled AddAfter still delivered %q, %v", r.name, r.ok)
		case <-time.After(delay + 3*qtQuiet):
		}
		qtLen(t, q, 0)
	})
	t.Run("Add while processing cancels it too", func(t *testing.T) {
		const delay = 100 * time.Millisecond
		q := qtNewQueue(t)
		q.Add("a")
		qtMustGet(t, q, "a")
		q.AddAfter("a", delay) // as a worker does after reconciling
		q.Add("a")             // an API change arrives
		q.Done("a")
		qtMustGet(t, q, "a")
		q.Done("a")
		waiting := qtGetAsync(q)
		select {
		case r := <-waiting:
			t.Fatalf("cancelled AddAfter still delivered %q, %v", r.name, r.ok)
		case <-time.After(delay + 3*qtQuiet):
		}
	})
}

func TestQueueAddAfterDoesNotDelayDirtyName(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		q := qtNewQueue(t)
		q.Add("a")
		q.AddAfter("a", time.Hour)
		qtLen(t, q, 1)
		qtMustGet(t, q, "a")
		q.Done("a")
		if n := q.qtTimerCount(); n != 0 {
			t.Errorf("%d timers pending, want 0: AddAfter of a queued name must be dropped", n)
		}
		qtNoResult(t, qtGetAsync(q), "delivered once")
	})
	t.Run("added while processing", func(t *testing.T) {
		q := qtNewQueue(t)
		q.Add("a")
		qtMustGet(t, q, "a")
		q.Add("a")
		q.AddAfter("a", time.Hour)
		q.Done("a")
		qtMustGet(t, q, "a") // promptly, not in an hour
		q.Done("a")
		if n := q.qtTimerCount(); n != 0 {
			t.Errorf("%d timers pending, want 0", n)
		}
	})
}

func TestQueueAddAfterSoonerWins(t *testing.T) {
	// A sooner AddAfter replaces a later pending one.
	q := qtNewQueue(t)
	q.AddAfter("a", time.Hour)
	q.AddAfter("a", 50*time.Millisecond)
	qtMustGet(t, q, "a")
	q.Done("a")
	if n := q.qtTimerCount(); n != 0 {
		t.Errorf("%d timers pending, want 0: the replaced timer must not linger", n)
	}
	qtNoResult(t, qtGetAsync(q), "delivered once")
}

func TestQueueAddAfterWhileProcessing(t *testing.T) {
	// A timer that fires while the name is processed waits for Done.
	q := qtNewQueue(t)
	q.Add("a")
	qtMustGet(t, q, "a")
	q.AddAfter("a", 20*time.Millisecond)
	waiting := qtGetAsync(q)
	qtNoResult(t, waiting, "timer fired while a is processed")
	q.Done("a")
	r := qtRecv(t, waiting)
	if !r.ok || r.name != "a" {
		t.Fatalf("Get = %q, %v; want a, true", r.name, r.ok)
	}
	q.Done("a")
}

func TestQueueShutdown(t *testing.T) {
	t.Run("wakes blocked Gets", func(t *testing.T) {
		q := newQueue()
		const n = 4
		chans := make([]<-chan qtResult, n)
		for i := range chans {
			chans[i] = qtGetAsync(q)
		}
		qtNoResult(t, chans[0], "before Shutdown")
		q.Shutdown()
		for i, ch := range chans {
			if r := qtRecv(t, ch); r.ok || r.name != "" {
				t.Errorf("Get %d after Shutdown = %q, %v; want \"\", false", i, r.name, r.ok)
			}
		}
	})
	t.Run("Get after Shutdown returns at once", func(t *testing.T) {
		q := newQueue()
		q.Add("a")
		q.Shutdown()
		if name, ok := qtGet(t, q); ok {
			t.Fatalf("Get after Shutdown = %q, true; want false", name)
		}
	})
	t.Run("Add and AddAfter after Shutdown are ignored", func(t *testing.T) {
		q := newQueue()
		q.Shutdown()
		q.Add("a")
		q.AddAfter("b", time.Millisecond)
		q.AddAfter("c", time.Hour)
		qtLen(t, q, 0)
		if n := q.qtTimerCount(); n != 0 {
			t.Fatalf("%d timers after Shutdown, want 0", n)
		}
	})
	t.Run("stops timers", func(t *testing.T) {
		q := newQueue()
		q.AddAfter("a", 50*time.Millisecond)
		q.AddAfter("b", time.Hour)
		if n := q.qtTimerCount(); n != 2 {
			t.Fatalf("%d timers, want 2", n)
		}
		q.Shutdown()
		if n := q.qtTimerCount(); n != 0 {
			t.Fatalf("%d timers after Shutdown, want 0", n)
		}
		time.Sleep(50*time.Millisecond + qtQuiet)
		qtLen(t, q, 0)
		q.mu.Lock()
		dirty := len(q.dirty)
		q.mu.Unlock()
		if dirty != 0 {
			t.Fatalf("a stopped timer still marked %d names dirty", dirty)
		}
	})
	t.Run("Done after Shutdown does not requeue", func(t *testing.T) {
		q := newQueue()
		q.Add("a")
		qtMustGet(t, q, "a")
		q.Add("a")
		q.Shutdown()
		q.Done("a")
		qtLen(t, q, 0)
	})
	t.Run("twice is harmless", func(t *testing.T) {
		q := newQueue()
		q.Shutdown()
		q.Shutdown()
		if _, ok := qtGet(t, q); ok {
			t.Fatal("Get after double Shutdown returned ok")
		}
	})
}

// TestQueueLaterAddAfterKeepsEarlier: a long recheck asked for after a short
// retry must not postpone the retry.
func TestQueueLaterAddAfterKeepsEarlier(t *testing.T) {
	q := qtNewQueue(t)
	q.AddAfter("a", 20*time.Millisecond)
	q.AddAfter("a", time.Hour)
	qtMustGet(t, q, "a")
}

func TestStartPoll(t *testing.T) {
	cases := []struct {
		elapsed, ceiling, want time.Duration
	}{
		{0, 250 * time.Millisecond, 20 * time.Millisecond},
		{time.Second, 250 * time.Millisecond, 50 * time.Millisecond},
		{3 * time.Second, 100 * time.Millisecond, 100 * time.Millisecond},
		{10 * time.Minute, 250 * time.Millisecond, 250 * time.Millisecond},
	}
	for _, c := range cases {
		if got := startPoll(c.elapsed, c.ceiling); got != c.want {
			t.Errorf("startPoll(%s, %s) = %s, want %s", c.elapsed, c.ceiling, got, c.want)
		}
	}
}
