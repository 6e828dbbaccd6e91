package auth

import (
	"net"
	"sync"
	"time"
)

// FailureLimiter counts failed authentications per client address in
// one-minute windows. Once an address is over the limit, callers check
// Blocked before verifying anything and answer 429 until the window ends,
// so tokens cannot be guessed at speed and forged ones cost neither
// signature checks nor key set fetches. The price: others behind the same
// address (NAT) wait out the window too. Valid credentials never count.
type FailureLimiter struct {
	limit int
	now   func() time.Time

	mu        sync.Mutex
	windows   map[string]*window
	lastSweep time.Time
}

type window struct {
	start time.Time
	fails int
}

// maxTrackedAddresses bounds the memory an address flood can take; past it
// new addresses are not tracked until old windows expire.
const maxTrackedAddresses = 100000

// NewFailureLimiter allows limit failures per address per minute.
func NewFailureLimiter(limit int) *FailureLimiter {
	return &FailureLimiter{limit: limit, now: time.Now, windows: map[string]*window{}}
}

// SetClock replaces the clock (tests).
func (l *FailureLimiter) SetClock(now func() time.Time) { l.now = now }

// key groups IPv6 addresses by /64, which one client usually controls whole.
func key(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Fail records a failed authentication from addr and reports whether the
// address is now over the limit.
func (l *FailureLimiter) Fail(addr string) bool {
	k := key(addr)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[k]
	if w == nil || now.Sub(w.start) >= time.Minute {
		if len(l.windows) >= maxTrackedAddresses {
			if now.Sub(l.lastSweep) < time.Second {
				return false // full, swept a moment ago: do not scan again
			}
			l.lastSweep = now
			for a, v := range l.windows {
				if now.Sub(v.start) >= time.Minute {
					delete(l.windows, a)
				}
			}
			if len(l.windows) >= maxTrackedAddresses {
				return false
			}
		}
		w = &window{start: now}
		l.windows[k] = w
	}
	w.fails++
	return w.fails > l.limit
}

// Blocked reports whether addr is over the limit.
func (l *FailureLimiter) Blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[key(addr)]
	return w != nil && l.now().Sub(w.start) < time.Minute && w.fails > l.limit
}
