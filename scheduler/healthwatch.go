package scheduler

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/store"
)

// healthWatcher is what the loop needs of health watching (package
// health, made in New): its scheduler's counts, asked or streamed.
type healthWatcher interface {
	Run(ctx context.Context)
	Counts(ctx context.Context, cl *store.Cluster) (health.Counts, error)
	Watch(cl *store.Cluster) *health.Watch
	DropWatch(cluster string, w *health.Watch)
	Forget(cluster string)
	LastHeard(cluster string) (time.Time, bool)
	KeepOnly(keep func(cluster string) bool)
	Silence() time.Duration
	Watching() int
}

// watchLine takes a counts line of cluster's stream: an answer (the
// heartbeat clock), the idle clock's news (busy now, or until now), and,
// with workers other than the store's, a reason for a full pass.
func (c *Core) watchLine(cluster string, counts *health.Counts, wasBusy bool) {
	c.mu.Lock()
	now := c.now()
	st := c.clusters.ensure(cluster)
	st.answered = now
	s := st.settled
	if st.lastBusy.IsZero() || counts.Busy() || wasBusy {
		st.lastBusy = now
	}
	c.mu.Unlock()
	if s != nil && counts.Workers != s.cl.ReadyWorkers {
		c.requeue(cluster)
	}
}

// watchEnded queues a full pass for a cluster whose stream ended: it asks
// counts.json and describes the members, and fails the cluster if its
// scheduler is gone.
func (c *Core) watchEnded(cluster string, err error) {
	c.log.Debug("health watch ended", "cluster", cluster, "err", err)
	c.mu.Lock()
	settled := c.clusters.settledOf(cluster) != nil
	c.mu.Unlock()
	if settled {
		c.requeue(cluster)
	}
}
