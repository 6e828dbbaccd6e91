package scheduler

// LoseFollowUp takes a settled cluster from the sweep without queueing a
// pass for it: what a pass whose follow-up was lost leaves behind, which
// the sweep's resync is there to find.
func (c *Core) LoseFollowUp(name string) { c.unsettle(name) }

// Settled reports whether the sweep holds the cluster as settled.
func (c *Core) Settled(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settled[name] != nil
}

// LeasesKept reports whether the sweep's last read of the leases will
// serve the next sweeps too (no cluster row changed since, none lapses).
func (c *Core) LeasesKept() bool {
	c.leasesMu.Lock()
	defer c.leasesMu.Unlock()
	return c.leases.valid && !c.leases.again
}
