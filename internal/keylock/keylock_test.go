package keylock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLockSerialisesOneKeyOnly(t *testing.T) {
	var k Locks
	ctx := context.Background()
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := k.Lock(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	// Another key is not held up by "a".
	unlockB, err := k.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders of one key at once, want 1", most)
	}
	if len(k.locks) != 0 {
		t.Errorf("%d entries left after every unlock", len(k.locks))
	}
}

func TestLockHonoursContext(t *testing.T) {
	var k Locks
	unlock, err := k.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := k.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting on a held key past the deadline = %v", err)
	}
	unlock()
	if len(k.locks) != 0 {
		t.Errorf("%d entries left", len(k.locks))
	}
}
