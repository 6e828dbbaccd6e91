package scheduler

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// LoseFollowUp takes a settled cluster from the sweep without queueing a
// pass for it: what a pass whose follow-up was lost leaves behind, which
// the sweep's resync is there to find.
func (c *Core) LoseFollowUp(name string) { c.unsettle(name) }

// Settled reports whether the sweep holds the cluster as settled.
func (c *Core) Settled(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusters.settledOf(name) != nil
}

// LeasesKept reports whether the sweep's last read of the leases will
// serve the next sweeps too (no cluster row changed since, none lapses).
func (c *Core) LeasesKept() bool {
	c.leasesMu.Lock()
	defer c.leasesMu.Unlock()
	return c.leases.valid && !c.leases.again
}

// SettleStale settles the cluster again as a pass would that read it
// before another replica's write: with a version older than the store's.
func (c *Core) SettleStale(name string) {
	c.mu.Lock()
	s := c.clusters.settledOf(name)
	c.mu.Unlock()
	cl := *s.cl
	cl.Version--
	members := make([]providers.Member, len(s.members))
	for i, k := range s.members {
		members[i] = providers.Member{Cluster: name, Name: k.Name, Address: k.Address, DashboardURL: k.DashboardURL, Reason: k.Reason, Role: k.Role, State: k.State}
	}
	c.unsettle(name)
	c.settle(&cl, members)
}

// SettledVersion is the version of the cluster as the sweep holds it
// settled (0 when it does not).
func (c *Core) SettledVersion(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.clusters.settledOf(name); s != nil {
		return s.cl.Version
	}
	return 0
}

// AgeLeaseRead makes the sweep's kept read of the leases older than
// leaseRescanEvery, after which a count that is not exact is not trusted.
func (c *Core) AgeLeaseRead() {
	c.leasesMu.Lock()
	defer c.leasesMu.Unlock()
	c.leases.at = c.leases.at.Add(-leaseRescanEvery - time.Second)
}

// SweepLeases is the sweep's read of the leases; it says whether the
// store was read anew.
func (c *Core) SweepLeases(ctx context.Context) (bool, error) {
	_, scanned, err := c.sweepLeases(ctx)
	return scanned, err
}

// AgeResync makes the sweep's last comparison of the settled clusters
// with a read older than leaseRescanEvery, and returns when it now says
// that was.
func (c *Core) AgeResync() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settledCompared = c.settledCompared.Add(-leaseRescanEvery - time.Second)
	return c.settledCompared
}

// SettledCompared is when the sweep last compared the settled clusters
// with a read of the leases.
func (c *Core) SettledCompared() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settledCompared
}

// LeaseNames are the clusters of the sweep's last read of the leases.
func (c *Core) LeaseNames() []string {
	c.leasesMu.Lock()
	defer c.leasesMu.Unlock()
	names := make([]string, len(c.leases.list))
	for i, l := range c.leases.list {
		names[i] = l.Name
	}
	return names
}

// HasRecord reports whether the loop keeps a record of the cluster.
func (c *Core) HasRecord(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusters.get(name) != nil
}
