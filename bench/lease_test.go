package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// holder is a Recorder that is also a Holder: it records each renewal.
type holder struct {
	Recorder
	mu    sync.Mutex
	calls [][]string
	fail  error
	again chan struct{}
}

func (h *holder) HoldRun(_ context.Context, runID string, clusters []string) (time.Duration, error) {
	h.mu.Lock()
	h.calls = append(h.calls, clusters)
	n := len(h.calls)
	h.mu.Unlock()
	if n == 4 {
		close(h.again)
	}
	if n == 2 {
		return 0, h.fail // one renewal fails
	}
	return 300 * time.Millisecond, nil
}

// TestLeaseRenewsWithClusters: a run renews its lease at once, names the
// clusters it holds, and goes on renewing within the lease the gateway
// gave until it ends; a failing renewal is said once.
func TestLeaseRenewsWithClusters(t *testing.T) {
	for _, fail := range []error{nil, errors.New("gateway unreachable")} {
		h := &holder{fail: fail, again: make(chan struct{})}
		var mu sync.Mutex
		held := []string{}
		var said []string
		l := holdRun(t.Context(), h, "br-1", func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(held) },
			func(m string) { said = append(said, m) })
		mu.Lock()
		held = append(held, "c1")
		mu.Unlock()
		l.renew(t.Context(), []string{"c1"})
		select {
		case <-h.again:
		case <-time.After(time.Minute): // a hang bound, not a timing assertion
			t.Fatal("the lease was not renewed on its own")
		}
		l.end()
		h.mu.Lock()
		if len(h.calls) < 4 || len(h.calls[0]) != 0 || !slices.Equal(h.calls[1], []string{"c1"}) || !slices.Equal(h.calls[3], []string{"c1"}) {
			t.Errorf("renewals %v: want one at once, one naming c1 when it started, then c1 again", h.calls)
		}
		h.mu.Unlock()
		if fail != nil && (len(said) != 1 || !strings.Contains(said[0], "gateway unreachable")) {
			t.Errorf("failing renewals said %q, want once", said)
		}
		if fail == nil && len(said) != 0 {
			t.Errorf("said %q", said)
		}
	}
	if l := holdRun(t.Context(), nil, "br-1", nil, nil); l != nil {
		t.Error("a recorder without leases holds none")
	}
}
