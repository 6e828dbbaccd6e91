package scheduler_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"

	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

type fakeClock = testutil.Clock

// TestIdleTimeout: busy, however long, a cluster keeps running; idle, it
// stops after its timeout. A streaming scheduler says it is busy once,
// and that holds until it says otherwise.
func TestIdleTimeout(t *testing.T) {
	for _, streams := range []bool{false, true} {
		t.Run(fmt.Sprintf("streams=%v", streams), func(t *testing.T) {
			clk := testutil.NewClock(time.Now())
			h := newHarness(t)
			h.fp.configure(func(f *fakeProvider) { f.streams = streams })
			h.core.SetClock(clk.Now)
			h.start()
			// A streaming cluster makes no provider call while settled.
			wait := h.waitPolls
			if streams {
				wait = h.sweeps
			}
			cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"workers": 1, "idle_timeout": 60}))
			if err != nil {
				t.Fatal(err)
			}
			h.waitSettled(cl.Name, 1)
			if streams {
				h.waitWatches(1)
			}

			h.fp.configure(func(f *fakeProvider) { f.busy = map[string]bool{cl.Name: true} })
			wait(4)
			for range 3 {
				clk.Advance(10 * time.Minute)
				wait(4)
			}
			if got := h.cluster(cl.Name); got.Status != store.Running {
				t.Fatalf("a busy cluster was stopped: %s", describe(got))
			}

			h.fp.configure(func(f *fakeProvider) { f.busy = nil })
			wait(4)
			clk.Advance(59 * time.Second)
			wait(6)
			if got := h.cluster(cl.Name); got.Status != store.Running {
				t.Fatalf("stopped before its idle timeout: %s", describe(got))
			}
			clk.Advance(2 * time.Second)
			got := h.waitStatus(cl.Name, store.Stopped)
			if !strings.Contains(got.Reason, "idle for 1m0s") {
				t.Errorf("reason %q", got.Reason)
			}
			h.checkDown(cl.Name)
		})
	}
}

func TestIdleTimeoutZeroIsNever(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t, func(c *scheduler.Config) { c.Limits.DefaultIdleTimeout = time.Minute })
	h.core.SetClock(clk.Now)
	h.start()
	never, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"idle_timeout": 0}))
	if err != nil {
		t.Fatal(err)
	}
	byDefault := h.create("alice", 0)
	h.waitStatus(never.Name, store.Running)
	h.waitStatus(byDefault.Name, store.Running)
	// The clock moves on in steps until the default stops its cluster: a
	// step taken before the loop's first look at a cluster (a loaded
	// machine) only starts that cluster's idle clock.
	eventually(t, waitLimit, byDefault.Name+" to stop when idle", func() (bool, string) {
		h.waitPolls(2)
		clk.Advance(2 * time.Minute)
		got := h.cluster(byDefault.Name)
		return got.Status == store.Stopped, describe(got)
	}) // the gateway's default applies
	h.waitPolls(3)
	if got := h.cluster(never.Name); got.Status != store.Running {
		t.Fatalf("idle_timeout 0 stopped the cluster: %s", describe(got))
	}
}

func TestMaxLifetime(t *testing.T) {
	for _, streams := range []bool{false, true} {
		t.Run(fmt.Sprintf("streams=%v", streams), func(t *testing.T) {
			clk := testutil.NewClock(time.Now())
			h := newHarness(t, func(c *scheduler.Config) { c.MaxLifetime = time.Hour })
			h.fp.configure(func(f *fakeProvider) { f.streams = streams })
			h.core.SetClock(clk.Now)
			h.start()
			cl := h.create("alice", 1)
			h.waitSettled(cl.Name, 1)
			if streams {
				h.waitWatches(1)
			}
			h.fp.configure(func(f *fakeProvider) { f.busy = map[string]bool{cl.Name: true} })
			// A streaming cluster makes no provider call while settled.
			wait := h.waitPolls
			if streams {
				wait = h.sweeps
			}
			clk.Advance(59 * time.Minute)
			wait(3)
			if got := h.cluster(cl.Name); got.Status != store.Running {
				t.Fatalf("stopped before its lifetime: %s", describe(got))
			}
			clk.Advance(2 * time.Minute)
			got := h.waitStatus(cl.Name, store.Stopped)
			if !strings.Contains(got.Reason, "maximum lifetime of 1h0m0s") {
				t.Errorf("reason %q", got.Reason)
			}
			h.checkDown(cl.Name)
		})
	}
}

// TestIdleClockAfterBusy: a streaming cluster busy for longer than its
// idle timeout is not stopped while busy, and its idle clock starts when
// the stream says the work ended, not when the sweep last looked.
func TestIdleClockAfterBusy(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t)
	h.fp.configure(func(f *fakeProvider) { f.streams = true })
	h.core.SetClock(clk.Now)
	h.start()
	cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"idle_timeout": 600}))
	if err != nil {
		t.Fatal(err)
	}
	h.waitSettled(cl.Name, 0)
	h.waitWatches(1)
	h.fp.configure(func(f *fakeProvider) { f.busy = map[string]bool{cl.Name: true} })
	h.sweeps(3)
	for _, step := range []time.Duration{5, 5, 5, 5, 4} { // 24 minutes busy
		clk.Advance(step * time.Minute)
		h.sweeps(3)
	}
	if got := h.cluster(cl.Name); got.Status != store.Running {
		t.Fatalf("stopped while busy: %s", describe(got))
	}
	h.fp.configure(func(f *fakeProvider) { f.busy = nil })
	h.sweeps(3) // the stream says idle
	clk.Advance(9 * time.Minute)
	h.sweeps(5)
	if got := h.cluster(cl.Name); got.Status != store.Running {
		t.Fatalf("stopped 9 minutes after its work ended, with an idle timeout of 10: %s", describe(got))
	}
	clk.Advance(2 * time.Minute)
	got := h.waitStatus(cl.Name, store.Stopped)
	if !strings.Contains(got.Reason, "idle for 10m0s") {
		t.Errorf("reason %q", got.Reason)
	}
}

func TestIdleTimeoutBounds(t *testing.T) {
	l := scheduler.Limits{MaxWorkers: 1, MaxWorkerThreads: 1, MaxWorkerMemory: 2, DefaultIdleTimeout: 20 * time.Minute, MaxIdleTimeout: time.Hour}
	for _, tc := range []struct {
		v  string
		ok bool
	}{{"60", true}, {"3600", true}, {"3601", false}, {"0", false}, {"59", false}, {"-1", false}} {
		_, err := l.ParseOptions(raw(map[string]string{"idle_timeout": tc.v}))
		if (err == nil) != tc.ok {
			t.Errorf("idle_timeout=%s: %v", tc.v, err)
		}
	}
	if o, _ := l.ParseOptions(nil); o.IdleTimeout != 1200 {
		t.Errorf("default idle timeout %d, want 1200", o.IdleTimeout)
	}
}

func TestSchedulerStopsAnswering(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t, func(c *scheduler.Config) { c.HeartbeatTimeout = 30 * time.Second })
	h.core.SetClock(clk.Now)
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.fp.configure(func(f *fakeProvider) { f.unresponsive = map[string]bool{cl.Name: true} })
	h.waitCluster(cl.Name, "to be marked as not answering", func(c *store.Cluster) bool {
		return strings.HasPrefix(c.Phase, "scheduler not answering since")
	})
	clk.Advance(29 * time.Second)
	h.waitPolls(3)
	if got := h.cluster(cl.Name); got.Status != store.Running {
		t.Fatalf("failed before the heartbeat timeout: %s", describe(got))
	}
	// It answers again: the silence is forgotten.
	h.fp.configure(func(f *fakeProvider) { f.unresponsive = nil })
	h.waitPolls(3)
	h.fp.configure(func(f *fakeProvider) { f.unresponsive = map[string]bool{cl.Name: true} })
	h.waitPolls(3)
	clk.Advance(20 * time.Second)
	h.waitPolls(3)
	if got := h.cluster(cl.Name); got.Status != store.Running {
		t.Fatalf("an earlier silence counted again: %s", describe(got))
	}
	clk.Advance(11 * time.Second)
	got := h.waitStatus(cl.Name, store.Failed)
	if !strings.Contains(got.Reason, "stopped answering") {
		t.Errorf("reason %q", got.Reason)
	}
	h.checkDown(cl.Name)
}

func TestAdaptive(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t) // Limits.MaxWorkers is 5
	h.core.SetClock(clk.Now)
	h.start()
	cl := h.create("alice", 0)
	h.waitSettled(cl.Name, 0)
	setDesired := func(n int) {
		h.fp.configure(func(f *fakeProvider) { f.desired = map[string]int{cl.Name: n} })
	}

	if msg, err := h.core.Adapt(h.ctx, who("alice"), cl.Name, 1, 9, true); err != nil || !strings.Contains(msg, "limit of 5") {
		t.Fatalf("Adapt above the limit: %q %v", msg, err)
	}
	h.waitSettled(cl.Name, 1) // the minimum applies at once

	setDesired(3)
	h.waitSettled(cl.Name, 3)
	setDesired(50)
	h.waitSettled(cl.Name, 5) // clamped to the maximum

	// Down only after the demand has stayed low for a while.
	setDesired(0)
	h.waitPolls(5)
	if got := h.cluster(cl.Name); got.DesiredWorkers != 5 {
		t.Fatalf("scaled down at once: %s", describe(got))
	}
	clk.Advance(5 * time.Second)
	h.waitSettled(cl.Name, 1) // to the minimum, not below

	// A manual scale ends adaptive scaling.
	if _, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 2); err != nil {
		t.Fatal(err)
	}
	h.waitSettled(cl.Name, 2)
	setDesired(4)
	h.waitPolls(5)
	if got := h.cluster(cl.Name); got.Adaptive || got.DesiredWorkers != 2 {
		t.Fatalf("adaptive after a manual scale: %s adaptive=%v", describe(got), got.Adaptive)
	}

	for _, tc := range []struct{ lo, hi int }{{-1, 2}, {3, 2}} {
		if _, err := h.core.Adapt(h.ctx, who("alice"), cl.Name, tc.lo, tc.hi, true); !errors.Is(err, scheduler.ErrInvalid) {
			t.Errorf("Adapt(%d, %d): %v", tc.lo, tc.hi, err)
		}
	}
	if _, err := h.core.Adapt(h.ctx, who("bob"), cl.Name, 0, 1, true); !errors.Is(err, scheduler.ErrNotFound) {
		t.Errorf("another user adapted: %v", err)
	}
}
