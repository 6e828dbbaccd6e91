package gateway

import (
	"context"
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
}

// wrapBenchAuth lets scheduled runs act as their owner through the API
// in process (see schedule.Grants).
func (g *Gateway) wrapBenchAuth(a auth.Authenticator) auth.Authenticator {
	g.bench = &benchWiring{grants: schedule.NewGrants()}
	return g.bench.grants.Wrap(a)
}

// setupBench turns on the schedule routes and the scheduler of due
// schedules, which runs them through apiSrv.
func (g *Gateway) setupBench(apiSrv *api.Server, replicaID, version string) {
	python := g.cfg.Bench.Python
	if python == "" && g.cfg.Dev {
		python = "python3" // dev runs local clusters as the user already
	}
	if python == "" {
		// A scheduled suite is users' Python run on this host as the
		// gateway's user: only an operator's explicit choice turns it on.
		g.log.Info("benchmark schedules are off (bench.python is not set)")
		return
	}
	apiSrv.SetBenchSchedules(g.store, nil)
	r := &schedule.Runner{API: apiSrv, PublicURL: g.PublicURL, Grants: g.bench.grants, Python: python,
		Provider: g.provider.Name(), Version: version, TempDir: "", Log: g.log}
	var hook *bench.Webhook
	if g.cfg.Bench.AlertWebhook != "" {
		hook = &bench.Webhook{URL: g.cfg.Bench.AlertWebhook, Client: &http.Client{}, Log: g.log}
	}
	g.bench.scheduler = &schedule.Scheduler{Store: g.store, Holder: replicaID, Interval: g.cfg.Bench.ScheduleInterval,
		Run: r.Run, Webhook: hook, Log: g.log}
}

// runBench fires due schedules until ctx ends.
func (g *Gateway) runBench(ctx context.Context) {
	if g.bench != nil && g.bench.scheduler != nil {
		g.bench.scheduler.Loop(ctx)
	}
}
