package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitQueued waits (bounded) until n writers wait in q.
func waitQueued(t *testing.T, q *writeQueue, n int) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if got, _ := q.queued(); got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	got, _ := q.queued()
	t.Fatalf("%d writers queued, want %d", got, n)
}

// TestWriteQueueServesInOrder: writers waiting for the slot run one at a
// time in the order they came.
func TestWriteQueueServesInOrder(t *testing.T) {
	q := newWriteQueue()
	ctx := context.Background()
	hold, err := q.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	running := 0
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := q.acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			running++
			if running > 1 {
				t.Error("two writers ran at once")
			}
			order = append(order, i)
			running--
			mu.Unlock()
			release()
		}()
		waitQueued(t, q, i+1) // the next one comes after this one
	}
	hold()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("writers ran in order %v, want 0..4", order)
		}
	}
}

// TestWriteQueueCancelLeavesQueue: a writer whose context ends while it
// waits gets the context's error and takes nothing; the next one runs.
func TestWriteQueueCancelLeavesQueue(t *testing.T) {
	q := newWriteQueue()
	hold, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := q.acquire(ctx)
		done <- err
	}()
	waitQueued(t, q, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire = %v, want context.Canceled", err)
	}
	hold()
	hold() // a second release is a no-op, not a stolen slot
	release, err := q.acquire(context.Background())
	if err != nil {
		t.Fatalf("acquire after a cancelled waiter: %v", err)
	}
	release()
	q.close() // nothing pending: returns
}

// TestWriteQueueCloseDrains: close refuses new writers at once, lets the
// running and queued ones finish, and returns only after they have.
func TestWriteQueueCloseDrains(t *testing.T) {
	q := newWriteQueue()
	ctx := context.Background()
	hold, err := q.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	note := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := q.acquire(ctx)
			if err != nil {
				t.Errorf("queued writer refused: %v", err)
				return
			}
			note("write")
			release()
		}()
		waitQueued(t, q, i+1)
	}
	closed := make(chan struct{})
	go func() {
		q.close()
		note("closed")
		close(closed)
	}()
	for i := 0; ; i++ {
		if _, c := q.queued(); c {
			break
		}
		if i == 10000 {
			t.Fatal("close did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := q.acquire(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire on a closing queue = %v, want ErrClosed", err)
	}
	note("held write")
	hold()
	<-closed
	wg.Wait()
	want := []string{"held write", "write", "write", "write", "closed"}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %v, want %v", events, want)
		}
	}
}

// TestNilWriteQueue: PostgreSQL's (nil) queue lets everything through.
func TestNilWriteQueue(t *testing.T) {
	var q *writeQueue
	a, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a()
	b()
	q.close()
}

// TestWriteQueueInteractiveFirst: writes someone waits for go ahead of
// background writes that came earlier, but at most interactiveStreak in a
// row: a waiting background write is never starved.
func TestWriteQueueInteractiveFirst(t *testing.T) {
	q := newWriteQueue()
	hold, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enqueue := func(name string, ctx context.Context, queued int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := q.acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			release()
		}()
		waitQueued(t, q, queued)
	}
	bg, fg := context.Background(), Interactive(context.Background())
	enqueue("bg0", bg, 1)
	enqueue("bg1", bg, 2)
	for i := range interactiveStreak + 2 {
		enqueue(fmt.Sprintf("fg%d", i), fg, 3+i)
	}
	hold()
	wg.Wait()
	want := []string{}
	for i := range interactiveStreak {
		want = append(want, fmt.Sprintf("fg%d", i))
	}
	want = append(want, "bg0", fmt.Sprintf("fg%d", interactiveStreak), fmt.Sprintf("fg%d", interactiveStreak+1), "bg1")
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("turns in order %v, want %v", order, want)
	}
}
