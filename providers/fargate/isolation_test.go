package fargate_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// admits reports whether a group lets TCP from the source group in on
// port: a group rule matches by reference; an address range may hold any
// task's address, so it counts as admitting every source.
func admits(g fargatetest.Group, source string, port int) bool {
	return slices.ContainsFunc(g.Ingress, func(r fargatetest.Rule) bool {
		if r.Protocol != "-1" && (r.Protocol != "tcp" || port < r.FromPort || port > r.ToPort) {
			return false
		}
		return r.CIDR != "" || r.SourceGroup == source
	})
}

// TestClusterGroupsAdmitOnlyTheGatewayAndThemselves: with
// gateway_security_group set, cluster A's group admits the gateway's group
// and itself on the scheduler and dashboard ports, no address range, and
// nothing of cluster B's, though both run in the same subnets.
func TestClusterGroupsAdmitOnlyTheGatewayAndThemselves(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	gw := f.AddGroup("gateway-tasks", fargatetest.DefaultVPC, nil)
	p, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayCIDRs, c.GatewaySecurityGroup = nil, gw })
	const a, b = "0123456789abcdef", "fedcba9876543210"
	for _, name := range []string{a, b} {
		if err := p.StartScheduler(ctx, testSpec(name, "ann")); err != nil {
			t.Fatalf("StartScheduler %s: %v", name, err)
		}
	}
	by := map[string]fargatetest.Group{}
	for _, g := range f.Groups() {
		if c := g.Tags["gateway-cluster"]; c != "" {
			by[c] = g
		}
	}
	ga, gb := by[a], by[b]
	if ga.ID == "" || gb.ID == "" {
		t.Fatalf("groups: %+v", f.Groups())
	}
	ta, _ := f.TaskOf(a, "scheduler")
	tb, _ := f.TaskOf(b, "scheduler")
	if !slices.Equal(ta.SecurityGroups, []string{ga.ID}) || !slices.Equal(tb.SecurityGroups, []string{gb.ID}) || ta.Subnet != tb.Subnet {
		t.Errorf("tasks: a in %v (%s), b in %v (%s); want each in its own group, same subnet", ta.SecurityGroups, ta.Subnet, tb.SecurityGroups, tb.Subnet)
	}
	for _, port := range []int{8786, 8787} {
		if !admits(ga, gw, port) || !admits(ga, ga.ID, port) {
			t.Errorf("cluster a's group does not admit the gateway and itself on %d: %+v", port, ga.Ingress)
		}
		if admits(ga, gb.ID, port) || admits(gb, ga.ID, port) {
			t.Errorf("one cluster's group admits the other's tasks on %d: a %+v, b %+v", port, ga.Ingress, gb.Ingress)
		}
	}
	for _, r := range ga.Ingress {
		if r.CIDR != "" || (r.SourceGroup != gw && r.SourceGroup != ga.ID) {
			t.Errorf("cluster a's group has rule %+v; want only the gateway's group and itself", r)
		}
		if r.SourceGroup == gw && (r.FromPort != 8786 || r.ToPort != 8787) {
			t.Errorf("the gateway is admitted on %d-%d; want 8786-8787", r.FromPort, r.ToPort)
		}
	}
}

// TestGatewayGroupInAnotherVPC: a gateway group outside the subnets' VPC
// fails the start with what to fix, and starts no task.
func TestGatewayGroupInAnotherVPC(t *testing.T) {
	f := fargatetest.New(t)
	gw := f.AddGroup("gateway-tasks", "vpc-0other", nil)
	p, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayCIDRs, c.GatewaySecurityGroup = nil, gw })
	err := p.StartScheduler(context.Background(), testSpec("0123456789abcdef", "ann"))
	if err == nil || !strings.Contains(err.Error(), "gateway_security_group") || !strings.Contains(err.Error(), fargatetest.DefaultVPC) {
		t.Fatalf("err = %v; want one naming gateway_security_group and %s", err, fargatetest.DefaultVPC)
	}
	if _, ok := f.TaskOf("0123456789abcdef", "scheduler"); ok {
		t.Error("a task started")
	}
}

// TestStaleRulesRevoked: a cluster whose group was made while the gateway
// was admitted by address range loses those ranges when a gateway
// configured with its security group next starts one of its tasks.
func TestStaleRulesRevoked(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	gw := f.AddGroup("gateway-tasks", fargatetest.DefaultVPC, nil)
	const a = "0123456789abcdef"
	p1, _ := newProvider(t, f) // gateway_cidrs
	if err := p1.StartScheduler(ctx, testSpec(a, "ann")); err != nil {
		t.Fatal(err)
	}
	p2, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayCIDRs, c.GatewaySecurityGroup = nil, gw })
	sched := schedulerUp(t, p2, a)
	if err := p2.StartWorker(ctx, testSpec(a, "ann"), "worker-0", sched.Address); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups() {
		if g.Tags["gateway-cluster"] != a {
			continue
		}
		if !admits(g, gw, 8786) || !admits(g, g.ID, 8786) {
			t.Errorf("rules = %+v", g.Ingress)
		}
		for _, r := range g.Ingress {
			if r.CIDR != "" || (r.SourceGroup != gw && r.SourceGroup != g.ID) {
				t.Errorf("rule left: %+v", r)
			}
		}
	}
}
