package contract

import (
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Neighbour is a second gateway on the same backend as the suite's
// provider: the same account or project (the same fake), another
// GatewayID.
type Neighbour struct {
	P providers.Provider
	// Spec is a valid spec for one of its clusters, with its GatewayID.
	Spec func(t *testing.T, cluster, owner string) providers.ClusterSpec
}

// Renamed is the Neighbour made by newProvider for gatewayID, its specs
// spec's with that GatewayID: the usual neighbour of a live test, another
// gateway on the same account.
func Renamed(t *testing.T, gatewayID string, newProvider func(t *testing.T, gatewayID string) providers.Provider, spec func(t *testing.T, cluster, owner string) providers.ClusterSpec) Neighbour {
	return Neighbour{P: newProvider(t, gatewayID), Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
		s := spec(t, cluster, owner)
		s.GatewayID = gatewayID
		return s
	}}
}

// Isolation is how a backend shows that two gateways sharing an account
// or project never touch each other's members or resources, one
// safeguard layer at a time.
type Isolation struct {
	// Neighbour returns another gateway's provider on the same backend as
	// p (made by Harness.New in the same test).
	Neighbour func(t *testing.T, p providers.Provider) Neighbour
	// LooseFilter, when set, makes the backend's server side stop
	// narrowing listings to one gateway's (it answers as if the ownership
	// filter, tag or label, were not there), so that the suite runs once
	// more with only the provider's own re-check of every answer between
	// the gateways. Without it the backend has no server-side filter.
	LooseFilter func(t *testing.T, p providers.Provider)
	// Unfiltered, with a server-side filter, lists the listing requests
	// that went out without it (or with another gateway's value), as the
	// backend's fake recorded them: the filter layer on its own, which the
	// re-check would otherwise hide.
	Unfiltered func(t *testing.T, p providers.Provider) []string
}

// isolation runs the two-gateway test with both layers, then with the
// server-side filter gone (the re-check alone); the filter alone is
// checked on the wire (Unfiltered), the re-check not being something a
// test can turn off.
func isolation(t *testing.T, h Harness) {
	is := h.Isolation
	if is == nil {
		t.Fatal("the harness declares no Isolation: every backend shows that two gateways sharing its account never touch each other's members")
	}
	if (is.LooseFilter == nil) != (is.Unfiltered == nil) {
		t.Fatal("Isolation: a backend with a server-side filter declares both LooseFilter and Unfiltered")
	}
	t.Run("BothLayers", func(t *testing.T) { twoGateways(t, h, false) })
	if is.LooseFilter != nil {
		t.Run("RecheckAlone", func(t *testing.T) { twoGateways(t, h, true) })
	}
}

// twoGateways: gateways A and B each run a cluster of the same name (the
// worst case: only the gateway's ownership tells them apart) and one of
// their own; A's List, ListMembers, Describe, StopWorker, StopCluster,
// ListLeftovers and DeleteLeftover (as its reaper would call them) see
// and touch nothing of B's, and B's clusters run on, their shared
// resources intact.
func twoGateways(t *testing.T, h Harness, loose bool) {
	a := newEnv(t, h)
	nb := h.Isolation.Neighbour(t, a.p)
	b := &env{t: t, h: Harness{New: h.New, Spec: nb.Spec, Timeout: h.Timeout, Poll: h.Poll}, p: nb.P, ctx: a.ctx}
	if loose {
		h.Isolation.LooseFilter(t, a.p)
	}
	shared, specA := a.cluster("ann")
	onlyA, _ := a.cluster("ann")
	// B's cluster of the same name; a backend whose names are unique per
	// project rather than per gateway may refuse it (refusing is not
	// touching), and B's cluster then has a name of its own.
	sharedB := shared
	specB := nb.Spec(t, sharedB, "bob")
	t.Cleanup(func() { _ = b.p.StopCluster(a.ctx, sharedB) })
	if err := b.p.StartScheduler(a.ctx, specB); err != nil {
		t.Logf("B cannot run a cluster of A's cluster's name (%v); it runs one of its own name instead", err)
		var spec providers.ClusterSpec
		sharedB, spec = b.cluster("bob")
		specB = spec
	}
	onlyB, _ := b.cluster("bob")
	sa, sb := a.schedulerRunning(shared), b.schedulerRunning(sharedB)
	b.schedulerRunning(onlyB)
	a.schedulerRunning(onlyA)
	if err := a.p.StartWorker(a.ctx, specA, "worker-0", sa.Address); err != nil {
		t.Fatalf("A: StartWorker: %v", err)
	}
	if err := b.p.StartWorker(a.ctx, specB, "worker-0", sb.Address); err != nil {
		t.Fatalf("B: StartWorker: %v", err)
	}
	a.wait(shared, "A's worker-0 to run", func(ms []providers.Member) bool {
		w := find(ms, "worker-0")
		return w != nil && w.State == providers.StateRunning
	})
	b.wait(sharedB, "B's worker-0 to run", func(ms []providers.Member) bool {
		w := find(ms, "worker-0")
		return w != nil && w.State == providers.StateRunning
	})

	// Each sees only its own: by owner (A's are ann's, B's bob's) and by
	// cluster.
	notBobs := func(who, what string, ms []providers.Member) {
		t.Helper()
		for _, m := range ms {
			if m.Owner == "bob" || m.Cluster == onlyB || m.Cluster == sharedB && sharedB != shared {
				t.Errorf("%s: %s lists the other gateway's member %s/%s (owner %s)", who, what, m.Cluster, m.Name, m.Owner)
			}
		}
	}
	all, err := a.p.List(a.ctx)
	if err != nil {
		t.Fatalf("A: List: %v", err)
	}
	notBobs("A", "List", all)
	if lm, ok := a.p.(providers.MemberLister); ok {
		ms, err := lm.ListMembers(a.ctx)
		if err != nil {
			t.Fatalf("A: ListMembers: %v", err)
		}
		notBobs("A", "ListMembers", ms)
	}
	for _, c := range []string{shared, sharedB, onlyB} {
		ms, err := a.p.Describe(a.ctx, c)
		if err != nil {
			t.Fatalf("A: Describe(%s): %v", c, err)
		}
		notBobs("A", "Describe("+c+")", ms)
	}
	var leftB []providers.Leftover
	if ll, ok := b.p.(providers.LeftoverLister); ok {
		if leftB, err = ll.ListLeftovers(a.ctx); err != nil {
			t.Fatalf("B: ListLeftovers: %v", err)
		}
	}
	// A stops a worker, then the clusters, by B's names: B's stay.
	for _, c := range []string{shared, sharedB} {
		if err := a.p.StopWorker(a.ctx, c, "worker-0"); err != nil {
			t.Fatalf("A: StopWorker(%s): %v", c, err)
		}
	}
	for _, c := range []string{shared, onlyA, sharedB, onlyB} {
		if err := a.p.StopCluster(a.ctx, c); err != nil {
			t.Fatalf("A: StopCluster(%s): %v", c, err)
		}
	}
	for _, c := range []string{shared, onlyA} {
		a.wait(c, "A's cluster stopped", func(ms []providers.Member) bool { return len(live(ms)) == 0 })
	}
	if ll, ok := a.p.(providers.LeftoverLister); ok {
		// A's reaper deletes whatever A lists as its own once A's
		// clusters are gone: none of B's.
		leftA, err := ll.ListLeftovers(a.ctx)
		if err != nil {
			t.Fatalf("A: ListLeftovers: %v", err)
		}
		for _, l := range leftA {
			if slices.ContainsFunc(leftB, sameLeftover(l)) {
				t.Errorf("A lists B's %s %s (cluster %s) as its own leftover", l.Kind, l.ID, l.Cluster)
				continue
			}
			if l.Cluster == onlyB || l.Cluster == sharedB && sharedB != shared {
				t.Errorf("A lists a leftover of B's cluster %s: %+v", onlyB, l)
				continue
			}
			if err := ll.DeleteLeftover(a.ctx, l); err != nil {
				t.Errorf("A: DeleteLeftover(%+v): %v", l, err)
			}
		}
	}

	for _, c := range []string{sharedB, onlyB} {
		ms, err := b.p.Describe(a.ctx, c)
		if err != nil {
			t.Fatalf("B: Describe(%s): %v", c, err)
		}
		s := find(ms, "scheduler")
		if s == nil || s.State != providers.StateRunning || s.Owner != "bob" {
			t.Errorf("B's %s after A stopped its clusters by the same names: %s; want B's scheduler running", c, describe(ms))
		}
		if c == sharedB {
			if w := find(ms, "worker-0"); w == nil || w.State != providers.StateRunning {
				t.Errorf("B's worker-0 after A's StopWorker of the same name: %s", describe(ms))
			}
		}
	}
	if ll, ok := b.p.(providers.LeftoverLister); ok {
		after, err := ll.ListLeftovers(a.ctx)
		if err != nil {
			t.Fatalf("B: ListLeftovers: %v", err)
		}
		for _, l := range leftB {
			if !slices.ContainsFunc(after, sameLeftover(l)) {
				t.Errorf("B's %s %s (cluster %s) is gone after A reaped and stopped its own", l.Kind, l.ID, l.Cluster)
			}
		}
	}
	if h.Isolation.Unfiltered != nil && !loose {
		for _, r := range h.Isolation.Unfiltered(t, a.p) {
			t.Errorf("a listing went out without the gateway's ownership filter: %s", r)
		}
	}
	// And B's List still has every member of its own.
	deadline := time.Now().Add(h.timeout())
	for {
		all, err := b.p.List(a.ctx)
		if err != nil {
			t.Fatalf("B: List: %v", err)
		}
		n := 0
		for _, m := range live(all) {
			if m.Owner != "bob" {
				t.Fatalf("B's List has %s/%s owned by %s", m.Cluster, m.Name, m.Owner)
			}
			n++
		}
		if n == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's List: %s; want its 3 members", describe(all))
		}
		time.Sleep(h.poll())
	}
}

// sameLeftover matches the leftover that is l: the same kind and id.
func sameLeftover(l providers.Leftover) func(providers.Leftover) bool {
	return func(o providers.Leftover) bool { return o.Kind == l.Kind && o.ID == l.ID }
}
