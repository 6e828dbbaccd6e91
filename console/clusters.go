package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// clusterRow is one cluster as the list shows it.
type clusterRow struct {
	Name, Status, Phase, Reason string
	Ready, Requested            int
	Adaptive                    bool
	AdaptMin, AdaptMax          int
	Uptime                      string
	// Since is when a running cluster started (RFC 3339): console.js
	// keeps its Uptime current, so a page kept for a while stays right.
	Since     string
	Created   time.Time
	Dashboard string // its path, when it has one
	Active    bool   // may be stopped and scaled
}

type clustersData struct {
	Rows     []clusterRow
	Stopped  []clusterRow
	ReadOnly bool
}

// recentStopped is how many ended clusters the list shows below the live
// ones.
const recentStopped = 20

func rowOf(c *store.Cluster, now time.Time) clusterRow {
	r := clusterRow{Name: c.Name, Status: string(c.Status), Phase: c.Phase, Reason: c.Reason,
		Ready: c.ReadyWorkers, Requested: c.DesiredWorkers, Adaptive: c.Adaptive, AdaptMin: c.AdaptMin, AdaptMax: c.AdaptMax,
		Created: c.CreatedAt, Active: c.Status.Live()}
	switch {
	case !c.StartedAt.IsZero() && !c.StoppedAt.IsZero():
		r.Uptime = humanDuration(c.StoppedAt.Sub(c.StartedAt))
	case !c.StartedAt.IsZero():
		r.Uptime = humanDuration(now.Sub(c.StartedAt))
		r.Since = c.StartedAt.UTC().Format(time.RFC3339)
	}
	if c.Status == store.Running && c.DashboardAddress != "" {
		r.Dashboard = "/clusters/" + c.Name + "/status"
	}
	return r
}

// clustersData lists the user's clusters: the live ones, newest first,
// then the most recently ended.
func (s *Server) clustersData(ctx context.Context, u *auth.User) (clustersData, error) {
	cls, err := s.clusters.List(ctx, u.Owner(), nil)
	if err != nil {
		return clustersData{}, err
	}
	now := time.Now()
	d := clustersData{ReadOnly: u.ReadOnly}
	for _, c := range cls {
		if c.Owner != u.Owner() {
			continue // never another user's, whatever the loop returned
		}
		if !c.Status.Active() {
			d.Stopped = append(d.Stopped, rowOf(c, now))
		} else {
			d.Rows = append(d.Rows, rowOf(c, now))
		}
	}
	newest := func(a, b clusterRow) int { return b.Created.Compare(a.Created) }
	slices.SortFunc(d.Rows, newest)
	slices.SortFunc(d.Stopped, newest)
	d.Stopped = d.Stopped[:min(len(d.Stopped), recentStopped)]
	return d, nil
}

// clustersPage is the list. Its table is the one the event stream sends,
// kept by the user's cluster generation like the stream's: reloads and
// new tabs between changes render nothing again.
func (s *Server) clustersPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	var table string
	gen, err := s.clusters.ClustersGeneration(r.Context(), u.Owner())
	if err == nil {
		table, err = s.frags.get(s.fragKey(u, gen), func() (string, error) { return s.clustersFragment(r.Context(), u) })
	} else {
		table, err = s.clustersFragment(r.Context(), u)
	}
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	// The table is the console's own rendering, escaped as it was made.
	s.render(w, r, http.StatusOK, "clusters", view{Title: "Clusters", User: u, Nav: "clusters", Data: template.HTML(table)}) //nolint:gosec
}

// fragKey is the key a user's clusters table is kept under: their
// generation, and the time rounded to fragmentFresh, since the table
// shows uptimes.
func (s *Server) fragKey(u *auth.User, gen int64) fragKey {
	return fragKey{owner: u.Owner(), readOnly: u.ReadOnly, gen: gen, at: time.Now().Truncate(fragmentFresh).Unix()}
}

// fragmentFresh is how long a rendered table is kept while nothing
// changes: its uptimes are that stale at most without script (with it,
// console.js keeps them current).
const fragmentFresh = 10 * time.Second

// clustersFragment is the clusters table alone, for the event stream.
func (s *Server) clustersFragment(ctx context.Context, u *auth.User) (string, error) {
	d, err := s.clustersData(ctx, u)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := s.pages["clusters"].ExecuteTemplate(&buf, "table", view{User: u, Data: d}); err != nil {
		return "", fmt.Errorf("console: %w", err)
	}
	return buf.String(), nil
}

type clusterData struct {
	clusterRow
	Provider string
	Events   []store.Event
	Logs     string
	LogLines int
	ReadOnly bool
	// What to paste into Python to connect.
	GatewaySnippet, DistributedSnippet string
}

// logTail is how many lines of the logs the cluster page shows.
const logTail = 200

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	c, err := s.clusters.Get(r.Context(), u.Owner(), name)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	events, err := s.clusters.Events(r.Context(), u.Owner(), name)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d := clusterData{clusterRow: rowOf(c, time.Now()), Provider: c.Provider, Events: events, ReadOnly: u.ReadOnly}
	var logs bytes.Buffer
	if err := s.clusters.Logs(r.Context(), u.Owner(), name, logTail, &logs); err != nil {
		d.Logs = "(the logs cannot be read: " + err.Error() + ")"
	} else {
		d.Logs = logs.String()
		d.LogLines = strings.Count(d.Logs, "\n")
	}
	d.GatewaySnippet, d.DistributedSnippet = snippets(s.cfg.PublicURL, c.Name, u.Name)
	s.render(w, r, http.StatusOK, "cluster", view{Title: c.Name, User: u, Nav: "clusters", Data: d})
}

// snippets are the Python that connects to the cluster: through
// dask_gateway with an API token, and with plain distributed using the
// credentials the CLI keeps (gateway new-cluster prints the same).
func snippets(publicURL, name, user string) (gateway, distributed string) {
	host := strings.TrimPrefix(strings.TrimPrefix(publicURL, "https://"), "http://")
	gateway = fmt.Sprintf(`from dask_gateway import Gateway, BasicAuth
# an API token: gateway token create --name notebook
gateway = Gateway(%q, auth=BasicAuth(%q, "gw_..."))
client = gateway.connect(%q).get_client()`, publicURL, user, name)
	distributed = fmt.Sprintf(`# gateway show %[1]s writes the cluster's TLS credentials (tls.crt, tls.key) under ~/.config/gateway/clusters/%[1]s/
from distributed import Client
from distributed.security import Security

class GatewaySecurity(Security):
    def get_connection_args(self, role):
        args = super().get_connection_args(role)
        args["server_hostname"] = "daskgateway-%[1]s"  # the gateway routes by TLS server name
        return args

security = GatewaySecurity(tls_ca_file="tls.crt", tls_client_cert="tls.crt", tls_client_key="tls.key", require_encryption=True)
client = Client("tls://%[2]s", security=security)`, name, host)
	return gateway, distributed
}

func (s *Server) stopCluster(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	if err := s.clusters.Stop(r.Context(), u.Owner(), name, "stopped by "+u.Name+" in the console"); err != nil {
		s.fail(w, r, u, err)
		return
	}
	redirect(w, r, back(r, "/c/"+name), "Stopping "+name+".")
}

func (s *Server) scaleCluster(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("workers")))
	if err != nil || n < 0 {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Cannot scale",
			fmt.Sprintf("Workers must be a whole number from 0, not %q.", r.PostFormValue("workers")))
		return
	}
	msg, err := s.clusters.Scale(r.Context(), quota.Who{ID: u.Owner(), Name: u.Name, Groups: u.Groups}, name, n)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	if msg == "" {
		msg = fmt.Sprintf("Scaling %s to %d workers.", name, n)
	}
	redirect(w, r, back(r, "/c/"+name), msg)
}

// back is the page an action returns to: the one it was sent from, if it
// is a console page (from=list), else fallback.
func back(r *http.Request, fallback string) string {
	if r.PostFormValue("from") == "list" {
		return "/"
	}
	return fallback
}

// fail answers err as the API would (Config.Explain), on a page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, u *auth.User, err error) {
	status, msg, ok := s.cfg.Explain(r, err)
	if !ok {
		return
	}
	if status >= 500 {
		s.log.Error("console: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	title := http.StatusText(status)
	if status == http.StatusNotFound {
		title = "Not found"
	}
	s.errorPage(w, r, u, status, title, msg)
}
