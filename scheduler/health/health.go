// Package health watches the schedulers of running clusters for the
// control loop: a stream of counts per settled cluster (watch.go), parked
// between lines, and a poll of counts.json over one kept-alive
// connection per cluster (counts.go) for what does not stream. Both
// verify an https dashboard against its cluster's own certificate
// (newCountsEntry).
package health

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// Counts is what a scheduler's counts.json (or a line of its watch) says.
type Counts struct {
	Workers int `json:"workers"`
	// Desired is the scheduler's own estimate of the workers its load
	// needs (Scheduler.adaptive_target, what Dask's Adaptive follows).
	Desired    int `json:"desired_workers"`
	Processing int `json:"processing"`
	Waiting    int `json:"waiting"`
	Clients    int `json:"clients"`
}

// Busy: tasks running or queued, or a client connected (the scheduler
// counts one client of its own, for fire-and-forget futures).
func (s Counts) Busy() bool { return s.Processing > 0 || s.Waiting > 0 || s.Clients > 1 }

// PollTimeout bounds one counts.json request, and a watch's dial.
const PollTimeout = 3 * time.Second

// Config is what a Watcher needs.
type Config struct {
	// Timeout is the heartbeat timeout, Beat the heartbeat interval a
	// stream is asked for.
	Timeout, Beat time.Duration
	// Lines is told of each counts line of a cluster's stream, on its
	// watch's goroutine, and whether the line before said busy
	// (heartbeats only move the watch's Heard).
	Lines func(cluster string, c *Counts, wasBusy bool)
	// Ended is told once when a live watch ends.
	Ended func(cluster string, err error)
}

// Watcher is the clusters' watches and polls.
type Watcher struct {
	polls   *countsPool
	watches *watchPool
}

// New makes a Watcher; Run starts its watches.
func New(cfg Config) *Watcher {
	h := &Watcher{polls: newCountsPool(), watches: newWatchPool(cfg.Timeout, cfg.Beat, cfg.Lines, cfg.Ended)}
	// A streaming cluster's pooled counts.json connection is not needed.
	h.watches.live = h.polls.Drop
	return h
}

// Run has Watch start watches under ctx; they end with it.
func (h *Watcher) Run(ctx context.Context) { h.watches.run(ctx) }

// Counts asks cl's scheduler for its counts.json, within PollTimeout.
func (h *Watcher) Counts(ctx context.Context, cl *store.Cluster) (Counts, error) {
	return h.polls.counts(ctx, cl)
}

// Watch has cl's scheduler watched and returns its watch: the one open
// already unless it ended, its retry is due, or cl's address or
// certificate changed. Nil before Run.
func (h *Watcher) Watch(cl *store.Cluster) *Watch {
	w := h.watches.ensure(cl)
	if w != nil && w.State() == Live {
		h.polls.Drop(cl.Name) // the stream serves
	}
	return w
}

// DropWatch ends cluster's watch if it is still w (a full pass may have
// opened a new one meanwhile).
func (h *Watcher) DropWatch(cluster string, w *Watch) { h.watches.dropIf(cluster, w) }

// Forget ends cluster's watch and closes its poll's connection.
func (h *Watcher) Forget(cluster string) {
	h.polls.Drop(cluster)
	h.watches.drop(cluster)
}

// LastHeard is when cluster's stream last said something, if it streams.
func (h *Watcher) LastHeard(cluster string) (time.Time, bool) { return h.watches.lastHeard(cluster) }

// KeepOnly ends the watches of clusters keep does not name.
func (h *Watcher) KeepOnly(keep func(cluster string) bool) {
	if h.watches.Len() > 0 {
		h.watches.keepOnly(keep)
	}
}

// Silence is how long a stream may say nothing before its cluster needs a
// full pass: the heartbeat interval and a margin.
func (h *Watcher) Silence() time.Duration { return h.watches.silence }

// Watching is the number of watches held.
func (h *Watcher) Watching() int { return h.watches.Len() }

// Polling is the number of clusters with a poll's connection.
func (h *Watcher) Polling() int { return h.polls.Len() }

// Streaming is the number of watches streaming now.
func (h *Watcher) Streaming() int64 { return h.watches.open.Load() }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
