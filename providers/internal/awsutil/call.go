package awsutil

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
)

// Retry is how a backend repeats its AWS calls: at most MaxAttempts
// calls, with exponential backoff from BaseDelay up to MaxDelay and full
// jitter (a random wait up to the bound), which spreads many gateways'
// retries apart.
type Retry struct {
	MaxAttempts         int
	BaseDelay, MaxDelay time.Duration
	// Jitter picks the wait within a window; nil is uniform over [0,
	// window]. Tests make it the window itself, to check the waits.
	Jitter func(window time.Duration) time.Duration
	// Sleep waits between attempts (backoff.Sleep in production).
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger
}

// Backoff is the wait after the given failed attempt, within its window.
func (r Retry) Backoff(attempt int) time.Duration {
	window := backoff.Window(attempt, r.BaseDelay, r.MaxDelay)
	if window <= 0 {
		return 0
	}
	if r.Jitter == nil {
		return rand.N(window + 1)
	}
	return min(max(r.Jitter(window), 0), window)
}

// Call runs f until it succeeds, fails for good (not Retryable), or
// MaxAttempts calls have been throttled or met server errors. Every call a
// backend repeats is safe to repeat: reads, creations idempotent by name
// or client token, and deletions that take "not found" as done. Calls
// metered by budget (nil: none) first take their turn in it; a throttled
// call waits at least half the backoff window and pauses the budget for
// everyone sharing it, so that a throttled account is not called again at
// once. An error after the last attempt says how many were made and the
// last error's code.
func Call[T any](ctx context.Context, r Retry, budget *backoff.Budget, op string, f func(context.Context) (T, error)) (T, error) {
	var zero T
	paused := false // the retry after a throttled call: it has waited the pause
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		if !paused {
			if err := budget.Wait(ctx); err != nil {
				return zero, err
			}
		}
		out, err := f(ctx)
		if err == nil {
			return out, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return zero, err
		}
		if attempt >= r.MaxAttempts {
			// The caller names the operation.
			return zero, fmt.Errorf("still failing after %d attempts (%s): %w", attempt, cmp.Or(ErrorCode(err), "network error"), err)
		}
		wait := r.Backoff(attempt)
		paused = Throttled(err)
		if paused {
			wait = max(wait, backoff.Window(attempt, r.BaseDelay, r.MaxDelay)/2)
			// Everyone else sharing the budget keeps the pause too.
			budget.Throttled(wait)
		}
		r.Log.Warn("AWS call failed; retrying", "op", op, "attempt", attempt, "code", ErrorCode(err), "wait", wait, "err", err)
		if serr := r.Sleep(ctx, wait); serr != nil {
			return zero, fmt.Errorf("%w (while waiting to retry %s after: %v)", serr, op, err)
		}
	}
}
