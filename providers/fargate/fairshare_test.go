package fargate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestStuckClusterTakesItsFairShare: a cluster whose start is stuck (its
// tasks run, its scheduler never answers), polled by the core as fast as
// anything lets it (three polls for every one of another cluster), makes
// no more ECS reads than its fair share of the shared read budget over
// the simulated time, and a second cluster starting meanwhile waits for
// its reads no longer than its own share's refill: counted where the
// requests arrive, on the wire-level fake.
func TestStuckClusterTakesItsFairShare(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	f := fargatetest.New(t)
	p, _ := newProvider(t, f, func(c *fargate.Config) { c.Sleep, c.Now = clock.Sleep, clock.Now })
	ctx := context.Background()
	const stuck, starting = "0123456789abcdef", "fedcba9876543210"
	for _, c := range []string{stuck, starting} {
		if err := p.StartScheduler(ctx, testSpec(c, "ann")); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(cluster string) int {
		n := 0
		for _, r := range f.Requests("ecs:ListTasks") {
			if strings.Contains(string(r.Body), `"gateway-`+cluster+`"`) {
				n++
			}
		}
		return n
	}
	before := map[string]int{stuck: reads(stuck), starting: reads(starting)}
	// The core's passes, in turn: three polls of the stuck cluster (as
	// fast as anything lets them) for one of the starting cluster, whose
	// wait for its reads is timed on the simulated clock.
	const window, rounds = 30 * time.Second, 400
	elapsed, startingWait, startingPolls := clock.StuckAndStarting(t, window, rounds,
		func() error { _, err := p.Describe(ctx, stuck); return err },
		func() error { _, err := p.Describe(ctx, starting); return err })
	// Each Describe lists twice (desired RUNNING, STOPPED) and describes
	// once: three reads for two ListTasks.
	got := map[string]float64{}
	for c, n := range before {
		got[c] = float64(reads(c)-n) * 3 / 2
	}
	share := backoff.FairShare * fargate.ReadRate
	if limit := share*elapsed.Seconds() + backoff.FairShare*fargate.ReadBurst + 3; got[stuck] > limit {
		t.Errorf("the stuck cluster made %.0f ECS reads in %s simulated (%.1f/s); its fair share allows %.0f (%.1f/s of the budget's %g/s)",
			got[stuck], elapsed, got[stuck]/elapsed.Seconds(), limit, share, fargate.ReadRate)
	}
	// Its three reads wait for no more than its own share's refill.
	if most := time.Duration(3 / share * float64(time.Second)); startingWait > most+time.Millisecond {
		t.Errorf("a poll of the starting cluster waited %s simulated for its reads; its share refills three in %s", startingWait, most)
	}
	if elapsed < window {
		t.Errorf("the polls ended after %s simulated, by count: nothing paced them", elapsed)
	}
	t.Logf("%s simulated: stuck cluster %.0f reads (%.1f/s), starting cluster %.0f (%.1f/s, %d polls, longest wait %s); budget %g/s, fair share %.1f/s",
		elapsed.Round(time.Second), got[stuck], got[stuck]/elapsed.Seconds(), got[starting], got[starting]/elapsed.Seconds(), startingPolls, startingWait, fargate.ReadRate, share)
}
