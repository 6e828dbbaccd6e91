package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/store"
)

// benchSweeper fails the benchmark runs whose client stopped renewing
// their lease and stops the clusters they hold: the gateway, not the
// client, owns a run's clusters, so a killed laptop or a lost network
// leaves nothing running past the lease.
type benchSweeper struct {
	store interface {
		LapsedBenchRuns(ctx context.Context, now time.Time, limit int) ([]store.LapsedBenchRun, error)
		FinishBenchRun(ctx context.Context, id, status, errMsg string) error
	}
	clusters interface {
		Stop(ctx context.Context, owner, name, why string) error
	}
	lease time.Duration
	now   func() time.Time
	log   *slog.Logger
}

// sweep handles the runs lapsed now; it returns how many it failed.
func (b *benchSweeper) sweep(ctx context.Context) int {
	runs, err := b.store.LapsedBenchRuns(ctx, b.now(), 0)
	if err != nil {
		b.log.Warn("bench runs: cannot list runs whose client went away", "err", err)
		return 0
	}
	n := 0
	for _, r := range runs {
		// Clusters first: a run marked failed is not listed again, and
		// a replica that dies here leaves it for the next sweep.
		stopped := 0
		for _, c := range r.Clusters {
			err := b.clusters.Stop(ctx, r.Owner, c, "its benchmark run's client went away")
			switch {
			case err == nil:
				stopped++
			case errors.Is(err, store.ErrNotFound):
			default:
				b.log.Warn("bench runs: cannot stop a cluster of a run whose client went away", "run", r.ID, "cluster", c, "err", err)
			}
		}
		msg := fmt.Sprintf("its client stopped reporting (no news for %s, bench.run_lease): the gateway stopped its %d cluster(s); its samples are left out of regression checks", b.lease, len(r.Clusters))
		if err := b.store.FinishBenchRun(ctx, r.ID, store.BenchFailed, msg); err != nil && !errors.Is(err, store.ErrBenchFinished) {
			b.log.Warn("bench runs: cannot mark a run failed", "run", r.ID, "err", err)
			continue
		}
		n++
		b.log.Info("bench run failed: its client went away", "run", r.ID, "owner", r.Owner, "clusters", len(r.Clusters), "stopped", stopped)
	}
	return n
}

// loop sweeps every quarter of the lease until ctx ends.
func (b *benchSweeper) loop(ctx context.Context) {
	if b.lease <= 0 {
		b.lease = api.DefaultBenchRunLease
	}
	every := b.lease / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.sweep(ctx)
		}
	}
}
