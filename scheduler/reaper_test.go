package scheduler_test

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// leftover plants a running member that the store may not know, started at.
func (f *fakeProvider) leftover(cluster, name string, role providers.Role, started time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusters[cluster] == nil {
		f.clusters[cluster] = map[string]*fakeMember{}
	}
	f.clusters[cluster][name] = &fakeMember{Member: providers.Member{Cluster: cluster, Name: name, Role: role,
		State: providers.StateRunning, StartedAt: started}}
}

func TestReaper(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	cases := []struct {
		name    string
		dryRun  bool
		setup   func(h *harness) (cluster string)
		reaped  bool
		counted bool
	}{
		{"unknown cluster past the grace", false, func(h *harness) string {
			h.fp.leftover("orphan1", "scheduler", providers.RoleScheduler, clk.Now().Add(-10*time.Minute))
			h.fp.leftover("orphan1", "worker-0", providers.RoleWorker, clk.Now().Add(-10*time.Minute))
			return "orphan1"
		}, true, true},
		{"unknown cluster within the grace", false, func(h *harness) string {
			h.fp.leftover("orphan2", "scheduler", providers.RoleScheduler, clk.Now().Add(-10*time.Second))
			return "orphan2"
		}, false, false},
		{"dry run only reports", true, func(h *harness) string {
			h.fp.leftover("orphan3", "scheduler", providers.RoleScheduler, clk.Now().Add(-10*time.Minute))
			return "orphan3"
		}, false, true},
		{"a stopped cluster's leftover worker", false, func(h *harness) string {
			cl := h.create("alice", 0)
			h.waitStatus(cl.Name, store.Running)
			if err := h.core.Stop(h.ctx, "alice", cl.Name, "test"); err != nil {
				h.t.Fatal(err)
			}
			h.waitStatus(cl.Name, store.Stopped)
			h.fp.leftover(cl.Name, "worker-7", providers.RoleWorker, clk.Now().Add(-time.Hour))
			return cl.Name
		}, true, true},
		{"an active cluster is the loop's", false, func(h *harness) string {
			cl := h.create("alice", 1)
			h.waitSettled(cl.Name, 1)
			return cl.Name
		}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *scheduler.Config) {
				c.Reaper = scheduler.ReaperConfig{Grace: 2 * time.Minute, DryRun: tc.dryRun} // ReapOnce is called by hand
			})
			h.core.SetClock(clk.Now)
			h.start()
			cluster := tc.setup(h)
			before, _ := h.fp.stops(cluster)
			h.core.ReapOnce(h.ctx)
			after, _ := h.fp.stops(cluster)
			if reaped := after > before; reaped != tc.reaped {
				t.Errorf("StopCluster calls %d -> %d, want reaped=%v", before, after, tc.reaped)
			}
			if counted := h.core.Reaped() > 0; counted != tc.counted {
				t.Errorf("Reaped() = %d, want counted=%v", h.core.Reaped(), tc.counted)
			}
		})
	}
}

// terminated plants a stopped member, as EC2 keeps listing a terminated
// instance for about an hour after StopCluster.
func (f *fakeProvider) terminated(cluster, name string, role providers.Role, started time.Time) {
	f.leftover(cluster, name, role, started)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters[cluster][name].State = providers.StateStopped
}

// TestReaperTidiesTerminatedOnce: a cluster whose members are all stopped
// is tidied once, not on every pass while the provider still lists them;
// a member that runs again is reaped; a cluster the provider stopped
// listing is forgotten.
func TestReaperTidiesTerminatedOnce(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t, func(c *scheduler.Config) {
		c.Reaper = scheduler.ReaperConfig{Grace: 2 * time.Minute} // ReapOnce is called by hand
	})
	h.core.SetClock(clk.Now)
	h.start()
	old := clk.Now().Add(-time.Hour)
	const passes = 6
	for range passes {
		// The fake forgets a cluster on StopCluster; EC2 does not.
		h.fp.terminated("gone1", "scheduler", providers.RoleScheduler, old)
		h.fp.terminated("gone1", "worker-0", providers.RoleWorker, old)
		h.core.ReapOnce(h.ctx)
	}
	if n, _ := h.fp.stops("gone1"); n != 1 {
		t.Fatalf("StopCluster(gone1) called %d times over %d passes, want 1", n, passes)
	}
	if h.core.Reaped() != 0 {
		t.Errorf("Reaped() = %d: tidying stopped records is not reaping", h.core.Reaped())
	}

	// A member that is running again is reaped, tidied or not.
	h.fp.terminated("gone1", "scheduler", providers.RoleScheduler, old)
	h.fp.leftover("gone1", "worker-0", providers.RoleWorker, old)
	h.core.ReapOnce(h.ctx)
	if n, _ := h.fp.stops("gone1"); n != 2 {
		t.Fatalf("StopCluster(gone1) = %d calls after a member ran again, want 2", n)
	}
	if h.core.Reaped() != 1 {
		t.Errorf("Reaped() = %d after a running leftover, want 1", h.core.Reaped())
	}

	// Listed stopped after that reap: tidied once more (the running member
	// cleared the memory), then left alone.
	for range passes {
		h.fp.terminated("gone1", "scheduler", providers.RoleScheduler, old)
		h.core.ReapOnce(h.ctx)
	}
	if n, _ := h.fp.stops("gone1"); n != 3 {
		t.Fatalf("StopCluster(gone1) = %d calls, want 3", n)
	}

	// Once the provider stops listing it, the cluster is forgotten: should
	// its records come back, they are tidied again.
	h.fp.mu.Lock()
	delete(h.fp.clusters, "gone1") // the hour is over: AWS lists it no more
	h.fp.mu.Unlock()
	h.core.ReapOnce(h.ctx)
	h.fp.terminated("gone1", "scheduler", providers.RoleScheduler, old)
	h.core.ReapOnce(h.ctx)
	if n, _ := h.fp.stops("gone1"); n != 4 {
		t.Fatalf("StopCluster(gone1) = %d calls after it was unlisted and listed again, want 4", n)
	}
}
