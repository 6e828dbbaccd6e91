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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
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
	UpdateOwned(ctx context.Context, name string, monthStart time.Time, fn store.OwnedUpdateFunc) (*store.Cluster, error)
	RecordLedger(ctx context.Context, cluster string, entries ...store.LedgerEntry) error
	OpenMembers(ctx context.Context, cluster string) (map[string]time.Time, error)
	AcquireLease(ctx context.Context, cluster, holder string, ttl time.Duration) (bool, error)
	ReleaseLeases(ctx context.Context, holder string) error
	RenewLeases(ctx context.Context, holder string, ttl time.Duration) error
	ActiveLeases(ctx context.Context) ([]store.ActiveLease, error)
}

// Router publishes where each running cluster's scheduler and dashboard are.
type Router interface {
	// clusterCert is the cluster's certificate (PEM), which an https
	// dashboard must present.
	SetRoute(cluster, owner, schedulerAddr, dashboardURL string, clusterCert []byte)
	DeleteRoute(cluster string)
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
}

// Core is the scheduling core.
type Core struct {
	cfg      Config
	store    Store
	provider providers.Provider
	router   Router
	log      *slog.Logger
	now      func() time.Time
	// dash keeps a connection per cluster for the health poll (health.go),
	// each verifying https dashboards against that cluster's certificate.
	dash *countsPool
	// health holds each settled cluster's stream of counts (watch.go).
	health *watchPool
	queue  *queue
	// The sweep's own state (its goroutine only).
	leasesMu       sync.Mutex // leases: written by the sweep, read by the reaper too
	leases         leaseRead
	membersChecked time.Time

	mu                    sync.Mutex
	watchers              map[string]*watch          // per cluster, closed on its next change
	exits                 map[string]map[string]bool // workers seen exiting on their own, per cluster (names are never reused)
	active                map[string]time.Time       // last time each running cluster was seen busy
	reaped                atomic.Int64               // leftover clusters the reaper stopped
	cleaned               map[string]bool            // clusters the reaper tidied whose stopped members the provider still lists
	firstSeen             map[string]time.Time       // when the reaper first saw each leftover the cloud gives no date for (reaper.go)
	answered              map[string]time.Time       // last answer of each running scheduler
	downSince             map[string]time.Time       // when each adaptive cluster first asked for fewer workers
	quotaNote             map[string]string          // per cluster, the last quota message recorded for adaptive scaling
	settled               map[string]*settled        // running clusters with nothing to do, which the sweep watches (sweep.go)
	polled                map[string]*settled        // those of settled not yet on the due heaps: streams not live, polled schedulers
	settles               uint64                     // clusters settled so far
	settlesChecked        uint64                     // settles when the sweep last compared settled with a read of the leases
	settledCompared       time.Time                  // when it did
	silenceDue, expiryDue dueHeap                    // the rest, by deadline (due.go)
	failures              map[string]int             // failed passes in a row, per cluster (retry.go)
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
		dash:      newCountsPool(),
		queue:     newQueue(),
		watchers:  map[string]*watch{},
		exits:     map[string]map[string]bool{},
		active:    map[string]time.Time{},
		answered:  map[string]time.Time{},
		downSince: map[string]time.Time{},
		quotaNote: map[string]string{},
		settled:   map[string]*settled{},
		polled:    map[string]*settled{},
		failures:  map[string]int{},
	}
	c.health = newWatchPool(cfg.HeartbeatTimeout, cfg.HeartbeatInterval, c.watchLine, c.watchEnded)
	c.health.live = c.dash.Drop
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
	c.health.run(ctx)
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

type watch struct {
	ch      chan struct{}
	waiters int
}

func (c *Core) notify(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.watchers[name]; ok {
		close(w.ch)
		delete(c.watchers, name)
	}
}

// watch returns a channel closed on the cluster's next change, and a
// function to call when no longer waiting, so that waits on names that never
// change leave nothing behind.
func (c *Core) watch(name string) (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.watchers[name]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		c.watchers[name] = w
	}
	w.waiters++
	return w.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.waiters--
		if w.waiters == 0 && c.watchers[name] == w {
			delete(c.watchers, name)
		}
	}
}

// update applies fn to the stored cluster and wakes any waiters.
func (c *Core) update(ctx context.Context, name string, fn store.UpdateFunc) (*store.Cluster, error) {
	cl, err := c.store.UpdateCluster(ctx, name, fn)
	if err == nil {
		c.notify(name)
	}
	return cl, err
}

// updateOwned is update for growth that quotas bound: fn also sees the
// owner's other live clusters and this month's ledger totals.
func (c *Core) updateOwned(ctx context.Context, name string, fn store.OwnedUpdateFunc) (*store.Cluster, error) {
	cl, err := c.store.UpdateOwned(ctx, name, quota.MonthStart(c.now()), fn)
	if err == nil {
		c.notify(name)
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
	opts, err := c.cfg.Limits.ParseOptions(raw)
	if err != nil {
		return nil, err
	}
	if opts.Env != "" && c.cfg.Envs == nil {
		return nil, fmt.Errorf("%w: this gateway builds no environments: give an image instead of env", ErrInvalid)
	}
	eff, err := c.effective(ctx, who)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	shape := c.shape(sched, worker)
	if err := eff.CheckShape(shape, opts.Workers, time.Duration(opts.IdleTimeout)*time.Second); err != nil {
		return nil, err
	}
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
		err = c.store.AdmitCluster(ctx, cl, monthStart, func(live store.Usage, month store.Totals) error {
			return eff.Admit(quota.InUseOf(live), monthOf(monthStart, month), shape, opts.Workers)
		})
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
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch, done := c.watch(name)
		cl, err := c.Get(ctx, owner, name)
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
		case <-time.After(time.Second): // another replica may have changed it
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

// Scale sets the wanted number of workers. A count above the per-cluster
// limit is clamped; growth beyond the owner's quota is clamped or refused
// (quotas.on_exceed). The returned message says what was done instead.
func (c *Core) Scale(ctx context.Context, who Who, name string, count int) (msg string, err error) {
	if _, err := c.Get(ctx, who.ID, name); err != nil {
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
	eff, err := c.effective(ctx, who)
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
						"Scale request of %d workers refused: %s (the cluster keeps its %d workers)", asked, quotaMessage(why), cl.DesiredWorkers)}
				}
				msg = fmt.Sprintf("Scale request of %d workers is beyond your quota: %s; scaling to %d instead.", asked, quotaMessage(why), allowed)
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
		return store.Event{Kind: "scale", Message: ev}, nil
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
	if _, err := c.Get(ctx, who.ID, name); err != nil {
		return "", err
	}
	eff, err := c.effective(ctx, who)
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
		if !active {
			return store.Event{Kind: "adapt", Message: "adaptive scaling off by " + who.Name}, nil
		}
		want := max(minimum, min(cl.DesiredWorkers, maximum))
		if want > cl.DesiredWorkers {
			// A minimum is growth now: it is bound like a scale.
			allowed, why := c.growTo(eff, cl, others, month, want)
			if allowed < want {
				if c.onExceed() == quota.Refuse {
					return store.Event{}, &quota.ExceededError{Limit: limitOf(why), Msg: fmt.Sprintf(
						"Adaptive minimum of %d workers refused: %s", minimum, quotaMessage(why))}
				}
				notes = append(notes, fmt.Sprintf("Adaptive minimum of %d workers is beyond your quota: %s; starting from %d instead.", minimum, quotaMessage(why), allowed))
				want = allowed
			}
		}
		cl.DesiredWorkers = want
		return store.Event{Kind: "adapt", Message: fmt.Sprintf("adaptive scaling between %d and %d workers by %s", minimum, maximum, who.Name)}, nil
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
func (c *Core) adapt(ctx context.Context, cl *store.Cluster, counts schedulerCounts) (bool, error) {
	target := max(cl.AdaptMin, min(counts.Desired, cl.AdaptMax))
	now := c.now()
	c.mu.Lock()
	if target >= cl.DesiredWorkers {
		delete(c.downSince, cl.Name)
	} else if _, ok := c.downSince[cl.Name]; !ok {
		c.downSince[cl.Name] = now
	}
	since, down := c.downSince[cl.Name]
	c.mu.Unlock()
	if target == cl.DesiredWorkers || (down && now.Sub(since) < adaptDownAfter) {
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
	delete(c.downSince, cl.Name)
	c.mu.Unlock()
	return err == nil, err
}

// noteQuota records, once per distinct message, why adaptive scaling was
// held back, so that the cluster's events say so without repeating it
// at every poll.
func (c *Core) noteQuota(ctx context.Context, cluster, note string) {
	c.mu.Lock()
	same := c.quotaNote[cluster] == note
	c.quotaNote[cluster] = note
	c.mu.Unlock()
	if !same {
		c.log.Info("adaptive scaling held by quota", "cluster", cluster, "why", note)
		c.event(ctx, cluster, "quota", note)
	}
}

const adaptDownAfter = 3 * time.Second

// Stop asks for the cluster to be stopped. Stopping a stopped cluster is
// not an error.
func (c *Core) Stop(ctx context.Context, owner, name, why string) error {
	if _, err := c.Get(ctx, owner, name); err != nil {
		return err
	}
	_, err := c.update(ctx, name, func(cl *store.Cluster) (store.Event, error) {
		if !cl.Status.Live() {
			return store.Event{}, nil
		}
		cl.Status, cl.Phase, cl.Reason = store.Stopping, "stopping", why
		return store.Event{Kind: "stop", Message: why}, nil
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

// ---- the reconcile loop ----

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
	c.router.SetRoute(cl.Name, cl.Owner, sched.Address, sched.DashboardURL, cl.TLSCert)
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

func workerPhase(ready, desired int) string {
	if ready >= desired {
		return "running"
	}
	return fmt.Sprintf("waiting for workers %d/%d", ready, desired)
}

func (c *Core) reconcileRunning(ctx context.Context, cl *store.Cluster) (time.Duration, error) {
	members, err := c.provider.Describe(ctx, cl.Name)
	if err != nil {
		return time.Second, err
	}
	sched := findScheduler(members)
	if sched == nil || sched.State == providers.StateStopped {
		reason := "the scheduler is gone"
		if sched != nil && sched.Reason != "" {
			reason = "the scheduler stopped: " + sched.Reason
		}
		return 0, c.fail(ctx, cl, reason)
	}
	if sched.Address != "" && (sched.Address != cl.SchedulerAddress || sched.DashboardURL != cl.DashboardAddress) {
		// A re-adopted or restarted scheduler may have moved.
		cl, err = c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
			x.SchedulerAddress, x.DashboardAddress = sched.Address, sched.DashboardURL
			return store.Event{}, nil
		})
		if err != nil {
			return time.Second, err
		}
	}
	c.router.SetRoute(cl.Name, cl.Owner, cl.SchedulerAddress, cl.DashboardAddress, cl.TLSCert)

	if cl, err = c.adoptLegacy(ctx, cl, members); errors.Is(err, errStale) {
		return 1, nil
	} else if err != nil {
		return time.Second, err
	}
	// Before anything starts or stops below: members started in this
	// pass are not in members yet.
	open, err := c.syncLedger(ctx, cl, members)
	if err != nil {
		return time.Second, err
	}
	var alive []providers.Member
	for _, m := range members {
		if m.Role != providers.RoleWorker {
			continue
		}
		if m.State == providers.StateStopped {
			// Workers stopped on request carry no reason; one that exited on
			// its own is counted once, however often the backend reports it.
			if m.Reason == "" || !c.countExit(cl.Name, m.Name) {
				continue
			}
			_ = c.provider.StopWorker(ctx, cl.Name, m.Name) // let the backend forget it
			if table, ok := images.MismatchIn(m.Reason); ok {
				// Replacements would run the same image: fail at once.
				return 0, c.fail(ctx, cl, fmt.Sprintf("%s runs other software than the client:\n%s", m.Name, table))
			}
			n := c.exitCount(cl.Name)
			c.log.Warn("worker exited", "cluster", cl.Name, "worker", m.Name, "reason", firstLine(m.Reason))
			c.event(ctx, cl.Name, "worker-exited", m.Name+": "+m.Reason)
			if n > c.cfg.WorkerRestarts {
				return 0, c.fail(ctx, cl, fmt.Sprintf("workers keep exiting (%d exits; the limit is %d). Last: %s", n, c.cfg.WorkerRestarts, m.Reason))
			}
			continue
		}
		if !open[m.Name] {
			// Its stop is in the ledger (recorded at the intent) but it
			// still runs: a stop that failed, or a crash in between. Stop
			// it again, and do not count it as one of the wanted workers.
			if err := c.provider.StopWorker(ctx, cl.Name, m.Name); err != nil {
				return time.Second, err
			}
			continue
		}
		alive = append(alive, m)
	}

	if missing := cl.DesiredWorkers - len(alive); missing > 0 {
		// Record the names before starting anything: a crash between the
		// two can then never start a worker twice under one name.
		first := cl.NextWorkerSeq
		names := make([]string, 0, missing)
		for seq := first; seq < first+missing; seq++ {
			names = append(names, "worker-"+strconv.Itoa(seq))
		}
		cl, err = c.update(ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
			if x.Status != store.Running || x.NextWorkerSeq != first {
				return store.Event{}, errStale
			}
			x.NextWorkerSeq += missing
			return store.Event{Ledger: ledgerStart(shapeOf(x).Worker, names...)}, nil
		})
		if errors.Is(err, errStale) {
			return 1, nil
		}
		if err != nil {
			return time.Second, err
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkersNamed)
		spec, err := c.spec(cl)
		if err != nil {
			return 0, err
		}
		for _, w := range names {
			if err := c.provider.StartWorker(ctx, spec, w, cl.SchedulerAddress); err != nil {
				return 0, c.fail(ctx, cl, fmt.Sprintf("could not start %s: %v", w, err))
			}
			crashpoint.Hit(ctx, crashpoint.CoreWorkerLaunched)
		}
	} else if extra := len(alive) - cl.DesiredWorkers; extra > 0 {
		// Stop the newest first: the oldest hold the most data.
		sort.Slice(alive, func(i, j int) bool { return workerSeq(alive[i].Name) > workerSeq(alive[j].Name) })
		for _, m := range alive[:extra] {
			// The ledger stops at the intent, as it starts at one: a crash
			// after it only lets the stop happen later, and a member the
			// backend no longer lists is then never in doubt.
			if err := c.ledgerClosed(ctx, cl.Name, m.Name, time.Time{}); err != nil {
				return time.Second, err
			}
			crashpoint.Hit(ctx, crashpoint.CoreWorkerStopRecorded)
			if err := c.provider.StopWorker(ctx, cl.Name, m.Name); err != nil {
				return time.Second, err
			}
			crashpoint.Hit(ctx, crashpoint.CoreWorkerStopped)
		}
	}

	counts, err := c.connectedWorkers(ctx, cl)
	ready := counts.Workers
	if err != nil && outOfDescriptors(err) {
		// The gateway's own shortage says nothing of the scheduler: it is
		// not counted as silence, and the check is tried again.
		c.log.Warn("health check: the gateway has no file descriptor left (raise its limit)", "cluster", cl.Name, "err", err)
		c.mu.Lock()
		c.answered[cl.Name] = c.now()
		c.mu.Unlock()
		return c.cfg.PollInterval, nil
	}
	if err != nil {
		// A scheduler whose process lives but does not answer (hung,
		// overloaded, partitioned) is failed after the heartbeat timeout.
		c.mu.Lock()
		since, seen := c.answered[cl.Name]
		if !seen {
			since = c.now()
			c.answered[cl.Name] = since
		}
		// Its stream's last line counts as an answer too (heartbeats are
		// kept on the stream, not here: see watchLine).
		if heard, ok := c.health.lastHeard(cl.Name); ok {
			if at := c.now().Add(-time.Since(heard)); at.After(since) {
				since = at
				c.answered[cl.Name] = at
			}
		}
		c.mu.Unlock()
		if silent := c.now().Sub(since); silent >= c.cfg.HeartbeatTimeout {
			return 0, c.fail(ctx, cl, fmt.Sprintf("the scheduler stopped answering (nothing for %s: %v)", silent.Round(time.Second), err))
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
		return c.cfg.PollInterval / 5, nil
	}
	c.mu.Lock()
	c.answered[cl.Name] = c.now()
	c.mu.Unlock()
	why, err := c.expired(cl)
	if err != nil {
		return 0, err
	}
	if why != "" {
		c.log.Info("stopping cluster", "cluster", cl.Name, "why", why)
		return 1, c.Stop(ctx, cl.Owner, cl.Name, why)
	}
	if cl.Adaptive {
		if changed, err := c.adapt(ctx, cl, counts); err != nil {
			return time.Second, err
		} else if changed {
			return 1, nil
		}
	}
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
			return 1, nil
		}
		if err != nil {
			return time.Second, err
		}
		crashpoint.Hit(ctx, crashpoint.CoreWorkersReadyRecorded)
		cl = updated
	}
	if ready != cl.DesiredWorkers {
		return c.startPoll(c.now().Sub(cl.CreatedAt), 250*time.Millisecond), nil
	}
	if cl.Adaptive {
		return min(c.cfg.PollInterval, time.Second), nil // follow demand closely
	}
	// Nothing to do until something changes: the sweep watches it.
	return 0, c.settle(cl, members)
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
	last, ok := c.active[cl.Name]
	c.mu.Unlock()
	return c.expiredAt(cl, o, c.now(), last, ok)
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

// schedulerCounts is what the scheduler's counts.json says.
type schedulerCounts struct {
	Workers int `json:"workers"`
	// Desired is the scheduler's own estimate of the workers its load
	// needs (Scheduler.adaptive_target, what Dask's Adaptive follows).
	Desired    int `json:"desired_workers"`
	Processing int `json:"processing"`
	Waiting    int `json:"waiting"`
	Clients    int `json:"clients"`
}

// busy: tasks running or queued, or a client connected (the scheduler
// counts one client of its own, for fire-and-forget futures).
func (s schedulerCounts) busy() bool { return s.Processing > 0 || s.Waiting > 0 || s.Clients > 1 }

const pollTimeout = 3 * time.Second

// connectedWorkers asks the scheduler how many workers it has, and notes
// whether it is busy.
func (c *Core) connectedWorkers(ctx context.Context, cl *store.Cluster) (schedulerCounts, error) {
	counts, err := c.dash.counts(ctx, cl)
	if err != nil {
		return schedulerCounts{}, err
	}
	c.mu.Lock()
	if _, seen := c.active[cl.Name]; !seen || counts.busy() {
		c.active[cl.Name] = c.now()
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

func (c *Core) forget(name string) {
	c.dash.Drop(name)
	c.health.drop(name)
	c.mu.Lock()
	delete(c.exits, name)
	delete(c.active, name)
	delete(c.answered, name)
	delete(c.downSince, name)
	delete(c.quotaNote, name)
	delete(c.settled, name)
	c.mu.Unlock()
}

// countExit records a worker's unexpected exit; false if it was counted already.
func (c *Core) countExit(cluster, worker string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exits[cluster] == nil {
		c.exits[cluster] = map[string]bool{}
	}
	if c.exits[cluster][worker] {
		return false
	}
	c.exits[cluster][worker] = true
	return true
}

func (c *Core) exitCount(cluster string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.exits[cluster])
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
