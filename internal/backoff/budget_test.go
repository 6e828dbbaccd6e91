package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestBudgetBoundsCalls: however many callers share a budget, the calls
// it lets through never exceed its burst plus its rate over the simulated
// time that passed.
func TestBudgetBoundsCalls(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	const rate, burst, callers, each = 5.0, 10, 8, 50
	b := NewBudget(rate, burst, clock.Now, clock.Sleep)
	elapsed, calls := clock.Callers(t, callers, each, 0, func(int) error { return b.Wait(context.Background()) })
	if calls != callers*each {
		t.Fatalf("%d calls, want %d", calls, callers*each)
	}
	if limit := burst + rate*elapsed.Seconds(); float64(calls) > limit+1 {
		t.Errorf("%d calls in %s of simulated time; the budget allows %.0f", calls, elapsed, limit)
	}
	// And it does not starve them: the time is about what the rate needs.
	if need := time.Duration(float64(callers*each-burst) / rate * float64(time.Second)); elapsed < need {
		t.Errorf("%d calls took %s; a rate of %g/s needs at least %s", calls, elapsed, rate, need)
	}
}

// TestBudgetThrottled: a throttling answer pauses every caller of the
// budget, and the calls after the pause come at the steady rate, not as
// a burst.
func TestBudgetThrottled(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
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

// TestBudgetFairShare: calls marked as one key's take at most FairShare
// of the budget, however many of that key's callers there are, and
// unmarked calls still take the whole.
func TestBudgetFairShare(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	const rate, burst = 9.0, 9
	b := NewBudget(rate, burst, clock.Now, clock.Sleep)
	ctx := WithKey(context.Background(), "stuck")
	elapsed, calls := clock.Callers(t, 3, 100, 20*time.Second, func(int) error { return b.Wait(ctx) })
	if limit := FairShare*burst + FairShare*rate*elapsed.Seconds(); float64(calls) > limit+1 {
		t.Errorf("one key made %d calls in %s simulated; its share allows %.0f", calls, elapsed, limit)
	}
	b.Forget("stuck")
	before := clock.Now()
	for range burst - 1 { // the bucket refilled while the key waited its share
		if err := b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if waited := clock.Now().Sub(before); waited > 0 {
		t.Errorf("unkeyed calls within the burst waited %s", waited)
	}
}
