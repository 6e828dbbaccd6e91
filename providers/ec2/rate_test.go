package ec2

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// describeCalls counts the Describe* requests the fake received: the
// calls EC2 meters in one account-wide bucket.
func (e *env) describeCalls() int {
	n := 0
	for _, r := range e.ec2.Requests("") {
		if strings.HasPrefix(r.Action, "Describe") {
			n++
		}
	}
	return n
}

// TestDescribeBudgetSharedByClusters: clusters booting together, polled
// as fast as anyone likes, make no more Describe calls than the
// provider's one budget allows over the simulated boot: burst plus rate
// times the time that passed, however many clusters there are.
func TestDescribeBudgetSharedByClusters(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	e := newEnv(t, func(c *Config) { c.Sleep = clock.Sleep })
	e.p.describes = backoff.NewBudget(DescribeRate, DescribeBurst, clock.Now, clock.Sleep)
	e.ec2.SetPendingDescribes(1 << 20) // the machines never finish booting
	c := ctx(t)
	const clusters, boot, maxPolls = 6, 60 * time.Second, 400
	for i := range clusters {
		if err := e.p.StartScheduler(c, spec(fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	before := e.describeCalls()
	// Bounded in count as well as in simulated time.
	elapsed, _ := clock.Callers(t, clusters, maxPolls, boot, func(i int) error {
		_, err := e.p.Describe(c, fmt.Sprintf("c%d", i))
		return err
	})
	calls := e.describeCalls() - before
	if limit := DescribeBurst + DescribeRate*elapsed.Seconds(); float64(calls) > limit+1 {
		t.Errorf("%d clusters made %d Describe calls in %s of simulated boot; the budget allows %.0f (%g/s)", clusters, calls, elapsed.Round(time.Millisecond), limit, DescribeRate)
	}
	if elapsed < boot {
		t.Errorf("the polls ended after %s of simulated time, by count (%d calls): nothing paced them", elapsed, calls)
	}
	t.Logf("%d clusters, %s simulated: %d Describe calls (%.1f/s; budget %g/s, burst %d)", clusters, elapsed.Round(time.Second), calls, float64(calls)/elapsed.Seconds(), DescribeRate, DescribeBurst)
}

// TestThrottledDescribeBacksOff: a throttling answer is retried after at
// least half the backoff bound, never at once, and the pause is the
// budget's, so every cluster of the provider keeps it.
func TestThrottledDescribeBacksOff(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	e := newEnv(t, func(c *Config) { c.Sleep = clock.Sleep; c.MaxAttempts = 8 })
	e.p.describes = backoff.NewBudget(DescribeRate, DescribeBurst, clock.Now, clock.Pass)
	c := ctx(t)
	const rounds, fails = 5, 3
	for round := range rounds {
		e.ec2.FailNext("DescribeInstances", fails, "RequestLimitExceeded")
		n := len(clock.Sleeps())
		if _, err := e.p.Describe(c, "c1"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		waits := clock.Sleeps()[n:]
		if len(waits) < fails {
			t.Fatalf("round %d: %d waits for %d throttled answers: retried at once", round, len(waits), fails)
		}
		for i, w := range waits[:fails] {
			if half := backoff.Window(i+1, e.cfg.BaseDelay, e.cfg.MaxDelay) / 2; w < half {
				t.Errorf("round %d: wait %d after throttling = %s, want at least %s", round, i+1, w, half)
			}
		}
	}
	// The pause belongs to the budget: a call made during it waits too.
	e.ec2.FailNext("DescribeInstances", 1, "RequestLimitExceeded")
	before := clock.Now()
	e.p.describes.Throttled(time.Minute) // as another cluster's throttled call would
	if _, err := e.p.Describe(c, "c2"); err != nil {
		t.Fatal(err)
	}
	if waited := clock.Now().Sub(before); waited < time.Minute {
		t.Errorf("a Describe during another's throttling pause went ahead after %s", waited)
	}
}
