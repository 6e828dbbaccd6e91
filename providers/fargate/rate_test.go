package fargate

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

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

func (c *simClock) Sleep(ctx context.Context, d time.Duration) error { return c.advance(ctx, d, true) }
func (c *simClock) Pass(ctx context.Context, d time.Duration) error  { return c.advance(ctx, d, false) }

func rateProvider(clock *simClock) *Provider {
	p := &Provider{
		cfg: Config{
			Sleep: clock.Sleep,
			Retry: Retry{MaxAttempts: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second,
				Jitter: func(time.Duration) time.Duration { return 0 }}, // the shortest full-jitter wait
		},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	p.budgets.ecs = backoff.NewBudget(ReadRate, ReadBurst, clock.Now, clock.Pass)
	return p
}

// TestReadBudgetSharedByClusters: the DescribeTasks polls of clusters
// starting together go through the one ECS budget: no more calls than its
// burst plus its rate over the simulated time, however many clusters.
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
				_, err := call(context.Background(), p, "DescribeTasks", func(context.Context) (int, error) {
					mu.Lock()
					calls++
					mu.Unlock()
					return 0, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := clock.Now().Sub(start)
	if limit := ReadBurst + ReadRate*elapsed.Seconds(); float64(calls) > limit+1 || elapsed < boot {
		t.Errorf("%d clusters made %d DescribeTasks calls in %s simulated; the budget allows %.0f, over %s", clusters, calls, elapsed, limit, boot)
	}
}

// TestThrottledReadBacksOff: a ThrottlingException is retried after at
// least half the backoff window, even when the jitter would draw 0, and
// pauses the budget for every other caller.
func TestThrottledReadBacksOff(t *testing.T) {
	clock := &simClock{t: time.Unix(1e9, 0)}
	p := rateProvider(clock)
	fails := 3
	_, err := call(context.Background(), p, "ListTasks", func(context.Context) (int, error) {
		if fails > 0 {
			fails--
			return 0, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
		}
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.mu.Lock()
	waits := clock.sleeps
	clock.mu.Unlock()
	if len(waits) != 3 {
		t.Fatalf("waits %v; want 3, one per throttled answer", waits)
	}
	for i, w := range waits {
		if half := backoff.Window(i+1, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay) / 2; w < half {
			t.Errorf("wait %d = %s after throttling; want at least %s, not a tight retry", i+1, w, half)
		}
	}
	// Another cluster's read during a throttling pause waits for its end.
	p.budgets.ecs.Throttled(time.Minute)
	throttledAt := clock.Now()
	if _, err := call(context.Background(), p, "DescribeTasks", func(context.Context) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	if d := clock.Now().Sub(throttledAt); d < time.Minute {
		t.Errorf("a read during the pause went ahead after %s", d)
	}
}
