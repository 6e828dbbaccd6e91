package scheduler

import (
	"testing"
	"time"
)

func TestExploreLaterAddAfter(t *testing.T) {
	q := newQueue()
	defer q.Shutdown()
	q.AddAfter("a", 20*time.Millisecond)
	q.AddAfter("a", time.Hour)
	ch := qtGetAsync(q)
	select {
	case r := <-ch:
		t.Logf("delivered %v", r)
	case <-time.After(time.Second):
		t.Errorf("BUG: not delivered after 1s; a later AddAfter postponed the sooner one")
	}
}
