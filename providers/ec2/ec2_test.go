package ec2

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
)

// Compile-time checks of the optional interfaces.
var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.InstanceTypes = (*Provider)(nil)
	_ providers.StopTimes     = (*Provider)(nil)
)

func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")

	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	if err := e.p.StartScheduler(c, s); err != nil { // idempotent
		t.Fatalf("StartScheduler again: %v", err)
	}
	if n := len(e.ec2.Requests("RunInstances")); n != 1 {
		t.Fatalf("RunInstances called %d times for one scheduler", n)
	}
	ms, err := e.p.Describe(c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	sched, ok := memberByName(ms, "scheduler")
	schedInst, _ := e.ec2.Instance("c1", "scheduler")
	if !ok || sched.State != providers.StateRunning || sched.Role != providers.RoleScheduler || sched.Owner != "alice" ||
		sched.Address != schedInst.PrivateIP+":8786" || sched.DashboardURL != "https://"+schedInst.PrivateIP+":8787" || sched.StartedAt.IsZero() {
		t.Fatalf("scheduler = %+v", sched)
	}
	if !slices.Contains(e.probes.addrs, sched.Address) {
		t.Errorf("the scheduler was not probed at %s: %v", sched.Address, e.probes.addrs)
	}

	if err := e.p.StartWorker(c, s, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	if err := e.p.StartWorker(c, s, "worker-1", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	if err := e.p.StartWorker(c, s, "worker-1", sched.Address); err != nil { // idempotent
		t.Fatalf("StartWorker again: %v", err)
	}
	spot := s
	spot.Spot = true
	if err := e.p.StartWorker(c, spot, "worker-2", sched.Address); err != nil {
		t.Fatalf("StartWorker (spot): %v", err)
	}
	if n := len(e.ec2.Requests("RunInstances")); n != 4 {
		t.Fatalf("RunInstances called %d times for 4 members", n)
	}

	// Describe and List, one instance per page: every page is read.
	e.ec2.SetPageSize(1)
	before := len(e.ec2.Requests("DescribeInstances"))
	ms, err = e.p.Describe(c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.ec2.Requests("DescribeInstances")) - before; got < 4 {
		t.Errorf("Describe made %d DescribeInstances calls for 4 instances on pages of 1", got)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
		if m.State != providers.StateRunning || m.Cluster != "c1" || m.Owner != "alice" {
			t.Errorf("member %+v", m)
		}
		if m.Name != "scheduler" && (m.Role != providers.RoleWorker || m.Address != "") {
			t.Errorf("worker %+v", m)
		}
	}
	if want := []string{"scheduler", "worker-0", "worker-1", "worker-2"}; !slices.Equal(names, want) {
		t.Fatalf("Describe names = %v, want %v", names, want)
	}
	// Another cluster, to see that List reports both and Describe keeps them apart.
	if err := e.p.StartScheduler(c, spec("c2")); err != nil {
		t.Fatal(err)
	}
	all, err := e.p.List(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[4].Cluster != "c2" || all[4].Name != "scheduler" {
		t.Fatalf("List = %+v", all)
	}
	if ms, _ := e.p.Describe(c, "c1"); len(ms) != 4 {
		t.Fatalf("Describe(c1) after c2 started: %d members", len(ms))
	}
	e.ec2.SetPageSize(0)

	// What was asked of EC2, as the fake recorded it.
	for _, in := range e.ec2.Instances() {
		member := in.Tags["gateway-member"]
		if in.HTTPTokens != "required" || in.HopLimit != 2 || in.MetadataEndpoint != "enabled" {
			t.Errorf("%s: metadata options tokens=%s hops=%d", member, in.HTTPTokens, in.HopLimit)
		}
		if in.AssociatePublicIP != "false" {
			t.Errorf("%s: public address %q; want none asked for, whatever the subnet's default", member, in.AssociatePublicIP)
		}
		for _, tags := range []map[string]string{in.Tags, in.Volume.Tags} {
			want := map[string]string{"gateway-id": "gw-test", "gateway-cluster": in.Tags["gateway-cluster"], "gateway-member": member,
				"gateway-owner": "alice", "team": "data", "Name": "dask-" + in.Tags["gateway-cluster"] + "-" + member}
			for k, v := range want {
				if tags[k] != v {
					t.Errorf("%s: tag %s = %q, want %q (tags %v)", member, k, tags[k], v, tags)
				}
			}
		}
		if v := in.Volume; v.Device != "/dev/xvda" || v.SizeGiB != 40 || v.Type != "gp3" || !v.DeleteOnTermination || !v.Encrypted {
			t.Errorf("%s: volume %+v", member, in.Volume)
		}
		if in.InstanceProfile != "dask-member" || in.ShutdownBehavior != "terminate" || in.ImageID != "ami-0123456789abcdef0" || len(in.SecurityGroups) != 1 {
			t.Errorf("%s: profile=%s shutdown=%s image=%s groups=%v", member, in.InstanceProfile, in.ShutdownBehavior, in.ImageID, in.SecurityGroups)
		}
		if !strings.HasPrefix(in.ClientToken, "gw-") || len(in.ClientToken) > 64 {
			t.Errorf("%s: client token %q", member, in.ClientToken)
		}
		assertNoSecrets(t, in.UserData)
		wantSpot := member == "worker-2"
		if in.Spot != wantSpot || (wantSpot && (in.SpotInstanceType != "one-time" || in.SpotInterruption != "terminate")) {
			t.Errorf("%s: spot=%v type=%s interruption=%s", member, in.Spot, in.SpotInstanceType, in.SpotInterruption)
		}
		if in.Tags["gateway-cluster"] == "c1" && in.Type != map[bool]string{true: "m6i.large", false: "m6i.xlarge"}[member == "scheduler"] {
			t.Errorf("%s: type %s", member, in.Type)
		}
		// Workers go to the scheduler's subnet first.
		if in.Subnet != schedInst.Subnet && in.Tags["gateway-cluster"] == "c1" {
			t.Errorf("%s in %s, the scheduler in %s", member, in.Subnet, schedInst.Subnet)
		}
	}

	// The security group: the gateway's group to 8786-8787, the group to
	// itself, and nothing open to any address range.
	groups := e.groups()
	if len(groups) != 2 {
		t.Fatalf("%d security groups for 2 clusters", len(groups))
	}
	g := groups[0]
	if g.Name != "gateway-gw-test-c1" || g.Tags["gateway-id"] != "gw-test" || g.Tags["gateway-cluster"] != "c1" || g.VPC != "vpc-0c000000000000001" {
		t.Errorf("group %+v", g)
	}
	want := []ec2test.Rule{
		{Protocol: "tcp", From: 8786, To: 8787, GroupID: testGatewayGroup},
		{Protocol: "tcp", From: 0, To: 65535, GroupID: g.ID},
	}
	if len(g.Ingress) != len(want) {
		t.Errorf("ingress = %+v", g.Ingress)
	}
	for _, w := range want {
		if !slices.ContainsFunc(g.Ingress, func(r ec2test.Rule) bool {
			return r.Protocol == w.Protocol && r.From == w.From && r.To == w.To && r.CIDR == w.CIDR && r.GroupID == w.GroupID
		}) {
			t.Errorf("ingress lacks %+v: %+v", w, g.Ingress)
		}
	}
	for _, r := range g.Ingress {
		if r.CIDR != "" {
			t.Errorf("ingress admits an address range: %+v", r)
		}
	}
	for _, r := range e.ec2.Requests("") {
		for k, vs := range r.Params {
			for _, v := range vs {
				if v == "0.0.0.0/0" || v == "::/0" {
					t.Errorf("%s sent %s=%s", r.Action, k, v)
				}
			}
		}
	}
	if n := len(e.ec2.Requests("CreateSecurityGroup")); n != 2 {
		t.Errorf("CreateSecurityGroup called %d times for 2 clusters", n)
	}

	// The TLS parameter.
	param, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls")
	if !ok || param.Type != "SecureString" || !strings.Contains(param.Value, testCert) || !strings.Contains(param.Value, testKey) ||
		param.Tags["gateway-cluster"] != "c1" || param.Tags["gateway-id"] != "gw-test" {
		t.Fatalf("parameter = %+v", param)
	}
	if n := len(e.ssm.Requests("PutParameter")); n != 2 {
		t.Errorf("PutParameter called %d times for 2 clusters", n)
	}

	// StopWorker: gone without a reason; unknown and repeated are fine.
	if err := e.p.StopWorker(c, "c1", "worker-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StopWorker(c, "c1", "worker-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StopWorker(c, "c1", "worker-99"); err != nil {
		t.Fatal(err)
	}
	if in, _ := e.ec2.Instance("c1", "worker-1"); in.State != "shutting-down" && in.State != "terminated" {
		t.Errorf("worker-1 is %s after StopWorker", in.State)
	}
	ms, _ = e.p.Describe(c, "c1")
	if w, _ := memberByName(ms, "worker-1"); w.State != providers.StateStopped || w.Reason != "" {
		t.Errorf("worker-1 after StopWorker: %+v", w)
	}
	if w, _ := memberByName(ms, "worker-0"); w.State != providers.StateRunning {
		t.Errorf("worker-0 after stopping worker-1: %+v", w)
	}

	// StopCluster: every instance terminated, group and parameter gone.
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	for _, in := range e.ec2.Instances() {
		if in.Tags["gateway-cluster"] == "c1" && in.State != "terminated" {
			t.Errorf("%s is %s after StopCluster", in.Tags["gateway-member"], in.State)
		}
		if in.Tags["gateway-cluster"] == "c2" && in.State != "running" {
			t.Errorf("c2's %s is %s after stopping c1", in.Tags["gateway-member"], in.State)
		}
	}
	if gs := e.groups(); len(gs) != 1 || gs[0].Tags["gateway-cluster"] != "c2" {
		t.Errorf("groups after StopCluster: %+v", gs)
	}
	if _, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls"); ok {
		t.Error("the TLS parameter outlived its cluster")
	}
	for _, m := range []string{"scheduler", "worker-0", "worker-1", "worker-2"} {
		if at, ok := e.p.StoppedAt("c1", m); !ok || at.IsZero() {
			t.Errorf("StoppedAt(c1, %s) = %v, %v", m, at, ok)
		}
		if _, ok := e.p.StoppedAt("c1", m); ok {
			t.Errorf("StoppedAt(c1, %s) answered twice", m)
		}
	}
	ms, err = e.p.Describe(c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.State != providers.StateStopped || m.Reason != "" {
			t.Errorf("after StopCluster: %+v", m)
		}
	}
	// Idempotent, and an unknown cluster is not an error.
	if err := e.p.StopCluster(c, "c1"); err != nil {
		t.Errorf("StopCluster again: %v", err)
	}
	if err := e.p.StopCluster(c, "nope"); err != nil {
		t.Errorf("StopCluster(unknown): %v", err)
	}
	if ms, err := e.p.Describe(c, "nope"); err != nil || len(ms) != 0 {
		t.Errorf("Describe(unknown) = %v, %v", ms, err)
	}
}

func TestSchedulerPendingUntilItServes(t *testing.T) {
	e := newEnv(t)
	serving := false
	e.p.cfg.ProbeScheduler = func(_ context.Context, addr string) error {
		if !serving {
			return errors.New("connection refused")
		}
		return nil
	}
	e.ec2.SetPendingDescribes(1)
	c := ctx(t)
	if err := e.p.StartScheduler(c, spec("c1")); err != nil {
		t.Fatal(err)
	}
	states := []providers.State{}
	for range 3 {
		ms, err := e.p.Describe(c, "c1")
		if err != nil || len(ms) != 1 {
			t.Fatalf("Describe = %v, %v", ms, err)
		}
		states = append(states, ms[0].State)
		if ms[0].State != providers.StateRunning && ms[0].Address != "" {
			t.Errorf("address %q before the scheduler serves", ms[0].Address)
		}
		serving = len(states) == 2
	}
	if want := []providers.State{providers.StatePending, providers.StatePending, providers.StateRunning}; !slices.Equal(states, want) {
		t.Errorf("states = %v, want %v (EC2 pending, then running but not serving, then serving)", states, want)
	}
}

func TestEventualConsistency(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	// EC2 does not list a new instance for a while.
	e.ec2.SetVisibilityDelay(5)
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	ms, err := e.p.Describe(c, "c1")
	if err != nil || len(ms) != 1 || ms[0].State != providers.StatePending || ms[0].Name != "scheduler" {
		t.Fatalf("Describe right after the launch = %+v, %v; want the scheduler pending", ms, err)
	}
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	// A restarted gateway does not remember the launch: the client token
	// makes EC2 answer with the same instance.
	p2, err := New(c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	if n := len(e.ec2.Instances()); n != 1 {
		t.Fatalf("%d instances for one scheduler", n)
	}
	// Once listed, Describe reports it from EC2.
	for range 5 {
		ms, _ = e.p.Describe(c, "c1")
	}
	if len(ms) != 1 || ms[0].State != providers.StateRunning {
		t.Fatalf("Describe once listed = %+v", ms)
	}
}

func TestIdempotentParameterMismatch(t *testing.T) {
	// A restarted gateway launches a member EC2 does not list yet, with a
	// newer image: EC2 refuses the token's reuse, and the member is found
	// by its client token instead of being launched twice.
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	e.ec2.SetVisibilityDelay(1)
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	e.ec2.AddImage(ec2test.Image{ID: "ami-0bbbbbbbbbbbbbbb2", Arch: "x86_64", RootDevice: "/dev/xvda"})
	e.ssm.Set(DefaultAMIParameter, "ami-0bbbbbbbbbbbbbbb2")
	p2, err := New(c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.StartScheduler(c, s); err != nil {
		t.Fatalf("StartScheduler after restart: %v", err)
	}
	if n := len(e.ec2.Instances()); n != 1 {
		t.Fatalf("%d instances for one scheduler", n)
	}
	if n := len(e.ec2.Requests("RunInstances")); n != 2 {
		t.Fatalf("RunInstances called %d times", n)
	}
}

func TestDuplicateMemberTerminated(t *testing.T) {
	// Two gateway processes with the subnets in a different order launch
	// the same worker while EC2 lists neither: the next start keeps the
	// older instance and terminates the younger.
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	e.ec2.SetVisibilityDelay(2)
	cfg2 := e.cfg
	cfg2.Subnets = []string{e.cfg.Subnets[1], e.cfg.Subnets[0]}
	p2, err := New(c, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler lives in the first subnet, so p2 also starts there,
	// but its client tokens differ: the order of its subnets differs.
	if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	if err := p2.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	e.ec2.SetVisibilityDelay(0)
	var ids []string
	for _, in := range e.ec2.Instances() {
		if in.Tags["gateway-member"] == "worker-0" {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("expected the duplicate the test sets up, got %v", ids)
	}
	// The core's next look at the cluster (Describe) lets the younger go;
	// a later start finds one instance and launches nothing.
	for range 3 { // let EC2 list both
		_, _ = e.p.Describe(c, "c1")
	}
	if n := len(e.ec2.Requests("TerminateInstances")); n != 1 {
		t.Fatalf("Describe made %d TerminateInstances calls, want one for the younger copy", n)
	}
	if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	term := e.ec2.Requests("TerminateInstances")
	if len(term) != 1 || term[0].Params.Get("InstanceId.1") != ids[1] {
		t.Fatalf("TerminateInstances calls %+v, want one for %s", term, ids[1])
	}
	if !strings.Contains(e.logs.String(), "more than one instance") {
		t.Error("the duplicate was not logged")
	}
	ms, _ := e.p.Describe(c, "c1")
	if w, _ := memberByName(ms, "worker-0"); w.State != providers.StateRunning {
		t.Errorf("worker-0 = %+v", w)
	}
}

func TestStopWorkerNotYetListed(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	e.ec2.SetVisibilityDelay(1)
	if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StopWorker(c, "c1", "worker-0"); err != nil {
		t.Fatal(err)
	}
	if in, _ := e.ec2.Instance("c1", "worker-0"); in.State != "shutting-down" {
		t.Fatalf("worker-0 is %s", in.State)
	}
}

func TestTLSParameter(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	s := spec("c1")
	s.Owner = "O'Brien"
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	p, ok := e.ssm.Parameter("/gateway/gw-test/c1/tls")
	if !ok || p.Tags["gateway-owner"] != "O_Brien" || p.Type != "SecureString" || p.Tier != "Standard" {
		t.Fatalf("parameter = %+v", p)
	}
	if in, _ := e.ec2.Instance("c1", "scheduler"); in.Tags["gateway-owner"] != "O'Brien" {
		t.Errorf("instance owner tag %q", in.Tags["gateway-owner"])
	}
	// A restarted gateway overwrites the parameter (without tags, which SSM
	// only takes on creation) before starting a worker.
	p2, err := New(c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.TLSCert = []byte(strings.Replace(testCert, "LINE1", "LINE9", 1))
	if err := p2.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
		t.Fatal(err)
	}
	puts := e.ssm.Requests("PutParameter")
	if len(puts) != 3 || puts[2].Params.Get("Overwrite") != "true" || strings.Contains(puts[2].Body, "Tags") {
		t.Errorf("PutParameter calls: %+v", puts)
	}
	if p, _ := e.ssm.Parameter("/gateway/gw-test/c1/tls"); !strings.Contains(p.Value, "LINE9") || p.Version != 2 {
		t.Errorf("parameter after overwrite: %+v", p)
	}
	// Material larger than a standard parameter holds goes to the advanced tier.
	big := spec("c2")
	big.TLSCert = []byte(strings.Repeat(testCert, 25))
	if err := e.p.StartScheduler(c, big); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.ssm.Parameter("/gateway/gw-test/c2/tls"); p.Tier != "Advanced" {
		t.Errorf("a %d-byte parameter in tier %q", len(p.Value), p.Tier)
	}
}
