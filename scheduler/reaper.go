package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/store"
)

// ReaperConfig tunes the reaper, which stops what runs under this gateway's
// ownership tag but belongs to no active cluster: leftovers of a crash
// between a provider call and the store write that should have followed,
// or of a stop that did not finish. Cloud backends bill such machines by
// the minute, so nothing the store does not know may run on.
type ReaperConfig struct {
	Interval time.Duration // 0 disables the reaper
	// Grace spares members younger than this: a member started a moment
	// ago may belong to a request still being recorded elsewhere.
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
// store does not know or has ended, past the grace period.
func (c *Core) ReapOnce(ctx context.Context) {
	members, err := c.provider.List(ctx)
	if err != nil {
		c.log.Warn("reaper: cannot list resources", "err", err)
		return
	}
	now := c.now()
	byCluster := map[string][]providers.Member{}
	for _, m := range members {
		byCluster[m.Cluster] = append(byCluster[m.Cluster], m)
	}
	c.pruneCleaned(byCluster)
	for name, ms := range byCluster {
		cl, err := c.store.GetCluster(ctx, name)
		known := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.Warn("reaper: cannot look up cluster", "cluster", name, "err", err)
			continue
		}
		if known && cl.Status.Active() {
			continue // the reconcile loop owns it
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
			continue
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
			continue
		}
		c.forgetCleaned(name) // a member runs again: reap it like any other
		if c.cfg.Reaper.DryRun {
			c.log.Warn("reaper (dry run): would stop leftover resources", "cluster", name, "running", live, "why", why)
			c.reaped.Add(1)
			continue
		}
		if err := c.provider.StopCluster(ctx, name); err != nil {
			c.log.Error("reaper: stop leftover resources", "cluster", name, "err", err)
			continue
		}
		c.reaped.Add(1)
		c.log.Warn("reaper: stopped leftover resources", "cluster", name, "running", live, "why", why)
		if known {
			c.event(ctx, name, "reaped", "stopped "+why+" leftovers")
		}
	}
}

// maxCleaned bounds the reaper's memory of tidied clusters. Past it the
// reaper forgets nothing and remembers nothing new: the worst case is the
// old behaviour, one needless StopCluster per pass.
const maxCleaned = 10000

func (c *Core) wasCleaned(cluster string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cleaned[cluster]
}

func (c *Core) markCleaned(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cleaned == nil {
		c.cleaned = map[string]bool{}
	}
	if len(c.cleaned) < maxCleaned {
		c.cleaned[cluster] = true
	}
}

func (c *Core) forgetCleaned(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cleaned, cluster)
}

// pruneCleaned forgets the clusters the provider no longer lists: once
// their records are gone there is nothing left to skip.
func (c *Core) pruneCleaned(listed map[string][]providers.Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.cleaned {
		if _, ok := listed[name]; !ok {
			delete(c.cleaned, name)
		}
	}
}
