package scheduler

import (
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

// retryAfter counts one more failure of the cluster's pass and says when
// to try again.
func (c *Core) retryAfter(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters.ensure(name)
	st.failures++
	return backoff.Window(st.failures, retryBase, retryMax)
}

// succeeded ends the cluster's run of failures.
func (c *Core) succeeded(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.clusters.get(name); st != nil {
		st.failures = 0
	}
}
