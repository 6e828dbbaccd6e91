package gce

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestReaperRemovesLeftoversByTag runs the scheduler's reaper on the
// Compute Engine provider (real REST clients, the fake). A cluster whose
// instances are all gone leaves its two firewall rules and its secret,
// which no instance leads to: the reaper finds them by their owner mark
// and labels and removes them after the grace period, not before. A
// running cluster's are kept, and so are another gateway's.
func TestReaperRemovesLeftoversByTag(t *testing.T) {
	e := newEnv(t, nil)
	otherCfg := testConfig(e.srv, e.sl)
	otherCfg.GatewayID = "gw-other"
	other := e.provider(otherCfg)
	for _, name := range []string{"cgone", "cended", "clive"} {
		if err := e.p.StartScheduler(e.ctx, testSpec(t, name, "ann")); err != nil {
			t.Fatalf("StartScheduler(%s): %v", name, err)
		}
	}
	spec := testSpec(t, "cother", "bob")
	spec.GatewayID = "gw-other"
	if err := other.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, in := range e.srv.Instances() {
		if in.Name != instanceName("clive", "scheduler") {
			if err := e.srv.Remove(in.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := store.Open(e.ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, status := range map[string]store.Status{"cended": store.Failed, "clive": store.Running} {
		if err := st.CreateCluster(e.ctx, &store.Cluster{Name: name, Owner: "ann", Status: status, Provider: Name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.provider(testConfig(e.srv, e.sl)) // a restarted gateway
	clk := testutil.NewClock(time.Now())
	core := scheduler.New(scheduler.Config{GatewayID: testGatewayID, Reaper: scheduler.ReaperConfig{Grace: 2 * time.Minute}},
		st, p, coretest.NopRouter{}, slog.New(slog.DiscardHandler))
	core.SetClock(clk.Now)

	left := func() []string {
		var out []string
		for _, f := range e.srv.Firewalls() {
			out = append(out, "rule "+f.Name)
		}
		for id := range e.srv.Secrets() {
			out = append(out, "secret "+id)
		}
		slices.Sort(out)
		return out
	}
	of := func(clusters ...string) []string {
		var out []string
		for _, c := range clusters {
			out = append(out, "rule "+gatewayRuleName(c), "rule "+internalRuleName(c), "secret "+secretID(c))
		}
		slices.Sort(out)
		return out
	}
	all := of("cgone", "cended", "clive", "cother")
	if got := left(); !slices.Equal(got, all) {
		t.Fatalf("before the reaper: %v; want %v", got, all)
	}
	core.ReapOnce(e.ctx)
	if got := left(); !slices.Equal(got, all) {
		t.Fatalf("within the grace, left %v; want all kept", got)
	}
	clk.Advance(2*time.Minute + time.Second)
	core.ReapOnce(e.ctx)
	if got, want := left(), of("clive", "cother"); !slices.Equal(got, want) {
		t.Errorf("after the grace, left %v; want %v", got, want)
	}
	if core.Reaped() != 2 {
		t.Errorf("Reaped() = %d; want 2 (cgone and cended)", core.Reaped())
	}
	for _, r := range e.srv.RequestsTo("GET", "/global/firewalls") {
		if f := r.Query.Get("filter"); f != `name eq "gw-.*"` {
			t.Errorf("firewall listing filter %q", f)
		}
	}
}

// TestLeftoverSecretsCheckedExactly: a secret labelled as this gateway's
// whose cluster label does not name the cluster its ID is made for (a
// shortened, hashed label, or someone else's) is not listed.
func TestLeftoverSecretsCheckedExactly(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.p.StartScheduler(e.ctx, testSpec(t, "cx", "ann")); err != nil {
		t.Fatal(err)
	}
	// Someone else's secret with this gateway's label, under another ID.
	if err := e.p.secrets.create(e.ctx, "gw-cy-tls", map[string]string{keyGateway: e.p.gwLabel, keyCluster: "cz"}); err != nil {
		t.Fatal(err)
	}
	ls, err := e.p.ListLeftovers(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Kind+" "+l.ID+" of "+l.Cluster)
	}
	slices.Sort(got)
	want := []string{
		providers.LeftoverFirewall + " " + gatewayRuleName("cx") + " of cx",
		providers.LeftoverFirewall + " " + internalRuleName("cx") + " of cx",
		providers.LeftoverSecret + " " + secretID("cx") + " of cx",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ListLeftovers = %v; want %v", got, want)
	}
}
