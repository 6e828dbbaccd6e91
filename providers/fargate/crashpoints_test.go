package fargate_test

import (
	"context"
	"testing"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestCrashPointsReached: what the core asks of the backend (a cluster's
// start, a worker's launch and stop, the cluster's stop, the reaper's
// removal of leftovers) reaches every Fargate crash point. The integration
// test TestCrashPoints kills the gateway at each.
func TestCrashPointsReached(t *testing.T) {
	testutil.EachCrashPoint(t, fargate.Registration().CrashPoints, func(t *testing.T, c context.Context) {
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		s := testSpec("c1", "alice")
		if err := p.StartScheduler(c, s); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		addr := schedulerUp(t, p, "c1").Address
		steps := []struct {
			what string
			do   func() error
		}{
			{"StartWorker", func() error { return p.StartWorker(c, s, "worker-0", addr) }},
			{"StopWorker", func() error { return p.StopWorker(c, "c1", "worker-0") }},
			{"StopCluster", func() error { return p.StopCluster(c, "c1") }},
			// A cluster whose task ECS has forgotten leaves its group,
			// secret and task definitions for the reaper.
			{"StartScheduler ghost", func() error { return p.StartScheduler(c, testSpec("ghost", "alice")) }},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.what, err)
			}
		}
		if task, ok := f.TaskOf("ghost", "scheduler"); ok {
			f.Forget(task.ARN)
		}
		left, err := p.ListLeftovers(c)
		if err != nil || len(left) != 3 {
			t.Fatalf("ListLeftovers: %v, %v; want the group, the secret and the task definition family", left, err)
		}
		for _, l := range left {
			if err := p.DeleteLeftover(c, l); err != nil {
				t.Fatalf("DeleteLeftover %v: %v", l, err)
			}
		}
	})
}
