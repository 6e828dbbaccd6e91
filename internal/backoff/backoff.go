// Package backoff holds what the cloud backends share to retry a call:
// the exponentially growing, capped window that full jitter draws a wait
// from, and a wait that ends with its context.
package backoff

import (
	"context"
	"sync"
	"time"
)

// Window bounds the wait after the attempt-th failure (attempt >= 1):
// base doubled for each failure before it, never above max.
func Window(attempt int, base, max time.Duration) time.Duration {
	w := max
	// From 32 doublings on the product would overflow; the cap applies.
	if shift := attempt - 1; shift >= 0 && shift < 32 {
		if d := base << shift; d > 0 && d < w {
			w = d
		}
	}
	return w
}

// Sleep waits for d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Budget is a token bucket: the calls one gateway may make to one cloud
// service in one account, shared by every cluster of the backend, so that
// clusters booting together cannot add up to more than the service's
// account-wide request rate (which it enforces by throttling every caller
// in the account, other tools included). It is safe for concurrent use.
type Budget struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu     sync.Mutex
	tokens float64
	// last is when tokens was counted; it is in the future while a pause
	// that the service asked for lasts, so that no tokens accrue in it.
	last time.Time
	// shares are the buckets of the keys (clusters) that have called
	// through WithKey: each is FairShare of the budget.
	shares map[string]*Budget
}

// FairShare is the part of a budget that one key (a cluster) may take
// however often it calls: a cluster whose start is stuck, polled as fast
// as anything lets it, leaves the rest to every other cluster.
const FairShare = 1.0 / 3

type keyCtx struct{}

// WithKey marks the calls made with ctx as key's (a cluster's): Wait
// then also takes them from key's fair share of the budget.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// NewBudget allows rate calls per second on average, burst at once. now
// and sleep are the clock (nil for the real one), replaceable so that
// tests count calls against simulated time.
func NewBudget(rate float64, burst int, now func() time.Time, sleep func(context.Context, time.Duration) error) *Budget {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = Sleep
	}
	burst = max(burst, 1)
	return &Budget{rate: rate, burst: float64(burst), tokens: float64(burst), now: now, sleep: sleep}
}

// Wait takes one call from the budget, waiting until the bucket has
// refilled enough, or until ctx ends (its error). Waiters are served in
// the order they came: each reserves its token before sleeping.
func (b *Budget) Wait(ctx context.Context) error {
	if b == nil || b.rate <= 0 {
		return ctx.Err()
	}
	if key, _ := ctx.Value(keyCtx{}).(string); key != "" {
		// The key's own share first: its waiters queue there, not in the
		// shared bucket, where they would hold every other key's turn.
		if err := b.share(key).Wait(context.WithValue(ctx, keyCtx{}, "")); err != nil {
			return err
		}
	}
	b.mu.Lock()
	now := b.now()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	b.tokens--
	// The call's turn: once the deficit has refilled after last.
	turn := b.last
	if b.tokens < 0 {
		turn = turn.Add(time.Duration(-b.tokens / b.rate * float64(time.Second)))
	}
	d := turn.Sub(now)
	b.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	return b.sleep(ctx, d)
}

// share is key's bucket, made on first use.
func (b *Budget) share(key string) *Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shares == nil {
		b.shares = map[string]*Budget{}
	}
	s := b.shares[key]
	if s == nil {
		s = NewBudget(b.rate*FairShare, int(b.burst*FairShare), b.now, b.sleep)
		b.shares[key] = s
	}
	return s
}

// Forget drops key's share (its cluster is gone).
func (b *Budget) Forget(key string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	delete(b.shares, key)
	b.mu.Unlock()
}

// Throttled records that the service refused a call for its rate: no call
// is made for d by anyone else sharing the budget, and the bucket starts
// again empty, so that the calls after the pause come at the steady rate
// rather than as a burst that would be throttled again. The caller that
// was throttled waits d itself and retries without Wait: the retry is
// the first call after the pause.
func (b *Budget) Throttled(d time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.now().Add(d); u.After(b.last) {
		b.last = u
	}
	b.tokens = min(b.tokens, 0)
}
