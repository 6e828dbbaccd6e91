// Package schedule runs stored benchmark schedules inside the gateway:
// each replica looks for due schedules, claims each one in the store (so
// that of several replicas exactly one runs a firing), runs the suite
// under the owner's identity and quotas through the gateway's own API
// (in process, with a credential that never leaves the process), checks
// the results against their history and alerts when a test regressed.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/store"
)

// Store is what the scheduler needs of the store.
type Store interface {
	ClaimDueSchedules(ctx context.Context, now time.Time, holder string, lease time.Duration) ([]*store.BenchSchedule, error)
	RenewBenchScheduleLease(ctx context.Context, id, holder string, now time.Time, lease time.Duration) (bool, error)
	CompleteBenchSchedule(ctx context.Context, id, holder string, lastRun time.Time, runID, errMsg string, nextRun time.Time) (bool, error)
	bench.HistorySource
}

// RunFunc runs one firing of a schedule and returns the run it recorded
// ("" when none was).
type RunFunc func(ctx context.Context, s *store.BenchSchedule) (runID string, err error)

// Scheduler fires due schedules.
type Scheduler struct {
	Store    Store
	Holder   string // this replica
	Now      func() time.Time
	Interval time.Duration // how often to look for due schedules; 30 s
	Lease    time.Duration // a claim's lease, renewed while the run goes on; 5 min
	Run      RunFunc
	Webhook  *bench.Webhook // nil: no alerts
	Log      *slog.Logger
}

func (s *Scheduler) defaults() {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Interval <= 0 {
		s.Interval = 30 * time.Second
	}
	if s.Lease <= 0 {
		s.Lease = 5 * time.Minute
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

// Loop fires due schedules until ctx ends.
func (s *Scheduler) Loop(ctx context.Context) {
	s.defaults()
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick claims the schedules due now and runs them one after the other;
// it returns how many it fired.
func (s *Scheduler) Tick(ctx context.Context) int {
	s.defaults()
	due, err := s.Store.ClaimDueSchedules(ctx, s.Now(), s.Holder, s.Lease)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Error("bench schedules: claim", "err", err)
		}
		return 0
	}
	for _, sch := range due {
		s.fire(ctx, sch)
	}
	return len(due)
}

func (s *Scheduler) fire(ctx context.Context, sch *store.BenchSchedule) {
	log := s.Log.With("schedule", sch.ID, "owner", sch.OwnerName, "suite", sch.Suite)
	log.Info("bench schedule firing", "due", sch.NextRun)
	started := s.Now()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keep the claim while the run goes on
		defer wg.Done()
		t := time.NewTicker(s.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				ok, err := s.Store.RenewBenchScheduleLease(runCtx, sch.ID, s.Holder, s.Now(), s.Lease)
				if err == nil && !ok {
					log.Warn("bench schedule: lost its claim (deleted?); stopping the run")
					cancel()
					return
				}
			}
		}
	}()
	runID, err := s.Run(runCtx, sch)
	cancel()
	wg.Wait()
	msg := ""
	if err != nil {
		msg = err.Error()
		log.Warn("bench schedule run failed", "run", runID, "err", err)
	}
	if runID != "" && ctx.Err() == nil {
		if cerr := s.check(ctx, sch, runID); cerr != nil {
			log.Warn("bench schedule check", "err", cerr)
			if msg == "" {
				msg = cerr.Error()
			}
		}
	}
	if ctx.Err() != nil {
		// The gateway is stopping: leave the claim to expire, so that a
		// replica (or this one, restarted) runs the firing again.
		return
	}
	next, nerr := schedspec.Next(sch.Cron, s.Now())
	if nerr != nil {
		next = s.Now().Add(24 * time.Hour)
		msg = nerr.Error()
	}
	ok, err := s.Store.CompleteBenchSchedule(context.WithoutCancel(ctx), sch.ID, s.Holder, started, runID, msg, next)
	if err != nil || !ok {
		log.Warn("bench schedule: could not record the firing", "err", err, "held", ok)
		return
	}
	log.Info("bench schedule fired", "run", runID, "next_run", next, "error", msg)
}

// check compares each environment's latest samples with their history
// and alerts when a test regressed.
func (s *Scheduler) check(ctx context.Context, sch *store.BenchSchedule, runID string) error {
	o, err := schedspec.Decode(sch.Options)
	if err != nil {
		return err
	}
	window := 7 * 24 * time.Hour
	if o.Window != "" {
		if d, err := time.ParseDuration(o.Window); err == nil && d > 0 {
			window = d
		}
	}
	threshold := o.Threshold
	if threshold <= 0 {
		threshold = 0.10
	}
	alert := bench.Alert{Kind: "bench_regression", Schedule: sch.ID, Suite: sch.Suite, Owner: sch.OwnerName, Run: runID,
		Window: window.String(), Threshold: threshold, At: s.Now().UTC()}
	var errs []error
	for _, e := range o.Envs {
		env := e.Hash
		if env == "" {
			env = e.Name
		}
		res, err := bench.Check(ctx, s.Store, sch.Owner, env, window, threshold)
		if err != nil {
			errs = append(errs, fmt.Errorf("checking %s: %w", e.Name, err))
			continue
		}
		for _, f := range res.Findings {
			if !f.Regressed {
				continue
			}
			alert.Regressions = append(alert.Regressions, bench.Regression{Test: f.Test, Env: e.Name, Run: f.Run,
				BaselineMedian: num(f.BaselineMedian), LatestMedian: num(f.LatestMedian), Change: num(f.Change), P: num(f.P), Reason: f.Note})
		}
	}
	if len(alert.Regressions) == 0 {
		return errors.Join(errs...)
	}
	var names []string
	for _, r := range alert.Regressions {
		names = append(names, fmt.Sprintf("%s %+.0f%% (p=%.3g)", r.Test, 100*r.Change, r.P))
	}
	alert.Text = fmt.Sprintf("gateway bench: %d regression(s) in suite %s of %s: %s", len(alert.Regressions), sch.Suite, sch.OwnerName, strings.Join(names, "; "))
	s.Log.Warn("bench regression", "schedule", sch.ID, "run", runID, "regressions", len(alert.Regressions))
	if s.Webhook == nil || s.Webhook.URL == "" {
		return errors.Join(errs...)
	}
	if err := s.Webhook.Post(ctx, alert); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// num is a finding's number, 0 when it has none (JSON has no NaN).
func num(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
