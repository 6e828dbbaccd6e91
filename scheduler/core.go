// Package scheduler is the gateway's scheduling core. Each cluster is a
// state machine stored in the database; a reconcile loop drives it towards
// what was asked for, calling the provider. Requests only write intents to
// the store and wake the loop: no provider call ever runs inside an HTTP
// handler, and after a crash the loop resumes from what is stored.
package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// Errors the API maps to HTTP statuses.
var (
	ErrNotFound = errors.New("cluster not found")        // 404
	ErrInvalid  = errors.New("invalid request")          // 422
	ErrConflict = errors.New("conflicts with its state") // 409
	// ErrUnavailable: something the request needs (a registry, an engine)
	// cannot be reached now; the request may be tried again. 503.
	ErrUnavailable = errors.New("unavailable")
)

// Store is what the core needs of the database.
type Store interface {
	CreateCluster(ctx context.Context, c *store.Cluster) error
	GetCluster(ctx context.Context, name string) (*store.Cluster, error)
	ListClusters(ctx context.Context, f store.Filter) ([]*store.Cluster, error)
	UpdateCluster(ctx context.Context, name string, fn store.UpdateFunc) (*store.Cluster, error)
	Events(ctx context.Context, cluster string) ([]store.Event, error)
	AdmitCluster(ctx context.Context, c *store.Cluster, monthStart time.Time, admit store.AdmitFunc) error
	// OwnerState is what AdmitCluster's check is given, read without
	// admitting anything (CheckCreate).
	OwnerState(ctx context.Context, owner string, monthStart time.Time) (store.Usage, store.Totals, error)
	UpdateOwned(ctx context.Context, name string, monthStart time.Time, fn store.OwnedUpdateFunc) (*store.Cluster, error)
	RecordLedger(ctx context.Context, cluster string, entries ...store.LedgerEntry) error
	OpenMembers(ctx context.Context, cluster string) (map[string]time.Time, error)
	AcquireLease(ctx context.Context, cluster, holder string, ttl time.Duration) (bool, error)
	ReleaseLeases(ctx context.Context, holder string) error
	RenewLeases(ctx context.Context, holder string, ttl time.Duration) error
	ActiveLeases(ctx context.Context) ([]store.ActiveLease, error)
	// Sharing (sharing.go).
	ClusterShares(ctx context.Context, cluster string) ([]store.Share, error)
	UpdateShares(ctx context.Context, cluster string, by store.Actor, action string, change store.ShareChange) (before, after []store.Share, err error)
	SharedWith(ctx context.Context, id string, groups []string, statuses []store.Status) ([]store.SharedCluster, error)
	UserIDsByName(ctx context.Context, name string) ([]string, error)
	GetUserClaims(ctx context.Context, id string) (*store.UserClaims, error)
	RecordAudit(ctx context.Context, e store.AuditEntry) error
}

// Router publishes where each running cluster's scheduler and dashboard are.
type Router interface {
	// clusterCert is the cluster's certificate (PEM), which an https
	// dashboard must present; clusterKey (PEM) is the gateway's to
	// present it in turn (dashboards require it).
	SetRoute(cluster, owner, schedulerAddr, dashboardURL string, clusterCert, clusterKey []byte)
	DeleteRoute(cluster string)
}

// WorkerRouter is a Router that also publishes where each running
// cluster's workers serve their own pages (worker name to base URL).
type WorkerRouter interface {
	SetWorkers(cluster string, workers map[string]string)
}

// Config tunes the core.
type Config struct {
	GatewayID    string
	Limits       Limits
	StartTimeout time.Duration // scheduler start, from creation
	PollInterval time.Duration // health poll of running clusters
	Concurrency  int           // clusters reconciled at once
	CertLifetime time.Duration
	// WorkerRestarts is how many unexpected worker exits a cluster absorbs
	// by starting replacements before it is failed.
	WorkerRestarts int
	// MaxLifetime stops any cluster that has run this long (0: never).
	MaxLifetime time.Duration
	// HeartbeatTimeout fails a running cluster whose scheduler has not
	// answered for this long.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is how often a settled cluster's scheduler says it
	// is there when nothing changes (watch.go): only a frozen scheduler
	// (its process stopped, not dead, its host up) waits this long to be
	// noticed, since a dead process ends its stream, a lost host is found
	// by TCP keepalive and a blocked event loop ends its stream itself,
	// each within HeartbeatTimeout. 0: 5 minutes.
	HeartbeatInterval time.Duration
	// HealthInterval is how often the scheduler of a running cluster with
	// nothing to do is asked for its counts (heartbeat, idle timeout);
	// 0: every half HeartbeatTimeout (Dask Gateway's own heartbeat period),
	// and at most every PollInterval. A scheduler that does not answer is
	// then asked every PollInterval/5 until it answers or HeartbeatTimeout
	// passes since its last answer: the first failed check comes early
	// enough (half the timeout, plus a sweep and the request's timeout)
	// that the cluster fails when the timeout has passed, as it would with
	// checks at every poll.
	HealthInterval time.Duration
	// ReplicaID names this gateway process among replicas sharing a
	// database; LeaseTTL is how long its hold on a cluster lasts unless
	// renewed (a dead replica's clusters move on after that).
	ReplicaID string
	LeaseTTL  time.Duration
	Reaper    ReaperConfig
	// Quotas bound what each user may run (nil: only Limits apply).
	Quotas Quotas
	// Price estimates a member's price per hour for the usage ledger
	// (nil: 0).
	Price func(quota.Size) float64
	// InstanceGPUs are the GPUs the operator declares for instance types
	// (pricing.instance_types), over what the backend's listing counts.
	InstanceGPUs map[string]catalog.GPUs
	// Envs resolves the software options to an image (nil: an image is
	// taken as given, unchecked, and env is refused).
	Envs EnvResolver
	// SchedulerGPU gives the scheduler of a GPU cluster a small GPU of the
	// workers' model (backends with instance types).
	SchedulerGPU bool
	// WaitReread is how often Wait reads its cluster from the store again
	// between the changes this process makes to it, so that it sees what
	// another replica did; 0: every second.
	WaitReread time.Duration
	// Sharing bounds what owners may share (cluster.sharing; "":
	// sharing.DefaultSetting).
	Sharing sharing.Setting
}

func (c *Config) setDefaults() {
	if c.StartTimeout <= 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.ReplicaID == "" {
		c.ReplicaID = NewName()
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Minute
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = max(c.PollInterval, c.HeartbeatTimeout/2)
	}
	if c.CertLifetime <= 0 {
		c.CertLifetime = 30 * 24 * time.Hour
	}
	if c.Limits.MaxWorkers <= 0 {
		c.Limits.MaxWorkers = 50
	}
	if c.Limits.MaxWorkerThreads <= 0 {
		c.Limits.MaxWorkerThreads = 64
	}
	if c.Limits.MaxWorkerMemory <= 0 {
		c.Limits.MaxWorkerMemory = 256
	}
	if c.WorkerRestarts < 0 {
		c.WorkerRestarts = 0
	}
	if c.WaitReread <= 0 {
		c.WaitReread = time.Second
	}
	if c.Sharing == "" {
		c.Sharing = sharing.DefaultSetting
	}
}

// Core is the scheduling core.
type Core struct {
	cfg      Config
	store    Store
	provider providers.Provider
	router   Router
	log      *slog.Logger
	now      func() time.Time
	// health watches the running clusters' schedulers: each settled
	// cluster's stream of counts, and the polls of the rest (package
	// health).
	health healthWatcher
	queue  *queue
	// The sweep's own state (its goroutine only).
	leasesMu       sync.Mutex // leases: written by the sweep, read by the reaper too
	leases         leaseRead
	membersChecked time.Time

	// waits are the API's waits for clusters' changes.
	waits *waiters
	// tidied is the reaper's memory (reaper.go).
	tidied reaperMemory
	// retries are the failed passes in a row (retry.go).
	retries retries
	reaped  atomic.Int64 // leftover clusters the reaper stopped
	// views are the dashboards of shared clusters recently recorded in
	// the audit log (sharing.go).
	views viewNotes

	mu sync.Mutex
	// clusters is one record per cluster (state.go).
	clusters              *clusterTable
	settles               uint64    // clusters settled so far
	settlesChecked        uint64    // settles when the sweep last compared settled with a read of the leases
	settledCompared       time.Time // when it did
	silenceDue, expiryDue dueHeap   // the settled clusters with live streams, by deadline (due.go)
}

// New makes a core. Run starts its loop.
func New(cfg Config, st Store, p providers.Provider, r Router, log *slog.Logger) *Core {
	cfg.setDefaults()
	if _, ok := p.(providers.InstanceTypes); ok {
		cfg.Limits.InstanceTypes, cfg.Limits.GPUTypes = true, catalog.GPUTypes()
	}
	if _, ok := p.(providers.Spot); ok {
		cfg.Limits.Spot = true
	}
	cfg.Limits.Provider = p.Name()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Core{
		cfg: cfg, store: st, provider: p, router: r, log: log, now: time.Now,
		queue:    newQueue(),
		waits:    newWaiters(),
		clusters: newClusterTable(),
	}
	c.health = health.New(health.Config{Timeout: cfg.HeartbeatTimeout, Beat: cfg.HeartbeatInterval, Lines: c.watchLine, Ended: c.watchEnded})
	return c
}

// SetClock replaces the clock (tests).
func (c *Core) SetClock(now func() time.Time) { c.now = now }

// Limits returns the per-cluster limits.
func (c *Core) Limits() Limits { return c.cfg.Limits }

// ProviderName is the backend new clusters go to.
func (c *Core) ProviderName() string { return c.provider.Name() }

// Run reconciles until ctx ends. On start it queues every active cluster,
// which re-adopts what an earlier process left running.
func (c *Core) Run(ctx context.Context) error {
	active, err := c.store.ListClusters(ctx, store.Filter{Statuses: store.ActiveStatuses})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("scheduler: load clusters: %w", err)
	}
	for _, cl := range active {
		c.queue.Add(cl.Name)
	}
	c.log.Info("scheduling core started", "active_clusters", len(active), "provider", c.provider.Name())
	c.health.Run(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.runReaper(ctx)
	}()
	go func() {
		defer wg.Done()
		c.sweepLoop(ctx)
	}()
	for i := 0; i < c.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.worker(ctx)
		}()
	}
	<-ctx.Done()
	c.queue.Shutdown()
	wg.Wait()
	return nil
}

// ReleaseLeases gives up this replica's leases, so that other replicas take
// its clusters over at once (a clean shutdown that leaves clusters running).
func (c *Core) ReleaseLeases(ctx context.Context) {
	if err := c.store.ReleaseLeases(ctx, c.cfg.ReplicaID); err != nil {
		c.log.Warn("release leases", "err", err)
	}
}

func (c *Core) worker(ctx context.Context) {
	for {
		name, ok := c.queue.Get()
		if !ok {
			return
		}
		// One replica at a time works on a cluster: the lease says which.
		held, err := c.store.AcquireLease(ctx, name, c.cfg.ReplicaID, c.cfg.LeaseTTL)
		if err != nil || !held {
			c.queue.Done(name)
			if err != nil && ctx.Err() == nil {
				// The database may be away: try again soon, not at the next resync.
				wait := c.retryAfter(name)
				c.log.Warn("lease", "cluster", name, "retry_in", wait, "err", err)
				c.queue.AddAfter(name, wait)
			}
			continue // the resync brings it back; its holder works on it meanwhile
		}
		crashpoint.Hit(ctx, crashpoint.CoreLeaseAcquired)
		after, err := c.reconcile(ctx, name)
		if errors.Is(err, clusteropts.ErrMalformed) {
			// Options that cannot be read leave the cluster unsized and its
			// idle timeout and lifetime unknown: it fails, and its owner
			// sees why, rather than run on zero options or retry forever.
			after, err = 0, c.fail(ctx, &store.Cluster{Name: name}, err.Error())
		}
		c.queue.Done(name)
		switch {
		case err != nil && ctx.Err() == nil:
			wait := c.retryAfter(name)
			c.log.Warn("reconcile failed; retrying", "cluster", name, "retry_in", wait, "err", err)
			if after <= 0 {
				after = wait
			}
		case err == nil:
			c.succeeded(name)
		}
		if after > 0 {
			c.queue.AddAfter(name, after)
		}
	}
}

// update applies fn to the stored cluster and wakes any waiters.
func (c *Core) update(ctx context.Context, name string, fn store.UpdateFunc) (*store.Cluster, error) {
	cl, err := c.store.UpdateCluster(ctx, name, fn)
	if err == nil {
		c.waits.notify(name)
	}
	return cl, err
}

// updateOwned is update for growth that quotas bound: fn also sees the
// owner's other live clusters and this month's ledger totals.
func (c *Core) updateOwned(ctx context.Context, name string, fn store.OwnedUpdateFunc) (*store.Cluster, error) {
	cl, err := c.store.UpdateOwned(ctx, name, quota.MonthStart(c.now()), fn)
	if err == nil {
		c.waits.notify(name)
	}
	return cl, err
}

// errStale aborts an update whose premise no longer holds: someone else
// changed the cluster since it was read. The loop simply runs again.
var errStale = errors.New("cluster changed meanwhile")

// ---- requests ----

// NewName makes a cluster name: 16 hex digits, short enough for the SNI
// label limit and unguessable enough not to collide.
func NewName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidName reports whether s could be a cluster name, so malformed names are
// refused before they reach the store or a route.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 51 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Create validates the options, admits the cluster against the user's
// quota and records it PENDING. The reconcile loop does the rest.
func (c *Core) Create(ctx context.Context, who Who, raw map[string]json.RawMessage) (*store.Cluster, error) {
	a, err := c.admission(ctx, who, raw)
	if err != nil {
		return nil, err
	}
	opts, shape := a.opts, a.shape
	// After the quota's checks: looking into an image may pull it, which a
	// request the quota refuses must not cost.
	if err := c.resolveSoftware(ctx, who, &opts); err != nil {
		return nil, err
	}
	optJSON, _ := json.Marshal(opts)
	shapeJSON, _ := json.Marshal(shape)
	monthStart := quota.MonthStart(c.now())
	for attempt := 0; ; attempt++ {
		name := NewName()
		pair, err := pki.ClusterCert(name, c.cfg.CertLifetime, c.now())
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		cl := &store.Cluster{
			Name: name, Owner: who.ID, OwnerName: who.Name, OwnerGroups: who.Groups, Status: store.Pending, Phase: "queued",
			Provider: c.provider.Name(), Options: string(optJSON), Shape: string(shapeJSON), DesiredWorkers: opts.Workers,
			TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM, CreatedAt: c.now(),
		}
		err = c.store.AdmitCluster(ctx, cl, monthStart, a.admit(monthStart))
		if errors.Is(err, store.ErrExists) && attempt < 3 {
			continue
		}
		if errors.Is(err, quota.ErrExceeded) {
			c.log.Info("cluster refused by quota", "owner", who.Name, "reason", quotaMessage(err))
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		crashpoint.Hit(ctx, crashpoint.CoreCreateAdmitted)
		c.log.Info("cluster requested", "cluster", name, "owner", who.Name, "workers", opts.Workers)
		c.queue.Add(name)
		return cl, nil
	}
}

// admission is what Create decides of a request before it records the
// cluster: the options as they will be stored, the owner's quota, and the
// cluster's shape.
type admission struct {
	opts  Options
	eff   quota.Effective
	shape quota.Shape
}

// admission checks a request as Create does before it records anything:
// the options, and the owner's quota on the cluster itself (where it
// runs, its machines, its workers, its idle timeout). A refusal of the
// cluster's shape comes with the admission made so far (its shape).
func (c *Core) admission(ctx context.Context, who Who, raw map[string]json.RawMessage) (admission, error) {
	opts, err := c.cfg.Limits.ParseOptions(raw)
	if err != nil {
		return admission{}, err
	}
	if opts.Env != "" && c.cfg.Envs == nil {
		return admission{}, fmt.Errorf("%w: this gateway builds no environments: give an image instead of env", ErrInvalid)
	}
	eff, err := c.effective(ctx, who)
	if err != nil {
		return admission{}, err
	}
	if m := eff.Limits.MaxIdleTimeout; m != nil && *m != quota.UnlimitedDuration {
		if v, given := raw["idle_timeout"]; !given || string(v) == "null" {
			// The gateway's default is not the user's choice: bring it
			// within the user's maximum rather than refuse.
			if maxSec := int(time.Duration(*m) / time.Second); opts.IdleTimeout == 0 || opts.IdleTimeout > maxSec {
				opts.IdleTimeout = maxSec
			}
		}
	}
	if m := eff.Limits.MaxLifetime; m != nil && *m != quota.UnlimitedDuration {
		opts.MaxLifetime = int(time.Duration(*m) / time.Second)
	}
	sched, worker, err := c.machines(ctx, opts, eff)
	if err != nil {
		return admission{}, err
	}
	a := admission{opts: opts, eff: eff, shape: c.shape(sched, worker)}
	return a, eff.CheckShape(a.shape, opts.Workers, time.Duration(opts.IdleTimeout)*time.Second)
}

// admit is the admission's check against what the owner's live clusters
// hold and this month's use, as the store reads them.
func (a admission) admit(monthStart time.Time) store.AdmitFunc {
	return func(live store.Usage, month store.Totals) error {
		return a.eff.Admit(quota.InUseOf(live), monthOf(monthStart, month), a.shape, a.opts.Workers)
	}
}

// CheckCreate is Create without the cluster: the request checked as
// Create checks it, against what the owner's live clusters hold and this
// month's use (read without the owner's lock: a request made meanwhile
// may still take the room). It returns the shape the cluster would have
// and the workers it would start with (the shape also when a quota
// refuses it), and Create's refusal, if any. The console shows the cost
// and the quota that would refuse before the form is sent. The software
// is not looked into: that may pull an image.
func (c *Core) CheckCreate(ctx context.Context, who Who, raw map[string]json.RawMessage) (quota.Shape, int, error) {
	a, err := c.admission(ctx, who, raw)
	if err != nil {
		return a.shape, a.opts.Workers, err
	}
	monthStart := quota.MonthStart(c.now())
	live, month, err := c.store.OwnerState(ctx, who.ID, monthStart)
	if err != nil {
		return a.shape, a.opts.Workers, fmt.Errorf("scheduler: %w", err)
	}
	return a.shape, a.opts.Workers, a.admit(monthStart)(live, month)
}

// Get returns the owner's cluster. Another user's cluster is reported as not
// found, so that names do not leak.
func (c *Core) Get(ctx context.Context, owner, name string) (*store.Cluster, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	cl, err := c.store.GetCluster(ctx, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && cl.Owner != owner) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return cl, nil
}

// Wait returns the owner's cluster once it has left PENDING and STARTING, or
// when timeout passes, whichever comes first.
func (c *Core) Wait(ctx context.Context, owner, name string, timeout time.Duration) (*store.Cluster, error) {
	return c.waitFor(ctx, name, timeout, func() (*store.Cluster, error) { return c.Get(ctx, owner, name) })
}

// waitFor reads the cluster with get until it has left PENDING and
// STARTING, timeout passes or get fails.
func (c *Core) waitFor(ctx context.Context, name string, timeout time.Duration, get func() (*store.Cluster, error)) (*store.Cluster, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	reread := time.NewTicker(c.cfg.WaitReread)
	defer reread.Stop()
	for {
		ch, done := c.waits.watch(name)
		cl, err := get()
		if err != nil || (cl.Status != store.Pending && cl.Status != store.Starting) {
			done()
			return cl, err
		}
		select {
		case <-ch:
		case <-deadline.C:
			done()
			return cl, nil
		case <-ctx.Done():
			done()
			return cl, nil
		case <-reread.C: // another replica may have changed it
		}
		done()
	}
}

// List returns the owner's clusters with the given statuses (all when none).
func (c *Core) List(ctx context.Context, owner string, statuses []store.Status) ([]*store.Cluster, error) {
	cls, err := c.store.ListClusters(ctx, store.Filter{Owner: owner, Statuses: statuses})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return cls, nil
}

// Events returns the owner's cluster's lifecycle events.
func (c *Core) Events(ctx context.Context, owner, name string) ([]store.Event, error) {
	if _, err := c.Get(ctx, owner, name); err != nil {
		return nil, err
	}
	return c.store.Events(ctx, name)
}

// Scale sets the wanted number of workers: by its owner, or by someone it
// is shared with and allowed to scale it (recorded in the audit log). A
// count above the per-cluster limit is clamped; growth beyond the owner's
// quota (whoever asks: a cluster counts against its owner's quota only) is
// clamped or refused (quotas.on_exceed). The returned message says what
// was done instead.
func (c *Core) Scale(ctx context.Context, who Who, name string, count int) (msg string, err error) {
	cl, g, err := c.Reach(ctx, who, name, sharing.Scale)
	if err != nil {
		return "", err
	}
	if count < 0 {
		return "", fmt.Errorf("%w: scale expects a non-negative number of workers, got %d", ErrInvalid, count)
	}
	asked := count
	if max := c.cfg.Limits.MaxWorkers; count > max {
		msg = fmt.Sprintf("Scale request of %d workers would exceed the limit of %d workers per cluster; scaling to %d instead.", count, max, max)
		count = max
	}
	eff, err := c.effective(ctx, c.quotaWho(who, cl, g))
	if err != nil {
		return "", err
	}
	_, err = c.updateOwned(ctx, name, func(cl *store.Cluster, others store.Usage, month store.Totals) (store.Event, error) {
		if !cl.Status.Live() {
			return store.Event{}, fmt.Errorf("%w: cluster %s is %s; only a pending or running cluster can be scaled", ErrConflict, name, cl.Status)
		}
		if count > cl.DesiredWorkers {
			allowed, why := c.growTo(eff, cl, others, month, count)
			if allowed < count {
				if c.onExceed() == quota.Refuse {
					return store.Event{}, &quota.ExceededError{Limit: limitOf(why), Msg: fmt.Sprintf(
						"Scale request of %d workers refused: %s (the cluster keeps its %d workers)", asked, quotaText(why, g, cl), cl.DesiredWorkers)}
				}
				msg = fmt.Sprintf("Scale request of %d workers is beyond %s: %s; scaling to %d instead.", asked, whoseQuota(g, cl), quotaText(why, g, cl), allowed)
				count = allowed
			}
		}
		if cl.DesiredWorkers == count && !cl.Adaptive {
			return store.Event{}, nil
		}
		from := cl.DesiredWorkers
		cl.DesiredWorkers = count
		cl.Adaptive = false // a manual scale ends adaptive scaling, as in dask-gateway
		ev := fmt.Sprintf("%d -> %d workers by %s", from, count, who.Name)
		if count != asked {
			ev += fmt.Sprintf(" (asked for %d)", asked)
		}
		return store.Event{Kind: "scale", Message: ev, Audit: sharedAudit(who, cl, g, "cluster.scale",
			map[string]any{"workers": count, "from": from})}, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return "", err
	}
	crashpoint.Hit(ctx, crashpoint.CoreScaleRecorded)
	c.queue.Add(name)
	return msg, nil
}

func limitOf(err error) string {
	var x *quota.ExceededError
	if errors.As(err, &x) {
		return x.Limit
	}
	return ""
}

// Adapt turns adaptive scaling on within [minimum, maximum] workers, or off.
// A maximum above the per-cluster limit is clamped, and the message says so.
func (c *Core) Adapt(ctx context.Context, who Who, name string, minimum, maximum int, active bool) (msg string, err error) {
	cl, g, err := c.Reach(ctx, who, name, sharing.Scale)
	if err != nil {
		return "", err
	}
	eff, err := c.effective(ctx, c.quotaWho(who, cl, g))
	if err != nil {
		return "", err
	}
	var notes []string
	if active {
		if minimum < 0 || maximum < minimum {
			return "", fmt.Errorf("%w: adaptive scaling needs 0 <= minimum <= maximum, got minimum %d, maximum %d", ErrInvalid, minimum, maximum)
		}
		lim, what := c.cfg.Limits.MaxWorkers, "the limit of "+strconv.Itoa(c.cfg.Limits.MaxWorkers)+" workers per cluster"
		if m := eff.Limits.MaxWorkersPerCluster; m != nil && float64(*m) < float64(lim) {
			lim = int(*m)
			what = fmt.Sprintf("your limit of %d workers per cluster (max_workers_per_cluster, from %s)", lim, eff.Source("max_workers_per_cluster"))
		}
		if maximum > lim {
			notes = append(notes, fmt.Sprintf("Adaptive maximum of %d workers would exceed %s; using %d instead.", maximum, what, lim))
			maximum = lim
			minimum = min(minimum, lim)
		}
		// The other limits (totals, budgets) are applied at each step up:
		// what fits changes as the user's other clusters come and go.
	}
	_, err = c.updateOwned(ctx, name, func(cl *store.Cluster, others store.Usage, month store.Totals) (store.Event, error) {
		if !cl.Status.Live() {
			return store.Event{}, fmt.Errorf("%w: cluster %s is %s; only a pending or running cluster can adapt", ErrConflict, name, cl.Status)
		}
		cl.Adaptive, cl.AdaptMin, cl.AdaptMax = active, minimum, maximum
		audit := sharedAudit(who, cl, g, "cluster.adapt", map[string]any{"active": active, "minimum": minimum, "maximum": maximum})
		if !active {
			return store.Event{Kind: "adapt", Message: "adaptive scaling off by " + who.Name, Audit: audit}, nil
		}
		want := max(minimum, min(cl.DesiredWorkers, maximum))
		if want > cl.DesiredWorkers {
			// A minimum is growth now: it is bound like a scale.
			allowed, why := c.growTo(eff, cl, others, month, want)
			if allowed < want {
				if c.onExceed() == quota.Refuse {
					return store.Event{}, &quota.ExceededError{Limit: limitOf(why), Msg: fmt.Sprintf(
						"Adaptive minimum of %d workers refused: %s", minimum, quotaText(why, g, cl))}
				}
				notes = append(notes, fmt.Sprintf("Adaptive minimum of %d workers is beyond %s: %s; starting from %d instead.", minimum, whoseQuota(g, cl), quotaText(why, g, cl), allowed))
				want = allowed
			}
		}
		cl.DesiredWorkers = want
		return store.Event{Kind: "adapt", Message: fmt.Sprintf("adaptive scaling between %d and %d workers by %s", minimum, maximum, who.Name), Audit: audit}, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	msg = strings.Join(notes, " ")
	if err != nil {
		return "", err
	}
	c.queue.Add(name)
	return msg, nil
}

// adapt moves the wanted workers towards the scheduler's own estimate,
// within the cluster's bounds. Up at once; down only when the estimate has
// stayed lower for adaptDownAfter, so a pause between two computations
// does not throw workers (and their data) away.
func (c *Core) adapt(ctx context.Context, cl *store.Cluster, counts health.Counts) (bool, error) {
	target := max(cl.AdaptMin, min(counts.Desired, cl.AdaptMax))
	now := c.now()
	c.mu.Lock()
	st := c.clusters.ensure(cl.Name)
	if target >= cl.DesiredWorkers {
		st.downSince = time.Time{}
	} else if st.downSince.IsZero() {
		st.downSince = now
	}
	since := st.downSince
	c.mu.Unlock()
	if target == cl.DesiredWorkers || (!since.IsZero() && now.Sub(since) < adaptDownAfter) {
		return false, nil
	}
	// Loaded whatever the direction: the stored cluster may have changed
	// since the snapshot (a new maximum), and growth is always bound.
	eff, err := c.effective(ctx, whoOf(cl))
	if err != nil {
		return false, err
	}
	var note string
	_, err = c.updateOwned(ctx, cl.Name, func(x *store.Cluster, others store.Usage, month store.Totals) (store.Event, error) {
		if !x.Adaptive || x.Status != store.Running {
			return store.Event{}, errStale
		}
		want := max(x.AdaptMin, min(counts.Desired, x.AdaptMax))
		if want > x.DesiredWorkers {
			allowed, why := c.growTo(eff, x, others, month, want)
			if allowed < want {
				want, note = allowed, fmt.Sprintf("the scheduler asks for %d workers; %s", counts.Desired, quotaMessage(why))
			}
		}
		if want == x.DesiredWorkers {
			return store.Event{}, errStale
		}
		from := x.DesiredWorkers
		x.DesiredWorkers = want
		return store.Event{Kind: "adaptive", Message: fmt.Sprintf("%d -> %d workers (the scheduler asks for %d)", from, want, counts.Desired)}, nil
	})
	if note != "" {
		c.noteQuota(ctx, cl.Name, note)
	}
	if errors.Is(err, errStale) {
		return false, nil
	}
	c.mu.Lock()
	if st := c.clusters.get(cl.Name); st != nil {
		st.downSince = time.Time{}
	}
	c.mu.Unlock()
	return err == nil, err
}

// noteQuota records, once per distinct message, why adaptive scaling was
// held back, so that the cluster's events say so without repeating it
// at every poll.
func (c *Core) noteQuota(ctx context.Context, cluster, note string) {
	c.mu.Lock()
	st := c.clusters.ensure(cluster)
	same := st.quotaNote == note
	st.quotaNote = note
	c.mu.Unlock()
	if !same {
		c.log.Info("adaptive scaling held by quota", "cluster", cluster, "why", note)
		c.event(ctx, cluster, "quota", note)
	}
}

const adaptDownAfter = 3 * time.Second

// Stop asks for the owner's cluster to be stopped. Stopping a stopped
// cluster is not an error.
func (c *Core) Stop(ctx context.Context, owner, name, why string) error {
	if _, err := c.Get(ctx, owner, name); err != nil {
		return err
	}
	return c.stop(ctx, name, why, nil)
}

// StopAs is Stop by its owner, or by someone it is shared with and
// allowed to stop it (recorded in the audit log).
func (c *Core) StopAs(ctx context.Context, who Who, name string) error {
	cl, g, err := c.Reach(ctx, who, name, sharing.Stop)
	if err != nil {
		return err
	}
	why := "stopped by " + who.Name
	if !g.Owner {
		why += " (shared with them by " + ownerLabel(cl) + ")"
	}
	// Recorded with the stop, in its transaction; a cluster already on its
	// way out is not stopped again, and nothing is recorded.
	return c.stop(ctx, name, why, sharedAudit(who, cl, g, "cluster.stop", nil))
}

// stop records the stop intent (with audit, if any) and wakes the loop.
func (c *Core) stop(ctx context.Context, name, why string, audit *store.AuditEntry) error {
	_, err := c.update(ctx, name, func(cl *store.Cluster) (store.Event, error) {
		if !cl.Status.Live() {
			return store.Event{}, nil
		}
		cl.Status, cl.Phase, cl.Reason = store.Stopping, "stopping", why
		return store.Event{Kind: "stop", Message: why, Audit: audit}, nil
	})
	if err != nil {
		return err
	}
	crashpoint.Hit(ctx, crashpoint.CoreStopRecorded)
	c.queue.Add(name)
	return nil
}

// Logs writes the cluster's logs when the provider keeps them.
func (c *Core) Logs(ctx context.Context, owner, name string, tail int, w io.Writer) error {
	if _, err := c.Get(ctx, owner, name); err != nil {
		return err
	}
	lr, ok := c.provider.(providers.LogReader)
	if !ok {
		return fmt.Errorf("%w: the %s provider does not keep logs", ErrInvalid, c.provider.Name())
	}
	err := lr.Logs(ctx, name, tail, w)
	if errors.Is(err, providers.ErrNotFound) {
		return fmt.Errorf("%w: cluster %s has no logs yet", ErrNotFound, name)
	}
	return err
}

// Shutdown stops every active cluster of this gateway (used when the
// gateway is configured to stop its clusters on exit).
func (c *Core) Shutdown(ctx context.Context) {
	active, err := c.store.ListClusters(ctx, store.Filter{Statuses: store.ActiveStatuses})
	if err != nil {
		c.log.Error("shutdown: cannot list clusters", "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, cl := range active {
		if cl.Provider != c.provider.Name() {
			continue
		}
		// With replicas, each stops only the clusters it holds (or that
		// nobody holds); the others' stay with them.
		if held, err := c.store.AcquireLease(ctx, cl.Name, c.cfg.ReplicaID, c.cfg.LeaseTTL); err != nil || !held {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.provider.StopCluster(ctx, cl.Name); err != nil {
				c.log.Error("shutdown: stop cluster", "cluster", cl.Name, "err", err)
				return
			}
			c.router.DeleteRoute(cl.Name)
			ends := c.endStops(ctx, cl.Name)
			_, err := c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
				x.Reason = "the gateway shut down"
				ev := c.stopped(x)
				ev.Ledger = ends
				return ev, nil
			})
			if err != nil {
				c.log.Error("shutdown: record stop", "cluster", cl.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// startPoll is how soon to look again at a cluster that is coming up,
// elapsed after it was asked for: often at first, when a local or container
// cluster is about to be ready and every poll saved is latency the user
// sees, then less, up to ceiling, for machines that take minutes to boot
// (whose Describe calls a cloud API).
func startPoll(elapsed, ceiling time.Duration) time.Duration {
	return min(max(elapsed/20, 20*time.Millisecond), ceiling)
}

// startPoll is how soon to look again at a cluster coming up on this
// backend: for a cloud backend from its StartPoll up to the poll interval
// (a machine boots in a minute or two; polling it ten times a second
// only spends the account's request rate), else the fast cadence that a
// local or container cluster's time to ready needs.
func (c *Core) startPoll(elapsed, ceiling time.Duration) time.Duration {
	if p, ok := c.provider.(providers.StartPacer); ok {
		return cloudStartPoll(elapsed, p.StartPoll(), c.cfg.PollInterval)
	}
	return startPoll(elapsed, ceiling)
}

// cloudStartPoll grows like startPoll, from first to ceiling.
func cloudStartPoll(elapsed, first, ceiling time.Duration) time.Duration {
	return min(max(elapsed/20, first), max(ceiling, first))
}

func (c *Core) event(ctx context.Context, name, kind, msg string) {
	_, err := c.update(ctx, name, func(*store.Cluster) (store.Event, error) {
		return store.Event{Kind: kind, Message: msg}, nil
	})
	if err != nil {
		c.log.Warn("record event", "cluster", name, "err", err)
	}
}

func (c *Core) logTail(ctx context.Context, name string) string {
	lr, ok := c.provider.(providers.LogReader)
	if !ok {
		return ""
	}
	var b strings.Builder
	_ = lr.Logs(ctx, name, 15, &b)
	return strings.TrimRight(b.String(), "\n")
}

func findScheduler(ms []providers.Member) *providers.Member {
	for i := range ms {
		if ms[i].Role == providers.RoleScheduler {
			return &ms[i]
		}
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
