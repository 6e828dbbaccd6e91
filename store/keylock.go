package store

import (
	"context"
	"sync"
)

// keyLocks serialises work on one key (an owner) within this process, so
// that a burst of one user's requests holds one database connection
// waiting for the owner's lock, not one per request: the others wait here,
// where waiting costs nothing. The database lock still orders processes.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch    chan struct{} // a one-slot semaphore, so that waiting honours ctx
	users int
}

// lock takes key's lock, or returns ctx's error; unlock releases it.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
