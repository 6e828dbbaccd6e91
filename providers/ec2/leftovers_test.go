package ec2

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestReaperRemovesLeftoversByTag runs the scheduler's reaper on the EC2
// provider (real SDK, the EC2 and SSM fakes). A cluster whose instances
// EC2 has forgotten leaves its security group and TLS parameter, which no
// instance leads to any more: the reaper finds them by their tags and
// removes them once the grace period is over, and not before. Those of a
// running cluster, and another gateway's, are kept.
func TestReaperRemovesLeftoversByTag(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	st, err := store.Open(c, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// Clusters started by an earlier process: "gone" is unknown to the
	// store, "ended" has stopped, "live" runs.
	for _, name := range []string{"gone", "ended", "live"} {
		if err := e.p.StartScheduler(c, spec(name)); err != nil {
			t.Fatalf("StartScheduler(%s): %v", name, err)
		}
	}
	for name, status := range map[string]store.Status{"ended": store.Stopped, "live": store.Running} {
		if err := st.CreateCluster(c, &store.Cluster{Name: name, Owner: "alice", Status: status, Provider: Name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// EC2 forgets the terminated instances of gone and ended.
	e.ec2.SetTerminatedListing(0)
	for _, in := range e.ec2.Instances() {
		if in.Tags[tagCluster] != "live" {
			e.ec2.Terminate(in.ID)
		}
	}
	// Another gateway's group and parameter, and one of a gateway whose id
	// merely starts with this one's.
	e.ec2.AddSecurityGroup(ec2test.SecurityGroup{Name: "gateway-gw-other-gone", VPC: "vpc-0c000000000000001",
		Tags: map[string]string{tagGateway: "gw-other", tagCluster: "gone"}})
	e.ssm.SetTagged("/gateway/gw-other/gone/tls", "x", map[string]string{tagGateway: "gw-other", tagCluster: "gone"})
	e.ssm.SetTagged("/gateway/gw-test-2/gone/tls", "x", map[string]string{tagGateway: "gw-test-2", tagCluster: "gone"})

	// A restarted gateway: nothing is remembered from the starts.
	p, err := New(c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := p.List(c); err != nil || len(ms) != 1 || ms[0].Cluster != "live" {
		t.Fatalf("List = %+v, %v; want only live's scheduler (EC2 has forgotten the others)", ms, err)
	}
	clk := testutil.NewClock(time.Now())
	core := scheduler.New(scheduler.Config{GatewayID: "gw-test", Reaper: scheduler.ReaperConfig{Grace: 2 * time.Minute}},
		st, p, coretest.NopRouter{}, slog.New(slog.DiscardHandler))
	core.SetClock(clk.Now)

	groupsOf := func() []string {
		var out []string
		for _, g := range e.groups() {
			out = append(out, g.Tags[tagGateway]+"/"+g.Tags[tagCluster])
		}
		slices.Sort(out)
		return out
	}
	params := func() []string {
		var out []string
		for _, name := range []string{"/gateway/gw-test/gone/tls", "/gateway/gw-test/ended/tls", "/gateway/gw-test/live/tls", "/gateway/gw-other/gone/tls", "/gateway/gw-test-2/gone/tls"} {
			if _, ok := e.ssm.Parameter(name); ok {
				out = append(out, name)
			}
		}
		return out
	}
	all := []string{"gw-other/gone", "gw-test/ended", "gw-test/gone", "gw-test/live"}
	core.ReapOnce(c)
	if got := groupsOf(); !slices.Equal(got, all) {
		t.Fatalf("within the grace, groups %v; want all kept %v", got, all)
	}
	if got := params(); len(got) != 5 {
		t.Fatalf("within the grace, parameters %v; want all 5 kept", got)
	}

	clk.Advance(2*time.Minute + time.Second)
	core.ReapOnce(c)
	if got, want := groupsOf(), []string{"gw-other/gone", "gw-test/live"}; !slices.Equal(got, want) {
		t.Errorf("after the grace, groups %v; want %v", got, want)
	}
	if got, want := params(), []string{"/gateway/gw-test/live/tls", "/gateway/gw-other/gone/tls", "/gateway/gw-test-2/gone/tls"}; !slices.Equal(got, want) {
		t.Errorf("after the grace, parameters %v; want %v", got, want)
	}
	// Only this gateway's, and only what was unowned, was asked for.
	for _, r := range e.ec2.Requests("DeleteSecurityGroup") {
		id := r.Params.Get("GroupId")
		for _, g := range e.ec2.SecurityGroups() {
			if g.ID == id {
				t.Errorf("DeleteSecurityGroup(%s) of %v, which is still there", id, g.Tags)
			}
		}
	}
	for _, r := range e.ssm.Requests("DeleteParameter") {
		if name := r.Params.Get("Name"); name != "/gateway/gw-test/gone/tls" && name != "/gateway/gw-test/ended/tls" {
			t.Errorf("DeleteParameter(%s): not a leftover of this gateway", name)
		}
	}
	if core.Reaped() != 2 {
		t.Errorf("Reaped() = %d; want 2 (gone and ended)", core.Reaped())
	}

	// Nothing left to do: the next pass lists, and deletes nothing.
	deletes := len(e.ec2.Requests("DeleteSecurityGroup")) + len(e.ssm.Requests("DeleteParameter"))
	core.ReapOnce(c)
	if n := len(e.ec2.Requests("DeleteSecurityGroup")) + len(e.ssm.Requests("DeleteParameter")); n != deletes {
		t.Errorf("%d more deletions on a pass with nothing left", n-deletes)
	}
}

// TestLeftoverGroupInUse: a group an interface still holds is not removed
// (DependencyViolation), and is removed on a later pass once released.
func TestLeftoverGroupInUse(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	if err := e.p.StartScheduler(c, spec("held")); err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(time.Now())
	e.ec2.SetClock(clk.Now)
	e.ec2.SetTerminatedListing(0)
	e.ec2.SetDetachDelay(time.Hour)
	for _, in := range e.ec2.Instances() {
		e.ec2.Terminate(in.ID)
	}
	ls, err := e.p.ListLeftovers(c)
	if err != nil {
		t.Fatal(err)
	}
	var group *int
	for i, l := range ls {
		if l.Kind == "security-group" && l.Cluster == "held" {
			group = &i
		}
	}
	if group == nil || len(ls) != 2 {
		t.Fatalf("ListLeftovers = %+v; want held's group and parameter", ls)
	}
	if err := e.p.DeleteLeftover(c, ls[*group]); err == nil {
		t.Fatal("DeleteLeftover of a group still held succeeded")
	}
	clk.Advance(time.Hour)
	if err := e.p.DeleteLeftover(c, ls[*group]); err != nil {
		t.Fatalf("DeleteLeftover once released: %v", err)
	}
	// Already gone is success.
	if err := e.p.DeleteLeftover(c, ls[*group]); err != nil {
		t.Fatalf("DeleteLeftover of a group already gone: %v", err)
	}
}
