package ec2

import (
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
)

// admits reports whether group g lets TCP from source (a security group
// id) in on port, by EC2's rules: a rule matches a source group by
// reference, and a CIDR rule matches any address in it, which a group's
// members may have, so it counts as admitting any source.
func admits(g ec2test.SecurityGroup, source string, port int) bool {
	return slices.ContainsFunc(g.Ingress, func(r ec2test.Rule) bool {
		if r.Protocol != "tcp" && r.Protocol != "-1" {
			return false
		}
		if r.Protocol == "tcp" && (port < r.From || port > r.To) {
			return false
		}
		return r.CIDR != "" || r.GroupID == source
	})
}

// TestClusterGroupsAdmitOnlyTheGatewayAndThemselves is the tenant-network
// property on the wire-level fake: with two clusters in the same subnets,
// cluster A's group admits the gateway's group and itself on the
// scheduler and dashboard ports, no address range at all, and nothing of
// cluster B's.
func TestClusterGroupsAdmitOnlyTheGatewayAndThemselves(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	for _, name := range []string{"a", "b"} {
		if err := e.p.StartScheduler(c, spec(name)); err != nil {
			t.Fatalf("StartScheduler %s: %v", name, err)
		}
	}
	byCluster := map[string]ec2test.SecurityGroup{}
	for _, g := range e.groups() {
		byCluster[g.Tags["gateway-cluster"]] = g
	}
	a, b := byCluster["a"], byCluster["b"]
	if a.ID == "" || b.ID == "" || a.ID == b.ID {
		t.Fatalf("groups = %+v", e.groups())
	}
	// Both schedulers are in the same subnets: only groups tell them apart.
	ia, _ := e.ec2.Instance("a", "scheduler")
	ib, _ := e.ec2.Instance("b", "scheduler")
	if !slices.Equal(ia.SecurityGroups, []string{a.ID}) || !slices.Equal(ib.SecurityGroups, []string{b.ID}) {
		t.Errorf("instances' groups: a %v, b %v; want only their own cluster's", ia.SecurityGroups, ib.SecurityGroups)
	}
	for _, port := range []int{8786, 8787} {
		if !admits(a, testGatewayGroup, port) {
			t.Errorf("cluster a's group does not admit the gateway's group on %d: %+v", port, a.Ingress)
		}
		if !admits(a, a.ID, port) {
			t.Errorf("cluster a's group does not admit its own members on %d", port)
		}
		if admits(a, b.ID, port) {
			t.Errorf("cluster a's group admits cluster b's members on %d: %+v", port, a.Ingress)
		}
		if admits(b, a.ID, port) {
			t.Errorf("cluster b's group admits cluster a's members on %d: %+v", port, b.Ingress)
		}
	}
	for _, r := range a.Ingress {
		if r.CIDR != "" {
			t.Errorf("cluster a's group admits an address range: %+v", r)
		}
		if r.GroupID != testGatewayGroup && r.GroupID != a.ID {
			t.Errorf("cluster a's group admits group %s: %+v", r.GroupID, r)
		}
		if r.GroupID == testGatewayGroup && (r.From != 8786 || r.To != 8787) {
			t.Errorf("the gateway is admitted on %d-%d, want 8786-8787 only", r.From, r.To)
		}
	}
	// No rule was ever sent with an address range.
	for _, r := range e.ec2.Requests("AuthorizeSecurityGroupIngress") {
		for k := range r.Params {
			if strings.Contains(k, "IpRanges") || strings.Contains(k, "Ipv6Ranges") {
				t.Errorf("AuthorizeSecurityGroupIngress sent %s", k)
			}
		}
	}
}

// TestGatewayGroupElsewhere: a gateway group that does not exist in the
// subnets' VPC fails the start with what to fix, and launches nothing.
func TestGatewayGroupElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed func(*ec2test.EC2)
	}{
		{"missing", func(*ec2test.EC2) {}},
		{"another VPC", func(f *ec2test.EC2) {
			f.AddSecurityGroup(ec2test.SecurityGroup{ID: "sg-0e000000000000009", Name: "gw", Description: "elsewhere", VPC: "vpc-0ffffffffffffffff"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.GatewaySecurityGroup = "sg-0e000000000000009" })
			tc.seed(e.ec2)
			err := e.p.StartScheduler(ctx(t), spec("a"))
			if err == nil || !strings.Contains(err.Error(), "gateway_security_group") || !strings.Contains(err.Error(), "vpc-0c000000000000001") {
				t.Fatalf("err = %v, want one naming gateway_security_group and the VPC", err)
			}
			if n := len(e.ec2.Instances()); n != 0 {
				t.Errorf("%d instances launched", n)
			}
		})
	}
}

// TestGatewayCIDRFallback: the documented fallback still admits the
// configured ranges (and only them) when no group is set.
func TestGatewayCIDRFallback(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.GatewaySecurityGroup, c.GatewayCIDRs = "", []string{"10.0.0.0/24", "fd00:1::/64"} })
	if err := e.p.StartScheduler(ctx(t), spec("a")); err != nil {
		t.Fatal(err)
	}
	gs := e.groups()
	if len(gs) != 1 {
		t.Fatalf("groups = %+v", gs)
	}
	var cidrs []string
	for _, r := range gs[0].Ingress {
		if r.CIDR != "" {
			cidrs = append(cidrs, r.CIDR)
			if r.From != 8786 || r.To != 8787 {
				t.Errorf("range %s admitted on %d-%d", r.CIDR, r.From, r.To)
			}
		}
		if r.GroupID == testGatewayGroup {
			t.Errorf("the gateway group is admitted though not configured")
		}
	}
	slices.Sort(cidrs)
	if !slices.Equal(cidrs, []string{"10.0.0.0/24", "fd00:1::/64"}) {
		t.Errorf("ranges = %v", cidrs)
	}
}

// TestStaleRulesRevoked: a cluster whose group was made while the gateway
// was admitted by address range (gateway_cidrs) loses those ranges when a
// gateway configured with its security group next starts one of its
// members: a running cluster does not stay open to the shared subnets.
func TestStaleRulesRevoked(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.GatewaySecurityGroup, c.GatewayCIDRs = "", []string{"10.0.0.0/24", "fd00:1::/64"} })
	c := ctx(t)
	s := spec("a")
	if err := e.p.StartScheduler(c, s); err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.GatewayCIDRs, cfg.GatewaySecurityGroup = nil, testGatewayGroup
	p2, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.StartWorker(c, s, "worker-0", "10.0.1.12:8786"); err != nil {
		t.Fatal(err)
	}
	gs := e.groups()
	if len(gs) != 1 {
		t.Fatalf("groups = %+v", gs)
	}
	for _, r := range gs[0].Ingress {
		if r.CIDR != "" || (r.GroupID != testGatewayGroup && r.GroupID != gs[0].ID) {
			t.Errorf("rule left: %+v", r)
		}
	}
	if !admits(gs[0], testGatewayGroup, 8786) || !admits(gs[0], gs[0].ID, 8786) {
		t.Errorf("rules = %+v", gs[0].Ingress)
	}
	if n := len(e.ec2.Requests("RevokeSecurityGroupIngress")); n != 1 {
		t.Errorf("RevokeSecurityGroupIngress called %d times", n)
	}
}
