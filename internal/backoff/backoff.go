// Package backoff holds what the cloud backends share to retry a call:
// the exponentially growing, capped window that full jitter draws a wait
// from, and a wait that ends with its context.
package backoff

import (
	"context"
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
