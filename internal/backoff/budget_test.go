package backoff

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock is simulated time: a sleep moves it forward to the end of the
// sleep at once, so counts are checked against time without waiting.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.t = c.t.Add(d)
	}
	return ctx.Err()
}

// TestBudgetBoundsCalls: however many callers share a budget, the calls
// it lets through never exceed its burst plus its rate over the simulated
// time that passed.
func TestBudgetBoundsCalls(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	start := clock.Now()
	const rate, burst, callers, each = 5.0, 10, 8, 50
	b := NewBudget(rate, burst, clock.Now, clock.Sleep)
	var mu sync.Mutex
	var at []time.Time
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := b.Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				at = append(at, clock.Now())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := clock.Now().Sub(start)
	if len(at) != callers*each {
		t.Fatalf("%d calls, want %d", len(at), callers*each)
	}
	if limit := burst + rate*elapsed.Seconds(); float64(len(at)) > limit+1 {
		t.Errorf("%d calls in %s of simulated time; the budget allows %.0f", len(at), elapsed, limit)
	}
	// And it does not starve them: the time is about what the rate needs.
	if need := time.Duration(float64(callers*each-burst) / rate * float64(time.Second)); elapsed < need {
		t.Errorf("%d calls took %s; a rate of %g/s needs at least %s", len(at), elapsed, rate, need)
	}
}

// TestBudgetThrottled: a throttling answer pauses every caller of the
// budget, and the calls after the pause come at the steady rate, not as
// a burst.
func TestBudgetThrottled(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	b := NewBudget(10, 20, clock.Now, clock.Sleep)
	ctx := context.Background()
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	before := clock.Now()
	b.Throttled(3 * time.Second)
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := clock.Now().Sub(before); waited < 3*time.Second {
		t.Errorf("the first call after throttling came %s later; want the 3s pause", waited)
	}
	afterPause := clock.Now()
	for range 10 {
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := clock.Now().Sub(afterPause); d < 900*time.Millisecond {
		t.Errorf("10 calls after the pause took %s; want the steady 10/s, not a burst", d)
	}
}

func TestBudgetCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := NewBudget(1, 1, nil, nil)
	_ = b.Wait(context.Background()) // the one token
	if err := b.Wait(ctx); err == nil {
		t.Error("Wait on a canceled context succeeded")
	}
	var none *Budget
	if err := none.Wait(context.Background()); err != nil {
		t.Errorf("a nil budget limits nothing; got %v", err)
	}
}
