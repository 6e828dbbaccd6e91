package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/proxy"
)

// dashboardCheck asks, once and in the background, whether the local
// provider's Python can serve cluster dashboards (Debian's
// python3-distributed comes without bokeh). The CLI may run on another
// machine, so the answer travels in the API's detail view of a cluster.
type dashboardCheck struct {
	done         chan struct{}
	problem      string // set before done closes
	missing, fix string
}

// start runs the check. The log gets the answer unless quiet (gateway dev,
// whose banner shows it: the user reads it once).
func (d *dashboardCheck) start(ctx context.Context, p *local.Provider, log *slog.Logger, quiet bool) {
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		ctx, cancel := context.WithTimeout(ctx, time.Minute) // ends with the command
		defer cancel()
		if s := p.DashboardSupport(ctx); s.Problem != "" {
			d.problem, d.missing, d.fix = s.Problem, s.Missing, s.Fix
			if quiet {
				return
			}
			log.Warn("cluster dashboards will not work", "python", s.Python, "distributed", s.Distributed, "bokeh", s.Bokeh, "fix", s.Problem)
		}
	}()
}

// forProvider answers without waiting: "" until the check has finished.
func (d *dashboardCheck) forProvider(provider string) string {
	if d.done == nil || provider != local.Name {
		return ""
	}
	select {
	case <-d.done:
		return d.problem
	default:
		return ""
	}
}

// DashboardProblem waits for the check and returns its one line, or "" when
// dashboards will work or the provider is not local.
func (g *Gateway) DashboardProblem(ctx context.Context) string {
	if g.dash.done == nil {
		return ""
	}
	select {
	case <-g.dash.done:
		return g.dash.problem
	case <-ctx.Done():
		return ""
	}
}

// dashboardProblem tells the dashboard proxy why a cluster's dashboard
// cannot work (its provider's check, shared with the CLI's note); known
// is false until the check has finished or when the cluster is not found.
func (g *Gateway) dashboardProblem(ctx context.Context, cluster string) (p proxy.DashboardProblem, known bool) {
	if g.dash.done == nil {
		return p, true // not a local provider: nothing is checked
	}
	select {
	case <-g.dash.done:
	default:
		return p, false
	}
	cl, err := g.store.GetCluster(ctx, cluster)
	if err != nil {
		return p, false
	}
	if g.dash.forProvider(cl.Provider) == "" {
		return p, true
	}
	return proxy.DashboardProblem{Missing: g.dash.missing, Fix: g.dash.fix}, true
}
