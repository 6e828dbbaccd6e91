package scheduler

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// TestRetryBacksOffAndResets: a cluster whose passes keep failing (the
// database away) is tried again after waits that double up to retryMax,
// so that work resumes within retryMax of the database's return; a pass
// that succeeds starts the count again.
func TestRetryBacksOffAndResets(t *testing.T) {
	c := &Core{}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := c.retryAfter("a"); got != w {
			t.Errorf("failure %d: retry after %s, want %s", i+1, got, w)
		}
	}
	if got := c.retryAfter("b"); got != retryBase {
		t.Errorf("another cluster's first failure: %s, want %s", got, retryBase)
	}
	c.succeeded("a")
	if got := c.retryAfter("a"); got != retryBase {
		t.Errorf("first failure after a success: %s, want %s", got, retryBase)
	}
}

// TestRetryOutlivesForget: a pass that forgets its cluster and then fails
// (fail's record write with the database away) keeps backing off, rather
// than calling the provider again every retryBase for as long as the
// outage lasts.
func TestRetryOutlivesForget(t *testing.T) {
	c := New(Config{}, nil, retryProvider{}, nil, nil)
	c.retryAfter("a")
	c.retryAfter("a")
	c.forget("a")
	if got, want := c.retryAfter("a"), 2*time.Second; got != want {
		t.Errorf("third failure, after forget: retry after %s, want %s", got, want)
	}
}

type retryProvider struct{ providers.Provider }

func (retryProvider) Name() string { return "retry" }
