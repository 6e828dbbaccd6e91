package fargate

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
)

func rateProvider(clock *testutil.Clock) *Provider {
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
	clock := testutil.NewClock(time.Unix(1e9, 0))
	p := rateProvider(clock)
	const clusters, boot, maxPolls = 6, 40 * time.Second, 300
	// Counted where the requests arrive.
	var calls atomic.Int64
	elapsed, _ := clock.Callers(t, clusters, maxPolls, boot, func(int) error {
		_, err := call(context.Background(), p, "DescribeTasks", func(context.Context) (int, error) {
			calls.Add(1)
			return 0, nil
		})
		return err
	})
	if limit := ReadBurst + ReadRate*elapsed.Seconds(); float64(calls.Load()) > limit+1 || elapsed < boot {
		t.Errorf("%d clusters made %d DescribeTasks calls in %s simulated; the budget allows %.0f, over %s", clusters, calls.Load(), elapsed, limit, boot)
	}
}

// TestThrottledReadBacksOff: a ThrottlingException is retried after at
// least half the backoff window, even when the jitter would draw 0, and
// pauses the budget for every other caller.
func TestThrottledReadBacksOff(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
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
	waits := clock.Sleeps()
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
