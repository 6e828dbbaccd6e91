package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/gatewayhq/gateway/internal/errpage"
)

// DashboardProblem is why a cluster's dashboard cannot work: Dask without
// a usable bokeh serves one generic page ("Dask needs bokeh ...", with a
// pip command that fails on a system Python) at /status and bare 404s at
// its other plot pages. The gateway answers those pages itself instead.
type DashboardProblem struct {
	Missing string // what is missing, for people; "" when the dashboard works
	Fix     string // the command that installs it on the cluster's machine
}

// problems caches each cluster's answer: asked once per cluster, dropped
// when its route goes.
type problems struct {
	ask func(ctx context.Context, cluster string) (DashboardProblem, bool)
	mu  sync.Mutex
	m   map[string]DashboardProblem
}

func (p *problems) get(ctx context.Context, cluster string) DashboardProblem {
	if p == nil || p.ask == nil {
		return DashboardProblem{}
	}
	p.mu.Lock()
	v, ok := p.m[cluster]
	p.mu.Unlock()
	if ok {
		return v
	}
	v, known := p.ask(ctx, cluster)
	if known {
		p.mu.Lock()
		p.m[cluster] = v
		p.mu.Unlock()
	}
	return v
}

func (p *problems) drop(cluster string) {
	p.mu.Lock()
	delete(p.m, cluster)
	p.mu.Unlock()
}

// worksWithoutBokeh are the scheduler's pages (paths under the cluster)
// that Dask serves without bokeh (distributed.scheduler.http.routes), and
// the gateway's own endpoints under the dashboard; every other page is
// bokeh's.
var worksWithoutBokeh = []string{"info/", "json/", "individual-plots.json", "metrics", "health", "statics/",
	"eventstream", "sitemap.json", "proxy/", "gateway-health/", "gateway-bench/"}

func needsBokeh(rest string) bool {
	for _, p := range worksWithoutBokeh {
		if rest == strings.TrimSuffix(p, "/") || strings.HasPrefix(rest, p) {
			return false
		}
	}
	return true
}

// workingPages are the links the page offers instead.
var workingPages = []errpage.Link{
	{Text: "Workers", Href: "info/main/workers.html"},
	{Text: "Scheduler logs", Href: "info/main/logs.html"},
	{Text: "Task and worker counts (JSON)", Href: "json/counts.json"},
	{Text: "Scheduler identity (JSON)", Href: "json/identity.json"},
	{Text: "Prometheus metrics", Href: "metrics"},
}

// missingDashboard answers a bokeh page of a cluster whose Dask has no
// usable bokeh.
func missingDashboard(w http.ResponseWriter, r *http.Request, cluster string, p DashboardProblem) {
	links := make([]errpage.Link, len(workingPages))
	for i, l := range workingPages {
		links[i] = errpage.Link{Text: l.Text, Href: DashboardPrefix + cluster + "/" + l.Href}
	}
	errpage.Write(w, r, errpage.Error{
		Status: http.StatusServiceUnavailable, Code: "dashboard_unavailable", Title: "This dashboard needs bokeh",
		Message: "The plots of cluster " + cluster + "'s dashboard cannot be shown: " + p.Missing + ".",
		Hint:    "Install it on the machine that runs the cluster's scheduler, then start a new cluster:",
		Command: p.Fix, Links: links, LinksTitle: "These pages work without it:",
	})
}
