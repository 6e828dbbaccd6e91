package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/store"
)

// ReaperConfig tunes the reaper, which stops what runs under this gateway's
// ownership tag but belongs to no active cluster: leftovers of a crash
// between a provider call and the store write that should have followed,
// or of a stop that did not finish. Cloud backends bill such machines by
// the minute, so nothing the store does not know may run on. Providers
// that can list what a cluster shares by its tags (providers.LeftoverLister) also
// have those resources removed once no member leads to them.
type ReaperConfig struct {
	Interval time.Duration // 0 disables the reaper
	// Grace spares members and leftovers younger than this: a member
	// started a moment ago may belong to a request still being recorded
	// elsewhere. A leftover the cloud gives no date for (a security group)
	// is aged from when this process first saw it.
	Grace  time.Duration
	DryRun bool // only log what would be reaped
}

// Reaped is how many leftover clusters the reaper has stopped (or, dry,
// found).
func (c *Core) Reaped() int64 { return c.reaped.Load() }

func (c *Core) runReaper(ctx context.Context) {
	if c.cfg.Reaper.Interval <= 0 {
		return
	}
	t := time.NewTicker(c.cfg.Reaper.Interval)
	defer t.Stop()
	for {
		c.ReapOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReapOnce lists the provider's resources and stops those of clusters the
// store does not know or has ended, past the grace period; then, when the
// provider can list them, removes the leftover resources of such clusters
// that no member leads to. Each listing is made once per pass, whatever
// the number of clusters.
func (c *Core) ReapOnce(ctx context.Context) {
	members, err := c.provider.List(ctx)
	if err != nil {
		c.log.Warn("reaper: cannot list resources", "err", err)
		return
	}
	var leftovers []providers.Leftover
	lister, canList := c.provider.(providers.LeftoverLister)
	if canList {
		// Listed before the store is read, as the members are: a cluster
		// made after the listing cannot have its resources in it.
		if leftovers, err = lister.ListLeftovers(ctx); err != nil {
			c.log.Warn("reaper: cannot list leftover resources", "err", err)
			canList = false
		}
	}
	now := c.now()
	byCluster := map[string][]providers.Member{}
	for _, m := range members {
		byCluster[m.Cluster] = append(byCluster[m.Cluster], m)
	}
	c.pruneCleaned(byCluster)
	// One read of what is active spares a lookup per running cluster (the
	// sweep's, if nothing changed since: a cluster missing from it is
	// looked up below anyway).
	leases, err := c.activeLeases(ctx)
	if err != nil {
		c.log.Warn("reaper: cannot list active clusters", "err", err)
		return
	}
	active := make(map[string]bool, len(leases))
	for _, l := range leases {
		active[l.Name] = true
	}
	for name, ms := range byCluster {
		if active[name] {
			continue // the reconcile loop owns it
		}
		c.reapCluster(ctx, name, ms, now)
	}
	if canList {
		c.reapLeftovers(ctx, lister, leftovers, byCluster, active, now)
	}
}

// reapCluster stops the listed members of a cluster that is not active
// in the store, once they are past the grace period.
func (c *Core) reapCluster(ctx context.Context, name string, ms []providers.Member, now time.Time) {
	cl, err := c.store.GetCluster(ctx, name)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		c.log.Warn("reaper: cannot look up cluster", "cluster", name, "err", err)
		return
	}
	if known && cl.Status.Active() {
		return // the reconcile loop owns it
	}
	live, young := 0, false
	for _, m := range ms {
		if m.State == providers.StateStopped {
			continue
		}
		live++
		if now.Sub(m.StartedAt) < c.cfg.Reaper.Grace {
			young = true
		}
	}
	if live > 0 && young {
		return
	}
	why := "unknown to the store"
	if known {
		why = "cluster is " + string(cl.Status)
	}
	if live == 0 {
		// Only records of stopped members: tidy them without fuss, once.
		// EC2 lists terminated instances for about an hour, and calling
		// StopCluster on every pass of that hour only costs API calls.
		if !c.cfg.Reaper.DryRun && !c.wasCleaned(name) && c.provider.StopCluster(ctx, name) == nil {
			c.markCleaned(name)
		}
		return
	}
	c.forgetCleaned(name) // a member runs again: reap it like any other
	if c.cfg.Reaper.DryRun {
		c.log.Warn("reaper (dry run): would stop leftover resources", "cluster", name, "running", live, "why", why)
		c.reaped.Add(1)
		return
	}
	if err := c.provider.StopCluster(ctx, name); err != nil {
		c.log.Error("reaper: stop leftover resources", "cluster", name, "err", err)
		return
	}
	crashpoint.Hit(ctx, crashpoint.CoreReaperOrphanStopped)
	c.reaped.Add(1)
	c.log.Warn("reaper: stopped leftover resources", "cluster", name, "running", live, "why", why)
	if known {
		c.event(ctx, name, "reaped", "stopped "+why+" leftovers")
	}
}

// reapLeftovers removes the listed leftovers whose cluster the store does
// not know or has ended, once they are older than the grace period. A
// cluster the provider still lists members of is left to StopCluster
// above, which removes what it shares with its members too.
func (c *Core) reapLeftovers(ctx context.Context, lister providers.LeftoverLister, leftovers []providers.Leftover, members map[string][]providers.Member, active map[string]bool, now time.Time) {
	slices.SortFunc(leftovers, func(a, b providers.Leftover) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	listed := make(map[string]bool, len(leftovers))
	for _, l := range leftovers {
		listed[leftoverKey(l)] = true
	}
	c.pruneLeftovers(listed)

	type verdict struct {
		skip bool
		why  string
	}
	verdicts := map[string]verdict{} // one store lookup per cluster
	judge := func(name string) verdict {
		if v, ok := verdicts[name]; ok {
			return v
		}
		v := verdict{skip: true}
		switch cl, err := c.store.GetCluster(ctx, name); {
		case errors.Is(err, store.ErrNotFound):
			v = verdict{why: "unknown to the store"}
		case err != nil:
			c.log.Warn("reaper: cannot look up cluster", "cluster", name, "err", err)
		case !cl.Status.Active():
			v = verdict{why: "cluster is " + string(cl.Status)}
		}
		verdicts[name] = v
		return v
	}
	removed := map[string]int{}
	whys := map[string]string{}
	for _, l := range leftovers {
		key := leftoverKey(l)
		if l.Cluster == "" || active[l.Cluster] || len(members[l.Cluster]) > 0 || c.wasCleaned(key) {
			continue
		}
		v := judge(l.Cluster)
		if v.skip {
			continue // active, or unknown for now: the reconcile loop owns it
		}
		made := l.Created
		if made.IsZero() {
			// The cloud does not date it (a security group): the grace runs
			// from when this process first saw it unowned.
			made = c.noteSeen(key, now)
		}
		if now.Sub(made) < c.cfg.Reaper.Grace {
			continue
		}
		whys[l.Cluster] = v.why
		if c.cfg.Reaper.DryRun {
			c.log.Warn("reaper (dry run): would remove leftover resource", "cluster", l.Cluster, "kind", l.Kind, "id", l.ID, "why", v.why)
			removed[l.Cluster]++
			continue
		}
		if err := lister.DeleteLeftover(ctx, l); err != nil {
			// A group still held by a network interface, say: next pass.
			c.log.Warn("reaper: cannot remove leftover resource", "cluster", l.Cluster, "kind", l.Kind, "id", l.ID, "err", err)
			continue
		}
		crashpoint.Hit(ctx, crashpoint.CoreReaperLeftoverDeleted)
		c.markCleaned(key)
		removed[l.Cluster]++
		c.log.Warn("reaper: removed leftover resource", "cluster", l.Cluster, "kind", l.Kind, "id", l.ID, "why", v.why)
	}
	for name, n := range removed {
		c.reaped.Add(1)
		if !c.cfg.Reaper.DryRun && whys[name] != "unknown to the store" {
			c.event(ctx, name, "reaped", fmt.Sprintf("removed %d leftover resource(s) of a %s", n, strings.TrimPrefix(whys[name], "cluster is ")+" cluster"))
		}
	}
}

// leftoverKey names a leftover in the reaper's memory. The NUL cannot
// occur in a cluster name, so these keys never meet the clusters'.
func leftoverKey(l providers.Leftover) string {
	return "leftover\x00" + l.Kind + "\x00" + l.ID
}

// maxCleaned bounds the reaper's memory of tidied clusters. Past it the
// reaper forgets nothing and remembers nothing new: the worst case is the
// old behaviour, one needless StopCluster per pass.
const maxCleaned = 10000

// reaperMemory is what the reaper remembers between passes, keyed by
// cluster name or leftoverKey: not the loop's clusters, so not in their
// records.
type reaperMemory struct {
	mu        sync.Mutex
	cleaned   map[string]bool      // clusters tidied whose stopped members the provider still lists
	firstSeen map[string]time.Time // when each leftover the cloud gives no date for was first seen
}

func (c *Core) wasCleaned(cluster string) bool {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	return c.tidied.cleaned[cluster]
}

func (c *Core) markCleaned(cluster string) {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	if c.tidied.cleaned == nil {
		c.tidied.cleaned = map[string]bool{}
	}
	if len(c.tidied.cleaned) < maxCleaned {
		c.tidied.cleaned[cluster] = true
	}
}

func (c *Core) forgetCleaned(cluster string) {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	delete(c.tidied.cleaned, cluster)
}

// pruneCleaned forgets the clusters the provider no longer lists: once
// their records are gone there is nothing left to skip.
func (c *Core) pruneCleaned(listed map[string][]providers.Member) {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	for name := range c.tidied.cleaned {
		if strings.HasPrefix(name, "leftover\x00") {
			continue // pruneLeftovers' to forget
		}
		if _, ok := listed[name]; !ok {
			delete(c.tidied.cleaned, name)
		}
	}
}

// pruneLeftovers forgets the leftovers the provider no longer lists: those
// removed, and those someone else removed before their grace ran out.
func (c *Core) pruneLeftovers(listed map[string]bool) {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	for key := range c.tidied.cleaned {
		if strings.HasPrefix(key, "leftover\x00") && !listed[key] {
			delete(c.tidied.cleaned, key)
		}
	}
	for key := range c.tidied.firstSeen {
		if !listed[key] {
			delete(c.tidied.firstSeen, key)
		}
	}
}

// noteSeen returns when the reaper first saw the leftover, noting now if
// it had not. Past maxCleaned entries nothing new is noted, and the
// leftover counts as seen now on every pass: kept, the safe side.
func (c *Core) noteSeen(key string, now time.Time) time.Time {
	c.tidied.mu.Lock()
	defer c.tidied.mu.Unlock()
	if t, ok := c.tidied.firstSeen[key]; ok {
		return t
	}
	if c.tidied.firstSeen == nil {
		c.tidied.firstSeen = map[string]time.Time{}
	}
	if len(c.tidied.firstSeen) < maxCleaned {
		c.tidied.firstSeen[key] = now
	}
	return now
}
