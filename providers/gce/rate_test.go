package gce

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
)

func rateProvider(clock *testutil.Clock) *Provider {
	p := &Provider{
		cfg: Config{Retry: RetryConfig{MaxAttempts: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second,
			Sleep: clock.Sleep}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	p.reads = backoff.NewBudget(ReadRate, ReadBurst, clock.Now, clock.Pass)
	return p
}

// TestReadBudgetSharedByClusters: the instance listings of clusters
// starting together go through the one budget of Compute Engine reads.
func TestReadBudgetSharedByClusters(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	p := rateProvider(clock)
	const clusters, boot, maxPolls = 6, 40 * time.Second, 300
	// Counted where the requests arrive.
	var calls atomic.Int64
	elapsed, _ := clock.Callers(t, clusters, maxPolls, boot, func(int) error {
		return p.call(context.Background(), "list instances", func(context.Context) error {
			calls.Add(1)
			return nil
		})
	})
	if limit := ReadBurst + ReadRate*elapsed.Seconds(); float64(calls.Load()) > limit+1 || elapsed < boot {
		t.Errorf("%d clusters made %d list calls in %s simulated; the budget allows %.0f, over %s", clusters, calls.Load(), elapsed, limit, boot)
	}
	// Secret Manager is another service, and writes are not metered.
	for _, what := range []string{"get secret s1", "access secret s1", "insert gw-x", "delete gw-x"} {
		if computeRead(what) {
			t.Errorf("%q metered as a Compute Engine read", what)
		}
	}
}

// TestRateLimitedReadBacksOff: a 403 rateLimitExceeded is retried after at
// least half the backoff window, never at once, 20 times over (full
// jitter alone would draw a short wait about half the time), and pauses
// the budget for every other cluster.
func TestRateLimitedReadBacksOff(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	p := rateProvider(clock)
	limited := &googleapi.Error{Code: http.StatusForbidden, Message: "Rate Limit Exceeded", Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}
	for round := range 20 {
		fails := 1
		if err := p.call(context.Background(), "list instances", func(context.Context) error {
			if fails > 0 {
				fails--
				return limited
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sleeps := clock.Sleeps()
		w := sleeps[len(sleeps)-1]
		if half := p.cfg.Retry.BaseDelay / 2; w < half {
			t.Errorf("round %d: waited %s after rateLimitExceeded; want at least %s", round, w, half)
		}
	}
	p.reads.Throttled(time.Minute)
	before := clock.Now()
	if err := p.call(context.Background(), "guest attributes of gw-x", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := clock.Now().Sub(before); d < time.Minute {
		t.Errorf("a read during the pause went ahead after %s", d)
	}
}
