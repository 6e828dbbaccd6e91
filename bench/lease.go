package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

// Holder renews a run's lease with the gateway and names the clusters
// the run holds: a run whose client stops renewing is failed by the
// gateway, which stops its clusters (bench.run_lease). A Recorder that
// is also a Holder is renewed by Run as it goes.
type Holder interface {
	HoldRun(ctx context.Context, runID string, clusters []string) (lease time.Duration, err error)
}

// LeaseAPI is the part of the API a run's lease goes through;
// *client.Client has it.
type LeaseAPI interface {
	RenewBenchRun(ctx context.Context, runID string, clusters []string) (apitype.BenchLeaseJSON, error)
}

// HoldRun implements Holder when the API has leases.
func (r APIRecorder) HoldRun(ctx context.Context, runID string, clusters []string) (time.Duration, error) {
	l, ok := r.API.(LeaseAPI)
	if !ok {
		return 0, errNoLeases
	}
	v, err := l.RenewBenchRun(ctx, runID, clusters)
	if err != nil {
		return 0, err
	}
	return time.Duration(v.LeaseSeconds * float64(time.Second)), nil
}

var errNoLeases = errors.New("this gateway holds no bench run leases")

// lease keeps a run's lease while the run goes on.
type lease struct {
	h     Holder
	runID string
	log   func(string)

	mu     sync.Mutex
	every  time.Duration
	warned bool
	stop   chan struct{}
	done   chan struct{}
}

// holdRun starts renewing the run's lease (when the recorder can) until
// the returned lease is ended; clusters says what the run holds now.
func holdRun(ctx context.Context, rec Recorder, runID string, clusters func() []string, log func(string)) *lease {
	h, ok := rec.(Holder)
	if !ok {
		return nil
	}
	l := &lease{h: h, runID: runID, log: log, every: time.Minute, stop: make(chan struct{}), done: make(chan struct{})}
	l.renew(ctx, clusters())
	go func() {
		defer close(l.done)
		for {
			l.mu.Lock()
			every := l.every
			l.mu.Unlock()
			t := time.NewTimer(every)
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				l.renew(ctx, clusters())
			}
		}
	}()
	return l
}

// renew renews the lease now, naming clusters; a failure is said once
// (the gateway fails the run if renewals stay away for a whole lease).
func (l *lease) renew(ctx context.Context, clusters []string) {
	if l == nil {
		return
	}
	d, err := l.h.HoldRun(ctx, l.runID, clusters)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if !l.warned && !errors.Is(err, errNoLeases) && ctx.Err() == nil {
			l.warned = true
			l.log(fmt.Sprintf("  could not renew the run's lease with the gateway (it stops the run's clusters when its client is silent for too long): %v", err))
		}
		l.every = min(l.every, 10*time.Second) // try again well within any lease
		return
	}
	if d > 0 {
		l.every = max(d/3, 100*time.Millisecond)
	}
}

func (l *lease) end() {
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
}
