package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/schedule"
)

// benchWiring runs the stored benchmark schedules (gateway bench
// schedule) from this replica.
type benchWiring struct {
	grants    *schedule.Grants
	scheduler *schedule.Scheduler
	probe     *pythonProbe
}

// wrapBenchAuth lets scheduled runs act as their owner through the API
// in process (see schedule.Grants).
func (g *Gateway) wrapBenchAuth(a auth.Authenticator) auth.Authenticator {
	g.bench = &benchWiring{grants: schedule.NewGrants()}
	return g.bench.grants.Wrap(a)
}

// setupBench turns on the schedule routes and the scheduler of due
// schedules, which runs them as their owners through handler (the API
// and the dashboard proxy). A scheduled suite's client runs next to each
// cluster's scheduler, in the cluster's own software (bench.Agent), so
// that this host needs no Python and runs no user's code. An operator
// who sets bench.python runs the clients here instead, with that Python,
// which is checked in the background: until it has distributed,
// schedules are refused with what to configure, and none fires.
func (g *Gateway) setupBench(apiSrv *api.Server, handler http.Handler, replicaID, version string) {
	python := g.cfg.Bench.Python
	probe := &pythonProbe{done: make(chan struct{})}
	if python == "" {
		close(probe.done)
		g.log.Info("benchmark schedules are on: their clients run next to each cluster's scheduler")
	} else {
		go func() {
			defer close(probe.done)
			v, err := bench.CheckPython(context.Background(), python)
			if err != nil {
				probe.err = fmt.Errorf("%w (bench.python): set bench.python (GATEWAY_BENCH_PYTHON) to a Python with Dask's distributed, the clusters' version, or leave it empty to run scheduled clients in the clusters", err)
				g.log.Warn("benchmark schedules are off", "reason", probe.err)
				return
			}
			g.log.Info("benchmark schedules are on: their clients run on this host", "python", python, "distributed", v)
		}()
	}
	apiSrv.SetBenchSchedules(g.store, nil)
	apiSrv.SetBenchSchedulesReady(probe.wait)
	r := &schedule.Runner{API: handler, PublicURL: g.PublicURL, Grants: g.bench.grants, Python: python,
		Provider: g.provider.Name(), Version: version, TempDir: "", Log: g.log}
	var hook *bench.Webhook
	if g.cfg.Bench.AlertWebhook != "" {
		hook = &bench.Webhook{URL: g.cfg.Bench.AlertWebhook, Client: &http.Client{}, Log: g.log}
	}
	g.bench.probe = probe
	g.bench.scheduler = &schedule.Scheduler{Store: g.store, Holder: replicaID, Interval: g.cfg.Bench.ScheduleInterval,
		Run: r.Run, Webhook: hook, Log: g.log}
}

// pythonProbe is the check of the Python that runs scheduled suites.
type pythonProbe struct {
	done chan struct{}
	err  error // set before done closes
}

func (p *pythonProbe) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runBench fires due schedules until ctx ends, once the Python that runs
// them has passed its check.
func (g *Gateway) runBench(ctx context.Context) {
	if g.bench == nil || g.bench.scheduler == nil {
		return
	}
	if g.bench.probe.wait(ctx) != nil {
		return
	}
	g.bench.scheduler.Loop(ctx)
}
