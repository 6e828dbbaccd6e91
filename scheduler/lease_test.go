package scheduler_test

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestReleaseLeasesHandsOverAtOnce: a replica that shuts down cleanly
// gives up its clusters in one write, and another replica takes them over
// at its next sweep, long before their leases would have run out (an
// hour here), and acts on them.
func TestReleaseLeasesHandsOverAtOnce(t *testing.T) {
	h := newHarness(t, func(c *scheduler.Config) { c.ReplicaID, c.LeaseTTL = "replica-a", time.Hour })
	h.useListing()
	h.start()
	a, b := h.create("alice", 1), h.create("bob", 0)
	h.waitSettled(a.Name, 1)
	h.waitSettled(b.Name, 0)

	cfgB := h.cfg
	cfgB.ReplicaID = "replica-b"
	_, stopB := h.runReplica(cfgB, listingProvider{h.fp})
	defer stopB()
	h.waitCalls("ListMembers", 6) // both replicas sweep a few times
	for _, n := range []string{a.Name, b.Name} {
		if got := h.holder(n); got != "replica-a" {
			t.Fatalf("lease of %s held by %q while replica-a runs", n, got)
		}
	}

	h.stop()
	h.core.ReleaseLeases(h.ctx)
	h.takenOverAndActed("replica-b", a.Name, b.Name)
}

// takenOverAndActed waits until holder holds every named cluster's lease,
// then scales the last one (idle, 0 workers) up by a write to the store,
// as another replica's API would, and waits for holder to act on it.
func (h *harness) takenOverAndActed(holder string, names ...string) {
	h.t.Helper()
	for _, n := range names {
		eventually(h.t, waitLimit, holder+" to take "+n+" over", func() (bool, string) {
			got := h.holder(n)
			return got == holder, got
		})
	}
	last := names[len(names)-1]
	if _, err := h.st.UpdateCluster(h.ctx, last, func(x *store.Cluster) (store.Event, error) {
		x.DesiredWorkers = 1
		return store.Event{Kind: "scale", Message: "0 -> 1 workers"}, nil
	}); err != nil {
		h.t.Fatal(err)
	}
	h.waitSettled(last, 1)
}
