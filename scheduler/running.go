package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/store"
)

// A running cluster's pass is a list of small steps, each of which looks
// at one thing (its members, its workers, its scheduler's health, its
// expiry, adaptive scaling, its readiness) and returns a result: when to
// look at the cluster again, and whether the pass ends there. The pass
// runs them in order until one ends it, and takes the earliest wake-up
// any of them asked for.

// result is what a step of a pass decides.
type result struct {
	// requeueAfter is when to look at the cluster again (0: only when
	// something changes).
	requeueAfter time.Duration
	// done ends the pass here.
	done bool
}

// goOn lets the pass go on to its next step.
var goOn = result{}

// requeue ends the pass and looks at the cluster again after d (0: only
// when something changes).
func requeue(d time.Duration) result { return result{requeueAfter: d, done: true} }

// earliest is the sooner of two wake-ups, 0 being none.
func earliest(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// runningPass is what the steps of a running cluster's pass learn and
// hand on.
type runningPass struct {
	c       *Core
	cl      *store.Cluster
	members []providers.Member
	open    map[string]bool // members whose ledger entries are open
	alive   []providers.Member
	counts  health.Counts
}

// runningStep is one step of a running cluster's pass.
type runningStep func(ctx context.Context) (result, error)

func (c *Core) reconcileRunning(ctx context.Context, cl *store.Cluster) (time.Duration, error) {
	p := &runningPass{c: c, cl: cl}
	steps := [...]runningStep{
		p.describe,
		p.ledger,
		p.workerExits,
		p.scale,
		p.heartbeat,
		p.expiry,
		p.adaptive,
		p.ready,
	}
	var after time.Duration
	for _, step := range steps {
		r, err := step(ctx)
		after = earliest(after, r.requeueAfter)
		if err != nil || r.done {
			return after, err
		}
	}
	return after, nil
}

// describe describes the cluster's members, fails it when its scheduler
// is gone, and follows a scheduler that moved.
func (p *runningPass) describe(ctx context.Context) (result, error) {
	c := p.c
	members, err := c.provider.Describe(ctx, p.cl.Name)
	if err != nil {
		return requeue(time.Second), err
	}
	p.members = members
	sched := findScheduler(members)
	if sched == nil || sched.State == providers.StateStopped {
		reason := "the scheduler is gone"
		if sched != nil && sched.Reason != "" {
			reason = "the scheduler stopped: " + sched.Reason
		}
		return requeue(0), c.fail(ctx, p.cl, reason)
	}
	if sched.Address != "" && (sched.Address != p.cl.SchedulerAddress || sched.DashboardURL != p.cl.DashboardAddress) {
		// A re-adopted or restarted scheduler may have moved.
		p.cl, err = c.update(ctx, p.cl.Name, func(x *store.Cluster) (store.Event, error) {
			x.SchedulerAddress, x.DashboardAddress = sched.Address, sched.DashboardURL
			return store.Event{}, nil
		})
		if err != nil {
			return requeue(time.Second), err
		}
	}
	c.router.SetRoute(p.cl.Name, p.cl.Owner, p.cl.SchedulerAddress, p.cl.DashboardAddress, p.cl.TLSCert, p.cl.TLSKey)
	if wr, ok := c.router.(WorkerRouter); ok {
		// Worker pages go only where the provider says the cluster's own
		// running workers serve.
		workers := map[string]string{}
		for _, m := range members {
			if m.Role == providers.RoleWorker && m.State == providers.StateRunning && m.DashboardURL != "" {
				workers[m.Name] = m.DashboardURL
			}
		}
		wr.SetWorkers(p.cl.Name, workers)
	}
	return goOn, nil
}

// ledger brings the usage ledger in line with the members, before
// anything starts or stops: members started in this pass are not in
// p.members yet.
func (p *runningPass) ledger(ctx context.Context) (result, error) {
	c := p.c
	cl, err := c.adoptLegacy(ctx, p.cl, p.members)
	if errors.Is(err, errStale) {
		return requeue(1), nil
	} else if err != nil {
		return requeue(time.Second), err
	}
	p.cl = cl
	if p.open, err = c.syncLedger(ctx, cl, p.members); err != nil {
		return requeue(time.Second), err
	}
	return goOn, nil
}

// workerExits counts the workers that exited on their own (failing the
// cluster past the restart limit), stops again those whose stop is in the
// ledger, and keeps the rest as the alive workers.
func (p *runningPass) workerExits(ctx context.Context) (result, error) {
	c := p.c
	cl := p.cl
	for _, m := range p.members {
		if m.Role != providers.RoleWorker {
			continue
		}
		if m.State == providers.StateStopped {
			if r, err := p.workerExited(ctx, m); err != nil || r.done {
				return r, err
			}
			continue
		}
		if !p.open[m.Name] {
			// Its stop is in the ledger (recorded at the intent) but it
			// still runs: a stop that failed, or a crash in between. Stop
			// it again, and do not count it as one of the wanted workers.
			if err := c.provider.StopWorker(ctx, cl.Name, m.Name); err != nil {
				return requeue(time.Second), err
			}
			continue
		}
		p.alive = append(p.alive, m)
	}
	return goOn, nil
}

// workerExited takes a stopped worker: one stopped on request carries no
// reason; one that exited on its own is counted once, however often the
// backend reports it.
func (p *runningPass) workerExited(ctx context.Context, m providers.Member) (result, error) {
	c, cl := p.c, p.cl
	if m.Reason == "" || !c.countExit(cl.Name, m.Name) {
		return goOn, nil
	}
	_ = c.provider.StopWorker(ctx, cl.Name, m.Name) // let the backend forget it
	if table, ok := images.MismatchIn(m.Reason); ok {
		// Replacements would run the same image: fail at once.
		return requeue(0), c.fail(ctx, cl, fmt.Sprintf("%s runs other software than the client:\n%s", m.Name, table))
	}
	n := c.exitCount(cl.Name)
	c.log.Warn("worker exited", "cluster", cl.Name, "worker", m.Name, "reason", firstLine(m.Reason))
	c.event(ctx, cl.Name, "worker-exited", m.Name+": "+m.Reason)
	if n > c.cfg.WorkerRestarts {
		return requeue(0), c.fail(ctx, cl, fmt.Sprintf("workers keep exiting (%d exits; the limit is %d). Last: %s", n, c.cfg.WorkerRestarts, m.Reason))
	}
	return goOn, nil
}

// scale starts the missing workers or stops the extra ones.
func (p *runningPass) scale(ctx context.Context) (result, error) {
	if missing := p.cl.DesiredWorkers - len(p.alive); missing > 0 {
		return p.startWorkers(ctx, missing)
	} else if extra := len(p.alive) - p.cl.DesiredWorkers; extra > 0 {
		return p.stopWorkers(ctx, extra)
	}
	return goOn, nil
}

// startWorkers starts missing workers. It records their names before
// starting anything: a crash between the two can then never start a
// worker twice under one name.
func (p *runningPass) startWorkers(ctx context.Context, missing int) (result, error) {
	c := p.c
	first := p.cl.NextWorkerSeq
	names := make([]string, 0, missing)
	for seq := first; seq < first+missing; seq++ {
		names = append(names, "worker-"+strconv.Itoa(seq))
	}
	cl, err := c.update(ctx, p.cl.Name, func(x *store.Cluster) (store.Event, error) {
		if x.Status != store.Running || x.NextWorkerSeq != first {
			return store.Event{}, errStale
		}
		x.NextWorkerSeq += missing
		return store.Event{Ledger: ledgerStart(shapeOf(x).Worker, names...)}, nil
	})
	if errors.Is(err, errStale) {
		return requeue(1), nil
	}
	if err != nil {
		return requeue(time.Second), err
	}
	p.cl = cl
	crashpoint.Hit(ctx, crashpoint.CoreWorkersNamed)
	spec, err := c.spec(cl)
	if err != nil {
		return requeue(0), err
	}
	for _, w := range names {
		if err := c.provider.StartWorker(ctx, spec, w, cl.SchedulerAddress); err != nil {
			return requeue(0), c.fail(ctx, cl, fmt.Sprintf("could not start %s: %v", w, err))
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkerLaunched)
	}
	return goOn, nil
}

// stopWorkers stops extra workers, the newest first: the oldest hold the
// most data.
func (p *runningPass) stopWorkers(ctx context.Context, extra int) (result, error) {
	c := p.c
	alive := p.alive
	sort.Slice(alive, func(i, j int) bool { return workerSeq(alive[i].Name) > workerSeq(alive[j].Name) })
	for _, m := range alive[:extra] {
		// The ledger stops at the intent, as it starts at one: a crash
		// after it only lets the stop happen later, and a member the
		// backend no longer lists is then never in doubt.
		if err := c.ledgerClosed(ctx, p.cl.Name, m.Name, time.Time{}); err != nil {
			return requeue(time.Second), err
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkerStopRecorded)
		if err := c.provider.StopWorker(ctx, p.cl.Name, m.Name); err != nil {
			return requeue(time.Second), err
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkerStopped)
	}
	return goOn, nil
}

// heartbeat asks the scheduler for its counts (the heartbeat clock).
func (p *runningPass) heartbeat(ctx context.Context) (result, error) {
	c := p.c
	cl := p.cl
	counts, err := c.connectedWorkers(ctx, cl)
	if err != nil && outOfDescriptors(err) {
		// The gateway's own shortage says nothing of the scheduler: it is
		// not counted as silence, and the check is tried again.
		c.log.Warn("health check: the gateway has no file descriptor left (raise its limit)", "cluster", cl.Name, "err", err)
		c.markAnswered(cl.Name)
		return requeue(c.cfg.PollInterval), nil
	}
	if err != nil {
		return p.notAnswering(ctx, err)
	}
	c.markAnswered(cl.Name)
	p.counts = counts
	return goOn, nil
}

// markAnswered sets the cluster's heartbeat clock to now.
func (c *Core) markAnswered(name string) {
	c.mu.Lock()
	st := c.clusters.ensure(name)
	st.answered, st.unanswered = c.now(), 0
	c.mu.Unlock()
}

// notAnswering takes a scheduler whose process lives but does not answer
// (hung, overloaded, partitioned): it is failed after the heartbeat
// timeout, and its phase says so meanwhile.
func (p *runningPass) notAnswering(ctx context.Context, err error) (result, error) {
	c, cl := p.c, p.cl
	c.mu.Lock()
	st := c.clusters.ensure(cl.Name)
	if st.answered.IsZero() {
		st.answered = c.now()
	}
	// Its stream's last line counts as an answer too (heartbeats are
	// kept on the stream, not here: see watchLine).
	if heard, ok := c.health.LastHeard(cl.Name); ok {
		if at := c.now().Add(-time.Since(heard)); at.After(st.answered) {
			st.answered = at
		}
	}
	since := st.answered
	c.mu.Unlock()
	silent := c.now().Sub(since)
	if silent >= c.cfg.HeartbeatTimeout {
		return requeue(0), c.fail(ctx, cl, fmt.Sprintf("the scheduler stopped answering (nothing for %s: %v)", silent.Round(time.Second), err))
	}
	// Say so while it lasts: the phase shows in list and show.
	if phase := "scheduler not answering since " + since.UTC().Format("15:04:05"); cl.Phase != phase {
		_, _ = c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
			if x.Status != store.Running {
				return store.Event{}, errStale
			}
			x.Phase = phase
			return store.Event{}, nil
		})
	}
	c.log.Debug("scheduler not answering", "cluster", cl.Name, "err", err)
	return requeue(c.silentWait(cl.Name, silent)), nil
}

// silentWait is how long to wait before asking again a scheduler that has
// not answered for silent: a fifth of the poll interval at first, doubling
// with each pass in a row without an answer up to the poll interval, so
// that a stuck cluster's passes (each a Describe, three reads on Fargate)
// thin out; never past the heartbeat timeout, so that the failure comes
// when it is due. An answer starts it over (markAnswered).
func (c *Core) silentWait(name string, silent time.Duration) time.Duration {
	c.mu.Lock()
	st := c.clusters.ensure(name)
	n := st.unanswered
	st.unanswered++
	c.mu.Unlock()
	poll := c.cfg.PollInterval
	wait := poll / 5
	for ; n > 0 && wait < poll; n-- {
		wait *= 2
	}
	wait = min(wait, poll)
	if left := c.cfg.HeartbeatTimeout - silent; left > 0 && left < wait {
		wait = left
	}
	return max(wait, 1)
}

// expiry stops a cluster idle past its idle timeout or past its
// maximum lifetime.
func (p *runningPass) expiry(ctx context.Context) (result, error) {
	c := p.c
	why, err := c.expired(p.cl)
	if err != nil {
		return requeue(0), err
	}
	if why != "" {
		c.log.Info("stopping cluster", "cluster", p.cl.Name, "why", why)
		return requeue(1), c.Stop(ctx, p.cl.Owner, p.cl.Name, why)
	}
	return goOn, nil
}

// adaptive follows the scheduler's own estimate of the workers it
// needs.
func (p *runningPass) adaptive(ctx context.Context) (result, error) {
	c := p.c
	if !p.cl.Adaptive {
		return goOn, nil
	}
	if changed, err := c.adapt(ctx, p.cl, p.counts); err != nil {
		return requeue(time.Second), err
	} else if changed {
		return requeue(1), nil
	}
	return goOn, nil
}

// ready records the ready workers and the phase, and says when to look
// again: soon while workers come up, often for adaptive scaling, else
// never, the cluster being settled for the sweep to watch.
func (p *runningPass) ready(ctx context.Context) (result, error) {
	c := p.c
	cl, ready := p.cl, p.counts.Workers
	phase := workerPhase(ready, cl.DesiredWorkers)
	if ready != cl.ReadyWorkers || phase != cl.Phase {
		updated, err := c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
			if x.Status != store.Running {
				return store.Event{}, errStale
			}
			x.ReadyWorkers, x.Phase = ready, workerPhase(ready, x.DesiredWorkers)
			return store.Event{}, nil
		})
		if errors.Is(err, errStale) {
			return requeue(1), nil
		}
		if err != nil {
			return requeue(time.Second), err
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkersReadyRecorded)
		cl = updated
	}
	if ready != cl.DesiredWorkers {
		return requeue(c.startPoll(c.now().Sub(cl.CreatedAt), 250*time.Millisecond)), nil
	}
	if cl.Adaptive {
		return requeue(min(c.cfg.PollInterval, time.Second)), nil // follow demand closely
	}
	// Nothing to do until something changes: the sweep watches it.
	return requeue(0), c.settle(cl, p.members)
}
