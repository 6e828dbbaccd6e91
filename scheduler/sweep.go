package scheduler

import (
	"context"
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
//   - the store's change count (store.DB.Changes), one small read: only
//     when it moved, or a lease is held elsewhere or free (those lapse with
//     time), does the sweep read every active cluster's version and lease,
//     which says which rows changed (by this replica or another), which
//     leases are free to take over, and which another replica took;
//   - each settled cluster's scheduler pushes its counts (watch.go): a
//     heartbeat line every half heartbeat timeout, its counts when they
//     change; the sweep only looks at what the streams last said, and at
//     the maximum lifetime and idle timeout;
//   - a scheduler without the stream (countsPool) is asked for its
//     counts.json every HealthInterval (half the heartbeat timeout by
//     default), and its members compared with the provider's at every
//     sweep; those of streaming schedulers are compared every
//     watchedMembersEvery, as a backstop: a lost worker shows in the
//     counts, a lost scheduler ends its stream;
//   - members come from one provider listing (providers.MemberLister), or else one
//     Describe per settled cluster, compared with what the last full pass
//     saw.
//
// Anything that differs queues the cluster for a full reconcile pass,
// which writes what changed and settles it again. A settled cluster
// costs no store write and no store read of its own.

// settled is what the last full pass of a settled cluster saw.
type settled struct {
	watch   *clusterWatch // nil before the core runs
	cl      *store.Cluster
	opts    Options // cl.Options, parsed
	members []memberKey
	checked time.Time // when its scheduler last answered a health check (monotonic)
	onHeaps bool      // its stream is live and it is on the due heaps (c.mu)
	// checking is the health check in flight (c.mu): a full pass taking
	// the cluster back cancels it and waits, so that no counts.json
	// request reaches a scheduler that the pass is stopping.
	checking *inflightCheck
}

type inflightCheck struct {
	cancel context.CancelFunc
	done   chan struct{}
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
func (c *Core) settle(cl *store.Cluster, members []providers.Member) error {
	opts, err := optionsOf(cl)
	if err != nil {
		return err
	}
	s := &settled{cl: cl, opts: opts, members: memberKeys(members), checked: time.Now(), watch: c.health.ensure(cl)}
	if s.watch != nil && s.watch.State() == watchLive {
		c.dash.Drop(cl.Name) // the pass's counts.json connection: the stream serves
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled[cl.Name] = s
	c.polled[cl.Name] = s // until the sweep sees its stream live
	c.settles++
	return nil
}

// unsettle takes a cluster back from the sweep (a full pass runs): once
// it returns, no health check of the sweep's is in flight for it.
func (c *Core) unsettle(name string) {
	c.mu.Lock()
	var check *inflightCheck
	if s := c.settled[name]; s != nil {
		check = s.checking
		delete(c.settled, name)
	}
	c.mu.Unlock()
	if check != nil {
		check.cancel()
		<-check.done
	}
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
		if c.sweep(ctx, now.Sub(resynced) >= c.cfg.LeaseTTL/2) {
			resynced = now
		}
	}
}

// sweep looks at every active cluster once; with resync it also queues
// the active clusters it holds that are not settled, as a safety net for
// a pass whose follow-up was lost. It reports whether it resynced: a
// resync it found nothing for stays due.
//
// Between reads of the leases, every settled cluster is among those the
// last read says are held here: settling one that was not means it was
// created, or its lease taken, both of which move the store's change
// count and so force a read. So when no cluster was settled since the
// sweep last compared the settled ones with a read (a pass may settle one
// with a version older than the read's, written by another replica while
// it ran), and as many are settled as the read says are held here, none
// held is unsettled and none settled is stale: the resync over the same
// read is skipped. At 10,000 idle clusters it was a fifth of the
// gateway's CPU (a map lookup and a record per cluster, every
// LeaseTTL/2). Should that ever not hold, the resync stays due and runs
// with the next read, and over the kept read at least every
// leaseRescanEvery (a store whose count is exact is not read again until
// something changes).
func (c *Core) sweep(ctx context.Context, resync bool) bool {
	leases, scanned, err := c.sweepLeases(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("sweep: list leases", "err", err)
		}
		return false
	}
	type candidate struct {
		*settled
		health  bool // its health check is due
		members bool // its members are to be compared
	}
	now := time.Now()
	membersDue := now.Sub(c.membersChecked) >= watchedMembersEvery
	c.mu.Lock()
	// A kept read (not scanned) holds only leases held here (sweepLeases).
	if resync && !scanned && c.settles == c.settlesChecked && len(c.settled) == len(leases) && now.Sub(c.settledCompared) < leaseRescanEvery {
		resync = false
	}
	var queue []string
	if scanned || resync {
		c.settlesChecked, c.settledCompared = c.settles, now
		settledBefore, matched := len(c.settled), 0
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
	}
	var check []candidate
	var retry []*settled // polled long enough: try their streams again
	anyPolled, healthJobs := false, 0
	nowNano, cnow := now.UnixNano(), c.now()
	for name, s := range c.polled {
		if c.settled[name] != s {
			delete(c.polled, name) // it left the sweep
			continue
		}
		if w := s.watch; w != nil {
			switch w.State() {
			case watchLive:
				delete(c.polled, name)
				if n := w.workers.Load(); n >= 0 && int(n) != s.cl.ReadyWorkers {
					delete(c.settled, name)
					queue = append(queue, name)
					continue
				}
				s.onHeaps = true
				c.silenceDue.add(time.Unix(0, w.heard.Load()).Add(c.health.silence), s)
				last, seen := c.active[name]
				if at := c.nextExpiry(s.cl, s.opts, cnow, last, seen); !at.IsZero() {
					c.expiryDue.add(at, s)
				}
				continue
			case watchDialing:
				if w.silentFor(now) > c.health.silence {
					c.health.dropIf(name, w)
					delete(c.settled, name)
					queue = append(queue, name)
				}
				continue
			case watchEnded:
				delete(c.settled, name)
				queue = append(queue, name)
				continue
			}
		}
		// Polled: its scheduler has no watch.
		anyPolled = true
		if w := s.watch; w != nil && w.State() == watchUnsupported && now.Sub(w.made) > watchRetry {
			retry = append(retry, s)
		}
		// Half a sweep early rather than a whole sweep late.
		due := now.Sub(s.checked) >= c.cfg.HealthInterval-c.sweepEvery()/2
		if due {
			s.checked = now
			healthJobs++
		}
		check = append(check, candidate{settled: s, health: due, members: true})
	}
	// Streaming clusters whose silence allowance ran out since their last
	// look: a heartbeat since then pushes them on, else the full pass asks
	// counts.json and keeps the heartbeat clock; the next settle opens a
	// new watch.
	for {
		s, ok := c.silenceDue.popDue(now)
		if !ok {
			break
		}
		name, w := s.cl.Name, s.watch
		if c.settled[name] != s {
			continue
		}
		if w.State() != watchLive {
			delete(c.settled, name) // ended (its end queued a pass too)
			queue = append(queue, name)
			continue
		}
		if heard := w.heard.Load(); time.Duration(nowNano-heard) <= c.health.silence {
			c.silenceDue.add(time.Unix(0, heard).Add(c.health.silence), s)
			continue
		}
		c.health.dropIf(name, w)
		delete(c.settled, name)
		queue = append(queue, name)
	}
	// Those whose lifetime or idle timeout may have run out.
	for {
		s, ok := c.expiryDue.popDue(cnow)
		if !ok {
			break
		}
		name := s.cl.Name
		if c.settled[name] != s {
			continue
		}
		if s.watch.busy.Load() {
			c.active[name] = cnow // busy all along
		}
		last, seen := c.active[name]
		if c.expiredAt(s.cl, s.opts, cnow, last, seen) != "" {
			delete(c.settled, name)
			queue = append(queue, name)
			continue
		}
		if at := c.nextExpiry(s.cl, s.opts, cnow, last, seen); !at.IsZero() {
			c.expiryDue.add(at, s)
		}
	}
	if membersDue {
		for _, s := range c.settled {
			if s.onHeaps {
				check = append(check, candidate{settled: s, members: true})
			}
		}
	}
	c.mu.Unlock()
	for _, name := range queue {
		c.queue.Add(name)
	}
	for _, s := range retry {
		w := c.health.ensure(s.cl)
		c.mu.Lock()
		if c.settled[s.cl.Name] == s {
			s.watch = w
		}
		c.mu.Unlock()
	}
	if len(check) == 0 {
		return resync
	}
	listMembers := anyPolled || membersDue
	lastChecked := c.membersChecked
	if membersDue {
		c.membersChecked = now
	}

	// Members: one listing when the backend can, else one Describe each.
	var listed map[string][]providers.Member
	skipMembers := false
	if ml, ok := c.provider.(providers.MemberLister); ok && listMembers {
		all, err := ml.ListMembers(ctx)
		if ctx.Err() != nil {
			return resync
		}
		if err != nil {
			// A failed listing (a throttled cloud API) says nothing of
			// any cluster: the comparison waits for the next sweep, and
			// the health checks go on. Sending every cluster to a full
			// pass would describe each, at the worst moment.
			c.log.Warn("sweep: list members; compared at the next sweep", "err", err)
			c.membersChecked = lastChecked
			skipMembers = true
		} else {
			listed = make(map[string][]providers.Member, len(check))
			for _, m := range all {
				listed[m.Cluster] = append(listed[m.Cluster], m)
			}
		}
	}
	// A few goroutines for all the checks rather than one for each: each
	// keeps the stack its first check grew.
	jobs := make(chan *settled)
	var wg sync.WaitGroup
	for range min(healthChecks, healthJobs) {
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
		if s.members && !skipMembers {
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
			if !slices.Equal(memberKeys(members), s.settled.members) {
				c.requeue(s.cl.Name)
				continue
			}
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
	return resync
}

// watchedMembersEvery is how often the members of clusters whose
// schedulers push their counts are compared with the provider's: a lost
// worker shows in the counts at once, and a lost scheduler ends its
// watch, so the listing is only the backstop.
const watchedMembersEvery = time.Minute

// leaseRescanEvery bounds how long the sweep trusts an unchanged count
// that is not exact: the safety net for a PostgreSQL write whose process
// died between its commit and its count, and for the writes of a replica
// of an older release, which keeps no count, during a rolling upgrade.
// It also bounds how long the resync over a kept read may be skipped.
const leaseRescanEvery = time.Minute

// changeCounter is implemented by stores that say cheaply whether any
// cluster row changed (store.DB.Changes).
type changeCounter interface {
	Changes(ctx context.Context) (int64, error)
}

// exactCounter is implemented by stores whose change count moves with
// every write to a cluster row, whoever makes it (store.DB on SQLite): an
// unchanged count is proof, and needs no periodic full read behind it.
type exactCounter interface {
	ChangesExact() bool
}

// sweepLeases reads every active cluster's version and lease, or, when
// the store says no cluster row changed since the last read and nothing
// in that read can change with time alone, returns that read again:
// scanned says which. An idle gateway's sweep then costs one small read,
// not one row per cluster. It reads anew when any lease was free or held
// by another replica (those lapse with time), on the sweep after one that
// saw a change (on PostgreSQL a write's count comes after its commit, so
// a read may miss a write that is counted just after it), and, unless the
// count is exact, at least every leaseRescanEvery. At 10,000 clusters that
// read was a sixth of an idle gateway's CPU on SQLite.
func (c *Core) sweepLeases(ctx context.Context) (leases []store.ActiveLease, scanned bool, err error) {
	cc, ok := c.store.(changeCounter)
	var n int64
	if ok {
		if n, err = cc.Changes(ctx); err != nil {
			ok = false
		}
	}
	ec, exact := c.store.(exactCounter)
	exact = exact && ec.ChangesExact()
	now := time.Now()
	c.leasesMu.Lock()
	last := c.leases
	c.leasesMu.Unlock()
	if ok && last.valid && n == last.changes && !last.again && (exact || now.Sub(last.at) < leaseRescanEvery) {
		return last.list, false, nil
	}
	leases, err = c.store.ActiveLeases(ctx)
	if err != nil {
		return nil, false, err
	}
	timed := false
	for _, l := range leases {
		if l.Free() || !l.Held(c.cfg.ReplicaID) {
			timed = true
			break
		}
	}
	c.leasesMu.Lock()
	c.leases = leaseRead{list: leases, changes: n, at: now, counted: ok, valid: ok && !timed, again: n != last.changes}
	c.leasesMu.Unlock()
	if c.health.Len() > 0 {
		held := make(map[string]bool, len(leases))
		for _, l := range leases {
			held[l.Name] = l.Held(c.cfg.ReplicaID)
		}
		c.health.keepOnly(func(name string) bool { return held[name] })
	}
	return leases, true, nil
}

// activeLeases is every active cluster's lease: the sweep's last read
// when the store's change count says no cluster row changed since (one
// small read instead of one row per cluster), else a new read. Lapsed
// leases are as they were then; callers that need only which clusters
// are active may use it.
func (c *Core) activeLeases(ctx context.Context) ([]store.ActiveLease, error) {
	if cc, ok := c.store.(changeCounter); ok {
		if n, err := cc.Changes(ctx); err == nil {
			c.leasesMu.Lock()
			last := c.leases
			c.leasesMu.Unlock()
			if last.counted && !last.again && n == last.changes {
				return last.list, nil
			}
		}
	}
	return c.store.ActiveLeases(ctx)
}

// leaseRead is the sweep's last read of the active leases.
type leaseRead struct {
	list    []store.ActiveLease
	changes int64     // the store's change count before it
	at      time.Time // when
	counted bool      // changes was read
	valid   bool      // it may be returned again while the count holds
	again   bool      // read anew next time regardless (a change was seen)
}

// checkHealth asks a settled cluster's scheduler for its counts and
// queues a full pass when anything needs doing: it did not answer (the
// full pass keeps the heartbeat clock), its workers changed, or it is due
// to stop.
func (c *Core) checkHealth(ctx context.Context, s *settled) {
	cl := s.cl
	c.mu.Lock()
	if c.settled[cl.Name] != s {
		c.mu.Unlock()
		return // a full pass took it back since the sweep listed it
	}
	checkCtx, cancel := context.WithCancel(ctx)
	check := &inflightCheck{cancel: cancel, done: make(chan struct{})}
	s.checking = check
	c.mu.Unlock()
	defer close(check.done)
	defer cancel()

	counts, err := c.connectedWorkers(checkCtx, cl)
	expired := err == nil && c.expiredWith(cl, s.opts) != ""
	c.mu.Lock()
	s.checking = nil
	ours := c.settled[cl.Name] == s
	if ours && err == nil {
		c.answered[cl.Name] = c.now()
	}
	c.mu.Unlock()
	switch {
	case !ours || checkCtx.Err() != nil:
		// Taken back or shutting down: the full pass has it.
	case err != nil, counts.Workers != cl.ReadyWorkers, expired:
		c.requeue(cl.Name)
	}
}
