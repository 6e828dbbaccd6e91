package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// listingProvider is the fake with the optional listing of every
// cluster's members in one call (providers.MemberLister).
type listingProvider struct{ *fakeProvider }

func (p listingProvider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["ListMembers"]++
	if p.listMembersErr != nil {
		return nil, p.listMembersErr
	}
	var out []providers.Member
	for _, ms := range p.clusters {
		for _, m := range ms {
			out = append(out, m.Member)
		}
	}
	return out, ctx.Err()
}

// useListing rebuilds the harness's core over the listing provider.
func (h *harness) useListing() {
	h.core = scheduler.New(h.cfg, h.st, listingProvider{h.fp}, h.rt, h.log)
}

func (h *harness) waitCalls(method string, n int) {
	h.t.Helper()
	start := h.fp.count(method)
	eventually(h.t, waitLimit, fmt.Sprintf("%d more %s calls", n, method), func() (bool, string) {
		got := h.fp.count(method) - start
		return got >= n, fmt.Sprintf("%d calls", got)
	})
}

// waitQuiet waits until three sweeps go by without a full reconcile pass
// (with the listing provider only full passes call Describe).
func (h *harness) waitQuiet() {
	h.t.Helper()
	eventually(h.t, waitLimit, "three sweeps without a full pass", func() (bool, string) {
		d := h.fp.count("Describe")
		h.waitCalls("ListMembers", 3)
		got := h.fp.count("Describe") - d
		return got == 0, fmt.Sprintf("%d full passes", got)
	})
}

func (h *harness) countsAsked() int {
	h.fp.mu.Lock()
	defer h.fp.mu.Unlock()
	return h.fp.countsAsked
}

// TestSweepListsMembersOnce: with a backend that lists every cluster's
// members in one call, settled clusters are watched through that listing
// alone (no Describe, no reconcile pass), and their schedulers are asked
// for their counts; while the listing fails (a throttled cloud API) the
// sweep still asks for the counts and sends no cluster to a full pass. A
// worker that exits and a scheduler that exits are then seen through the
// listing, the worker replaced and the cluster failed, as with a Describe
// per cluster.
func TestSweepListsMembersOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		listErr error
	}{
		{"listing answers", nil},
		{"listing fails", errors.New("RequestLimitExceeded: Request limit exceeded.")},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.useListing()
			h.start()
			a, b := h.create("alice", 1), h.create("bob", 1)
			h.waitSettled(a.Name, 1)
			h.waitSettled(b.Name, 1)
			h.waitQuiet()

			h.fp.mu.Lock()
			h.fp.listMembersErr = c.listErr
			h.fp.mu.Unlock()
			describes, asked := h.fp.count("Describe"), h.countsAsked()
			h.waitCalls("ListMembers", 5)
			if got := h.fp.count("Describe"); got != describes {
				t.Errorf("%d Describe calls while both clusters were settled, want none", got-describes)
			}
			if h.countsAsked() == asked {
				t.Error("no scheduler was asked for its counts while settled")
			}

			h.fp.mu.Lock()
			h.fp.listMembersErr = nil
			h.fp.mu.Unlock()
			h.loseWorkerAndScheduler(a.Name, b.Name)
		})
	}
}

// loseWorkerAndScheduler has a's only worker and b's scheduler exit, and
// checks that a gets a new worker and b fails, with the reason.
func (h *harness) loseWorkerAndScheduler(a, b string) {
	h.t.Helper()
	worker := h.fp.runningWorkers(a)[0]
	h.fp.exitWorker(a, worker, "killed (out of memory)")
	h.waitCluster(a, "to replace its worker", func(cl *store.Cluster) bool {
		ws := h.fp.runningWorkers(a)
		return cl.Status == store.Running && cl.ReadyWorkers == 1 && len(ws) == 1 && ws[0] != worker
	})
	if n := countKind(h.events(a), "worker-exited"); n != 1 {
		h.t.Errorf("%d worker-exited events, want 1", n)
	}

	h.fp.exitScheduler(b, "killed (out of memory)")
	got := h.waitStatus(b, store.Failed)
	if got.Reason != "the scheduler stopped: killed (out of memory)" {
		h.t.Errorf("reason %q", got.Reason)
	}
	h.checkDown(b)
	if got := h.cluster(a); got.Status != store.Running {
		h.t.Errorf("the other cluster: %s", describe(got))
	}
}

// TestSweepSeesChangesOfTheRow: a settled cluster whose stored row
// changes (here a scale written straight to the store, as another
// replica's API would) gets a full pass that acts on it.
func TestSweepSeesChangesOfTheRow(t *testing.T) {
	h := newHarness(t)
	h.useListing()
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.waitCalls("ListMembers", 2)
	if _, err := h.st.UpdateCluster(h.ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		x.DesiredWorkers = 2
		return store.Event{Kind: "scale", Message: "1 -> 2 workers elsewhere"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.waitSettled(cl.Name, 2)
}

// TestHealthIntervalSpacesSchedulerChecks: a settled cluster's scheduler
// is asked for its counts once per HealthInterval, not at every sweep;
// the maximum lifetime, which needs no answer, is still checked at every
// sweep.
func TestHealthIntervalSpacesSchedulerChecks(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t, func(c *scheduler.Config) { c.HealthInterval, c.MaxLifetime = time.Hour, time.Hour })
	h.useListing()
	h.core.SetClock(clk.Now)
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.waitQuiet()
	asked, describes := h.countsAsked(), h.fp.count("Describe")
	h.waitCalls("ListMembers", 5)
	if got := h.fp.count("Describe"); got != describes {
		t.Fatalf("%d full passes of a settled cluster", got-describes)
	}
	if got := h.countsAsked(); got != asked {
		t.Errorf("the scheduler was asked %d times within its health interval, want 0", got-asked)
	}
	clk.Advance(61 * time.Minute)
	got := h.waitStatus(cl.Name, store.Stopped)
	if !strings.Contains(got.Reason, "maximum lifetime") {
		t.Errorf("reason %q", got.Reason)
	}
}

// TestHeartbeatLossWithSpacedChecks: with health checks spaced out, a
// scheduler that stops answering is still noticed at its next check and
// failed after the heartbeat timeout.
func TestHeartbeatLossWithSpacedChecks(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t, func(c *scheduler.Config) {
		c.HeartbeatTimeout, c.HealthInterval = 30*time.Second, 300*time.Millisecond
	})
	h.useListing()
	h.core.SetClock(clk.Now)
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.fp.configure(func(f *fakeProvider) { f.unresponsive = map[string]bool{cl.Name: true} })
	h.waitCluster(cl.Name, "to be marked as not answering", func(c *store.Cluster) bool {
		return strings.HasPrefix(c.Phase, "scheduler not answering since")
	})
	clk.Advance(31 * time.Second)
	got := h.waitStatus(cl.Name, store.Failed)
	if !strings.Contains(got.Reason, "stopped answering") {
		t.Errorf("reason %q", got.Reason)
	}
	h.checkDown(cl.Name)
}

// runReplica runs a second core on the harness's store, provider and
// router, as another replica, until the returned stop is called or the
// test ends.
func (h *harness) runReplica(cfg scheduler.Config, p providers.Provider) (*scheduler.Core, func()) {
	h.t.Helper()
	core := scheduler.New(cfg, h.st, p, h.rt, h.log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- core.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				h.t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			h.t.Fatal("Run did not return within 10s of its context ending")
		}
	}
	h.t.Cleanup(stop)
	return core, stop
}

func (h *harness) holder(name string) string {
	h.t.Helper()
	ls, err := h.st.ActiveLeases(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == name {
			if l.Lapsed {
				return "(lapsed) " + l.Holder
			}
			return l.Holder
		}
	}
	return ""
}

// TestBatchedRenewalKeepsAndHandsOverLeases: a replica whose clusters are
// settled keeps their leases with its one batched renewal per interval
// (it makes no reconcile pass, so no per-cluster lease write), for many
// lease TTLs, while another replica waits; once it dies, the other takes
// its clusters over within a TTL and acts on them.
func TestBatchedRenewalKeepsAndHandsOverLeases(t *testing.T) {
	const ttl = 600 * time.Millisecond
	h := newHarness(t, func(c *scheduler.Config) { c.ReplicaID, c.LeaseTTL = "replica-a", ttl })
	h.useListing()
	h.start()
	a, b := h.create("alice", 1), h.create("bob", 0)
	h.waitSettled(a.Name, 1)
	h.waitSettled(b.Name, 0)
	h.waitQuiet()

	cfgB := h.cfg
	cfgB.ReplicaID = "replica-b"
	_, stopB := h.runReplica(cfgB, listingProvider{h.fp})
	describes := h.fp.count("Describe")
	// About 4 TTLs of A's sweeps, one each 50ms.
	for range 4 {
		h.waitCalls("ListMembers", int(ttl/h.cfg.PollInterval))
		for _, n := range []string{a.Name, b.Name} {
			if got := h.holder(n); got != "replica-a" {
				t.Fatalf("lease of %s held by %q while replica-a runs", n, got)
			}
		}
	}
	if got := h.fp.count("Describe"); got != describes {
		t.Errorf("%d Describe calls (reconcile passes) while settled: the leases were not kept by the batch alone", got-describes)
	}

	h.stop() // replica-a dies without letting go
	h.takenOverAndActed("replica-b", a.Name, b.Name)
	stopB()
}

// A sweep that took a cluster's members before its stop began must not
// ask the scheduler for its counts afterwards: the provider may have
// removed it (the fake records such a request as a violation).
func TestNoHealthCheckAfterStop(t *testing.T) {
	h := newHarness(t)
	h.start()
	cl := h.create("alice", 0)
	other := h.create("bob", 0)
	h.waitSettled(cl.Name, 0)
	h.waitSettled(other.Name, 0)

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.fp.configure(func(f *fakeProvider) {
		f.afterDescribe = func(cluster string) {
			// The sweep's description only: a full pass describes too,
			// and one under way (a health check that timed out on a
			// loaded machine queues one) held here would hold the stop.
			if cluster == cl.Name && inSweep() {
				once.Do(func() { close(entered); <-release })
			}
		}
	})
	select {
	case <-entered:
	case <-time.After(waitLimit):
		t.Fatal("the sweep never described the cluster")
	}
	if err := h.core.Stop(h.ctx, "alice", cl.Name, "test"); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(cl.Name, store.Stopped)
	if stops, _ := h.fp.stops(cl.Name); stops == 0 {
		t.Fatal("stopped without StopCluster")
	}
	close(release)
	// Two more descriptions of the other cluster: the held sweep ended.
	h.waitCalls("Describe", 2)
	h.fp.mu.Lock()
	bad := slices.Clone(h.fp.badCountsPaths)
	h.fp.badCountsPaths = nil // reported here rather than again at cleanup
	h.fp.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("counts.json asked of the stopped cluster: %v", bad)
	}
}

// inSweep reports whether the calling goroutine runs the core's sweep.
func inSweep() bool {
	buf := make([]byte, 64<<10)
	return bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("scheduler.(*Core).sweep("))
}

// TestResyncFindsLostFollowUp: an active cluster held here that is neither
// settled nor queued (a pass whose follow-up was lost) is taken up again
// by the sweep's resync, though no cluster row changed and the sweep works
// from its last read of the leases; the other cluster is left alone.
func TestResyncFindsLostFollowUp(t *testing.T) {
	h := newHarness(t, func(c *scheduler.Config) { c.LeaseTTL = 400 * time.Millisecond })
	h.start()
	lost := h.create("alice", 0)
	other := h.create("bob", 0)
	for _, cl := range []*store.Cluster{lost, other} {
		h.waitSettled(cl.Name, 0)
		eventually(t, waitLimit, cl.Name+" to be settled", func() (bool, string) {
			return h.core.Settled(cl.Name), "not settled"
		})
	}
	eventually(t, waitLimit, "the sweep to keep its read of the leases", func() (bool, string) {
		return h.core.LeasesKept(), "reading anew"
	})
	changes, err := h.st.Changes(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.core.LoseFollowUp(lost.Name)
	eventually(t, waitLimit, "the resync to settle "+lost.Name+" again", func() (bool, string) {
		return h.core.Settled(lost.Name), "not settled"
	})
	if !h.core.Settled(other.Name) {
		t.Errorf("%s was taken from the sweep too", other.Name)
	}
	if now, err := h.st.Changes(h.ctx); err != nil || now != changes {
		t.Errorf("the store's change count moved from %d to %d (%v) while the lost cluster waited: the test meant the sweep's kept read", changes, now, err)
	}

	// A pass that settles a cluster with a version older than the kept
	// read's (another replica wrote it while the pass ran): the resync
	// compares it with the read and queues it, though as many clusters
	// are settled as are held.
	want, err := h.st.GetCluster(h.ctx, other.Name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLimit, "the sweep to keep its read of the leases", func() (bool, string) {
		return h.core.LeasesKept(), "reading anew"
	})
	h.core.SettleStale(other.Name)
	if v := h.core.SettledVersion(other.Name); v != want.Version-1 {
		t.Fatalf("settled at version %d, want the stale %d", v, want.Version-1)
	}
	eventually(t, waitLimit, "the resync to take up "+other.Name+", settled stale", func() (bool, string) {
		v := h.core.SettledVersion(other.Name)
		return v == want.Version, fmt.Sprintf("settled at version %d, the store has %d", v, want.Version)
	})
}

// TestExactCountKeepsLeaseRead: on a store whose change count moves with
// every cluster write (SQLite's triggers), the sweep keeps its read of
// the leases however old it is while the count stands, and reads anew as
// soon as a write moves it; over the kept read, the resync still runs at
// least every minute, its safety net kept.
func TestExactCountKeepsLeaseRead(t *testing.T) {
	h := newHarness(t, func(c *scheduler.Config) { c.LeaseTTL = 400 * time.Millisecond })
	h.start()
	cl := h.create("alice", 0)
	h.waitSettled(cl.Name, 0)
	eventually(t, waitLimit, "the sweep to keep its read of the leases", func() (bool, string) {
		return h.core.LeasesKept(), "reading anew"
	})
	if !h.st.ChangesExact() {
		t.Fatal("the harness's SQLite store does not say its count is exact")
	}
	h.core.AgeLeaseRead()
	if scanned, err := h.core.SweepLeases(h.ctx); err != nil || scanned {
		t.Errorf("a read older than a minute, nothing changed: read anew %v (%v), want it kept", scanned, err)
	}
	aged := h.core.AgeResync()
	eventually(t, waitLimit, "the resync to run over the kept read", func() (bool, string) {
		at := h.core.SettledCompared()
		return at.After(aged.Add(time.Minute)), "last compared " + at.String()
	})

	bob := h.create("bob", 0)
	eventually(t, waitLimit, "a read of the leases with "+bob.Name, func() (bool, string) {
		names := h.core.LeaseNames()
		return slices.Contains(names, bob.Name), fmt.Sprintf("the read has %q", names)
	})
}
