// Package localtest helps tests that run real Dask schedulers with the
// local provider.
package localtest

import (
	"context"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Describer is the part of a provider the wait needs.
type Describer interface {
	Describe(ctx context.Context, cluster string) ([]providers.Member, error)
}

// WaitScheduler waits until the cluster's scheduler runs and returns its
// dashboard URL and its address; a scheduler that stops fails the test.
func WaitScheduler(ctx context.Context, t testing.TB, p Describer, cluster string) (dashboard, address string) {
	t.Helper()
	for {
		ms, err := p.Describe(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Role != providers.RoleScheduler {
				continue
			}
			switch m.State {
			case providers.StateStopped:
				t.Fatalf("scheduler stopped: %s", m.Reason)
			case providers.StateRunning:
				return m.DashboardURL, m.Address
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the scheduler did not come up")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
