package fargate_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestFaultModes drives a cluster's whole life (scheduler, two workers, a
// worker stopped, the cluster stopped) through each fault the real
// services show, and counts what is left in the fake afterwards: one task
// per member however often a launch was repeated, and no running task,
// security group, secret or ACTIVE task definition once the cluster is
// stopped.
func TestFaultModes(t *testing.T) {
	tests := []struct {
		name        string
		start, stop func(f *fargatetest.Server)
		fired       func(t *testing.T, f *fargatetest.Server)
	}{{
		name: "interfaces detaching",
		stop: func(f *fargatetest.Server) { f.SetDetachDelay(45 * time.Second) },
		fired: func(t *testing.T, f *fargatetest.Server) {
			if n := f.Calls("ec2:DeleteSecurityGroup"); n < 2 {
				t.Errorf("DeleteSecurityGroup called %d times: the group was never still in use", n)
			}
		},
	}, {
		name:  "throttling burst",
		start: func(f *fargatetest.Server) { f.ThrottleAll(3) },
		stop:  func(f *fargatetest.Server) { f.ThrottleAll(3) },
		fired: func(t *testing.T, f *fargatetest.Server) {
			if n := f.Injected("ThrottlingException") + f.Injected("RequestLimitExceeded"); n != 6 {
				t.Errorf("%d calls throttled, want 6", n)
			}
		},
	}, {
		name: "answers lost after success",
		start: func(f *fargatetest.Server) {
			f.LoseAnswers("ec2:CreateSecurityGroup", 1)
			f.LoseAnswersWith("secretsmanager:CreateSecret", 1, http.StatusInternalServerError, "InternalServiceError")
			f.LoseAnswers("ecs:RegisterTaskDefinition", 1)
			f.LoseAnswers("ecs:RunTask", 2)
			f.LoseAnswersWith("ecs:RunTask", 1, http.StatusInternalServerError, "ServerException")
		},
		stop: func(f *fargatetest.Server) {
			f.LoseAnswers("ecs:StopTask", 2)
			f.LoseAnswers("ec2:DeleteSecurityGroup", 1)
			f.LoseAnswersWith("secretsmanager:DeleteSecret", 1, http.StatusInternalServerError, "InternalServiceError")
			f.LoseAnswers("ecs:DeregisterTaskDefinition", 1)
			f.LoseAnswers("ecs:DeleteTaskDefinitions", 1)
		},
		fired: func(t *testing.T, f *fargatetest.Server) {
			if n := f.Injected("") + f.Injected("InternalServiceError") + f.Injected("ServerException"); n != 12 {
				t.Errorf("%d answers lost, want 12", n)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const cl = "c-faults"
			ctx := context.Background()
			clock := testutil.NewClock(time.Unix(1e9, 0))
			f := fargatetest.New(t)
			f.SetClock(clock.Now)
			p, _ := newProvider(t, f, func(c *fargate.Config) {
				c.Sleep = clock.Sleep
				c.PollInterval = 5 * time.Second
				c.StopTimeout = 2 * time.Minute
			})
			spec := testSpec(cl, "ann")
			if tc.start != nil {
				tc.start(f)
			}
			if err := p.StartScheduler(ctx, spec); err != nil {
				t.Fatalf("StartScheduler: %v", err)
			}
			sched := schedulerUp(t, p, cl)
			for _, w := range []string{"worker-0", "worker-1"} {
				if err := p.StartWorker(ctx, spec, w, sched.Address); err != nil {
					t.Fatalf("StartWorker %s: %v", w, err)
				}
			}
			perMember := map[string]int{}
			for _, task := range f.Tasks() {
				perMember[task.Tags["gateway-member"]]++
			}
			for _, m := range []string{"scheduler", "worker-0", "worker-1"} {
				if perMember[m] != 1 {
					t.Errorf("%d tasks of %s, want 1", perMember[m], m)
				}
			}
			if len(perMember) != 3 {
				t.Errorf("tasks of %v, want 3 members", perMember)
			}
			if n := len(f.Groups()); n != 1 {
				t.Errorf("%d security groups for one cluster", n)
			}
			if n := len(f.Secrets()); n != 1 {
				t.Errorf("%d secrets for one cluster", n)
			}
			waitFor(t, p, cl, "workers running", running("worker-0", "worker-1"))

			if tc.stop != nil {
				tc.stop(f)
			}
			if err := p.StopWorker(ctx, cl, "worker-1"); err != nil {
				t.Fatalf("StopWorker: %v", err)
			}
			if err := p.StopCluster(ctx, cl); err != nil {
				t.Fatalf("StopCluster: %v", err)
			}
			for _, task := range f.Tasks() {
				if task.DesiredStatus != "STOPPED" {
					t.Errorf("%s (%s) still wanted %s after StopCluster", task.ARN, task.Tags["gateway-member"], task.DesiredStatus)
				}
			}
			if gs := f.Groups(); len(gs) != 0 {
				t.Errorf("security groups left: %+v", gs)
			}
			if ss := f.Secrets(); len(ss) != 0 {
				t.Errorf("secrets left: %+v", ss)
			}
			for _, d := range f.TaskDefinitions() {
				if strings.Contains(d.Family, cl) && d.Status != "DELETE_IN_PROGRESS" {
					t.Errorf("task definition %s left %s", d.ARN, d.Status)
				}
			}
			tc.fired(t, f)
		})
	}
}

// TestEventualConsistency: right after RunTask, ECS neither lists the new
// tasks nor knows them by ARN for a while (ListTasks leaves them out,
// DescribeTasks answers MISSING, StopTask "not found"). Starting and
// then at once stopping a cluster must still start each member once and
// leave no task running.
func TestEventualConsistency(t *testing.T) {
	const cl = "c-lag"
	ctx := context.Background()
	clock := testutil.NewClock(time.Unix(1e9, 0))
	f := fargatetest.New(t)
	f.SetClock(clock.Now)
	p, _ := newProvider(t, f, func(c *fargate.Config) {
		c.Sleep = clock.Sleep
		c.PollInterval = 5 * time.Second
		c.StopTimeout = 2 * time.Minute
	})
	spec := testSpec(cl, "ann")
	f.SetListLag(3)
	f.SetDescribeLag(2)
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	if err := p.StartScheduler(ctx, spec); err != nil { // not listed yet: must not start a second
		t.Fatalf("StartScheduler again: %v", err)
	}
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	tasks := f.Tasks()
	if len(tasks) != 1 {
		t.Fatalf("%d tasks for one scheduler", len(tasks))
	}
	if tasks[0].DesiredStatus != "STOPPED" {
		t.Errorf("the scheduler's task still wants %s", tasks[0].DesiredStatus)
	}
	if len(f.Groups()) != 0 || len(f.Secrets()) != 0 {
		t.Errorf("left: groups %+v, secrets %+v", f.Groups(), f.Secrets())
	}

	// A worker stopped the moment it was started is stopped, not taken
	// for one already gone.
	f.SetListLag(0)
	f.SetDescribeLag(0)
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	sched := schedulerUp(t, p, cl)
	f.SetListLag(3)
	f.SetDescribeLag(2)
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	if err := p.StopWorker(ctx, cl, "worker-0"); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	for _, task := range f.Tasks() {
		if task.Tags["gateway-member"] == "worker-0" && task.DesiredStatus != "STOPPED" {
			t.Errorf("worker-0's task still wants %s after StopWorker", task.DesiredStatus)
		}
	}
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	if len(f.Groups()) != 0 || len(f.Secrets()) != 0 {
		t.Errorf("left: groups %+v, secrets %+v", f.Groups(), f.Secrets())
	}
}
