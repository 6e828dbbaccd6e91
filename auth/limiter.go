package auth

import (
	"sync"
	"time"
)

// FailureLimiter counts failed authentications per client address in
// one-minute windows and blocks an address over the limit until its window
// ends, so tokens cannot be guessed at speed.
type FailureLimiter struct {
	limit int
	now   func() time.Time

	mu      sync.Mutex
	windows map[string]*window
}

type window struct {
	start time.Time
	fails int
}

const maxTrackedAddresses = 100000

// NewFailureLimiter allows limit failures per address per minute.
func NewFailureLimiter(limit int) *FailureLimiter {
	return &FailureLimiter{limit: limit, now: time.Now, windows: map[string]*window{}}
}

// SetClock replaces the clock (tests).
func (l *FailureLimiter) SetClock(now func() time.Time) { l.now = now }

func (l *FailureLimiter) current(addr string, now time.Time) *window {
	w := l.windows[addr]
	if w == nil || now.Sub(w.start) >= time.Minute {
		if len(l.windows) >= maxTrackedAddresses {
			for k, v := range l.windows { // drop finished windows first
				if now.Sub(v.start) >= time.Minute {
					delete(l.windows, k)
				}
			}
		}
		w = &window{start: now}
		l.windows[addr] = w
	}
	return w
}

// Fail records a failed authentication from addr.
func (l *FailureLimiter) Fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current(addr, l.now()).fails++
}

// Blocked reports whether addr is over the limit.
func (l *FailureLimiter) Blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[addr]
	return w != nil && l.now().Sub(w.start) < time.Minute && w.fails >= l.limit
}
