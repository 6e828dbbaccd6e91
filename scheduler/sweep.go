package scheduler

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/store"
)

// A running cluster that has all its workers and no adaptive scaling is
// "settled": nothing is to be done for it until something changes. The
// reconcile loop leaves settled clusters to the sweep, which looks at all
// of them at once each poll interval, at a cost that grows with what
// changed rather than with how many clusters run:
//
//   - one batched lease renewal for everything this replica holds (once
//     per third of the lease TTL), instead of one write per cluster;
//   - one narrow read of every active cluster's version and lease, which
//     says which rows changed (by this replica or another), which leases
//     are free to take over, and which another replica took;
//   - one provider listing (memberLister), or else one Describe per
//     settled cluster, compared with what the last full pass saw;
//   - the scheduler's counts.json per settled cluster every
//     HealthInterval (half the heartbeat timeout by default), for
//     heartbeat loss and the idle timeout; the maximum lifetime and the
//     idle timeout are checked at every sweep.
//
// Anything that differs queues the cluster for a full reconcile pass,
// which writes what changed and settles it again. A settled cluster
// costs no store write and no store read of its own.

// memberLister is implemented by backends that report every cluster's
// members in one call, each member exactly as Describe would report it.
// The sweep then lists once per interval instead of describing each
// settled cluster.
type memberLister interface {
	ListMembers(ctx context.Context) ([]providers.Member, error)
}

// settled is what the last full pass of a settled cluster saw.
type settled struct {
	cl      *store.Cluster
	opts    Options // cl.Options, parsed
	members []memberKey
	checked time.Time // when its scheduler last answered a health check (monotonic)
}

// memberKey is what of a member the sweep compares between passes.
type memberKey struct {
	Name, Address, DashboardURL, Reason string
	Role                                providers.Role
	State                               providers.State
}

func memberKeys(ms []providers.Member) []memberKey {
	out := make([]memberKey, len(ms))
	for i, m := range ms {
		out[i] = memberKey{Name: m.Name, Address: m.Address, DashboardURL: m.DashboardURL, Reason: m.Reason, Role: m.Role, State: m.State}
	}
	slices.SortFunc(out, func(a, b memberKey) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// healthChecks bounds the counts.json requests the sweep has in flight.
const healthChecks = 16

// settle hands a cluster over to the sweep, as the full pass left it.
func (c *Core) settle(cl *store.Cluster, members []providers.Member) {
	s := &settled{cl: cl, members: memberKeys(members), checked: time.Now()}
	_ = json.Unmarshal([]byte(cl.Options), &s.opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled[cl.Name] = s
}

// unsettle takes a cluster back from the sweep (a full pass runs).
func (c *Core) unsettle(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.settled, name)
}

// requeue takes a settled cluster back and queues a full pass for it.
func (c *Core) requeue(name string) {
	c.unsettle(name)
	c.queue.Add(name)
}

// sweepEvery is the sweep's period: the poll interval, and often enough
// that leases are renewed three times per TTL.
func (c *Core) sweepEvery() time.Duration {
	return max(min(c.cfg.PollInterval, c.cfg.LeaseTTL/3), time.Millisecond)
}

// sweepLoop runs the sweep until ctx ends.
func (c *Core) sweepLoop(ctx context.Context) {
	t := time.NewTicker(c.sweepEvery())
	defer t.Stop()
	var renewed, resynced time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(renewed) >= c.cfg.LeaseTTL/3 {
			if err := c.store.RenewLeases(ctx, c.cfg.ReplicaID, c.cfg.LeaseTTL); err != nil {
				if ctx.Err() == nil {
					c.log.Warn("renew leases", "err", err)
				}
			} else {
				crashpoint.Hit(ctx, crashpoint.CoreLeasesRenewed)
				renewed = now
			}
		}
		resync := now.Sub(resynced) >= c.cfg.LeaseTTL/2
		if resync {
			resynced = now
		}
		c.sweep(ctx, resync)
	}
}

// sweep looks at every active cluster once; with resync it also queues
// the active clusters it holds that are not settled, as a safety net for
// a pass whose follow-up was lost.
func (c *Core) sweep(ctx context.Context, resync bool) {
	leases, err := c.store.ActiveLeases(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("sweep: list leases", "err", err)
		}
		return
	}
	type candidate struct {
		*settled
		health bool // its health check is due
	}
	now := time.Now()
	c.mu.Lock()
	var check []candidate
	settledBefore, matched := len(c.settled), 0
	var queue []string
	for _, l := range leases {
		s := c.settled[l.Name]
		if s != nil {
			matched++
		}
		switch {
		case l.Free():
			// Nobody holds it (its replica died, or let go): take it.
			queue = append(queue, l.Name)
			delete(c.settled, l.Name)
		case !l.Held(c.cfg.ReplicaID):
			delete(c.settled, l.Name) // another replica's now
		case s == nil:
			if resync {
				queue = append(queue, l.Name)
			}
		case s.cl.Version != l.Version:
			queue = append(queue, l.Name) // changed, here or by another replica
			delete(c.settled, l.Name)
		default:
			// Half a sweep early rather than a whole sweep late.
			due := now.Sub(s.checked) >= c.cfg.HealthInterval-c.sweepEvery()/2
			if due {
				s.checked = now
			}
			check = append(check, candidate{s, due})
		}
	}
	if matched < settledBefore {
		// Some settled cluster is no longer active: whoever ended it
		// cleaned up.
		seen := make(map[string]bool, len(leases))
		for _, l := range leases {
			seen[l.Name] = true
		}
		for name := range c.settled {
			if !seen[name] {
				delete(c.settled, name)
			}
		}
	}
	c.mu.Unlock()
	for _, name := range queue {
		c.queue.Add(name)
	}
	if len(check) == 0 {
		return
	}

	// Members: one listing when the backend can, else one Describe each.
	var listed map[string][]providers.Member
	if ml, ok := c.provider.(memberLister); ok {
		all, err := ml.ListMembers(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("sweep: list members", "err", err)
			}
			return
		}
		listed = make(map[string][]providers.Member, len(check))
		for _, m := range all {
			listed[m.Cluster] = append(listed[m.Cluster], m)
		}
	}
	// A few goroutines for all the checks rather than one for each: each
	// keeps the stack its first check grew.
	jobs := make(chan *settled)
	var wg sync.WaitGroup
	for range min(healthChecks, len(check)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs {
				c.checkHealth(ctx, s)
			}
		}()
	}
	for _, s := range check {
		if ctx.Err() != nil {
			break
		}
		var members []providers.Member
		if listed != nil {
			members = listed[s.cl.Name]
		} else {
			ms, err := c.provider.Describe(ctx, s.cl.Name)
			if err != nil {
				c.requeue(s.cl.Name) // the full pass retries and says why
				continue
			}
			members = ms
		}
		if !slices.Equal(memberKeys(members), s.members) {
			c.requeue(s.cl.Name)
			continue
		}
		if !s.health {
			if c.expiredWith(s.cl, s.opts) != "" {
				c.requeue(s.cl.Name)
			}
			continue
		}
		jobs <- s.settled
	}
	close(jobs)
	wg.Wait()
}

// checkHealth asks a settled cluster's scheduler for its counts and
// queues a full pass when anything needs doing: it did not answer (the
// full pass keeps the heartbeat clock), its workers changed, or it is due
// to stop.
func (c *Core) checkHealth(ctx context.Context, s *settled) {
	cl := s.cl
	counts, err := c.connectedWorkers(ctx, cl)
	if err != nil {
		if ctx.Err() == nil {
			c.requeue(cl.Name)
		}
		return
	}
	c.mu.Lock()
	c.answered[cl.Name] = c.now()
	c.mu.Unlock()
	if counts.Workers != cl.ReadyWorkers || c.expiredWith(cl, s.opts) != "" {
		c.requeue(cl.Name)
	}
}
