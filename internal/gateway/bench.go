package gateway

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
// schedules, which runs them through apiSrv. The Python that runs
// scheduled suites is bench.python; gateway dev, which runs clusters on
// this host as the user already, uses the clusters' own Python
// (providers.local.python) when it is not set. That Python is checked in
// the background: until it has distributed, schedules are refused with
// what to configure, and none fires.
func (g *Gateway) setupBench(apiSrv *api.Server, replicaID, version string) {
	python, source := g.cfg.Bench.Python, "bench.python"
	if python == "" && g.cfg.Dev {
		python, source = g.cfg.Providers.Local.Python, "providers.local.python, which gateway dev uses while bench.python is not set"
		if python == "" {
			python = "/usr/bin/python3"
		}
	}
	if python == "" {
		// A scheduled suite is users' Python run on this host as the
		// gateway's user: only an operator's explicit choice turns it on.
		g.log.Info("benchmark schedules are off (bench.python is not set)")
		return
	}
	probe := &pythonProbe{done: make(chan struct{})}
	go func() {
		defer close(probe.done)
		v, err := bench.CheckPython(context.Background(), python)
		if err != nil {
			probe.err = fmt.Errorf("%w (%s): set bench.python (GATEWAY_BENCH_PYTHON) to a Python with Dask's distributed, the clusters' version", err, source)
			g.log.Warn("benchmark schedules are off", "reason", probe.err)
			return
		}
		g.log.Info("benchmark schedules are on", "python", python, "distributed", v)
	}()
	apiSrv.SetBenchSchedules(g.store, nil)
	apiSrv.SetBenchSchedulesReady(probe.wait)
	r := &schedule.Runner{API: apiSrv, PublicURL: g.PublicURL, Grants: g.bench.grants, Python: python,
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
