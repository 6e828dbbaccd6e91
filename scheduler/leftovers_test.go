package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// leftoverProvider is the fake provider with resources the reaper lists
// by tag. Deleted ones stay listed when sticky is set, as an eventually
// consistent listing does for a while.
type leftoverProvider struct {
	*fakeProvider
	mu      sync.Mutex
	items   []providers.Leftover
	deletes map[string]int // by ID
	sticky  bool
	lists   int
	listErr error
	delErr  error
}

func (p *leftoverProvider) ListLeftovers(context.Context) ([]providers.Leftover, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists++
	if p.listErr != nil {
		return nil, p.listErr
	}
	return slices.Clone(p.items), nil
}

func (p *leftoverProvider) DeleteLeftover(_ context.Context, l providers.Leftover) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletes[l.ID]++
	if p.delErr != nil {
		return p.delErr
	}
	if !p.sticky {
		p.items = slices.DeleteFunc(p.items, func(x providers.Leftover) bool { return x.ID == l.ID })
	}
	return nil
}

func (p *leftoverProvider) add(ls ...providers.Leftover) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.items = append(p.items, ls...)
}

func (p *leftoverProvider) deleted(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deletes[id]
}

// leftoverHarness is a core on the fake provider with leftovers, a clock
// the test moves, and ReapOnce called by hand.
func leftoverHarness(t *testing.T, dryRun bool) (*harness, *leftoverProvider, *testutil.Clock) {
	t.Helper()
	h := newHarness(t, func(c *scheduler.Config) {
		c.Reaper = scheduler.ReaperConfig{Grace: 2 * time.Minute, DryRun: dryRun}
	})
	lp := &leftoverProvider{fakeProvider: h.fp, deletes: map[string]int{}}
	h.core = scheduler.New(h.cfg, h.st, lp, h.rt, h.log)
	clk := testutil.NewClock(time.Now())
	h.core.SetClock(clk.Now)
	return h, lp, clk
}

func (h *harness) record(name string, status store.Status) {
	h.t.Helper()
	if err := h.st.CreateCluster(h.ctx, &store.Cluster{Name: name, Owner: "alice", Status: status, Provider: "fake", CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
}

// TestReaperLeftovers: which clusters' leftovers the reaper removes.
func TestReaperLeftovers(t *testing.T) {
	h, lp, clk := leftoverHarness(t, false)
	old := clk.Now().Add(-time.Hour)
	for _, s := range []struct {
		name   string
		status store.Status
	}{{"stopped1", store.Stopped}, {"failed1", store.Failed}, {"running1", store.Running}, {"starting1", store.Starting}, {"pending1", store.Pending}, {"stopping1", store.Stopping}} {
		h.record(s.name, s.status)
	}
	for _, c := range []string{"unknown1", "stopped1", "failed1", "running1", "starting1", "pending1", "stopping1", "members1"} {
		lp.add(providers.Leftover{Kind: "secret", ID: "sec-" + c, Cluster: c, Created: old})
	}
	lp.add(providers.Leftover{Kind: "secret", ID: "sec-young", Cluster: "young1", Created: clk.Now().Add(-time.Minute)})
	// A cluster the provider still lists a member of: StopCluster's, which
	// removes what the cluster shares as well.
	h.fp.leftover("members1", "scheduler", providers.RoleScheduler, old)

	h.core.ReapOnce(h.ctx)
	for _, c := range []string{"unknown1", "stopped1", "failed1"} {
		if n := lp.deleted("sec-" + c); n != 1 {
			t.Errorf("%s's leftover deleted %d times; want 1", c, n)
		}
	}
	for _, c := range []string{"running1", "starting1", "pending1", "stopping1", "members1", "young"} {
		if n := lp.deleted("sec-" + c); n != 0 {
			t.Errorf("%s's leftover deleted %d times on the first pass; want kept", c, n)
		}
	}
	if n, _ := h.fp.stops("members1"); n != 1 {
		t.Errorf("StopCluster(members1) called %d times; want 1", n)
	}
	// The young one goes once past the grace; the others' never.
	clk.Advance(time.Minute + time.Second)
	h.core.ReapOnce(h.ctx)
	if n := lp.deleted("sec-young"); n != 1 {
		t.Errorf("young leftover deleted %d times after its grace; want 1", n)
	}
	for _, c := range []string{"running1", "starting1", "pending1", "stopping1"} {
		if n := lp.deleted("sec-" + c); n != 0 {
			t.Errorf("%s's leftover deleted %d times; want kept", c, n)
		}
	}
	// members1's member is gone since its StopCluster (the fake forgets
	// it): what it left is found by tag like any other's.
	if n := lp.deleted("sec-members1"); n != 1 {
		t.Errorf("members1's leftover deleted %d times once its members were gone; want 1", n)
	}
	// Reaped counts, per pass, the clusters something was removed of:
	// unknown1, stopped1, failed1 and members1 (its running member), then
	// members1 and young1.
	if got := h.core.Reaped(); got != 6 {
		t.Errorf("Reaped() = %d; want 6", got)
	}
	if lp.lists != 2 {
		t.Errorf("ListLeftovers called %d times over 2 passes; want 2 (once a pass, whatever the clusters)", lp.lists)
	}
}

// TestReaperLeftoversUndated: a leftover the cloud gives no date for is
// aged from when the reaper first saw it.
func TestReaperLeftoversUndated(t *testing.T) {
	h, lp, clk := leftoverHarness(t, false)
	lp.add(providers.Leftover{Kind: "security-group", ID: "sg-1", Cluster: "gone1"})
	for _, d := range []time.Duration{time.Minute, 59 * time.Second, 0} {
		h.core.ReapOnce(h.ctx)
		clk.Advance(d)
	}
	// Seen at 0, 1:00 and 1:59: not yet two minutes old at the last.
	if n := lp.deleted("sg-1"); n != 0 {
		t.Fatalf("undated leftover deleted within the grace (%d)", n)
	}
	clk.Advance(2 * time.Second)
	h.core.ReapOnce(h.ctx) // 2:01 after first seen
	if n := lp.deleted("sg-1"); n != 1 {
		t.Fatalf("undated leftover deleted %d times past the grace; want 1", n)
	}
}

// TestReaperLeftoversRemembered: what was removed is not removed again on
// every pass while the listing still shows it; once unlisted it is
// forgotten; a failed removal is tried again.
func TestReaperLeftoversRemembered(t *testing.T) {
	h, lp, clk := leftoverHarness(t, false)
	lp.sticky = true
	old := clk.Now().Add(-time.Hour)
	gone := providers.Leftover{Kind: "task-definition-family", ID: "fam-1", Cluster: "gone1", Created: old}
	lp.add(gone)
	for range 5 {
		h.core.ReapOnce(h.ctx)
	}
	if n := lp.deleted("fam-1"); n != 1 {
		t.Fatalf("deleted %d times over 5 passes while still listed; want 1", n)
	}
	lp.mu.Lock()
	lp.items = nil // the listing catches up
	lp.mu.Unlock()
	h.core.ReapOnce(h.ctx)
	lp.add(gone) // made again (the same name)
	h.core.ReapOnce(h.ctx)
	if n := lp.deleted("fam-1"); n != 2 {
		t.Fatalf("deleted %d times after it was unlisted and listed again; want 2", n)
	}

	lp.add(providers.Leftover{Kind: "security-group", ID: "sg-held", Cluster: "gone2", Created: old})
	lp.mu.Lock()
	lp.delErr = errors.New("DependencyViolation")
	lp.mu.Unlock()
	h.core.ReapOnce(h.ctx)
	h.core.ReapOnce(h.ctx)
	if n := lp.deleted("sg-held"); n != 2 {
		t.Fatalf("a failing removal was tried %d times over 2 passes; want 2", n)
	}
}

// TestReaperLeftoversDryRun only reports; a listing that fails leaves the
// member pass alone.
func TestReaperLeftoversDryRun(t *testing.T) {
	h, lp, clk := leftoverHarness(t, true)
	lp.add(providers.Leftover{Kind: "secret", ID: "sec-1", Cluster: "gone1", Created: clk.Now().Add(-time.Hour)})
	h.core.ReapOnce(h.ctx)
	if n := lp.deleted("sec-1"); n != 0 {
		t.Errorf("dry run deleted a leftover")
	}
	if h.core.Reaped() != 1 {
		t.Errorf("Reaped() = %d in a dry run with one leftover cluster; want 1", h.core.Reaped())
	}

	h2, lp2, clk2 := leftoverHarness(t, false)
	lp2.listErr = errors.New("AccessDenied")
	h2.fp.leftover("orphan1", "scheduler", providers.RoleScheduler, clk2.Now().Add(-time.Hour))
	h2.core.ReapOnce(h2.ctx)
	if n, _ := h2.fp.stops("orphan1"); n != 1 {
		t.Errorf("with the leftover listing failing, StopCluster(orphan1) called %d times; want 1", n)
	}
}
