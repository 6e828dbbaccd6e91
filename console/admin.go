package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/report"
	"github.com/gatewayhq/gateway/store"
)

// The admin's pages (for the gateway's admins only; 403 for everyone
// else): every user's clusters, users and groups with their usage, the
// quota entries (edited in place), the usage report and the audit log.
// They do what `gateway admin` and the API's admin routes do, with the
// same objects behind them (the control loop, the quota service, the
// store) and the same checks and words (quota, report).

// AdminClusters is what the admin pages need of the control loop.
type AdminClusters interface {
	// ListAll is every user's clusters with the given statuses (all when
	// none).
	ListAll(ctx context.Context, statuses []store.Status) ([]*store.Cluster, error)
	// AdminStop stops any user's cluster and audits it under by.
	AdminStop(ctx context.Context, by store.Actor, name string) error
}

// Quotas is what the admin pages need of the quota service.
type Quotas interface {
	List(ctx context.Context) ([]quota.Entry, error)
	Entry(ctx context.Context, s quota.Subject) (quota.Entry, error)
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
	Set(ctx context.Context, by store.Actor, s quota.Subject, patch quota.Limits) (quota.Entry, error)
	Unset(ctx context.Context, by store.Actor, s quota.Subject, fields []string) (quota.Entry, error)
}

// Records is what the admin pages read of the usage ledger and the audit
// log.
type Records interface {
	Intervals(ctx context.Context, f store.LedgerFilter) ([]store.Interval, error)
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
	LastGroups(ctx context.Context, ownerName string) ([]string, time.Time, error)
}

// adminDeps is what this section needs of the rest of the gateway.
type adminDeps struct {
	clusters AdminClusters
	quotas   Quotas
	records  Records
}

// SetAdmin adds the admin's pages, under /admin/.
func (s *Server) SetAdmin(clusters AdminClusters, quotas Quotas, records Records) {
	s.admin = adminDeps{clusters: clusters, quotas: quotas, records: records}
	s.section(navItem{Key: "admin", Title: "Admin", Path: "/admin/clusters", Admin: true}, func(m *http.ServeMux) {
		m.HandleFunc("GET /admin/clusters", s.adminPage(s.adminClustersPage))
		m.HandleFunc("POST /admin/clusters/{name}/stop", s.adminAction(s.adminStop))
		m.HandleFunc("GET /admin/users", s.adminPage(s.adminUsersPage))
		m.HandleFunc("GET /admin/quotas", s.adminPage(s.adminQuotasPage))
		m.HandleFunc("POST /admin/quotas", s.adminAction(s.adminSetQuota))
		m.HandleFunc("GET /admin/usage", s.adminPage(s.adminUsagePage))
		m.HandleFunc("GET /admin/usage.csv", s.adminPage(s.adminUsageCSV))
		m.HandleFunc("GET /admin/audit", s.adminPage(s.adminAuditPage))
		// Any other path or method under /admin/ is refused to non-admins
		// first, as the API's admin routes are: the answer does not tell
		// them which pages exist.
		m.HandleFunc("/admin/", s.adminPage(func(w http.ResponseWriter, r *http.Request, u *auth.User) {
			if r.Method == http.MethodGet && (r.URL.Path == "/admin/" || r.URL.Path == "/admin") {
				http.Redirect(w, r, "/admin/clusters", http.StatusSeeOther)
				return
			}
			s.errorPage(w, r, u, http.StatusNotFound, "Not found", "There is no admin page "+r.Method+" "+r.URL.Path+".")
		}))
	})
}

// adminPage serves a page to admins; anyone else signed in gets 403 with a
// page that says so.
func (s *Server) adminPage(h handler) http.HandlerFunc {
	return s.page(func(w http.ResponseWriter, r *http.Request, u *auth.User) {
		if s.isAdmin(w, r, u) {
			h(w, r, u)
		}
	})
}

// adminAction serves an admin's form POST: admins only, then the checks
// of every action (cross-site, read-only).
func (s *Server) adminAction(h handler) http.HandlerFunc {
	return s.page(func(w http.ResponseWriter, r *http.Request, u *auth.User) {
		if s.isAdmin(w, r, u) && s.actionAllowed(w, r, u) {
			h(w, r, u)
		}
	})
}

func (s *Server) isAdmin(w http.ResponseWriter, r *http.Request, u *auth.User) bool {
	if u.Admin {
		return true
	}
	s.log.Info("console: admin page refused", "user", u.Name, "method", r.Method, "path", r.URL.Path)
	s.errorPage(w, r, u, http.StatusForbidden, "Admins only",
		"This page is for the gateway's admins (auth.admin_users, auth.admin_groups), and "+u.Name+" is not one of them.")
	return false
}

func actorOf(u *auth.User) store.Actor { return store.Actor{ID: u.Owner(), Name: u.Name} }

// adminTab is what every admin page's data has: which of the admin pages
// it is, for their own navigation (_admin_nav.html).
type adminTab struct{ Tab string }

// --- every cluster ----------------------------------------------------------

// adminClusterRow is one cluster of any user.
type adminClusterRow struct {
	clusterRow
	Owner, Groups, Provider string
}

type adminClustersData struct {
	adminTab
	User, Group, Status string // the filter
	Statuses            []string
	Rows                []adminClusterRow
	Shown, Total        int
	Users, AllGroups    []string // for the filter's suggestions
	ReadOnly            bool
}

// maxAdminRows bounds the clusters one page lists, newest first.
const maxAdminRows = 500

// statusFilter reads the status filter: "" is every active cluster,
// "all" every cluster.
func statusFilter(v string) ([]store.Status, error) {
	switch v {
	case "":
		return store.ActiveStatuses, nil
	case "all":
		return nil, nil
	}
	st, err := store.ParseStatus(v)
	if err != nil {
		return nil, err
	}
	return []store.Status{st}, nil
}

func (s *Server) adminClustersPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	q := r.URL.Query()
	d := adminClustersData{adminTab: adminTab{"clusters"}, User: q.Get("user"), Group: q.Get("group"), Status: q.Get("status"), ReadOnly: u.ReadOnly}
	for _, st := range store.AllStatuses {
		d.Statuses = append(d.Statuses, string(st))
	}
	statuses, err := statusFilter(d.Status)
	if err != nil {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad filter", "status: "+err.Error())
		return
	}
	cls, err := s.admin.clusters.ListAll(r.Context(), statuses)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	slices.SortFunc(cls, func(a, b *store.Cluster) int { return b.CreatedAt.Compare(a.CreatedAt) })
	users, groups := map[string]bool{}, map[string]bool{}
	now := time.Now()
	for _, c := range cls {
		owner := ownerName(c)
		users[owner] = true
		for _, g := range c.OwnerGroups {
			groups[g] = true
		}
		if (d.User != "" && owner != d.User) || (d.Group != "" && !slices.Contains(c.OwnerGroups, d.Group)) {
			continue
		}
		d.Total++
		if len(d.Rows) < maxAdminRows {
			d.Rows = append(d.Rows, adminClusterRow{clusterRow: rowOf(c, now), Owner: owner, Groups: strings.Join(c.OwnerGroups, ", "), Provider: c.Provider})
		}
	}
	d.Shown = len(d.Rows)
	d.Users, d.AllGroups = slices.Sorted(maps.Keys(users)), slices.Sorted(maps.Keys(groups))
	s.render(w, r, http.StatusOK, "admin_clusters", view{Title: "Every cluster", User: u, Nav: "admin", Data: d})
}

func ownerName(c *store.Cluster) string {
	if c.OwnerName != "" {
		return c.OwnerName
	}
	return c.Owner
}

// adminStop stops any user's cluster, audited under the admin's name, as
// the API's DELETE /api/v1/admin/clusters/{name} does; back to the list
// with its filter.
func (s *Server) adminStop(w http.ResponseWriter, r *http.Request, u *auth.User) {
	name := r.PathValue("name")
	if err := s.admin.clusters.AdminStop(r.Context(), actorOf(u), name); err != nil {
		s.fail(w, r, u, err)
		return
	}
	back := url.Values{}
	for _, k := range []string{"user", "group", "status"} {
		if v := r.PostFormValue(k); v != "" {
			back.Set(k, v)
		}
	}
	back.Set("msg", "Stopping "+name+"; the stop is in the audit log under your name.")
	http.Redirect(w, r, "/admin/clusters?"+back.Encode(), http.StatusSeeOther)
}

// --- users and groups -------------------------------------------------------

// usageCells are a row's figures as the pages show them.
type usageCells struct {
	VCPUHours, MemoryGiBHours, GPUHours, Cost string
}

func cellsOf(f report.Figures) usageCells {
	return usageCells{VCPUHours: hours(f.VCPUHours), MemoryGiBHours: hours(f.MemoryGiBHours), GPUHours: hours(f.GPUHours), Cost: usd(f.CostUSD)}
}

type adminUserRow struct {
	Name, Groups  string
	Live, Workers int
	HasEntry      bool
	Subject       string // their quota subject
	Month         usageCells
}

type adminGroupRow struct {
	Name           string // "" for users without a group
	Members        string
	Live, Clusters int
	HasEntry       bool
	Subject        string
	Month          usageCells
}

type adminUsersData struct {
	adminTab
	Since  time.Time
	Users  []adminUserRow
	Groups []adminGroupRow
}

// adminUsersPage lists the users and groups the gateway knows (from their
// clusters, this month's ledger and the quota entries), with what they
// run now and what they used this month. A user's groups are those of
// their latest cluster: the gateway learns groups at sign-in only.
func (s *Server) adminUsersPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ctx := r.Context()
	now := time.Now()
	since := quota.MonthStart(now)
	cls, err := s.admin.clusters.ListAll(ctx, nil)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	ivs, err := s.admin.records.Intervals(ctx, store.LedgerFilter{Since: since, Until: now})
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	entries, err := s.admin.quotas.List(ctx)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d := adminUsersData{adminTab: adminTab{"users"}, Since: since}
	d.Users, d.Groups = usersAndGroups(cls, ivs, entries, now)
	s.render(w, r, http.StatusOK, "admin_users", view{Title: "Users and groups", User: u, Nav: "admin", Data: d})
}

func usersAndGroups(cls []*store.Cluster, ivs []store.Interval, entries []quota.Entry, now time.Time) ([]adminUserRow, []adminGroupRow) {
	users := map[string]*adminUserRow{}
	user := func(name string) *adminUserRow {
		if users[name] == nil {
			users[name] = &adminUserRow{Name: name, Subject: string(quota.UserSubject(name))}
		}
		return users[name]
	}
	groups := map[string]*adminGroupRow{}
	group := func(name string) *adminGroupRow {
		if groups[name] == nil {
			groups[name] = &adminGroupRow{Name: name}
			if name != "" {
				groups[name].Subject = string(quota.GroupSubject(name))
			}
		}
		return groups[name]
	}
	latest := map[string]*store.Cluster{}
	clusterGroups := map[string][]string{}
	for _, c := range cls {
		name := ownerName(c)
		row := user(name)
		if l := latest[name]; l == nil || c.CreatedAt.After(l.CreatedAt) {
			latest[name] = c
		}
		clusterGroups[c.Name] = c.OwnerGroups
		if c.Status.Live() {
			row.Live++
			row.Workers += c.DesiredWorkers
			for _, g := range groupsOrNone(c.OwnerGroups) {
				group(g).Live++
			}
		}
	}
	members := map[string][]string{}
	for name, c := range latest {
		users[name].Groups = strings.Join(c.OwnerGroups, ", ")
		for _, g := range groupsOrNone(c.OwnerGroups) {
			members[g] = append(members[g], name)
		}
	}
	for _, row := range report.Report(ivs, time.Time{}, now, "user").Rows {
		user(row.User).Month = cellsOf(reportFigures(row))
	}
	for _, row := range report.ByGroup(ivs, clusterGroups) {
		g := group(row.Group)
		g.Clusters, g.Month = row.Clusters, cellsOf(row.Figures)
	}
	for _, e := range entries {
		if name, ok := strings.CutPrefix(string(e.Subject), "user:"); ok {
			user(name).HasEntry = true
		} else if name, ok := strings.CutPrefix(string(e.Subject), "group:"); ok {
			group(name).HasEntry = true
		}
	}
	for g, names := range members {
		slices.Sort(names)
		group(g).Members = strings.Join(names, ", ")
	}
	outU := make([]adminUserRow, 0, len(users))
	for _, name := range slices.Sorted(maps.Keys(users)) {
		outU = append(outU, *users[name])
	}
	outG := make([]adminGroupRow, 0, len(groups))
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		outG = append(outG, *groups[name])
	}
	return outU, outG
}

// groupsOrNone is a cluster's groups, or "" (no group) when it has none.
func groupsOrNone(gs []string) []string {
	if len(gs) == 0 {
		return []string{""}
	}
	return gs
}
