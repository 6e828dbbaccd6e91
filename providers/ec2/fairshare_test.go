package ec2

import (
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestStuckClusterTakesItsFairShare: a cluster whose start is stuck (its
// instances never leave pending), polled by the core as fast as anything
// lets it (three polls for every one of another cluster), makes no more
// Describe calls than its fair share of the shared Describe budget over
// the simulated time, and a second cluster starting meanwhile waits for
// its call no longer than its own share's refill: counted where the
// requests arrive, on the wire-level fake, through the real SDK.
func TestStuckClusterTakesItsFairShare(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	e := newEnv(t, func(c *Config) { c.Sleep = clock.Sleep })
	e.p.describes = backoff.NewBudget(DescribeRate, DescribeBurst, clock.Now, clock.Sleep)
	e.ec2.SetPendingDescribes(1 << 20) // the machines never finish booting
	c := ctx(t)
	const stuck, starting = "c-stuck", "c-starting"
	for _, name := range []string{stuck, starting} {
		if err := e.p.StartScheduler(c, spec(name)); err != nil {
			t.Fatal(err)
		}
	}
	// calls counts the Describe* requests that name the cluster in a
	// filter (Describe lists a cluster's instances by its tag).
	calls := func(cluster string) int {
		n := 0
		for _, r := range e.ec2.Requests("DescribeInstances") {
			for k, v := range r.Params {
				if len(k) > 7 && k[:7] == "Filter." && slices.Contains(v, cluster) {
					n++
				}
			}
		}
		return n
	}
	before := map[string]int{stuck: calls(stuck), starting: calls(starting)}
	const window, rounds = 30 * time.Second, 400
	elapsed, startingWait, startingPolls := clock.StuckAndStarting(t, window, rounds,
		func() error { _, err := e.p.Describe(c, stuck); return err },
		func() error { _, err := e.p.Describe(c, starting); return err })
	got := map[string]int{}
	for name, n := range before {
		got[name] = calls(name) - n
	}
	share := backoff.FairShare * DescribeRate
	if limit := share*elapsed.Seconds() + backoff.FairShare*DescribeBurst + 1; float64(got[stuck]) > limit {
		t.Errorf("the stuck cluster made %d Describe calls in %s simulated (%.1f/s); its fair share allows %.0f (%.1f/s of the budget's %g/s)",
			got[stuck], elapsed, float64(got[stuck])/elapsed.Seconds(), limit, share, DescribeRate)
	}
	if most := time.Duration(1 / share * float64(time.Second)); startingWait > most+time.Millisecond {
		t.Errorf("a poll of the starting cluster waited %s simulated for its call; its share refills one in %s", startingWait, most)
	}
	if got[starting] < startingPolls {
		t.Errorf("the starting cluster's %d polls made %d Describe calls: the count does not see them", startingPolls, got[starting])
	}
	if elapsed < window {
		t.Errorf("the polls ended after %s simulated, by count: nothing paced them", elapsed)
	}
	t.Logf("%s simulated: stuck cluster %d calls (%.1f/s), starting cluster %d (%d polls, longest wait %s); budget %g/s, fair share %.1f/s",
		elapsed.Round(time.Second), got[stuck], float64(got[stuck])/elapsed.Seconds(), got[starting], startingPolls, startingWait, DescribeRate, share)
}
