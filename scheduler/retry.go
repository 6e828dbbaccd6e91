package scheduler

import (
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
)

// A cluster whose pass failed (most often: the database went away) is
// tried again after a wait that doubles with each failure in a row, from
// retryBase up to retryMax, so that an outage costs the database little
// while it lasts and work resumes within retryMax once it ends.
const (
	retryBase = 500 * time.Millisecond
	retryMax  = 4 * time.Second
)

// retries are the failed passes in a row, per cluster. They are the
// worker's, not the cluster's record's (as a rate-limited work queue keeps
// its items' failures): a pass that forgets its cluster and then fails
// (fail's write with the database away) keeps backing off.
type retries struct {
	mu       sync.Mutex
	failures map[string]int
}

// retryAfter counts one more failure of the cluster's pass and says when
// to try again.
func (c *Core) retryAfter(name string) time.Duration {
	r := &c.retries
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures == nil {
		r.failures = map[string]int{}
	}
	r.failures[name]++
	return backoff.Window(r.failures[name], retryBase, retryMax)
}

// succeeded ends the cluster's run of failures.
func (c *Core) succeeded(name string) {
	r := &c.retries
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, name)
}
