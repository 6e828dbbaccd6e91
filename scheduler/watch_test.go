package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

func (h *harness) watchesOpened() int {
	h.fp.mu.Lock()
	defer h.fp.mu.Unlock()
	return h.fp.watchesOpened
}

// waitWatches waits until n watches have been opened in all.
func (h *harness) waitWatches(n int) {
	h.t.Helper()
	eventually(h.t, waitLimit, fmt.Sprintf("%d health watches", n), func() (bool, string) {
		got := h.watchesOpened()
		return got >= n, fmt.Sprintf("%d watches", got)
	})
}

// sweeps lets n poll intervals (sweeps) go by, to show that something
// does not happen: a watched cluster makes no provider call to count.
func (h *harness) sweeps(n int) {
	time.Sleep(time.Duration(n) * h.cfg.PollInterval)
}

// TestWatchedClusterIsNotPolled: a settled cluster whose scheduler streams
// its counts is neither asked for counts.json nor described while nothing
// changes; a worker it loses and its own end come through the stream and
// are acted on as before.
func TestWatchedClusterIsNotPolled(t *testing.T) {
	h := newHarness(t)
	h.fp.configure(func(f *fakeProvider) { f.streams = true })
	h.start()
	a, b := h.create("alice", 1), h.create("bob", 1)
	h.waitSettled(a.Name, 1)
	h.waitSettled(b.Name, 1)
	h.waitWatches(2)
	h.sweeps(4) // the last full passes of the start settle
	asked, describes := h.countsAsked(), h.fp.count("Describe")
	h.sweeps(20) // 20 health intervals
	if got := h.countsAsked() - asked; got != 0 {
		t.Errorf("the schedulers were asked for counts.json %d times while they streamed", got)
	}
	if got := h.fp.count("Describe") - describes; got != 0 {
		t.Errorf("%d Describe calls while both clusters were settled and streaming", got)
	}

	h.loseWorkerAndScheduler(a.Name, b.Name)
}

// TestWatchSilence: a stream that goes silent (a frozen scheduler, which
// neither its stream's end nor keepalive shows) is noticed after the
// heartbeat interval; a scheduler that still answers counts.json keeps
// running and is watched anew, and one that does not is failed once the
// heartbeat timeout has passed since its last line.
func TestWatchSilence(t *testing.T) {
	h := newHarness(t, func(c *scheduler.Config) {
		c.HeartbeatTimeout, c.HeartbeatInterval = 2*time.Second, 1333*time.Millisecond
	})
	h.fp.configure(func(f *fakeProvider) { f.streams = true })
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.waitWatches(1)

	h.fp.configure(func(f *fakeProvider) { f.stalled = map[string]bool{cl.Name: true} })
	opened := h.watchesOpened()
	h.fp.configure(func(f *fakeProvider) { f.stalled = nil })
	eventually(t, waitLimit, "a new watch after the silence", func() (bool, string) {
		h.fp.configure(func(f *fakeProvider) { f.stalled = map[string]bool{cl.Name: true} })
		time.Sleep(3 * time.Second) // past the silence of 1.67s
		h.fp.configure(func(f *fakeProvider) { f.stalled = nil })
		return h.watchesOpened() > opened, fmt.Sprintf("%d watches", h.watchesOpened())
	})
	if got := h.cluster(cl.Name); got.Status != store.Running {
		t.Fatalf("a silent stream whose scheduler answered failed the cluster: %s", describe(got))
	}

	stalled := time.Now()
	h.fp.configure(func(f *fakeProvider) {
		f.stalled = map[string]bool{cl.Name: true}
		f.unresponsive = map[string]bool{cl.Name: true}
	})
	got := h.waitStatus(cl.Name, store.Failed)
	if !strings.Contains(got.Reason, "stopped answering") {
		t.Errorf("reason %q", got.Reason)
	}
	// Its last line came at most a beat (1.33s) before the stall.
	if took := time.Since(stalled); took < 600*time.Millisecond {
		t.Errorf("failed %s after the scheduler went silent, before the heartbeat timeout", took)
	}
	h.checkDown(cl.Name)
}

// TestWatchEndedBlocked: a stream the scheduler ends while its loop is
// blocked (the preload's watchdog), long after its last line (heartbeats
// are minutes apart), fails the cluster the heartbeat timeout after the
// end if counts.json does not answer meanwhile, not at the first failed
// check: the open stream said the scheduler was there until it ended.
func TestWatchEndedBlocked(t *testing.T) {
	const timeout = 3 * time.Second
	h := newHarness(t, func(c *scheduler.Config) { c.HeartbeatTimeout = timeout })
	h.fp.configure(func(f *fakeProvider) { f.streams = true })
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.waitWatches(1)
	time.Sleep(timeout + time.Second) // the last line is older than the timeout

	blocked := time.Now()
	h.fp.configure(func(f *fakeProvider) {
		f.endStream = map[string]bool{cl.Name: true}
		f.unresponsive = map[string]bool{cl.Name: true}
	})
	got := h.waitStatus(cl.Name, store.Failed)
	if !strings.Contains(got.Reason, "stopped answering") {
		t.Errorf("reason %q", got.Reason)
	}
	if took := time.Since(blocked); took < timeout*3/4 {
		t.Errorf("failed %s after the stream ended, before the heartbeat timeout (%s)", took, timeout)
	}
	h.checkDown(cl.Name)
}

// TestWatchMisbehaving: a stream that ends as soon as it has begun, or
// floods the gateway with lines, is not opened again and again (each end
// would cost a full pass): its cluster is polled, and keeps running.
func TestWatchMisbehaving(t *testing.T) {
	for _, bad := range []string{"ends", "floods"} {
		t.Run(bad, func(t *testing.T) {
			h := newHarness(t)
			h.fp.configure(func(f *fakeProvider) { f.streams, f.badStream = true, bad })
			h.start()
			cl := h.create("alice", 1)
			h.waitSettled(cl.Name, 1)
			h.waitWatches(1)
			h.sweeps(10)
			opened, asked := h.watchesOpened(), h.countsAsked()
			h.sweeps(20)
			if got := h.watchesOpened() - opened; got != 0 {
				t.Errorf("%d more watches opened while polled", got)
			}
			if h.countsAsked() == asked {
				t.Error("the cluster was not polled instead")
			}
			if got := h.cluster(cl.Name); got.Status != store.Running || got.ReadyWorkers != 1 {
				t.Errorf("cluster: %s", describe(got))
			}
		})
	}
}
