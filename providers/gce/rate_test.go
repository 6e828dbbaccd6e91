package gce

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/gatewayhq/gateway/internal/backoff"
)

// simClock is simulated time: a sleep moves it to the sleep's end at
// once, so call counts are checked against time without waiting.
type simClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *simClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *simClock) advance(ctx context.Context, d time.Duration, record bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if record {
		c.sleeps = append(c.sleeps, d)
	}
	if d > 0 {
		c.t = c.t.Add(d)
	}
	return ctx.Err()
}

func rateProvider(clock *simClock) *Provider {
	p := &Provider{
		cfg: Config{Retry: RetryConfig{MaxAttempts: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second,
			Sleep: func(ctx context.Context, d time.Duration) error { return clock.advance(ctx, d, true) }}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	p.reads = backoff.NewBudget(ReadRate, ReadBurst, clock.Now, func(ctx context.Context, d time.Duration) error { return clock.advance(ctx, d, false) })
	return p
}

// TestReadBudgetSharedByClusters: the instance listings of clusters
// starting together go through the one budget of Compute Engine reads.
func TestReadBudgetSharedByClusters(t *testing.T) {
	clock := &simClock{t: time.Unix(1e9, 0)}
	p := rateProvider(clock)
	const clusters, boot, maxPolls = 6, 40 * time.Second, 300
	start := clock.Now()
	var mu sync.Mutex
	calls := 0
	var wg sync.WaitGroup
	for range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range maxPolls {
				if clock.Now().Sub(start) >= boot {
					return
				}
				if err := p.call(context.Background(), "list instances", func(context.Context) error {
					mu.Lock()
					calls++
					mu.Unlock()
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := clock.Now().Sub(start)
	if limit := ReadBurst + ReadRate*elapsed.Seconds(); float64(calls) > limit+1 || elapsed < boot {
		t.Errorf("%d clusters made %d list calls in %s simulated; the budget allows %.0f, over %s", clusters, calls, elapsed, limit, boot)
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
	clock := &simClock{t: time.Unix(1e9, 0)}
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
		clock.mu.Lock()
		w := clock.sleeps[len(clock.sleeps)-1]
		clock.mu.Unlock()
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
