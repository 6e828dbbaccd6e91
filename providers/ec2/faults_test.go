package ec2

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// TestFaultModes drives a cluster's whole life (scheduler, two workers, a
// worker stopped, the cluster stopped) through each fault the real
// services show, and counts what is left in the fakes afterwards: one
// instance per member however often a launch was repeated, and no
// instance running, no security group and no parameter once the cluster
// is stopped.
func TestFaultModes(t *testing.T) {
	tests := []struct {
		name string
		// start and stop arm the faults before the start and the stop.
		start, stop func(e *env)
		// fired checks that the fault was met (else the test proves
		// nothing).
		fired func(t *testing.T, e *env)
	}{{
		name: "interfaces detaching",
		stop: func(e *env) { e.ec2.SetDetachDelay(45 * time.Second) },
		fired: func(t *testing.T, e *env) {
			if n := len(e.ec2.Requests("DeleteSecurityGroup")); n < 2 {
				t.Errorf("DeleteSecurityGroup called %d times: the group was never still in use", n)
			}
		},
	}, {
		name: "throttling burst",
		start: func(e *env) {
			e.ec2.Throttle(3)
			e.ssm.Throttle(3)
		},
		stop: func(e *env) {
			e.ec2.Throttle(3)
			e.ssm.Throttle(3)
		},
		fired: func(t *testing.T, e *env) {
			if n := e.ec2.Injected("RequestLimitExceeded"); n != 6 {
				t.Errorf("%d EC2 calls throttled, want 6", n)
			}
			if n := e.ssm.Injected("ThrottlingException"); n != 6 {
				t.Errorf("%d SSM calls throttled, want 6", n)
			}
		},
	}, {
		name: "answers lost after success",
		start: func(e *env) {
			e.ec2.LoseAnswers("CreateSecurityGroup", 1, "")
			e.ec2.LoseAnswers("AuthorizeSecurityGroupIngress", 1, "InternalError")
			e.ec2.LoseAnswers("RunInstances", 2, "")
			e.ec2.LoseAnswers("RunInstances", 1, "InternalError")
			e.ssm.LoseAnswers("PutParameter", 1, "")
		},
		stop: func(e *env) {
			e.ec2.LoseAnswers("TerminateInstances", 2, "")
			e.ec2.LoseAnswers("DeleteSecurityGroup", 1, "")
			e.ssm.LoseAnswers("DeleteParameter", 1, "InternalServerError")
		},
		fired: func(t *testing.T, e *env) {
			if n := e.ec2.Injected("") + e.ec2.Injected("InternalError"); n != 8 {
				t.Errorf("%d EC2 answers lost, want 8", n)
			}
			if n := e.ssm.Injected("") + e.ssm.Injected("InternalServerError"); n != 2 {
				t.Errorf("%d SSM answers lost, want 2", n)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock(time.Unix(1e9, 0))
			e := newEnv(t, func(c *Config) { c.Sleep = clock.Sleep })
			e.ec2.SetClock(clock.Now)
			c := ctx(t)
			s := spec("c1")
			if tc.start != nil {
				tc.start(e)
			}
			if err := e.p.StartScheduler(c, s); err != nil {
				t.Fatalf("StartScheduler: %v", err)
			}
			ms, err := e.p.Describe(c, "c1")
			if err != nil {
				t.Fatal(err)
			}
			sched, _ := memberByName(ms, "scheduler")
			for _, w := range []string{"worker-0", "worker-1"} {
				if err := e.p.StartWorker(c, s, w, sched.Address); err != nil {
					t.Fatalf("StartWorker %s: %v", w, err)
				}
			}
			perMember := map[string]int{}
			for _, in := range e.ec2.Instances() {
				perMember[in.Tags["gateway-member"]]++
			}
			for _, m := range []string{"scheduler", "worker-0", "worker-1"} {
				if perMember[m] != 1 {
					t.Errorf("%d instances of %s, want 1", perMember[m], m)
				}
			}
			if len(perMember) != 3 {
				t.Errorf("instances of %v, want 3 members", perMember)
			}
			if gs := e.groups(); len(gs) != 1 {
				t.Errorf("%d security groups for one cluster", len(gs))
			}
			if _, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls"); !ok {
				t.Error("no TLS parameter")
			}

			if tc.stop != nil {
				tc.stop(e)
			}
			if err := e.p.StopWorker(c, "c1", "worker-1"); err != nil {
				t.Fatalf("StopWorker: %v", err)
			}
			if err := e.p.StopCluster(c, "c1"); err != nil {
				t.Fatalf("StopCluster: %v", err)
			}
			for _, in := range e.ec2.Instances() {
				if in.State != "terminated" && in.State != "shutting-down" {
					t.Errorf("%s (%s) is %s after StopCluster", in.ID, in.Tags["gateway-member"], in.State)
				}
			}
			if gs := e.groups(); len(gs) != 0 {
				t.Errorf("security groups left: %+v", gs)
			}
			if _, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls"); ok {
				t.Error("the TLS parameter outlived its cluster")
			}
			tc.fired(t, e)
		})
	}
}

// TestStopRightAfterLaunch: an instance launched a moment ago is unknown
// to EC2's API for a while (InvalidInstanceID.NotFound, eventual
// consistency); StopCluster waits it out and terminates it instead of
// failing and leaving it running until the next try.
func TestStopRightAfterLaunch(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	e := newEnv(t, func(c *Config) { c.Sleep = clock.Sleep })
	e.ec2.SetClock(clock.Now)
	c := ctx(t)
	e.ec2.SetVisibilityDelay(6)
	if err := e.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	ins := e.ec2.Instances()
	if len(ins) != 1 || ins[0].State != "terminated" && ins[0].State != "shutting-down" {
		t.Fatalf("instances after StopCluster: %+v", ins)
	}
	if len(e.ec2.Requests("TerminateInstances")) < 2 {
		t.Errorf("TerminateInstances called %d times: the instance was never unknown", len(e.ec2.Requests("TerminateInstances")))
	}
	if len(e.groups()) != 0 {
		t.Error("security group left")
	}
}
