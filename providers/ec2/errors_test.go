package ec2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

func TestThrottlingRetried(t *testing.T) {
	tests := []struct {
		name, action, code string
		fails              int
		run                func(*env) error
	}{
		{"RunInstances throttled", "RunInstances", "RequestLimitExceeded", 2, func(e *env) error { return e.p.StartScheduler(context.Background(), spec("c1")) }},
		{"DescribeInstances unavailable", "DescribeInstances", "Unavailable", 3, func(e *env) error { _, err := e.p.Describe(context.Background(), "c1"); return err }},
		{"DescribeSubnets internal error", "DescribeSubnets", "InternalError", 1, func(e *env) error { return e.p.StartScheduler(context.Background(), spec("c1")) }},
		{"TerminateInstances throttled", "TerminateInstances", "RequestLimitExceeded", 1, func(e *env) error {
			if err := e.p.StartScheduler(context.Background(), spec("c1")); err != nil {
				return err
			}
			return e.p.StopCluster(context.Background(), "c1")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.ec2.FailNext(tc.action, tc.fails, tc.code)
			if err := tc.run(e); err != nil {
				t.Fatalf("err = %v, want success after %d failures", err, tc.fails)
			}
			if n := len(e.ec2.Requests(tc.action)); n < tc.fails+1 {
				t.Errorf("%s called %d times", tc.action, n)
			}
			e.sleeps.mu.Lock()
			waits := e.sleeps.waits[:tc.fails]
			e.sleeps.mu.Unlock()
			for i, w := range waits {
				// Full jitter: a random wait up to the exponential bound.
				if bound := e.cfg.BaseDelay << i; w < 0 || w > bound {
					t.Errorf("wait %d = %s, want within [0, %s]", i, w, bound)
				}
			}
		})
	}
}

func TestThrottlingExhausted(t *testing.T) {
	e := newEnv(t)
	e.ec2.FailNext("DescribeInstances", 100, "RequestLimitExceeded")
	_, err := e.p.Describe(ctx(t), "c1")
	if err == nil || !strings.Contains(err.Error(), "still failing after 4 attempts (RequestLimitExceeded)") {
		t.Fatalf("err = %v", err)
	}
	if awsutil.ErrorCode(err) != "RequestLimitExceeded" {
		t.Errorf("the API error is not wrapped: %v", err)
	}
	if n := len(e.ec2.Requests("DescribeInstances")); n != 4 {
		t.Errorf("DescribeInstances called %d times, want MaxAttempts=4", n)
	}
	if n := len(e.sleeps.waits); n != 3 {
		t.Errorf("%d waits between 4 attempts", n)
	}
}

func TestBackoffBounds(t *testing.T) {
	p := &Provider{cfg: Config{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}}
	for attempt := 1; attempt <= 40; attempt++ {
		bound := min(time.Second, 100*time.Millisecond<<min(attempt-1, 20))
		for range 50 {
			if d := p.backoff(attempt); d < 0 || d > bound {
				t.Fatalf("backoff(%d) = %s, want within [0, %s]", attempt, d, bound)
			}
		}
	}
}

func TestCanceledContext(t *testing.T) {
	e := newEnv(t)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.p.Describe(c, "c1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Describe with a canceled context: %v", err)
	}
	if err := e.p.StartScheduler(c, spec("c1")); !errors.Is(err, context.Canceled) {
		t.Errorf("StartScheduler with a canceled context: %v", err)
	}
	// A wait is cut short too.
	e.ec2.FailNext("DescribeInstances", 1, "RequestLimitExceeded")
	e.p.cfg.Sleep = backoff.Sleep
	e.p.cfg.BaseDelay, e.p.cfg.MaxDelay = time.Hour, time.Hour
	c2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	// A backoff that ignored the context would sleep its hour.
	testutil.Returns(t, "Describe in an hour's backoff with a 50ms context", func() {
		if _, err := e.p.Describe(c2, "c1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Describe during backoff: %v", err)
		}
	})
}

func TestCapacityFallback(t *testing.T) {
	all := ec2test.Fault{Action: "RunInstances", Times: -1}
	tests := []struct {
		name     string
		faults   []ec2test.Fault
		wantType string
		wantSub  string
		wantErr  []string // when the launch must fail
		calls    int      // RunInstances calls for the worker
	}{
		{
			name:     "second subnet",
			faults:   []ec2test.Fault{{Code: "InsufficientInstanceCapacity", Subnet: "subnet-0a000000000000001"}},
			wantType: "m6i.xlarge", wantSub: "subnet-0b000000000000002", calls: 2,
		},
		{
			name:     "unsupported in the zone",
			faults:   []ec2test.Fault{{Code: "Unsupported", Subnet: "subnet-0a000000000000001"}},
			wantType: "m6i.xlarge", wantSub: "subnet-0b000000000000002", calls: 2,
		},
		{
			name:     "instance limit",
			faults:   []ec2test.Fault{{Code: "InstanceLimitExceeded", InstanceType: "m6i.xlarge"}},
			wantType: "m5.xlarge", wantSub: "subnet-0a000000000000001", calls: 3,
		},
		{
			name:     "alternative type",
			faults:   []ec2test.Fault{{Code: "InsufficientInstanceCapacity", InstanceType: "m6i.xlarge"}},
			wantType: "m5.xlarge", wantSub: "subnet-0a000000000000001", calls: 3,
		},
		{
			name:   "nowhere",
			faults: []ec2test.Fault{{Code: "InsufficientInstanceCapacity"}},
			wantErr: []string{
				"no capacity", "ec2 could not launch worker-0 of cluster c1 in eu-west-1",
				"m6i.xlarge in subnet-0a000000000000001 (eu-west-1a): InsufficientInstanceCapacity",
				"m6i.xlarge in subnet-0b000000000000002 (eu-west-1b): InsufficientInstanceCapacity",
				"m5.xlarge in subnet-0a000000000000001 (eu-west-1a): InsufficientInstanceCapacity",
				"m5.xlarge in subnet-0b000000000000002 (eu-west-1b): InsufficientInstanceCapacity",
				"allow more instance types or subnets",
			},
			calls: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := ctx(t)
			s := spec("c1")
			if err := e.p.StartScheduler(c, s); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.faults {
				f.Action, f.Times = all.Action, all.Times
				e.ec2.Fail(f)
			}
			before := len(e.ec2.Requests("RunInstances"))
			err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786")
			if n := len(e.ec2.Requests("RunInstances")) - before; n != tc.calls {
				t.Errorf("RunInstances called %d times, want %d (capacity errors are not retried in place)", n, tc.calls)
			}
			if len(e.sleeps.waits) != 0 {
				t.Errorf("waited %v: a capacity error is not throttling", e.sleeps.waits)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, providers.ErrCapacity) {
					t.Fatalf("err = %v, want ErrCapacity", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in, _ := e.ec2.Instance("c1", "worker-0")
			if in.Type != tc.wantType || in.Subnet != tc.wantSub {
				t.Errorf("worker on %s in %s, want %s in %s", in.Type, in.Subnet, tc.wantType, tc.wantSub)
			}
		})
	}
}

func TestVcpuLimit(t *testing.T) {
	tests := []struct {
		instanceType string
		spot         bool
		want         string
	}{
		{"m6i.xlarge", false, "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (quota code L-1216C47A)"},
		{"g5.xlarge", false, "Running On-Demand G and VT instances (quota code L-DB2E81BA)"},
		{"p4de.24xlarge", false, "Running On-Demand P instances (quota code L-417A185B)"},
	}
	for _, tc := range tests {
		t.Run(tc.instanceType, func(t *testing.T) {
			e := newEnv(t)
			c := ctx(t)
			s := spec("c1")
			s.Scheduler = providers.Machine{InstanceType: tc.instanceType, Alternatives: []string{"m5.xlarge"}}
			e.ec2.Fail(ec2test.Fault{Action: "RunInstances", Code: "VcpuLimitExceeded", Times: -1})
			err := e.p.StartScheduler(c, s)
			if !errors.Is(err, providers.ErrCapacity) || awsutil.ErrorCode(err) != "VcpuLimitExceeded" {
				t.Fatalf("err = %v", err)
			}
			for _, w := range []string{"vCPU quota for " + family(tc.instanceType) + " instances in eu-west-1", tc.want, "Service Quotas"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := len(e.ec2.Requests("RunInstances")); n != 1 {
				t.Errorf("RunInstances called %d times: a quota is not a zone's capacity", n)
			}
		})
	}
	if q := vcpuQuota("c7g.large", true); q.code != "L-34B43A08" {
		t.Errorf("spot quota of c7g = %v", q)
	}
	if q := vcpuQuota("inf2.xlarge", false); q.code != "L-1945791B" {
		t.Errorf("quota of inf2 = %v", q)
	}
}

func TestSpotFallsBackToOnDemand(t *testing.T) {
	for _, code := range []string{"InsufficientInstanceCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded"} {
		t.Run(code, func(t *testing.T) {
			e := newEnv(t)
			c := ctx(t)
			s := spec("c1")
			s.Spot = true
			if err := e.p.StartScheduler(c, s); err != nil {
				t.Fatal(err)
			}
			if in, _ := e.ec2.Instance("c1", "scheduler"); in.Spot {
				t.Error("the scheduler runs on spot")
			}
			e.ec2.Fail(ec2test.Fault{Action: "RunInstances", Code: code, Market: "spot", Times: -1})
			if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
				t.Fatal(err)
			}
			in, _ := e.ec2.Instance("c1", "worker-0")
			if in.Spot || in.Type != "m6i.xlarge" {
				t.Errorf("worker-0: spot=%v type=%s, want on-demand m6i.xlarge", in.Spot, in.Type)
			}
			spotCalls := 0
			for _, r := range e.ec2.Requests("RunInstances") {
				if r.Params.Get("InstanceMarketOptions.MarketType") == "spot" {
					spotCalls++
				}
			}
			want := 4 // every type in every subnet
			if code == "MaxSpotInstanceCountExceeded" {
				want = 1 // an account-wide limit: no point trying elsewhere
			}
			if spotCalls != want {
				t.Errorf("%d spot attempts, want %d", spotCalls, want)
			}
			if !strings.Contains(e.logs.String(), "falling back to on-demand") && !strings.Contains(e.logs.String(), "launching on-demand") {
				t.Errorf("the fallback was not logged:\n%s", e.logs)
			}
		})
	}
}

// exited ends an instance as a member whose Dask process exited does: the
// unit's last lines and the end line on the console, then a shutdown.
func exited(f *ec2test.EC2, id string) {
	f.Print(id, "distributed.worker - INFO - Stopping worker\n\n"+consoleEnd+"\n")
	f.ShutDown(id)
}

func TestMemberLosses(t *testing.T) {
	tests := []struct {
		name   string
		end    func(*ec2test.EC2, string)
		reason string
	}{
		{"spot interruption", (*ec2test.EC2).Interrupt, "spot interruption"},
		{"interruption notice", (*ec2test.EC2).NoticeInterruption, "spot interruption"},
		{"exited", exited, "shut itself down"},
		{"terminated by someone", (*ec2test.EC2).Terminate, "by someone other than this gateway"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := ctx(t)
			s := spec("c1")
			s.Spot = true
			if err := e.p.StartScheduler(c, s); err != nil {
				t.Fatal(err)
			}
			if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
				t.Fatal(err)
			}
			in, _ := e.ec2.Instance("c1", "worker-0")
			if !in.Spot {
				t.Fatal("worker-0 is not on spot")
			}
			tc.end(e.ec2, in.ID)
			ms, err := e.p.Describe(c, "c1")
			if err != nil {
				t.Fatal(err)
			}
			w, _ := memberByName(ms, "worker-0")
			if w.State != providers.StateStopped || !strings.HasPrefix(w.Reason, tc.reason) && !strings.Contains(w.Reason, tc.reason) {
				t.Errorf("worker-0 = %+v, want stopped with reason %q", w, tc.reason)
			}
			if sch, _ := memberByName(ms, "scheduler"); sch.State != providers.StateRunning {
				t.Errorf("scheduler = %+v", sch)
			}
		})
	}
}

func TestStopClusterWaits(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	if err := e.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	e.ec2.SetTerminateDescribes(3)
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Fatal(err)
	}
	if in, _ := e.ec2.Instance("c1", "scheduler"); in.State != "terminated" {
		t.Errorf("scheduler is %s", in.State)
	}
	if len(e.sleeps.waits) < 2 {
		t.Errorf("StopCluster waited %v for the instance to terminate", e.sleeps.waits)
	}
	if len(e.groups()) != 0 {
		t.Error("security group left")
	}
}

func TestStopClusterTimesOut(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StopTimeout, c.PollInterval = 3*time.Second, time.Second })
	c := ctx(t)
	if err := e.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	e.ec2.SetTerminateDescribes(1000)
	err := e.p.StopCluster(c, "c1")
	if err == nil || !strings.Contains(err.Error(), "not terminated after 3s") {
		t.Fatalf("err = %v", err)
	}
	if len(e.groups()) != 1 {
		t.Error("the security group was deleted while its instance still ran")
	}
	// The next try finishes the job.
	e.ec2.SetTerminateDescribes(0)
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Fatal(err)
	}
	if len(e.groups()) != 0 {
		t.Error("security group left")
	}
}

func TestDependencyViolationRetried(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	if err := e.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	e.ec2.FailNext("DeleteSecurityGroup", 2, "DependencyViolation")
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.ec2.Requests("DeleteSecurityGroup")); n != 3 {
		t.Errorf("DeleteSecurityGroup called %d times", n)
	}
	if len(e.groups()) != 0 {
		t.Error("security group left")
	}
	if _, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls"); ok {
		t.Error("parameter left")
	}

	// Still in use when the wait budget runs out: an error that says so,
	// and the parameter stays for the next try.
	e2 := newEnv(t, func(c *Config) { c.StopTimeout = 5 * time.Second })
	if err := e2.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	e2.ec2.FailNext("DeleteSecurityGroup", 1000, "DependencyViolation")
	err := e2.p.StopCluster(c, "c1")
	if err == nil || !strings.Contains(err.Error(), "still in use") || awsutil.ErrorCode(err) != "DependencyViolation" {
		t.Fatalf("err = %v", err)
	}
	if _, ok := e2.ssm.Parameter("/gateway/gw-test/c1/tls"); !ok {
		t.Error("parameter deleted before the group")
	}
}

func TestImageErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		setup func(*env)
		want  []string
	}{
		{
			name:  "default parameter missing",
			setup: func(e *env) { e.ssm.Delete(DefaultAMIParameter) },
			want:  []string{"AMI parameter " + DefaultAMIParameter + " does not exist in eu-west-1 (ParameterNotFound)", "set providers.ec2.ami to an image id there"},
		},
		{
			name: "configured parameter missing",
			edit: func(c *Config) { c.AMIParameter = "/my/images/dask" },
			want: []string{"AMI parameter /my/images/dask does not exist"},
		},
		{
			name:  "parameter not an image",
			setup: func(e *env) { e.ssm.Set(DefaultAMIParameter, "latest") },
			want:  []string{`holds "latest", not an image id`},
		},
		{
			name: "image unknown",
			edit: func(c *Config) { c.AMI = "ami-0deadbeefdeadbeef" },
			want: []string{"image ami-0deadbeefdeadbeef does not exist in eu-west-1"},
		},
		{
			name: "parameter read denied",
			setup: func(e *env) {
				e.ssm.Fail(ec2test.Fault{Action: "GetParameter", Code: "AccessDeniedException", Times: -1})
			},
			want: []string{"not allowed to call it", "AccessDeniedException"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var edits []func(*Config)
			if tc.edit != nil {
				edits = append(edits, tc.edit)
			}
			e := newEnv(t, edits...)
			if tc.setup != nil {
				tc.setup(e)
			}
			err := e.p.StartScheduler(ctx(t), spec("c1"))
			if err == nil {
				t.Fatal("StartScheduler succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := len(e.ec2.Requests("RunInstances")); n != 0 {
				t.Errorf("RunInstances called %d times without an image", n)
			}
		})
	}
}

func TestImagePerArchitecture(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	s.Worker = providers.Machine{InstanceType: "m6g.xlarge"}
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	gpu := s
	gpu.Worker = providers.Machine{InstanceType: "g5.xlarge", GPUs: 1, GPUType: "a10g"}
	if err := e.p.StartWorker(c, gpu, "worker-1", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	im := ec2test.DefaultImages()
	for member, want := range map[string]string{"scheduler": im[0].ID, "worker-0": im[1].ID, "worker-1": im[2].ID} {
		in, _ := e.ec2.Instance("c1", member)
		if in.ImageID != want {
			t.Errorf("%s (%s) boots %s, want %s", member, in.Type, in.ImageID, want)
		}
		if gpus := strings.Contains(in.UserData, "--gpus all"); gpus != (member == "worker-1") {
			t.Errorf("%s: --gpus all in user data = %v", member, gpus)
		}
	}
	// Parameters are read once and cached.
	if n := len(e.ssm.Requests("GetParameter")); n != 3 {
		t.Errorf("GetParameter called %d times for 3 parameters", n)
	}

	// A configured x86 image: an Arm alternative is skipped, not launched.
	e2 := newEnv(t, func(c *Config) { c.AMI = im[0].ID })
	s2 := spec("c2")
	s2.Worker = providers.Machine{InstanceType: "m6g.xlarge", Alternatives: []string{"m6i.xlarge"}}
	if err := e2.p.StartScheduler(c, s2); err != nil {
		t.Fatal(err)
	}
	if err := e2.p.StartWorker(c, s2, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	if in, _ := e2.ec2.Instance("c2", "worker-0"); in.Type != "m6i.xlarge" {
		t.Errorf("worker on %s, want the x86 alternative", in.Type)
	}
	if n := len(e2.ssm.Requests("GetParameter")); n != 0 {
		t.Errorf("GetParameter called %d times with an explicit AMI", n)
	}
	// No allowed type can boot the image: not a capacity problem.
	for _, m := range []providers.Machine{
		{InstanceType: "m6g.xlarge"},          // the configured x86 image
		{InstanceType: "g5g.xlarge", GPUs: 1}, // no default arm64 GPU image
	} {
		env := e2
		if m.GPUs > 0 {
			env = e
		}
		s3 := spec("c1")
		s3.Worker = m
		err := env.p.StartWorker(c, s3, "worker-9", "10.0.1.10:8786")
		if !errors.Is(err, providers.ErrUnsupported) || errors.Is(err, providers.ErrCapacity) || !strings.Contains(err.Error(), m.InstanceType) {
			t.Errorf("%s: err = %v, want ErrUnsupported naming the type", m.InstanceType, err)
		}
	}
}

func TestSpecAndNetworkErrors(t *testing.T) {
	tests := []struct {
		name string
		run  func(*env) error
		want string
		is   error
	}{
		{"other gateway", func(e *env) error { s := spec("c1"); s.GatewayID = "other"; return e.p.StartScheduler(ctx2(), s) }, `belongs to gateway "other"`, nil},
		{"other region", func(e *env) error { s := spec("c1"); s.Region = "us-west-2"; return e.p.StartScheduler(ctx2(), s) }, "runs clusters in eu-west-1 only", providers.ErrUnsupported},
		{"bad cluster name", func(e *env) error { return e.p.StartScheduler(ctx2(), spec("c 1")) }, "cluster name", nil},
		{"bad image", func(e *env) error { s := spec("c1"); s.Image = "x;rm -rf /"; return e.p.StartScheduler(ctx2(), s) }, "not a container image", nil},
		{"bad dashboard prefix", func(e *env) error { s := spec("c1"); s.DashboardPrefix = "/a b"; return e.p.StartScheduler(ctx2(), s) }, "dashboard prefix", nil},
		{"bad worker name", func(e *env) error { return e.p.StartWorker(ctx2(), spec("c1"), "scheduler", "10.0.0.1:8786") }, "invalid worker name", nil},
		{"no scheduler address", func(e *env) error { return e.p.StartWorker(ctx2(), spec("c1"), "worker-0", "") }, "needs the scheduler's host:port", nil},
		{"bad instance type", func(e *env) error {
			s := spec("c1")
			s.Scheduler.InstanceType = "M6I LARGE"
			return e.p.StartScheduler(ctx2(), s)
		}, "not an EC2 instance type", nil},
		{"no TLS", func(e *env) error { s := spec("c1"); s.TLSKey = nil; return e.p.StartScheduler(ctx2(), s) }, "no TLS certificate and key", nil},
		{"unknown subnet", func(e *env) error {
			e.p.cfg.Subnets = []string{"subnet-0a000000000000001", "subnet-0dddddddddddddddd"}
			return e.p.StartScheduler(ctx2(), spec("c1"))
		}, "fix the subnets setting", nil},
		{"subnets in two VPCs", func(e *env) error {
			e.ec2.AddSubnet(ec2test.Subnet{ID: "subnet-0eeeeeeeeeeeeeeee", VPC: "vpc-0ffffffffffffffff", Zone: "eu-west-1c", CIDR: "10.9.0.0/24"})
			e.p.cfg.Subnets = []string{"subnet-0a000000000000001", "subnet-0eeeeeeeeeeeeeeee"}
			return e.p.StartScheduler(ctx2(), spec("c1"))
		}, "subnets are in 2 VPCs", nil},
		{"not authorized", func(e *env) error {
			e.ec2.Fail(ec2test.Fault{Action: "RunInstances", Code: "UnauthorizedOperation", Times: -1})
			return e.p.StartScheduler(ctx2(), spec("c1"))
		}, "not allowed to call it (UnauthorizedOperation)", nil},
		{"unknown instance type", func(e *env) error {
			s := spec("c1")
			s.Scheduler.InstanceType = "zz9.huge"
			return e.p.StartScheduler(ctx2(), s)
		}, "InvalidParameterValue", nil},
		{"parameter write denied", func(e *env) error {
			e.ssm.Fail(ec2test.Fault{Action: "PutParameter", Code: "AccessDeniedException", Times: -1})
			return e.p.StartScheduler(ctx2(), spec("c1"))
		}, "PutParameter /gateway/gw-test/c1/tls", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			err := tc.run(e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			if n := len(e.ec2.Instances()); n != 0 {
				t.Errorf("%d instances launched", n)
			}
		})
	}
}

func ctx2() context.Context { return context.Background() }

func TestSecurityGroupRecovery(t *testing.T) {
	// A crash between creating the group and authorizing its rules: the
	// next start finds the group by its tags and adds only what is missing.
	e := newEnv(t)
	c := ctx(t)
	e.ec2.FailNext("AuthorizeSecurityGroupIngress", 1, "UnauthorizedOperation")
	if err := e.p.StartScheduler(c, spec("c1")); err == nil {
		t.Fatal("StartScheduler succeeded with ingress refused")
	}
	p2, err := New(c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	gs := e.groups()
	if len(gs) != 1 || len(gs[0].Ingress) != 2 {
		t.Fatalf("groups = %+v", gs)
	}
	if n := len(e.ec2.Requests("CreateSecurityGroup")); n != 1 {
		t.Errorf("CreateSecurityGroup called %d times", n)
	}
	// A group of the same name that is not the gateway's is never used.
	e3 := newEnv(t)
	e3.ec2.AddSecurityGroup(ec2test.SecurityGroup{Name: "gateway-gw-test-c1", Description: "someone else's", VPC: "vpc-0c000000000000001"})
	err = e3.p.StartScheduler(c, spec("c1"))
	if err == nil || !strings.Contains(err.Error(), "not tagged as this gateway's") {
		t.Fatalf("err = %v", err)
	}
	if gs := e3.groups(); len(gs) != 1 || len(gs[0].Ingress) != 0 {
		t.Errorf("the foreign group was changed: %+v", gs)
	}
}

func TestCheck(t *testing.T) {
	e := newEnv(t)
	if err := e.p.Check(ctx(t)); err != nil {
		t.Fatal(err)
	}
	e.ssm.Delete(DefaultAMIParameter)
	e2 := newEnv(t)
	e2.ssm.Delete(DefaultAMIParameter)
	if err := e2.p.Check(ctx(t)); err == nil || !strings.Contains(err.Error(), "ParameterNotFound") {
		t.Errorf("Check = %v", err)
	}
}
