package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// ErrQuota matches requests refused by a quota (the API answers 403).
var ErrQuota = quota.ErrExceeded

// Quotas is what the core needs of the quota service. A nil Quotas in the
// configuration means nobody is limited beyond the cluster limits.
type Quotas interface {
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
	OnExceed() quota.OnExceed
}

// Who is the user a request comes from.
type Who = quota.Who

func (c *Core) effective(ctx context.Context, who Who) (quota.Effective, error) {
	if c.cfg.Quotas == nil {
		return quota.Effective{Sources: map[string]string{}}, nil
	}
	eff, err := c.cfg.Quotas.Effective(ctx, who)
	if err != nil {
		return quota.Effective{}, fmt.Errorf("scheduler: quotas: %w", err)
	}
	return eff, nil
}

func (c *Core) onExceed() quota.OnExceed {
	if c.cfg.Quotas == nil {
		return quota.Clamp
	}
	return c.cfg.Quotas.OnExceed()
}

// shape is where a cluster runs and how big its members are, from the
// machines chosen for it. A local worker's vCPUs are its threads.
func (c *Core) shape(sched, worker providers.Machine) quota.Shape {
	s := quota.Shape{Provider: c.provider.Name(), Worker: sizeOf(worker), Scheduler: sizeOf(sched)}
	if r, ok := c.provider.(providers.Regional); ok {
		s.Region = r.Region()
	}
	if c.cfg.Price != nil {
		s.Worker.PriceHour = c.cfg.Price(s.Worker)
		s.Scheduler.PriceHour = c.cfg.Price(s.Scheduler)
	}
	return s
}

func shapeOf(cl *store.Cluster) quota.Shape {
	var s quota.Shape
	_ = json.Unmarshal([]byte(cl.Shape), &s) // written by us; an old row without a shape counts as empty
	return s
}

func whoOf(cl *store.Cluster) Who {
	return Who{ID: cl.Owner, Name: cl.OwnerName, Groups: cl.OwnerGroups}
}

// InUse is what live clusters hold, as quotas count it.
func InUse(live []*store.Cluster) quota.InUse {
	var u quota.InUse
	for _, cl := range live {
		u.Add(shapeOf(cl), cl.DesiredWorkers)
	}
	return u
}

func monthOf(start time.Time, t store.Totals) quota.Month {
	return quota.Month{Since: start, VCPUHours: t.VCPUSeconds / 3600, GPUHours: t.GPUSeconds / 3600}
}

// growTo decides how many workers cluster cl may grow to (want > its
// current count), inside an owned update: others and month come from the
// store under the owner's lock.
func (c *Core) growTo(eff quota.Effective, cl *store.Cluster, others store.Usage, month store.Totals, want int) (int, error) {
	start := quota.MonthStart(c.now())
	return eff.WorkersAllowed(quota.InUseOf(others), monthOf(start, month), shapeOf(cl), cl.DesiredWorkers, want)
}

// ledgerStart is the ledger's start entries for members of one size.
func ledgerStart(size quota.Size, members ...string) []store.LedgerEntry {
	out := make([]store.LedgerEntry, 0, len(members))
	for _, m := range members {
		out = append(out, store.LedgerEntry{
			Member: m, Kind: store.LedgerStart, VCPUs: size.VCPUs, MemoryGiB: size.MemoryGiB,
			GPUs: size.GPUs, GPUType: size.GPUType, InstanceType: size.InstanceType, PriceHour: size.PriceHour,
		})
	}
	return out
}

// quotaMessage is an exceeded quota's message for a user, or err's.
func quotaMessage(err error) string {
	var x *quota.ExceededError
	if errors.As(err, &x) {
		return x.Msg
	}
	return err.Error()
}

const schedulerMember = "scheduler"

// ledgerClosed records that a member stopped, at when (zero: now).
func (c *Core) ledgerClosed(ctx context.Context, cluster, member string, when time.Time) error {
	return c.store.RecordLedger(ctx, cluster, store.LedgerEntry{Member: member, Kind: store.LedgerStop, At: when})
}

// ledgerGrace is how long a member may be missing from the backend's
// answers after its start before it counts as gone: cloud APIs list new
// machines only after a while.
const ledgerGrace = time.Minute

// syncLedger closes the ledger interval of every member the backend no
// longer runs: one that exited on its own, or whose stop was not recorded
// because the gateway died in between; such a stop is dated when it is
// seen. A member the backend never heard of (the gateway died between
// recording its name and starting it; names are not reused) ran for no
// time, when the backend lists members as soon as they start. It returns
// the members whose interval is open: the store is read at each pass, so
// that what another replica recorded while it held the cluster counts.
func (c *Core) syncLedger(ctx context.Context, cl *store.Cluster, members []providers.Member) (map[string]bool, error) {
	since, err := c.store.OpenMembers(ctx, cl.Name)
	if err != nil {
		return nil, err
	}
	state := make(map[string]providers.State, len(members))
	for _, m := range members {
		state[m.Name] = m.State
	}
	now := c.now()
	_, immediate := c.provider.(providers.Immediate)
	open := make(map[string]bool, len(since))
	for m, start := range since {
		st, listed := state[m]
		var err error
		switch {
		case st == providers.StateStopped:
			err = c.ledgerClosed(ctx, cl.Name, m, time.Time{})
		case !listed && immediate:
			err = c.ledgerClosed(ctx, cl.Name, m, start)
		case !listed && now.Sub(start) >= ledgerGrace:
			err = c.ledgerClosed(ctx, cl.Name, m, time.Time{})
		default:
			open[m] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		crashpoint.Hit(ctx, crashpoint.CoreLedgerSynced)
	}
	return open, nil
}

// adoptLegacy gives a cluster made before quotas and the ledger existed
// its shape, and opens ledger intervals for what it runs, from now: it
// then counts against quotas and in usage like any other.
func (c *Core) adoptLegacy(ctx context.Context, cl *store.Cluster, members []providers.Member) (*store.Cluster, error) {
	if cl.Shape != "" && cl.Shape != "{}" {
		return cl, nil
	}
	o, err := optionsOf(cl)
	if err != nil {
		return nil, err
	}
	// Legacy clusters predate machine options: sized by threads and memory.
	shape := c.shape(providers.Machine{}, providers.Machine{VCPUs: float64(o.WorkerThreads), MemoryGiB: o.WorkerMemory})
	b, err := json.Marshal(shape)
	if err != nil {
		return nil, err
	}
	var entries []store.LedgerEntry
	for _, m := range members {
		if m.State == providers.StateStopped {
			continue
		}
		size := shape.Worker
		if m.Role == providers.RoleScheduler {
			size = shape.Scheduler
		}
		entries = append(entries, ledgerStart(size, m.Name)...)
	}
	return c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		if x.Shape != "" && x.Shape != "{}" {
			return store.Event{}, errStale
		}
		x.Shape = string(b)
		return store.Event{Kind: "adopted", Message: "counted in quotas and usage from now on", Ledger: entries}, nil
	})
}

// ListAll returns every user's clusters with the given statuses (all when
// none), for admins.
func (c *Core) ListAll(ctx context.Context, statuses []store.Status) ([]*store.Cluster, error) {
	cls, err := c.store.ListClusters(ctx, store.Filter{Statuses: statuses})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return cls, nil
}

// AdminStop stops any user's cluster on an admin's request and records it
// in the audit log, in the same transaction as the stop.
func (c *Core) AdminStop(ctx context.Context, by store.Actor, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	_, err := c.update(ctx, name, func(cl *store.Cluster) (store.Event, error) {
		if !cl.Status.Live() {
			return store.Event{}, fmt.Errorf("%w: cluster %s is %s already", ErrConflict, name, cl.Status)
		}
		before, _ := json.Marshal(map[string]any{"status": cl.Status, "owner": cl.OwnerName, "owner_id": cl.Owner, "workers": cl.DesiredWorkers})
		why := "stopped by admin " + by.Name
		cl.Status, cl.Phase, cl.Reason = store.Stopping, "stopping", why
		after, _ := json.Marshal(map[string]any{"status": cl.Status, "owner": cl.OwnerName, "owner_id": cl.Owner, "workers": cl.DesiredWorkers})
		return store.Event{Kind: "stop", Message: why, Audit: &store.AuditEntry{
			Actor: by.Name, ActorID: by.ID, Action: "cluster.stop", Target: "cluster:" + name, Before: string(before), After: string(after),
		}}, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return err
	}
	c.log.Info("cluster stopped by admin", "cluster", name, "admin", by.Name)
	c.queue.Add(name)
	return nil
}

// endStops dates the ledger stops of the cluster's open members by when
// the backend saw them end, when it knows; the rest are closed at the
// time of the record (CloseLedger). Called after StopCluster.
func (c *Core) endStops(ctx context.Context, cluster string) []store.LedgerEntry {
	st, ok := c.provider.(providers.StopTimes)
	if !ok {
		return nil
	}
	open, err := c.store.OpenMembers(ctx, cluster)
	if err != nil {
		return nil // CloseLedger still closes them, a little later
	}
	var out []store.LedgerEntry
	for m := range open {
		if at, ok := st.StoppedAt(cluster, m); ok {
			out = append(out, store.LedgerEntry{Member: m, Kind: store.LedgerStop, At: at})
		}
	}
	return out
}
