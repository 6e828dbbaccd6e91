package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/store"
)

// sweepStore is the store as an idle gateway's sweep reads it: the same
// leases, and a change count that does not move. Only the sweep's reads
// are here: the benchmark measures the loop's own bookkeeping.
type sweepStore struct {
	Store
	leases []store.ActiveLease
}

func (s *sweepStore) ActiveLeases(context.Context) ([]store.ActiveLease, error) {
	return s.leases, nil
}

func (s *sweepStore) Changes(context.Context) (int64, error) { return 1, nil }

// sweepProvider lists every cluster's members at once, and has none.
type sweepProvider struct{ providers.Provider }

func (sweepProvider) Name() string { return "bench" }

func (sweepProvider) ListMembers(context.Context) ([]providers.Member, error) { return nil, nil }

// BenchmarkSweep is one sweep over n settled clusters whose schedulers
// are polled (no health check due) and were seen idle once, with and without the resync over the
// kept read of the leases.
func BenchmarkSweep(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, resync := range []bool{false, true} {
			b.Run(fmt.Sprintf("clusters=%d/resync=%v", n, resync), func(b *testing.B) {
				st := &sweepStore{}
				c := New(Config{ReplicaID: "r1", HealthInterval: time.Hour}, st, sweepProvider{}, nil, nil)
				for i := range n {
					cl := &store.Cluster{Name: fmt.Sprintf("c%05d", i), Version: 1, Status: store.Running, StartedAt: time.Now(), Options: "{}"}
					c.settle(cl, nil)
					c.watchLine(cl.Name, &health.Counts{}, false) // asked once, as a pass does
					st.leases = append(st.leases, store.ActiveLease{Name: cl.Name, Status: store.Running, Version: 1, Holder: "r1"})
				}
				c.sweep(b.Context(), true)
				b.ResetTimer()
				for range b.N {
					c.sweep(b.Context(), resync)
				}
			})
		}
	}
}
