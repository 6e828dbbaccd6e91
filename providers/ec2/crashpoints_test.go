package ec2

import (
	"context"
	"testing"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
)

// TestCrashPointsReached: what the core asks of the backend (a cluster's
// start, a worker's launch and stop, the cluster's stop, the reaper's
// removal of leftovers) reaches every EC2 crash point. The integration
// test TestCrashPoints kills the gateway at each.
func TestCrashPointsReached(t *testing.T) {
	testutil.EachCrashPoint(t, Registration().CrashPoints, func(t *testing.T, c context.Context) {
		e := newEnv(t)
		s := spec("c1")
		steps := []struct {
			what string
			do   func() error
		}{
			{"StartScheduler", func() error { return e.p.StartScheduler(c, s) }},
			{"StartWorker", func() error { return e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786") }},
			{"StopWorker", func() error { return e.p.StopWorker(c, "c1", "worker-0") }},
			{"StopCluster", func() error { return e.p.StopCluster(c, "c1") }},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.what, err)
			}
		}
		// Leftovers of a cluster the store does not know.
		tags := map[string]string{tagGateway: "gw-test", tagCluster: "ghost"}
		e.ec2.AddSecurityGroup(ec2test.SecurityGroup{Name: "gateway-gw-test-ghost", Description: "left over", VPC: "vpc-0c000000000000001", Tags: tags})
		e.ssm.SetTagged("/gateway/gw-test/ghost/tls", "left over", tags)
		left, err := e.p.ListLeftovers(c)
		if err != nil || len(left) != 2 {
			t.Fatalf("ListLeftovers: %v, %v; want the group and the parameter", left, err)
		}
		for _, l := range left {
			if err := e.p.DeleteLeftover(c, l); err != nil {
				t.Fatalf("DeleteLeftover %v: %v", l, err)
			}
		}
	})
}
