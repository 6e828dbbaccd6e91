package gce

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// peer is a VM as a firewall rule sees it: its network tags, the service
// account it runs as, and its address.
type peer struct {
	tags []string
	sa   string
	ip   string
}

func peerOf(in gcetest.Instance) peer {
	p := peer{ip: in.NetworkInterfaces[0].NetworkIP}
	if in.Tags != nil {
		p.tags = in.Tags.Items
	}
	if len(in.ServiceAccounts) > 0 {
		p.sa = in.ServiceAccounts[0].Email
	}
	return p
}

// allows evaluates the fake's ingress allow rules as Google documents them:
// a rule applies to a target by network tag or by service account (or to
// every VM when it names neither), and matches a source by range, tag or
// service account.
func allows(fws []gcetest.Firewall, src, dst peer, port int) bool {
	for _, f := range fws {
		if f.Direction != "INGRESS" || f.Disabled {
			continue
		}
		targeted := len(f.TargetTags) == 0 && len(f.TargetServiceAccounts) == 0 ||
			slices.ContainsFunc(f.TargetTags, func(t string) bool { return slices.Contains(dst.tags, t) }) ||
			slices.Contains(f.TargetServiceAccounts, dst.sa)
		if !targeted {
			continue
		}
		from := slices.ContainsFunc(f.SourceTags, func(t string) bool { return slices.Contains(src.tags, t) }) ||
			slices.Contains(f.SourceServiceAccounts, src.sa) ||
			slices.ContainsFunc(f.SourceRanges, func(r string) bool {
				pfx, err := netip.ParsePrefix(r)
				return err == nil && src.ip != "" && pfx.Contains(netip.MustParseAddr(src.ip))
			})
		if !from {
			continue
		}
		for _, a := range f.Allowed {
			if a.IPProtocol != "tcp" && a.IPProtocol != "all" {
				continue
			}
			if len(a.Ports) == 0 {
				return true
			}
			for _, pr := range a.Ports {
				lo, hi, _ := strings.Cut(pr, "-")
				l, _ := strconv.Atoi(lo)
				h := l
				if hi != "" {
					h, _ = strconv.Atoi(hi)
				}
				if port >= l && port <= h {
					return true
				}
			}
		}
	}
	return false
}

// TestFirewallAdmitsOnlyTheGatewayAndTheCluster is the tenant-network
// property on the fake: with two clusters on one network, cluster A's
// scheduler admits the gateway (by its service account) and A's own
// worker (by A's network tag) on the Dask and dashboard ports, and
// neither B's worker nor a VM in the gateway's subnetwork that is not the
// gateway. No rule admits an address range.
func TestFirewallAdmitsOnlyTheGatewayAndTheCluster(t *testing.T) {
	e := newEnv(t, nil)
	const a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	for _, c := range []string{a, b} {
		spec := testSpec(t, c, "ann")
		if err := e.p.StartScheduler(e.ctx, spec); err != nil {
			t.Fatalf("StartScheduler %s: %v", c, err)
		}
		if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.0.0.1:8786"); err != nil {
			t.Fatalf("StartWorker %s: %v", c, err)
		}
	}
	get := func(name string) peer {
		in, ok := e.srv.Instance(name)
		if !ok {
			t.Fatalf("no instance %s", name)
		}
		return peerOf(in)
	}
	schedA, workerA, workerB := get("gw-"+a+"-scheduler"), get("gw-"+a+"-worker-0"), get("gw-"+b+"-worker-0")
	gateway := peer{sa: testGatewaySA, ip: "10.128.0.50"}
	// Same subnetwork as the gateway, another account, no tag.
	neighbour := peer{sa: "someone@test-project.iam.gserviceaccount.com", ip: "10.128.0.51"}
	fws := e.srv.Firewalls()
	for _, port := range []int{8786, 8787} {
		for _, tc := range []struct {
			name string
			src  peer
			want bool
		}{
			{"the gateway", gateway, true},
			{"cluster A's worker", workerA, true},
			{"cluster B's worker", workerB, false},
			{"another VM by the gateway", neighbour, false},
		} {
			if got := allows(fws, tc.src, schedA, port); got != tc.want {
				t.Errorf("port %d from %s: allowed %v, want %v (rules %+v)", port, tc.name, got, tc.want, fws)
			}
		}
	}
	if allows(fws, workerA, workerB, 40000) || allows(fws, workerB, schedA, 40000) {
		t.Error("one cluster's members reach the other's on Dask's worker ports")
	}
	for _, f := range fws {
		if len(f.SourceRanges) > 0 {
			t.Errorf("rule %s admits ranges %v", f.Name, f.SourceRanges)
		}
		for _, sa := range f.SourceServiceAccounts {
			if sa != testGatewaySA {
				t.Errorf("rule %s admits service account %s", f.Name, sa)
			}
		}
		if strings.HasPrefix(f.Name, "gw-"+a) && len(f.SourceTags) > 0 && !slices.Equal(f.SourceTags, []string{"gw-" + a}) {
			t.Errorf("cluster A's rule %s admits tags %v", f.Name, f.SourceTags)
		}
	}
}

// TestFirewallCIDRFallback: with gateway_cidrs (no gateway account), the
// gateway rule admits those ranges on the cluster's tag, as before.
func TestFirewallCIDRFallback(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.GatewayServiceAccount, c.GatewayCIDRs = "", []string{"10.10.0.0/24"} })
	const a = "aaaaaaaaaaaaaaaa"
	if err := e.p.StartScheduler(e.ctx, testSpec(t, a, "ann")); err != nil {
		t.Fatal(err)
	}
	for _, f := range e.srv.Firewalls() {
		if f.Name == "gw-"+a+"-gateway" && (!slices.Equal(f.SourceRanges, []string{"10.10.0.0/24"}) || !slices.Equal(f.TargetTags, []string{"gw-" + a}) || len(f.SourceServiceAccounts) != 0) {
			t.Errorf("gateway rule %+v", f)
		}
	}
}

// TestMemberReportedAddressIsNotRouted (finding 9): a member writes its
// guest attributes itself, so whatever it says there (an address of its
// choosing included) is not where the gateway routes: the scheduler's
// address and dashboard are built from the networkIP Compute Engine
// assigned, and the guest attributes only say "ready". The instance
// listing (Describe, and List for the reaper) agrees.
func TestMemberReportedAddressIsNotRouted(t *testing.T) {
	e := newEnv(t, nil)
	const a = "aaaaaaaaaaaaaaaa"
	e.srv.AutoReady(false)
	if err := e.p.StartScheduler(e.ctx, testSpec(t, a, "ann")); err != nil {
		t.Fatal(err)
	}
	name := "gw-" + a + "-scheduler"
	for k, v := range map[string]string{
		"address": "203.0.113.7:8786", "host": "203.0.113.7", "dashboard": "http://203.0.113.7:8787", "ip": "203.0.113.7", "ready": "1",
	} {
		if err := e.srv.SetGuestAttribute(name, "gateway", k, v); err != nil {
			t.Fatal(err)
		}
	}
	in, _ := e.srv.Instance(name)
	ip := in.NetworkInterfaces[0].NetworkIP
	if ip == "" || ip == "203.0.113.7" {
		t.Fatalf("networkIP %q", ip)
	}
	sched := e.describe(a)["scheduler"]
	if sched.Address != ip+":8786" || sched.DashboardURL != "https://"+ip+":8787" {
		t.Errorf("scheduler routed to %q, dashboard %q; want the assigned %s", sched.Address, sched.DashboardURL, ip)
	}
	ms, err := e.p.List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.Contains(m.Address+m.DashboardURL, "203.0.113.7") {
			t.Errorf("List routes %s to the member's own word: %+v", m.Name, m)
		}
	}
}

// TestStaleFirewallUpdated: a cluster whose gateway rule was made while the
// gateway was admitted by address range gets the rule by service account
// when a gateway so configured next starts one of its members.
func TestStaleFirewallUpdated(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.GatewayServiceAccount, c.GatewayCIDRs = "", []string{"10.10.0.0/24"} })
	const a = "aaaaaaaaaaaaaaaa"
	spec := testSpec(t, a, "ann")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(e.srv, e.sl)
	p2 := e.provider(cfg)
	if err := p2.StartWorker(e.ctx, spec, "worker-0", "10.0.0.1:8786"); err != nil {
		t.Fatal(err)
	}
	fws := e.srv.Firewalls()
	if len(fws) != 2 {
		t.Fatalf("rules %+v", fws)
	}
	for _, f := range fws {
		if len(f.SourceRanges) > 0 {
			t.Errorf("rule %s still admits %v", f.Name, f.SourceRanges)
		}
		if f.Name == "gw-"+a+"-gateway" && (!slices.Equal(f.SourceServiceAccounts, []string{testGatewaySA}) || len(f.TargetTags) != 0) {
			t.Errorf("gateway rule %+v", f)
		}
	}
	if n := len(e.srv.RequestsTo("PUT", "/global/firewalls/gw-"+a+"-gateway")); n != 1 {
		t.Errorf("%d updates of the gateway rule; want 1 (the internal rule is unchanged)", n)
	}
}

// TestOwnershipLayers tests each of the two safeguards that keep another
// gateway's instances out of this one's listings and stops on its own: the
// label filter sent with every listing, and the exact re-check of the
// metadata behind it (identify). One instance carries this gateway's
// labels but another's metadata (a label value two gateway IDs can share
// once sanitized, or labels copied by hand): only the re-check stands
// between it and this gateway, as if the filter were gone. The other
// carries another gateway's labels and this one's metadata: only the
// filter keeps it out, as if the re-check were gone. Neither is listed,
// described or stopped.
func TestOwnershipLayers(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "mine", "alice")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	meta := func(gateway string) *gcetest.Metadata {
		return &gcetest.Metadata{Items: []gcetest.MetadataItem{
			{Key: keyGateway, Value: gateway}, {Key: keyCluster, Value: "mine"},
			{Key: keyMember, Value: "worker-7"}, {Key: keyRole, Value: "worker"}, {Key: keyOwner, Value: "mallory"},
		}}
	}
	labels := func(gateway string) map[string]string {
		return map[string]string{keyGateway: labelValue(gateway), keyCluster: labelValue("mine"), keyMember: "worker-7"}
	}
	// Passes the filter; only the metadata re-check refuses it.
	e.srv.PutInstance("us-central1-a", gcetest.Instance{Name: "other-filter-passes", MachineType: "zones/us-central1-a/machineTypes/e2-standard-4",
		Labels: labels(testGatewayID), Metadata: meta("gw-other")})
	// Carries this gateway's metadata; only the label filter keeps it out.
	e.srv.PutInstance("us-central1-b", gcetest.Instance{Name: "other-recheck-passes", MachineType: "zones/us-central1-b/machineTypes/e2-standard-4",
		Labels: labels("gw-other"), Metadata: meta(testGatewayID)})

	check := func(what string, ms []providers.Member, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, m := range ms {
			if m.Name == "worker-7" {
				t.Errorf("%s reports another gateway's instance: %+v", what, m)
			}
		}
	}
	ms, err := e.p.List(e.ctx)
	check("List", ms, err)
	ms, err = e.p.ListMembers(e.ctx)
	check("ListMembers", ms, err)
	ms, err = e.p.Describe(e.ctx, "mine")
	check("Describe", ms, err)
	if err := e.p.StopWorker(e.ctx, "mine", "worker-7"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.StopCluster(e.ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"other-filter-passes", "other-recheck-passes"} {
		if _, ok := e.srv.Instance(name); !ok {
			t.Errorf("%s, another gateway's instance, was deleted", name)
		}
	}
	if _, ok := e.srv.Instance(instanceName("mine", "scheduler")); ok {
		t.Errorf("this gateway's own scheduler was not stopped")
	}
	// Every listing carried the filter, which the first instance passes:
	// the re-check alone kept it out.
	for _, f := range filters(e.srv.RequestsTo("GET", "/aggregated/instances")) {
		if !strings.Contains(f, `labels.`+keyGateway+` = "`+labelValue(testGatewayID)+`"`) {
			t.Errorf("a listing without the gateway label filter: %s", f)
		}
	}
}
