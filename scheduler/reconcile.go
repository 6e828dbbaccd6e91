package scheduler

// The reconcile loop's pass over one cluster, by its stored status
// (running.go has a running cluster's steps), and what ends a cluster.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/store"
)

func (c *Core) spec(cl *store.Cluster) (providers.ClusterSpec, error) {
	o, err := optionsOf(cl)
	if err != nil {
		return providers.ClusterSpec{}, err
	}
	shape := shapeOf(cl)
	return providers.ClusterSpec{
		Name: cl.Name, Owner: cl.Owner, GatewayID: c.cfg.GatewayID,
		TLSCert: cl.TLSCert, TLSKey: cl.TLSKey,
		DashboardPrefix: "/clusters/" + cl.Name,
		WorkerThreads:   o.WorkerThreads,
		WorkerMemory:    o.WorkerMemoryBytes(),
		Scheduler:       machineFrom(shape.Scheduler),
		Worker:          machineFrom(shape.Worker),
		Region:          shape.Region,
		Spot:            o.Spot,
		Image:           o.Image,
		EnvExpect:       envExpect(o),
		Env:             o.Environ,
	}, nil
}

// reconcile moves one cluster one or more steps towards its goal and says
// when to look at it again (0: only when something changes).
func (c *Core) reconcile(ctx context.Context, name string) (time.Duration, error) {
	c.unsettle(name)
	cl, err := c.store.GetCluster(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		c.router.DeleteRoute(name)
		return 0, nil
	}
	if err != nil {
		return time.Second, err
	}
	switch cl.Status {
	case store.Pending:
		_, err := c.update(ctx, name, func(x *store.Cluster) (store.Event, error) {
			if x.Status != store.Pending {
				return store.Event{}, errStale
			}
			x.Status, x.Phase = store.Starting, "starting scheduler"
			// The ledger's clock starts before the machine does: a crash
			// between the two then never leaves a machine unaccounted.
			return store.Event{Kind: "starting", Message: "starting the scheduler on " + c.provider.Name(),
				Ledger: ledgerStart(shapeOf(x).Scheduler, schedulerMember)}, nil
		})
		if err != nil && !errors.Is(err, errStale) {
			return time.Second, err
		}
		if err == nil {
			crashpoint.Hit(ctx, crashpoint.CoreStartRecorded)
		}
		return 1, nil // at once
	case store.Starting:
		return c.reconcileStarting(ctx, cl)
	case store.Running:
		return c.reconcileRunning(ctx, cl)
	case store.Stopping:
		return c.reconcileStopping(ctx, cl)
	default: // STOPPED, FAILED: nothing runs; make sure nothing routes there
		c.router.DeleteRoute(name)
		return 0, nil
	}
}

func (c *Core) reconcileStarting(ctx context.Context, cl *store.Cluster) (time.Duration, error) {
	if age := c.now().Sub(cl.CreatedAt); age > c.cfg.StartTimeout {
		reason := fmt.Sprintf("the scheduler did not start within %s", c.cfg.StartTimeout)
		if tail := c.logTail(ctx, cl.Name); tail != "" {
			reason += "; last lines of its log:\n" + tail
		}
		return 0, c.fail(ctx, cl, reason)
	}
	// Launch only when the backend knows no scheduler: one that was
	// launched and has exited must fail the cluster with its reason, not be
	// relaunched until the start timeout hides why.
	members, err := c.provider.Describe(ctx, cl.Name)
	if err != nil {
		return time.Second, err
	}
	sched := findScheduler(members)
	if sched == nil {
		spec, err := c.spec(cl)
		if err != nil {
			return 0, err
		}
		if err := c.provider.StartScheduler(ctx, spec); err != nil {
			return 0, c.fail(ctx, cl, "could not start the scheduler: "+err.Error())
		}
		crashpoint.Hit(ctx, crashpoint.CoreStartLaunched)
		if members, err = c.provider.Describe(ctx, cl.Name); err != nil {
			return time.Second, err
		}
		sched = findScheduler(members)
	}
	starting := c.now().Sub(cl.CreatedAt)
	switch {
	case sched == nil:
		return c.startPoll(starting, 200*time.Millisecond), nil
	case sched.State == providers.StateStopped:
		if table, ok := images.MismatchIn(sched.Reason); ok {
			return 0, c.fail(ctx, cl, "the scheduler runs other software than the client:\n"+table)
		}
		return 0, c.fail(ctx, cl, "the scheduler failed to start: "+orDefault(sched.Reason, "it exited"))
	case sched.State != providers.StateRunning || sched.Address == "":
		return c.startPoll(starting, 100*time.Millisecond), nil
	}
	c.router.SetRoute(cl.Name, cl.Owner, sched.Address, sched.DashboardURL, cl.TLSCert, cl.TLSKey)
	crashpoint.Hit(ctx, crashpoint.CoreStartRoutePublished)
	running, err := c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		if x.Status != store.Starting {
			return store.Event{}, errStale
		}
		x.Status, x.StartedAt = store.Running, c.now()
		x.SchedulerAddress, x.DashboardAddress = sched.Address, sched.DashboardURL
		x.Phase = workerPhase(0, x.DesiredWorkers)
		return store.Event{Kind: "running", Message: "scheduler ready at " + sched.Address}, nil
	})
	if errors.Is(err, errStale) {
		return 1, nil
	}
	if err != nil {
		return time.Second, err
	}
	crashpoint.Hit(ctx, crashpoint.CoreStartRunningRecorded)
	c.log.Info("cluster running", "cluster", cl.Name, "scheduler", sched.Address, "startup", c.now().Sub(cl.CreatedAt).Round(time.Millisecond))
	// On in the same pass: behind a queue of other clusters' passes, a
	// second pass for the workers (or to settle) would only come later.
	return c.reconcileRunning(ctx, running)
}

func workerPhase(ready, desired int) string {
	if ready >= desired {
		return "running"
	}
	return fmt.Sprintf("waiting for workers %d/%d", ready, desired)
}

// expired says why a running cluster should stop now: idle for longer than
// its idle timeout, or past the maximum lifetime; "" when neither.
func (c *Core) expired(cl *store.Cluster) (string, error) {
	o, err := optionsOf(cl)
	if err != nil {
		return "", err
	}
	return c.expiredWith(cl, o), nil
}

// expiredWith is expired with the cluster's options already parsed.
func (c *Core) expiredWith(cl *store.Cluster, o Options) string {
	c.mu.Lock()
	last := c.lastBusy(cl.Name)
	c.mu.Unlock()
	return c.expiredAt(cl, o, c.now(), last, !last.IsZero())
}

// expiredAt is expired at now, the cluster last seen busy at last (if
// seen).
func (c *Core) expiredAt(cl *store.Cluster, o Options, now, last time.Time, seen bool) string {
	lifetime, whose := c.lifetimeOf(o)
	if lifetime > 0 && !cl.StartedAt.IsZero() && now.Sub(cl.StartedAt) >= lifetime {
		return fmt.Sprintf("reached %s maximum lifetime of %s", whose, lifetime)
	}
	if o.IdleTimeout <= 0 {
		return ""
	}
	if idle := time.Duration(o.IdleTimeout) * time.Second; seen && now.Sub(last) >= idle {
		return fmt.Sprintf("idle for %s (no tasks and no clients)", idle)
	}
	return ""
}

func workerSeq(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "worker-"))
	if err != nil {
		return -1
	}
	return n
}

// outOfDescriptors says whether err is this process (or the system)
// running out of file descriptors.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// connectedWorkers asks the scheduler how many workers it has, and notes
// whether it is busy.
func (c *Core) connectedWorkers(ctx context.Context, cl *store.Cluster) (health.Counts, error) {
	counts, err := c.health.Counts(ctx, cl)
	if err != nil {
		return health.Counts{}, err
	}
	c.mu.Lock()
	if st := c.clusters.ensure(cl.Name); st.lastBusy.IsZero() || counts.Busy() {
		st.lastBusy = c.now()
	}
	c.mu.Unlock()
	return counts, nil
}

func (c *Core) reconcileStopping(ctx context.Context, cl *store.Cluster) (time.Duration, error) {
	c.router.DeleteRoute(cl.Name)
	crashpoint.Hit(ctx, crashpoint.CoreStoppingRouteDeleted)
	if err := c.provider.StopCluster(ctx, cl.Name); err != nil {
		return time.Second, fmt.Errorf("stop cluster: %w", err)
	}
	crashpoint.Hit(ctx, crashpoint.CoreStoppingProviderDone)
	ends := c.endStops(ctx, cl.Name)
	_, err := c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		if x.Status != store.Stopping {
			return store.Event{}, errStale
		}
		ev := c.stopped(x)
		ev.Ledger = ends
		return ev, nil
	})
	if err != nil && !errors.Is(err, errStale) {
		return time.Second, err
	}
	if err == nil {
		crashpoint.Hit(ctx, crashpoint.CoreStoppingStoppedRecorded)
	}
	c.forget(cl.Name)
	c.log.Info("cluster stopped", "cluster", cl.Name)
	return 0, nil
}

// stopped records that the cluster's resources are gone, for a stop that
// was asked for (its reason, if any, says by whom or why).
func (c *Core) stopped(x *store.Cluster) store.Event {
	x.Status, x.Phase, x.StoppedAt, x.ReadyWorkers = store.Stopped, "stopped", c.now(), 0
	return store.Event{Kind: "stopped", Message: orDefault(x.Reason, "stopped"), CloseLedger: true}
}

// fail stops whatever runs of the cluster and records why it failed.
func (c *Core) fail(ctx context.Context, cl *store.Cluster, reason string) error {
	c.router.DeleteRoute(cl.Name)
	if err := c.provider.StopCluster(ctx, cl.Name); err != nil {
		return fmt.Errorf("clean up failed cluster: %w", err)
	}
	ends := c.endStops(ctx, cl.Name)
	_, err := c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		if !x.Status.Active() {
			return store.Event{}, errStale
		}
		if x.Status == store.Stopping { // a stop was asked: honour it as a stop
			ev := c.stopped(x)
			ev.Ledger = ends
			return ev, nil
		}
		x.Status, x.Phase, x.Reason, x.StoppedAt, x.ReadyWorkers = store.Failed, "failed", reason, c.now(), 0
		return store.Event{Kind: "failed", Message: reason, Ledger: ends, CloseLedger: true}, nil
	})
	c.forget(cl.Name)
	if errors.Is(err, errStale) {
		return nil
	}
	if err == nil {
		crashpoint.Hit(ctx, crashpoint.CoreFailRecorded)
		c.log.Warn("cluster failed", "cluster", cl.Name, "reason", firstLine(reason))
	}
	return err
}

// forget drops all the loop keeps of a cluster that ended.
func (c *Core) forget(name string) {
	c.health.Forget(name)
	c.mu.Lock()
	c.clusters.forget(name)
	c.mu.Unlock()
}

// countExit records a worker's unexpected exit; false if it was counted already.
func (c *Core) countExit(cluster, worker string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters.ensure(cluster)
	if st.exits == nil {
		st.exits = map[string]bool{}
	}
	if st.exits[worker] {
		return false
	}
	st.exits[worker] = true
	return true
}

func (c *Core) exitCount(cluster string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.clusters.get(cluster); st != nil {
		return len(st.exits)
	}
	return 0
}
