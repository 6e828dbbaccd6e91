// Package keylock serialises work on one key (an owner, a cluster's
// security group, a member's launch) within this process, with waits that
// honour a context; entries go when unused.
package keylock

import (
	"context"
	"sync"
)

// Locks is a set of per-key locks; the zero value is ready to use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	ch    chan struct{} // a one-slot semaphore, so that waiting honours ctx
	users int
}

// Lock takes key's lock, or returns ctx's error; unlock releases it.
func (k *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*lock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &lock{ch: make(chan struct{}, 1)}
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
