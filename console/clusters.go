package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/images"
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
	// SharedBy names the owner of a cluster shared with the viewer ("":
	// their own), Via the shares; Scale and Stop are what the viewer may
	// do with it while it is live.
	SharedBy, Via string
	Scale, Stop   bool

	// With the cluster pages' dependencies (SetClusterPages): "" when
	// not known.
	Spent   string // the usage ledger's estimate so far
	PerHour string // what it costs per hour as requested, while live
	Env     string // its environment or image ("" : the default)
	Spot    bool
	Idle    string // idle time left, or the idle timeout
}

// shared marks a row as a cluster shared with the viewer, with what its
// shares allow.
func (r *clusterRow) shared(a access) {
	r.SharedBy, r.Via = a.SharedBy, a.Via
	r.Scale, r.Stop = r.Active && a.Scale, r.Active && a.Stop
}

type clustersData struct {
	Rows     []clusterRow
	Stopped  []clusterRow
	ReadOnly bool
	Costs    bool // the cost columns are known
	// Live is how many live clusters there are; Rows has the newest
	// listPage of them unless All.
	Live int
	All  bool
}

// listPage is how many live clusters the list shows unless asked for all
// (?all=1): a page of a thousand rows is slow to make and to read.
const listPage = 100

// recentStopped is how many ended clusters the list shows below the live
// ones.
const recentStopped = 20

func rowOf(c *store.Cluster, now time.Time) clusterRow {
	r := clusterRow{Name: c.Name, Status: string(c.Status), Phase: c.Phase, Reason: c.Reason,
		Ready: c.ReadyWorkers, Requested: c.DesiredWorkers, Adaptive: c.Adaptive, AdaptMin: c.AdaptMin, AdaptMax: c.AdaptMax,
		Created: c.CreatedAt, Active: c.Status.Live(), Scale: c.Status.Live(), Stop: c.Status.Live()}
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

// withFacts adds to a cluster's row what its options, its shape, the
// loop's idle clock and its ledger totals (spent; nil: unknown) say.
func (s *Server) withFacts(r *clusterRow, c *store.Cluster, spent *store.Totals) {
	o, err := clusteropts.Decode([]byte(c.Options))
	if err == nil {
		r.Env, r.Spot = envName(o), o.Spot
	}
	var shape quota.Shape
	_ = json.Unmarshal([]byte(c.Shape), &shape) // an old row without a shape has no price
	priced := shape.Scheduler.PriceHour > 0 || shape.Worker.PriceHour > 0
	if spent != nil && (priced || spent.Cost > 0) {
		r.Spent = usd(spent.Cost)
	}
	if priced && c.Status.Active() {
		r.PerHour = usd(shape.PriceHour(c.DesiredWorkers)) + "/h"
	}
	if err != nil || !c.Status.Live() {
		return
	}
	timeout := time.Duration(o.IdleTimeout) * time.Second
	switch left, ok := s.create.loop.IdleLeft(c); {
	case ok:
		r.Idle = humanDuration(left) + " of " + humanDuration(timeout) + " left"
	case o.IdleTimeout > 0:
		r.Idle = "stops after " + humanDuration(timeout) + " idle"
	default:
		r.Idle = "never stops when idle"
	}
}

// envName is what a cluster runs: its environment, else its image; ""
// for the backend's default.
func envName(o clusteropts.Options) string {
	if o.Env != "" {
		return o.Env
	}
	return o.Image
}

// spent is the ledger's totals of the owner's clusters in cls, by
// cluster, read at once: the intervals since the oldest of them began.
func (s *Server) spent(ctx context.Context, owner string, cls []*store.Cluster) (map[string]*store.Totals, error) {
	if s.create.ledger == nil || len(cls) == 0 {
		return nil, nil
	}
	since := cls[0].CreatedAt
	want := make(map[string]*store.Totals, len(cls))
	names := make([]string, 0, len(cls))
	for _, c := range cls {
		if c.CreatedAt.Before(since) {
			since = c.CreatedAt
		}
		want[c.Name] = &store.Totals{}
		names = append(names, c.Name)
	}
	f := store.LedgerFilter{Owner: owner, Since: since}
	if len(names) <= store.MaxLedgerClusters {
		f.Clusters = names // a page of them: not every interval of the owner's
	}
	ivs, err := s.create.ledger.Intervals(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, i := range ivs {
		if t := want[i.Cluster]; t != nil && i.Owner == owner {
			t.Add(i)
		}
	}
	return want, nil
}

// clustersData lists the user's clusters: the live ones, newest first,
// then the most recently ended.
func (s *Server) clustersData(ctx context.Context, u *auth.User, all bool) (clustersData, error) {
	cls, err := s.clusters.List(ctx, u.Owner(), nil)
	if err != nil {
		return clustersData{}, err
	}
	now := time.Now()
	d := clustersData{ReadOnly: u.ReadOnly, Costs: s.create.loop != nil, All: all}
	var live, ended []*store.Cluster
	for _, c := range cls {
		if c.Owner != u.Owner() {
			continue // never another user's, whatever the loop returned
		}
		if !c.Status.Active() {
			ended = append(ended, c)
		} else {
			live = append(live, c)
		}
	}
	shared, err := s.sharedClusters(ctx, u)
	if err != nil {
		return clustersData{}, err
	}
	grants := map[*store.Cluster]access{}
	for _, sc := range shared {
		grants[sc.Cluster] = sharedAccess(sc.Cluster, sc.Grant)
		if !sc.Cluster.Status.Active() {
			ended = append(ended, sc.Cluster)
		} else {
			live = append(live, sc.Cluster)
		}
	}
	newest := func(a, b *store.Cluster) int { return b.CreatedAt.Compare(a.CreatedAt) }
	slices.SortFunc(live, newest)
	slices.SortFunc(ended, newest)
	ended = ended[:min(len(ended), recentStopped)]
	if d.Live = len(live); !all {
		live = live[:min(len(live), listPage)]
	}
	var spent map[string]*store.Totals
	if d.Costs {
		// The user's own only: a shared cluster's ledger is its owner's,
		// and an empty total would read as nothing spent.
		var own []*store.Cluster
		for _, c := range append(slices.Clip(live), ended...) {
			if c.Owner == u.Owner() {
				own = append(own, c)
			}
		}
		if spent, err = s.spent(ctx, u.Owner(), own); err != nil {
			return clustersData{}, err
		}
	}
	for _, list := range []struct {
		from []*store.Cluster
		to   *[]clusterRow
	}{{live, &d.Rows}, {ended, &d.Stopped}} {
		for _, c := range list.from {
			r := rowOf(c, now)
			if d.Costs {
				s.withFacts(&r, c, spent[c.Name])
			}
			if a, ok := grants[c]; ok {
				r.shared(a)
			}
			*list.to = append(*list.to, r)
		}
	}
	return d, nil
}

// clustersPage is the list. Its table is the one the event stream sends,
// kept by the user's cluster generation like the stream's: reloads and
// new tabs between changes render nothing again.
func (s *Server) clustersPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	all := r.URL.Query().Get("all") == "1"
	table, gen, err := s.clustersTable(r.Context(), u, -1, all)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	// The table is the console's own rendering, escaped as it was made.
	s.render(w, r, http.StatusOK, "clusters", view{Title: "Clusters", User: u, Nav: "clusters",
		Data: clustersPageData{Table: template.HTML(table), Costs: s.create.loop != nil, ReadOnly: u.ReadOnly, //nolint:gosec
			Stream: streamURL(gen, all)}})
}

// clustersPageData is the list's page: its table, rendered as the event
// stream renders it, and what the text above it says.
type clustersPageData struct {
	Table           template.HTML
	Costs, ReadOnly bool
	Stream          string // its event stream's URL
}

// streamURL is the list's event stream: since the generation the page
// shows (-1: unknown), all of the live clusters or a page of them.
func streamURL(gen int64, all bool) string {
	q := url.Values{}
	if gen >= 0 {
		q.Set("since", strconv.FormatInt(gen, 10))
	}
	if all {
		q.Set("all", "1")
	}
	if len(q) == 0 {
		return "/events"
	}
	return "/events?" + q.Encode()
}

// clustersTable is the user's clusters table, kept by generation gen
// (-1: read it now), and the generation it shows (-1: unknown, rendered
// afresh).
func (s *Server) clustersTable(ctx context.Context, u *auth.User, gen int64, all bool) (string, int64, error) {
	if gen < 0 {
		s.noteGroups(u)
		g, err := s.listGeneration(ctx, u.Owner())
		if err != nil {
			table, err := s.clustersFragment(ctx, u, all)
			return table, -1, err
		}
		gen = g
	}
	table, err := s.frags.get(s.fragKey(u, gen, all), func() (string, error) { return s.clustersFragment(ctx, u, all) })
	return table, gen, err
}

// fragKey is the key a user's clusters table is kept under: their
// generation, and the time rounded to fragmentFresh, since the table
// shows uptimes.
func (s *Server) fragKey(u *auth.User, gen int64, all bool) fragKey {
	return fragKey{owner: u.Owner(), readOnly: u.ReadOnly, all: all, gen: gen, at: s.now().Truncate(fragmentFresh).Unix()}
}

// fragmentFresh is how long a rendered table is kept while nothing
// changes: its uptimes are that stale at most without script (with it,
// console.js keeps them current).
const fragmentFresh = 10 * time.Second

// clustersFragment is the clusters table alone, for the event stream.
func (s *Server) clustersFragment(ctx context.Context, u *auth.User, all bool) (string, error) {
	d, err := s.clustersData(ctx, u, all)
	if err != nil {
		return "", err
	}
	return s.fragment("clusters", "table", u, d)
}

// fragment is one template of a page's set, rendered for u's stream.
func (s *Server) fragment(page, tmpl string, u *auth.User, data any) (string, error) {
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, tmpl, view{User: u, Data: data}); err != nil {
		return "", fmt.Errorf("console: %w", err)
	}
	return buf.String(), nil
}

type clusterData struct {
	clusterRow
	Provider string
	Events   []store.Event
	Members  []memberRow
	Software software
	Logs     string
	LogLines int
	Tail     int
	Tails    []int
	ReadOnly bool
	owner    string // whose the cluster is: the id the loop's reads take
	// What to paste into Python to connect.
	GatewaySnippet, DistributedSnippet string
}

// memberRow is a scheduler or worker as the usage ledger keeps it.
type memberRow struct {
	Name, State, Machine string
	Started              time.Time
	Ran, Cost            string
}

// software is what a cluster runs, and, when a member refused to run it,
// how its software differs from the client's.
type software struct {
	Env, Image    string
	Client        [][2]string // the client's versions it was checked against
	AllowMismatch bool
	Refused       string    // who refused ("the scheduler runs other software than the client")
	Diff          []diffRow // package by package
}

type diffRow struct{ Package, Client, Image string }

// logTail is how many lines of each member's log the cluster page shows
// unless asked (?tail=); maxTail bounds what may be asked.
const (
	logTail = 200
	maxTail = 5000
)

var tailChoices = []int{100, 200, 1000, maxTail}

// clusterFacts is the cluster's page but its logs: what its stream
// renders anew when the cluster changes.
func (s *Server) clusterFacts(ctx context.Context, u *auth.User, name string) (clusterData, error) {
	c, a, err := s.reach(ctx, u, name)
	if err != nil {
		return clusterData{}, err
	}
	events, err := s.clusters.Events(ctx, a.Owner, name)
	if err != nil {
		return clusterData{}, err
	}
	d := clusterData{clusterRow: rowOf(c, time.Now()), Provider: c.Provider, Events: events, ReadOnly: u.ReadOnly,
		Software: softwareOf(c)}
	if s.create.ledger != nil {
		ivs, err := s.create.ledger.Intervals(ctx, store.LedgerFilter{Owner: a.Owner, Cluster: c.Name})
		if err != nil {
			return clusterData{}, err
		}
		var t store.Totals
		for _, i := range ivs {
			t.Add(i)
			d.Members = append(d.Members, memberOf(i))
		}
		s.withFacts(&d.clusterRow, c, &t)
	}
	if a.SharedBy != "" {
		d.shared(a)
	}
	d.owner = a.Owner
	return d, nil
}

// memberOf is a member's row from its ledger interval.
func memberOf(i store.Interval) memberRow {
	m := memberRow{Name: i.Member, State: "stopped", Started: i.Start, Ran: humanDuration(i.Stop.Sub(i.Start)),
		Machine: machine(quota.Size{VCPUs: i.VCPUs, MemoryGiB: i.MemoryGiB, GPUs: i.GPUs, GPUType: i.GPUType,
			InstanceType: i.InstanceType, PriceHour: i.PriceHour})}
	if i.Open {
		m.State = "running"
	}
	if i.PriceHour > 0 {
		m.Cost = usd(i.PriceHour * i.Seconds() / 3600)
	}
	return m
}

// softwareOf is what the cluster runs, from its options, and the table
// of differences a member that refused it left in the cluster's reason.
func softwareOf(c *store.Cluster) software {
	o, err := clusteropts.Decode([]byte(c.Options))
	if err != nil {
		return software{}
	}
	sw := software{Env: o.Env, Image: o.Image, AllowMismatch: o.AllowMismatch}
	for _, k := range slices.Sorted(maps.Keys(o.ClientEnv)) {
		sw.Client = append(sw.Client, [2]string{k, o.ClientEnv[k]})
	}
	if report, ok := images.MismatchIn(c.Reason); ok {
		sw.Refused, _, _ = strings.Cut(c.Reason, ":\n")
		sw.Diff = diffTable(report)
	}
	return sw
}

// diffTable reads a table of differences ("package  client  image" and a
// row per package, aligned in columns, as the launcher and the gateway
// print it) by the header's columns: a version may hold spaces.
func diffTable(text string) []diffRow {
	lines := strings.Split(text, "\n")
	head := -1
	for i, l := range lines {
		if strings.Join(strings.Fields(l), " ") == "package client image" {
			head = i
			break
		}
	}
	if head < 0 {
		return nil
	}
	h := []rune(lines[head])
	ci := runeIndex(h, "client", 0)
	ii := runeIndex(h, "image", ci+len("client"))
	var out []diffRow
	for _, l := range lines[head+1:] {
		r := []rune(l)
		if strings.TrimSpace(l) == "" {
			break
		}
		if len(r) <= ii {
			out = append(out, diffRow{Package: strings.TrimSpace(l)})
			continue
		}
		out = append(out, diffRow{Package: strings.TrimSpace(string(r[:ci])), Client: strings.TrimSpace(string(r[ci:ii])),
			Image: strings.TrimSpace(string(r[ii:]))})
	}
	return out
}

// runeIndex is where word starts in r, at from or after, in runes.
func runeIndex(r []rune, word string, from int) int {
	if i := strings.Index(string(r[from:]), word); i >= 0 {
		return from + len([]rune(string(r[from:])[:i]))
	}
	return len(r)
}

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	tail := logTail
	if t := r.URL.Query().Get("tail"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > maxTail {
			s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad tail",
				fmt.Sprintf("tail must be a whole number of lines from 1 to %d, not %q.", maxTail, t))
			return
		}
		tail = n
	}
	d, err := s.clusterFacts(r.Context(), u, name)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d.Tail, d.Tails = tail, tailChoices
	var logs bytes.Buffer
	if err := s.clusters.Logs(r.Context(), d.owner, name, tail, &logs); err != nil {
		if _, msg, ok := s.cfg.Explain(r, err); ok {
			d.Logs = "(the logs cannot be read: " + msg + ")"
		}
	} else {
		d.Logs = logs.String()
		d.LogLines = strings.Count(d.Logs, "\n")
	}
	d.GatewaySnippet, d.DistributedSnippet = snippets(s.cfg.PublicURL, d.Name, u.Name)
	s.render(w, r, http.StatusOK, "cluster", view{Title: d.Name, User: u, Nav: "clusters", Data: d})
}

// clusterFragment is a cluster's page but its controls, snippets and
// logs, for the page's event stream.
func (s *Server) clusterFragment(ctx context.Context, u *auth.User, name string) (string, error) {
	d, err := s.clusterFacts(ctx, u, name)
	if err != nil {
		return "", err
	}
	return s.fragment("cluster", "live", u, d)
}

// snippets are the Python that connects to the cluster: through
// dask_gateway with an API token, and with plain distributed using the
// credentials the CLI keeps (gateway show and new-cluster write them and
// print the same).
func snippets(publicURL, name, user string) (gateway, distributed string) {
	host := strings.TrimPrefix(strings.TrimPrefix(publicURL, "https://"), "http://")
	gateway = fmt.Sprintf(`from dask_gateway import Gateway, BasicAuth
# an API token: gateway token create --name notebook
gateway = Gateway(%q, auth=BasicAuth(%q, "gw_..."))
client = gateway.connect(%q).get_client()`, publicURL, user, name)
	distributed = fmt.Sprintf(`# gateway show %[1]s writes the cluster's TLS credentials where the CLI keeps them
import os
from distributed import Client
from distributed.security import Security

creds = os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "gateway", "clusters", %[1]q)

class GatewaySecurity(Security):
    def get_connection_args(self, role):
        args = super().get_connection_args(role)
        args["server_hostname"] = %[3]q  # the gateway routes by TLS server name
        return args

security = GatewaySecurity(tls_ca_file=os.path.join(creds, "tls.crt"), tls_client_cert=os.path.join(creds, "tls.crt"),
                           tls_client_key=os.path.join(creds, "tls.key"), require_encryption=True)
client = Client("tls://%[2]s", security=security)`, name, host, apitype.SNIPrefix+name)
	return gateway, distributed
}

func (s *Server) stopCluster(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	err := s.clusters.Stop(r.Context(), u.Owner(), name, "stopped by "+u.Name+" in the console")
	if err != nil && s.shared.shares != nil {
		// Not theirs: one shared with them, if a share lets them stop it
		// (else not found, or forbidden saying what is missing).
		err = s.shared.shares.StopAs(r.Context(), whoOf(u), name)
	}
	if err != nil {
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
