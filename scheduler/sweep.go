package scheduler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler/health"
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
	watch   *health.Watch // nil before the core runs
	st      *clusterState // the cluster's record (c.mu)
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
	s := &settled{cl: cl, opts: opts, members: memberKeys(members), checked: time.Now(), watch: c.health.Watch(cl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusters.settle(cl.Name, s)
	c.settles++
	return nil
}

// unsettle takes a cluster back from the sweep (a full pass runs): once
// it returns, no health check of the sweep's is in flight for it.
func (c *Core) unsettle(name string) {
	c.mu.Lock()
	var check *inflightCheck
	if s := c.clusters.unsettle(name); s != nil {
		check = s.checking
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
	r := &sweepRound{c: c, now: time.Now()}
	r.membersDue = r.now.Sub(c.membersChecked) >= watchedMembersEvery
	c.mu.Lock()
	resync = r.compareLeases(leases, scanned, resync)
	r.cnow = c.now()
	r.walkPolled()
	r.popSilent()
	r.popExpired()
	if r.membersDue {
		c.clusters.eachSettled(func(_ string, s *settled) {
			if s.onHeaps {
				r.check = append(r.check, sweepCandidate{settled: s, members: true})
			}
		})
	}
	c.mu.Unlock()
	for _, name := range r.queue {
		c.queue.Add(name)
	}
	r.retryWatches()
	if len(r.check) > 0 {
		r.checkSettled(ctx)
	}
	return resync
}

// sweepRound is what one sweep gathers under the core's lock, and then
// acts on.
type sweepRound struct {
	c          *Core
	now        time.Time // real time
	cnow       time.Time // the core's clock
	membersDue bool      // the streaming clusters' members are to be compared
	queue      []string  // clusters for a full pass
	check      []sweepCandidate
	retry      []*settled // polled long enough: try their streams again
	anyPolled  bool
	healthJobs int
}

// sweepCandidate is a settled cluster the sweep looks at after the lock.
type sweepCandidate struct {
	*settled
	health  bool // its health check is due
	members bool // its members are to be compared
}

// take queues a settled cluster for a full pass (c.mu).
func (r *sweepRound) take(name string) {
	c := r.c
	c.clusters.unsettle(name)
	r.queue = append(r.queue, name)
}

// compareLeases compares the settled clusters with a read of the leases
// (c.mu): those changed, free or another replica's now leave the sweep,
// and, with resync, the held ones not settled are queued. It says whether
// it resynced.
func (r *sweepRound) compareLeases(leases []store.ActiveLease, scanned, resync bool) bool {
	c := r.c
	// A kept read (not scanned) holds only leases held here (sweepLeases).
	if resync && !scanned && c.settles == c.settlesChecked && c.clusters.settledCount() == len(leases) && r.now.Sub(c.settledCompared) < leaseRescanEvery {
		resync = false
	}
	if !scanned && !resync {
		return resync
	}
	c.settlesChecked, c.settledCompared = c.settles, r.now
	settledBefore, matched := c.clusters.settledCount(), 0
	for _, l := range leases {
		s := c.clusters.settledOf(l.Name)
		if s != nil {
			matched++
		}
		switch {
		case l.Free():
			// Nobody holds it (its replica died, or let go): take it.
			r.take(l.Name)
		case !l.Held(c.cfg.ReplicaID):
			c.clusters.unsettle(l.Name) // another replica's now
		case s == nil:
			if resync {
				r.queue = append(r.queue, l.Name)
			}
		case s.cl.Version != l.Version:
			r.take(l.Name) // changed, here or by another replica
		}
	}
	if matched < settledBefore {
		// Some settled cluster is no longer active: whoever ended it
		// cleaned up.
		seen := make(map[string]bool, len(leases))
		for _, l := range leases {
			seen[l.Name] = true
		}
		c.clusters.eachSettled(func(name string, _ *settled) {
			if !seen[name] {
				c.clusters.unsettle(name)
			}
		})
	}
	return resync
}

// walkPolled looks at the settled clusters not on the due heaps (c.mu):
// a stream gone live puts its cluster on the heaps, a stream that failed
// queues a pass, and the polled ones are to be checked.
func (r *sweepRound) walkPolled() {
	c := r.c
	for name, s := range c.clusters.polled {
		if !s.current() {
			delete(c.clusters.polled, name) // it left the sweep
			continue
		}
		if w := s.watch; w != nil && r.watchedPolled(name, s) {
			continue
		}
		// Polled: its scheduler has no watch.
		r.anyPolled = true
		if w := s.watch; w != nil && w.RetryDue(r.now) {
			r.retry = append(r.retry, s)
		}
		// Half a sweep early rather than a whole sweep late.
		due := r.now.Sub(s.checked) >= c.cfg.HealthInterval-c.sweepEvery()/2
		if due {
			s.checked = r.now
			r.healthJobs++
		}
		r.check = append(r.check, sweepCandidate{settled: s, health: due, members: true})
	}
}

// watchedPolled takes a polled cluster by its watch's state (c.mu), and
// says whether that settled it; false leaves the cluster polled.
func (r *sweepRound) watchedPolled(name string, s *settled) bool {
	c := r.c
	w := s.watch
	switch w.State() {
	case health.Live:
		delete(c.clusters.polled, name)
		if n := w.Workers(); n >= 0 && n != s.cl.ReadyWorkers {
			r.take(name)
			return true
		}
		s.onHeaps = true
		c.silenceDue.add(w.Heard().Add(c.health.Silence()), s)
		last := s.st.lastBusy
		if at := c.nextExpiry(s.cl, s.opts, r.cnow, last, !last.IsZero()); !at.IsZero() {
			c.expiryDue.add(at, s)
		}
		return true
	case health.Dialing:
		if w.SilentFor(r.now) > c.health.Silence() {
			c.health.DropWatch(name, w)
			r.take(name)
		}
		return true
	case health.Ended:
		r.take(name)
		return true
	}
	return false
}

// popSilent looks at the streaming clusters whose silence allowance ran
// out since their last look (c.mu): a heartbeat since then pushes them
// on, else the full pass asks counts.json and keeps the heartbeat clock;
// the next settle opens a new watch.
func (r *sweepRound) popSilent() {
	c := r.c
	for {
		s, ok := c.silenceDue.popDue(r.now)
		if !ok {
			return
		}
		name, w := s.cl.Name, s.watch
		if !s.current() {
			continue
		}
		if w.State() != health.Live {
			r.take(name) // ended (its end queued a pass too)
			continue
		}
		if heard := w.Heard(); r.now.Sub(heard) <= c.health.Silence() {
			c.silenceDue.add(heard.Add(c.health.Silence()), s)
			continue
		}
		c.health.DropWatch(name, w)
		r.take(name)
	}
}

// popExpired looks at the streaming clusters whose lifetime or idle
// timeout may have run out (c.mu).
func (r *sweepRound) popExpired() {
	c := r.c
	for {
		s, ok := c.expiryDue.popDue(r.cnow)
		if !ok {
			return
		}
		name := s.cl.Name
		if !s.current() {
			continue
		}
		st := s.st
		if s.watch.Busy() {
			st.lastBusy = r.cnow // busy all along
		}
		last, seen := st.lastBusy, !st.lastBusy.IsZero()
		if c.expiredAt(s.cl, s.opts, r.cnow, last, seen) != "" {
			r.take(name)
			continue
		}
		if at := c.nextExpiry(s.cl, s.opts, r.cnow, last, seen); !at.IsZero() {
			c.expiryDue.add(at, s)
		}
	}
}

// retryWatches opens new watches for polled clusters whose streams are to
// be tried again.
func (r *sweepRound) retryWatches() {
	c := r.c
	for _, s := range r.retry {
		w := c.health.Watch(s.cl)
		c.mu.Lock()
		if s.current() {
			s.watch = w
		}
		c.mu.Unlock()
	}
}

// checkSettled compares the candidates' members with the provider's and
// runs their due health checks.
func (r *sweepRound) checkSettled(ctx context.Context) {
	c := r.c
	listed, skipMembers, ok := r.listSettledMembers(ctx)
	if !ok {
		return
	}
	// A few goroutines for all the checks rather than one for each: each
	// keeps the stack its first check grew.
	jobs := make(chan *settled)
	var wg sync.WaitGroup
	for range min(healthChecks, r.healthJobs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs {
				c.checkHealth(ctx, s)
			}
		}()
	}
	for _, s := range r.check {
		if ctx.Err() != nil {
			break
		}
		if s.members && !skipMembers && !r.sameMembers(ctx, s.settled, listed) {
			c.requeue(s.cl.Name)
			continue
		}
		if !s.health {
			if c.expiredSettled(s.settled) != "" {
				c.requeue(s.cl.Name)
			}
			continue
		}
		jobs <- s.settled
	}
	close(jobs)
	wg.Wait()
}

// listSettledMembers lists every cluster's members in one call when the
// backend can and the sweep needs them (listed nil: describe each). skip
// says the comparison waits for the next sweep; ok false that the sweep
// is ending.
func (r *sweepRound) listSettledMembers(ctx context.Context) (listed map[string][]providers.Member, skip, ok bool) {
	c := r.c
	lastChecked := c.membersChecked
	if r.membersDue {
		c.membersChecked = r.now
	}
	ml, can := c.provider.(providers.MemberLister)
	if !can || !(r.anyPolled || r.membersDue) {
		return nil, false, true
	}
	all, err := ml.ListMembers(ctx)
	if ctx.Err() != nil {
		return nil, false, false
	}
	if err != nil {
		// A failed listing (a throttled cloud API) says nothing of
		// any cluster: the comparison waits for the next sweep, and
		// the health checks go on. Sending every cluster to a full
		// pass would describe each, at the worst moment.
		c.log.Warn("sweep: list members; compared at the next sweep", "err", err)
		c.membersChecked = lastChecked
		return nil, true, true
	}
	listed = make(map[string][]providers.Member, len(r.check))
	for _, m := range all {
		listed[m.Cluster] = append(listed[m.Cluster], m)
	}
	return listed, false, true
}

// sameMembers says whether a settled cluster's members are as its last
// full pass saw them: from the listing, else described.
func (r *sweepRound) sameMembers(ctx context.Context, s *settled, listed map[string][]providers.Member) bool {
	c := r.c
	var members []providers.Member
	if listed != nil {
		members = listed[s.cl.Name]
	} else {
		ms, err := c.provider.Describe(ctx, s.cl.Name)
		if err != nil {
			return false // the full pass retries and says why
		}
		members = ms
	}
	return slices.Equal(memberKeys(members), s.members)
}

// expiredSettled is expired for a settled cluster.
func (c *Core) expiredSettled(s *settled) string {
	c.mu.Lock()
	last := s.st.lastBusy
	c.mu.Unlock()
	return c.expiredAt(s.cl, s.opts, c.now(), last, !last.IsZero())
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
	if c.health.Watching() > 0 {
		held := make(map[string]bool, len(leases))
		for _, l := range leases {
			held[l.Name] = l.Held(c.cfg.ReplicaID)
		}
		c.health.KeepOnly(func(name string) bool { return held[name] })
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
	if !s.current() {
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
	expired := err == nil && c.expiredSettled(s) != ""
	c.mu.Lock()
	s.checking = nil
	ours := s.current()
	if ours && err == nil {
		s.st.answered = c.now()
	}
	c.mu.Unlock()
	switch {
	case !ours || checkCtx.Err() != nil:
		// Taken back or shutting down: the full pass has it.
	case err != nil, counts.Workers != cl.ReadyWorkers, expired:
		c.requeue(cl.Name)
	}
}
