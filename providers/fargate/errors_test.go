package fargate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

const cl = "00112233445566ff"

func gwKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:8]
}

// TestRefusedSpecs: what Fargate cannot run is refused before any request.
func TestRefusedSpecs(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(*providers.ClusterSpec)
		unsupported bool
		want        []string
		workerOK    bool // only the scheduler is refused: a worker does not need its size
	}{
		{"gpu workers", func(s *providers.ClusterSpec) { s.Worker.GPUs, s.Worker.GPUType = 1, "t4" }, true, []string{"no GPUs", "1 t4", "provider: ec2"}, false},
		{"gpu scheduler", func(s *providers.ClusterSpec) { s.Scheduler.GPUs = 2 }, true, []string{"no GPUs", "provider: ec2"}, false},
		{"workers beyond 16 vCPU", func(s *providers.ClusterSpec) { s.Worker.VCPUs = 32 }, true, []string{"worker needs 32 vCPU", "16 vCPU, 120 GiB", "provider: ec2"}, false},
		{"scheduler beyond 120 GiB", func(s *providers.ClusterSpec) { s.Scheduler.MemoryGiB = 128 }, true, []string{"scheduler needs 1 vCPU and 128 GiB", "provider: ec2"}, true},
		{"worker memory limit beyond 120 GiB", func(s *providers.ClusterSpec) { s.Worker.MemoryGiB, s.WorkerMemory = 0, 130<<30 }, true, []string{"worker needs", "130 GiB"}, false},
		{"negative size", func(s *providers.ClusterSpec) { s.Worker.VCPUs = -1 }, false, []string{"not a size"}, false},
		{"another region", func(s *providers.ClusterSpec) { s.Region = "eu-west-1" }, true, []string{"runs in us-east-1", "asks for eu-west-1"}, false},
		{"bad cluster name", func(s *providers.ClusterSpec) { s.Name = "a b/c" }, false, []string{"invalid cluster name"}, false},
		{"no TLS", func(s *providers.ClusterSpec) { s.TLSKey = nil }, false, []string{"no TLS certificate and key"}, false},
		{"another gateway's cluster", func(s *providers.ClusterSpec) { s.GatewayID = "gw-else" }, false, []string{"belongs to gateway"}, false},
		{"image with spaces", func(s *providers.ClusterSpec) { s.Image = "a b" }, false, []string{"white space"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fargatetest.New(t)
			p, _ := newProvider(t, f)
			spec := testSpec(cl, "ann")
			tc.edit(&spec)
			errs := map[string]error{"StartScheduler": p.StartScheduler(context.Background(), spec)}
			if !tc.workerOK {
				errs["StartWorker"] = p.StartWorker(context.Background(), spec, "worker-0", "10.1.0.2:8786")
			}
			for call, err := range errs {
				if err == nil {
					t.Fatalf("%s accepted the spec", call)
				}
				if errors.Is(err, providers.ErrUnsupported) != tc.unsupported {
					t.Errorf("%s: %v; ErrUnsupported %v, want %v", call, err, errors.Is(err, providers.ErrUnsupported), tc.unsupported)
				}
				mustContain(t, call+" error", err.Error(), tc.want...)
			}
			if rs := f.Requests(); len(rs) != 0 {
				t.Errorf("a refused spec sent %d requests (first %s)", len(rs), rs[0].Action)
			}
		})
	}
}

func TestStartWorkerArguments(t *testing.T) {
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	spec := testSpec(cl, "ann")
	for _, tc := range []struct{ worker, addr, want string }{
		{"", "10.1.0.2:8786", "invalid worker name"},
		{"scheduler", "10.1.0.2:8786", "invalid worker name"},
		{"w 1", "10.1.0.2:8786", "invalid worker name"},
		{"worker-0", "", "needs the scheduler's host:port"},
		{"worker-0", "10.1.0.2", "needs the scheduler's host:port"},
	} {
		err := p.StartWorker(context.Background(), spec, tc.worker, tc.addr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartWorker(%q, %q) = %v; want %q", tc.worker, tc.addr, err, tc.want)
		}
	}
	if len(f.Requests()) != 0 {
		t.Errorf("refused arguments sent requests")
	}
}

// TestThrottlingRetried: throttled and failed (5xx) calls are retried with
// exponential backoff, bounded; other errors are not retried.
func TestThrottlingRetried(t *testing.T) {
	ms := time.Millisecond
	t.Run("recovers", func(t *testing.T) {
		f := fargatetest.New(t)
		p, sl := newProvider(t, f)
		f.Throttle("ec2:CreateSecurityGroup", 1)
		f.Throttle("secretsmanager:CreateSecret", 1)
		f.FailNext("ecs:DescribeTaskDefinition", 1, http.StatusInternalServerError, "ServerException", "Service unavailable")
		f.Throttle("ecs:RunTask", 2)
		if err := p.StartScheduler(context.Background(), testSpec(cl, "ann")); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		if n := f.Calls("ecs:RunTask"); n != 3 {
			t.Errorf("RunTask called %d times; want 3 (2 throttled)", n)
		}
		if n := len(f.Tasks()); n != 1 {
			t.Errorf("%d tasks; want 1", n)
		}
		if got, want := sl.all(), []time.Duration{10 * ms, 10 * ms, 10 * ms, 10 * ms, 20 * ms}; !slices.Equal(got, want) {
			t.Errorf("waits %v; want %v", got, want)
		}
	})
	t.Run("gives up, backoff capped", func(t *testing.T) {
		f := fargatetest.New(t)
		p, sl := newProvider(t, f, func(c *fargate.Config) { c.Retry.MaxAttempts = 6 })
		f.Throttle("ecs:ListTasks", 100)
		err := p.StartScheduler(context.Background(), testSpec(cl, "ann"))
		if err == nil {
			t.Fatal("StartScheduler succeeded through endless throttling")
		}
		mustContain(t, "error", err.Error(), "ThrottlingException", "still failing after 6 attempts")
		if got, want := sl.all(), []time.Duration{10 * ms, 20 * ms, 40 * ms, 40 * ms, 40 * ms}; !slices.Equal(got, want) {
			t.Errorf("waits %v; want %v (doubling, capped at MaxDelay)", got, want)
		}
		if n := f.Calls("ecs:ListTasks"); n != 6 {
			t.Errorf("ListTasks called %d times; want 6", n)
		}
	})
	t.Run("EC2 503 RequestLimitExceeded", func(t *testing.T) {
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		f.Throttle("ec2:DescribeSubnets", 2)
		if err := p.StartScheduler(context.Background(), testSpec(cl, "ann")); err != nil {
			t.Fatal(err)
		}
		if n := f.Calls("ec2:DescribeSubnets"); n != 3 {
			t.Errorf("DescribeSubnets called %d times; want 3", n)
		}
	})
	t.Run("access denied is not retried", func(t *testing.T) {
		f := fargatetest.New(t)
		p, sl := newProvider(t, f)
		f.FailNext("ecs:RunTask", 1, http.StatusBadRequest, "AccessDeniedException", "User is not authorized to perform: ecs:RunTask")
		err := p.StartScheduler(context.Background(), testSpec(cl, "ann"))
		if err == nil || !strings.Contains(err.Error(), "not authorized") {
			t.Fatalf("StartScheduler = %v; want the access error", err)
		}
		if n := f.Calls("ecs:RunTask"); n != 1 || len(sl.all()) != 0 {
			t.Errorf("RunTask called %d times with waits %v; want once, no retry", n, sl.all())
		}
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		f := fargatetest.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		p, _ := newProvider(t, f, func(c *fargate.Config) {
			c.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }
		})
		f.Throttle("ecs:ListTasks", 1)
		err := p.StartScheduler(ctx, testSpec(cl, "ann"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("StartScheduler = %v; want context.Canceled", err)
		}
		if n := f.Calls("ecs:ListTasks"); n != 1 || len(f.Tasks()) != 0 {
			t.Errorf("after cancel: %d ListTasks, %d tasks", n, len(f.Tasks()))
		}
	})
}

// TestCapacity: a subnet without capacity moves the launch to the next,
// spot moves to regular Fargate, and when nothing is left the error wraps
// ErrCapacity and lists every try.
func TestCapacity(t *testing.T) {
	const spotGone = "Capacity is unavailable at this time. Please try again later or in a different availability zone"
	tests := []struct {
		name         string
		spot         bool
		faults       []fargatetest.RunFault
		capProviders []string
		wantCapacity string // where the worker ends up: "FARGATE in subnet-..."
		wantErr      []string
		errCapacity  bool
	}{
		{name: "next subnet", faults: []fargatetest.RunFault{{Subnet: fargatetest.SubnetA, Reason: "RESOURCE:FARGATE"}},
			wantCapacity: "FARGATE in " + fargatetest.SubnetB},
		{name: "spot next subnet", spot: true, faults: []fargatetest.RunFault{{Subnet: fargatetest.SubnetA, CapacityProvider: "FARGATE_SPOT", Reason: spotGone}},
			wantCapacity: "FARGATE_SPOT in " + fargatetest.SubnetB},
		{name: "spot falls back to regular Fargate", spot: true, faults: []fargatetest.RunFault{{CapacityProvider: "FARGATE_SPOT", Reason: spotGone}},
			wantCapacity: "FARGATE in " + fargatetest.SubnetA},
		{name: "spot not in the ECS cluster", spot: true, capProviders: []string{"FARGATE"},
			wantCapacity: "FARGATE in " + fargatetest.SubnetA},
		{name: "no capacity anywhere", spot: true, faults: []fargatetest.RunFault{{CapacityProvider: "FARGATE_SPOT", Reason: spotGone}, {CapacityProvider: "FARGATE", Reason: "RESOURCE:FARGATE", Detail: "no capacity in the zone"}},
			errCapacity: true, wantErr: []string{
				"no Fargate capacity for worker-0",
				"FARGATE_SPOT in " + fargatetest.SubnetA + ": Capacity is unavailable",
				"FARGATE_SPOT in " + fargatetest.SubnetB + ": Capacity is unavailable",
				"FARGATE in " + fargatetest.SubnetA + ": RESOURCE:FARGATE (no capacity in the zone)",
				"FARGATE in " + fargatetest.SubnetB + ": RESOURCE:FARGATE",
			}},
		{name: "other failure stops at once", faults: []fargatetest.RunFault{{Reason: "ATTRIBUTE", Detail: "requires attribute"}},
			wantErr: []string{"ECS refused to start worker-0", "ATTRIBUTE (requires attribute)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fargatetest.New(t)
			p, _ := newProvider(t, f)
			spec := testSpec(cl, "ann")
			spec.Spot = tc.spot
			if err := p.StartScheduler(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
			sched := schedulerUp(t, p, cl)
			for _, fl := range tc.faults {
				f.FailRunTask(fl)
			}
			if tc.capProviders != nil {
				f.SetCapacityProviders(tc.capProviders...)
			}
			before := f.Calls("ecs:RunTask")
			err := p.StartWorker(context.Background(), spec, "worker-0", sched.Address)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("StartWorker succeeded")
				}
				mustContain(t, "error", err.Error(), tc.wantErr...)
				if errors.Is(err, providers.ErrCapacity) != tc.errCapacity {
					t.Errorf("errors.Is(ErrCapacity) = %v; want %v", !tc.errCapacity, tc.errCapacity)
				}
				if !tc.errCapacity && f.Calls("ecs:RunTask")-before != 1 {
					t.Errorf("a non-capacity failure was tried again elsewhere")
				}
				if _, ok := f.TaskOf(cl, "worker-0"); ok {
					t.Errorf("a task was started")
				}
				return
			}
			if err != nil {
				t.Fatalf("StartWorker: %v", err)
			}
			task, ok := f.TaskOf(cl, "worker-0")
			if !ok || task.CapacityProvider+" in "+task.Subnet != tc.wantCapacity {
				t.Errorf("worker on %s in %s; want %s", task.CapacityProvider, task.Subnet, tc.wantCapacity)
			}
			waitFor(t, p, cl, "worker running", running("worker-0"))
		})
	}
}

// TestWorkerLosses: members that end on their own carry why.
func TestWorkerLosses(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	spec := testSpec(cl, "ann")
	spec.Spot = true
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sched := schedulerUp(t, p, cl)
	for _, w := range []string{"worker-0", "worker-1"} {
		if err := p.StartWorker(ctx, spec, w, sched.Address); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, p, cl, "workers running", running("worker-0", "worker-1"))
	w0, _ := f.TaskOf(cl, "worker-0")
	w1, _ := f.TaskOf(cl, "worker-1")
	if err := f.InterruptSpot(w0.ARN); err != nil {
		t.Fatal(err)
	}
	if err := f.Exit(w1.ARN, 137, "OutOfMemoryError: Container killed due to memory usage"); err != nil {
		t.Fatal(err)
	}
	ms := waitFor(t, p, cl, "workers stopped", func(ms []providers.Member) bool {
		return find(ms, "worker-0").State == providers.StateStopped && find(ms, "worker-1").State == providers.StateStopped
	})
	if r := find(ms, "worker-0").Reason; r != "spot interruption" {
		t.Errorf("spot-interrupted worker's reason %q; want %q", r, "spot interruption")
	}
	mustContain(t, "exited worker's reason", find(ms, "worker-1").Reason, "Essential container in task exited", "exit code 137", "OutOfMemoryError", "EssentialContainerExited")
	if s := find(ms, "scheduler"); s.State != providers.StateRunning {
		t.Errorf("scheduler %+v", s)
	}

	// A task that cannot start: its secret has gone.
	f.DeleteSecret("gateway/" + gwKey(testGateway) + "/" + cl + "/tls")
	if err := p.StartWorker(ctx, spec, "worker-2", sched.Address); err != nil {
		t.Fatal(err)
	}
	ms = waitFor(t, p, cl, "worker-2 failed", func(ms []providers.Member) bool {
		w := find(ms, "worker-2")
		return w != nil && w.State == providers.StateStopped
	})
	mustContain(t, "worker-2's reason", find(ms, "worker-2").Reason, "ResourceInitializationError", "TaskFailedToStart")
	// ECS forgets stopped tasks after a while: so does Describe.
	w2, _ := f.TaskOf(cl, "worker-2")
	f.Forget(w2.ARN)
	ms, err := p.Describe(ctx, cl)
	if err != nil || find(ms, "worker-2") != nil {
		t.Errorf("Describe after ECS forgot worker-2: %+v, %v", ms, err)
	}
}

// TestStartsAreIdempotent across processes and an eventually consistent
// listing: the client token returns the task already started.
func TestStartsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	f.SetListLag(1000) // ListTasks never shows new tasks in this test
	p, _ := newProvider(t, f)
	spec := testSpec(cl, "ann")
	for range 2 {
		if err := p.StartScheduler(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Calls("ecs:RunTask"); n != 1 {
		t.Errorf("RunTask called %d times by one process; it knows its task", n)
	}
	sched := schedulerUp(t, p, cl) // found though ListTasks does not list it

	// A restarted gateway that ECS does not show the task to yet.
	p2, _ := newProvider(t, f)
	if err := p2.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Tasks()); n != 1 {
		t.Fatalf("%d tasks after a restarted start; want the one", n)
	}
	if got := schedulerUp(t, p2, cl); got.Address != sched.Address {
		t.Errorf("restarted provider sees %s; want %s", got.Address, sched.Address)
	}

	// A worker stopped, then started again under its name, is a new task:
	// the token of its first start names a stopped task.
	f.SetListLag(0)
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, cl, "worker-0 running", running("worker-0"))
	if err := p.StopWorker(ctx, cl, "worker-0"); err != nil {
		t.Fatal(err)
	}
	p3, _ := newProvider(t, f)
	if err := p3.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatal(err)
	}
	var w0 []fargatetest.Task
	for _, task := range f.Tasks() {
		if task.Tags["gateway-member"] == "worker-0" {
			w0 = append(w0, task)
		}
	}
	if len(w0) != 2 || w0[0].DesiredStatus != "STOPPED" || w0[1].DesiredStatus != "RUNNING" {
		t.Errorf("worker-0 tasks: %+v; want the stopped one and a new one", w0)
	}
	ms := waitFor(t, p3, cl, "worker-0 running again", running("worker-0"))
	if n := len(ms); n != 2 {
		t.Errorf("Describe: %+v; want scheduler and worker-0 once", ms)
	}
}

// TestLostAnswers: a request that took effect but whose answer was lost
// is repeated, and the repeat finds what the first made instead of making
// a second one.
func TestLostAnswers(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	for _, a := range []string{"ecs:RunTask", "ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress", "secretsmanager:CreateSecret", "ecs:RegisterTaskDefinition"} {
		f.LoseAnswers(a, 1)
	}
	if err := p.StartScheduler(ctx, testSpec(cl, "ann")); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	if n := len(f.Tasks()); n != 1 {
		t.Errorf("%d tasks; want 1 (the client token returns the first)", n)
	}
	if n := len(f.Groups()); n != 1 {
		t.Errorf("%d security groups; want 1", n)
	}
	if n := len(f.Secrets()); n != 1 {
		t.Errorf("%d secrets; want 1", n)
	}
	if g := f.Groups(); len(g) == 1 && len(g[0].Ingress) != 3 {
		t.Errorf("ingress after a lost answer: %+v", g[0].Ingress)
	}
	if n := f.Calls("ecs:RunTask"); n != 2 {
		t.Errorf("RunTask called %d times; want 2", n)
	}
	schedulerUp(t, p, cl)
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
}

// TestStopClusterBounded: StopCluster waits for the tasks at most
// StopTimeout, leaves the group and secret when they do not stop, and
// finishes the job when called again.
func TestStopClusterBounded(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	spec := testSpec(cl, "ann")
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	schedulerUp(t, p, cl)
	f.SetAutoAdvance(false)
	err := p.StopCluster(ctx, cl)
	if err == nil || !strings.Contains(err.Error(), "still stopping") {
		t.Fatalf("StopCluster with tasks that never stop = %v", err)
	}
	if len(f.Groups()) != 1 || len(f.Secrets()) != 1 {
		t.Errorf("group or secret deleted while a task still held them")
	}
	f.SetAutoAdvance(true)
	f.FailNext("ec2:DeleteSecurityGroup", 2, http.StatusBadRequest, "DependencyViolation", "resource has a dependent object")
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatalf("second StopCluster: %v", err)
	}
	if len(f.Groups()) != 0 || len(f.Secrets()) != 0 {
		t.Errorf("left: groups %+v, secrets %+v", f.Groups(), f.Secrets())
	}
	if n := f.Calls("ec2:DeleteSecurityGroup"); n != 3 {
		t.Errorf("DeleteSecurityGroup called %d times; want 3 (two while in use)", n)
	}

	// A group that stays in use fails the stop, bounded.
	if err := p.StartScheduler(ctx, testSpec("aa11", "ann")); err != nil {
		t.Fatal(err)
	}
	f.FailNext("ec2:DeleteSecurityGroup", 1000, http.StatusBadRequest, "DependencyViolation", "resource has a dependent object")
	err = p.StopCluster(ctx, "aa11")
	if err == nil || !strings.Contains(err.Error(), "still in use") {
		t.Errorf("StopCluster with a group that stays in use = %v", err)
	}
}

// TestEnvironmentErrors: what an operator's AWS set-up can get wrong is
// reported with what to look at.
func TestEnvironmentErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		edit  func(*fargate.Config)
		setup func(f *fargatetest.Server)
		want  []string
	}{
		{name: "ECS cluster missing", edit: func(c *fargate.Config) { c.Cluster = "nope" }, want: []string{"ECS cluster nope", "Cluster not found"}},
		{name: "subnets in two VPCs", edit: func(c *fargate.Config) { c.Subnets = []string{fargatetest.SubnetA, fargatetest.SubnetOther} },
			want: []string{"must be in one VPC", fargatetest.DefaultVPC, "vpc-0other"}},
		{name: "unknown subnet", edit: func(c *fargate.Config) { c.Subnets = []string{"subnet-0dead"} }, want: []string{"look up subnets", "InvalidSubnetID.NotFound"}},
		{name: "group name taken", setup: func(f *fargatetest.Server) {
			f.AddGroup("gateway-"+gwKey(testGateway)+"-"+cl, fargatetest.DefaultVPC, nil)
		}, want: []string{"exists but does not carry this gateway's gateway-id tag"}},
		{name: "secret name taken", setup: func(f *fargatetest.Server) {
			f.PutSecret("gateway/"+gwKey(testGateway)+"/"+cl+"/tls", "{}", map[string]string{"gateway-id": "someone-else"})
		}, want: []string{"secret gateway/", "does not carry this gateway's"}},
		{name: "secret creation denied", setup: func(f *fargatetest.Server) {
			f.FailNext("secretsmanager:CreateSecret", 1, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform secretsmanager:CreateSecret")
		}, want: []string{"store the TLS secret", "not authorized"}},
		{name: "registration refused", setup: func(f *fargatetest.Server) {
			f.FailNext("ecs:RegisterTaskDefinition", 1, http.StatusBadRequest, "ClientException", "Too many concurrent attempts")
		}, want: []string{"register task definition", "scheduler", "1 vCPU, 2 GiB", "Too many concurrent attempts"}},
		{name: "group creation denied", setup: func(f *fargatetest.Server) {
			f.FailNext("ec2:CreateSecurityGroup", 1, http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation.")
		}, want: []string{"create security group", "UnauthorizedOperation"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fargatetest.New(t)
			var edits []func(*fargate.Config)
			if tc.edit != nil {
				edits = append(edits, tc.edit)
			}
			p, _ := newProvider(t, f, edits...)
			if tc.setup != nil {
				tc.setup(f)
			}
			err := p.StartScheduler(ctx, testSpec(cl, "ann"))
			if err == nil {
				t.Fatal("StartScheduler succeeded")
			}
			mustContain(t, "error", err.Error(), tc.want...)
			if n := len(f.Tasks()); n != 0 {
				t.Errorf("%d tasks started", n)
			}
		})
	}

	t.Run("our secret from an earlier run is reused", func(t *testing.T) {
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		arn := f.PutSecret("gateway/"+gwKey(testGateway)+"/"+cl+"/tls", "{}", map[string]string{"gateway-id": testGateway})
		if err := p.StartScheduler(ctx, testSpec(cl, "ann")); err != nil {
			t.Fatal(err)
		}
		defs := f.TaskDefinitions()
		if len(defs) != 1 || defs[0].Containers[0].Secrets["GATEWAY_TLS_CERT"] != arn+":cert::" {
			t.Errorf("definitions %+v; want the existing secret %s", defs, arn)
		}
	})
	t.Run("listing fails", func(t *testing.T) {
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		f.FailNext("ecs:ListTasks", 2, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform ecs:ListTasks")
		if _, err := p.Describe(ctx, cl); err == nil || !strings.Contains(err.Error(), "ecs:ListTasks") {
			t.Errorf("Describe = %v", err)
		}
		if _, err := p.List(ctx); err == nil || !strings.Contains(err.Error(), "ecs:ListTasks") {
			t.Errorf("List = %v", err)
		}
	})
	t.Run("stopping fails", func(t *testing.T) {
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		if err := p.StartScheduler(ctx, testSpec(cl, "ann")); err != nil {
			t.Fatal(err)
		}
		f.FailNext("ecs:StopTask", 1, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform ecs:StopTask")
		if err := p.StopCluster(ctx, cl); err == nil || !strings.Contains(err.Error(), "ecs:StopTask") {
			t.Errorf("StopCluster = %v", err)
		}
		f.FailNext("secretsmanager:DeleteSecret", 1, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform secretsmanager:DeleteSecret")
		if err := p.StopCluster(ctx, cl); err == nil || !strings.Contains(err.Error(), "delete secret") {
			t.Errorf("StopCluster = %v", err)
		}
		if err := p.StopCluster(ctx, cl); err != nil {
			t.Errorf("StopCluster once allowed: %v", err)
		}
	})
}

// TestPagination: listings of many pages and DescribeTasks batches of
// 100 lose nobody.
func TestPagination(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	f.SetPageSize(7)
	p, _ := newProvider(t, f)
	spec := testSpec(cl, "ann")
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sched := schedulerUp(t, p, cl)
	const workers = 104
	for i := range workers {
		if err := p.StartWorker(ctx, spec, "worker-"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i), sched.Address); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh process knows only what ECS lists. Stopping 105 tasks takes
	// many paged calls: give it more than the helpers' 1s, which a loaded
	// machine can use up.
	p2, _ := newProvider(t, f, func(c *fargate.Config) { c.StopTimeout = time.Minute })
	ms, err := p2.Describe(ctx, cl)
	if err != nil || len(ms) != workers+1 {
		t.Fatalf("Describe: %d members, %v; want %d", len(ms), err, workers+1)
	}
	all, err := p2.List(ctx)
	if err != nil || len(all) != workers+1 {
		t.Fatalf("List: %d members, %v; want %d", len(all), err, workers+1)
	}
	if err := p2.StopCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, task := range f.Tasks() {
		if task.LastStatus != "STOPPED" {
			t.Fatalf("task %s is %s after StopCluster", task.Tags["gateway-member"], task.LastStatus)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}
