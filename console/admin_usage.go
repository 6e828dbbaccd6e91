package console

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/report"
	"github.com/gatewayhq/gateway/store"
)

// --- the usage report -------------------------------------------------------

// usageMetric is one figure the charts can draw.
type usageMetric struct {
	Key, Title string
	of         func(report.Figures) float64
	format     func(float64) string
}

var usageMetrics = []usageMetric{
	{"vcpu_hours", "vCPU-hours", func(f report.Figures) float64 { return f.VCPUHours }, hours},
	{"gpu_hours", "GPU-hours", func(f report.Figures) float64 { return f.GPUHours }, hours},
	{"memory_gib_hours", "GiB-hours of memory", func(f report.Figures) float64 { return f.MemoryGiBHours }, hours},
	{"cost", "estimated cost (USD)", func(f report.Figures) float64 { return f.CostUSD }, usd},
}

// maxChartRows is how many users or groups a chart draws (the most
// using); the tables list them all.
const maxChartRows = 25

// maxChartDays is the longest window drawn day by day.
const maxChartDays = 366

type usageUserRow struct {
	Name     string
	Clusters int
	Running  bool
	usageCells
}

type usageGroupRow struct {
	Name            string
	Users, Clusters int
	usageCells
}

type usageDayRow struct {
	Day string
	usageCells
}

type adminUsageData struct {
	adminTab
	Since, Until, User, Metric string // the form, as given
	Metrics                    []usageMetric
	MetricTitle                string
	From, To                   time.Time // the window
	ByUser, ByGroup, ByDay     chart
	Users                      []usageUserRow
	Groups                     []usageGroupRow
	Days                       []usageDayRow
	DaysTooMany                bool
	Total                      usageCells
	CSVByUser, CSVByCluster    string
}

// adminUsagePage is the usage report as charts by user, group and day,
// each with its table, and the CSV the API and `gateway admin usage -o
// csv` write.
func (s *Server) adminUsagePage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	q := r.URL.Query()
	d := adminUsageData{adminTab: adminTab{"usage"}, Since: q.Get("since"), Until: q.Get("until"), User: q.Get("user"), Metric: q.Get("metric"), Metrics: usageMetrics}
	m, ok := metricOf(d.Metric)
	if !ok {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad filter", fmt.Sprintf("metric must be one of vcpu_hours, gpu_hours, memory_gib_hours, cost, got %q", d.Metric))
		return
	}
	d.Metric, d.MetricTitle = m.Key, m.Title
	since, until, ivs, ok := s.usageWindow(w, r, u)
	if !ok {
		return
	}
	cls, err := s.admin.clusters.ListAll(r.Context(), nil)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	groupsOf := map[string][]string{}
	for _, c := range cls {
		groupsOf[c.Name] = c.OwnerGroups
	}
	d.From, d.To = since.UTC(), until.UTC()
	var total report.Figures
	var userPoints, groupPoints, dayPoints []chartPoint
	for _, row := range report.Report(ivs, since, until, "user").Rows {
		f := reportFigures(row)
		total.Plus(f)
		d.Users = append(d.Users, usageUserRow{Name: row.User, Clusters: row.Clusters, Running: row.Running, usageCells: cellsOf(f)})
		userPoints = append(userPoints, chartPoint{row.User, m.of(f)})
	}
	d.Total = cellsOf(total)
	for _, row := range report.ByGroup(ivs, groupsOf) {
		name := row.Group
		if name == "" {
			name = "(no group)"
		}
		d.Groups = append(d.Groups, usageGroupRow{Name: row.Group, Users: row.Users, Clusters: row.Clusters, usageCells: cellsOf(row.Figures)})
		groupPoints = append(groupPoints, chartPoint{name, m.of(row.Figures)})
	}
	days := report.Daily(ivs, since, until)
	d.DaysTooMany = len(days) > maxChartDays
	if !d.DaysTooMany {
		for _, day := range days {
			label := day.Day.Format("2006-01-02")
			d.Days = append(d.Days, usageDayRow{Day: label, usageCells: cellsOf(day.Figures)})
			dayPoints = append(dayPoints, chartPoint{label, m.of(day.Figures)})
		}
	}
	d.ByUser = rowsChart("by-user", m.Title+" by user", top(userPoints), m.format)
	d.ByGroup = rowsChart("by-group", m.Title+" by group", top(groupPoints), m.format)
	d.ByDay = columnsChart("by-day", m.Title+" by day (UTC)", dayPoints, m.format)
	csv := url.Values{"since": {d.From.Format(time.RFC3339)}, "until": {d.To.Format(time.RFC3339)}}
	if d.User != "" {
		csv.Set("user", d.User)
	}
	d.CSVByUser = "/admin/usage.csv?" + csv.Encode()
	csv.Set("by", "cluster")
	d.CSVByCluster = "/admin/usage.csv?" + csv.Encode()
	s.render(w, r, http.StatusOK, "admin_usage", view{Title: "Usage", User: u, Nav: "admin", Data: d})
}

func metricOf(key string) (usageMetric, bool) {
	if key == "" {
		return usageMetrics[0], true
	}
	i := slices.IndexFunc(usageMetrics, func(m usageMetric) bool { return m.Key == key })
	if i < 0 {
		return usageMetric{}, false
	}
	return usageMetrics[i], true
}

func reportFigures(row apitype.UsageRow) report.Figures {
	return report.Figures{VCPUHours: row.VCPUHours, MemoryGiBHours: row.MemoryGiBHours, GPUHours: row.GPUHours, CostUSD: row.CostUSD}
}

// top is the points with the most use, most first.
func top(points []chartPoint) []chartPoint {
	out := slices.Clone(points)
	slices.SortStableFunc(out, func(a, b chartPoint) int {
		switch {
		case a.Value > b.Value:
			return -1
		case a.Value < b.Value:
			return 1
		}
		return 0
	})
	return out[:min(len(out), maxChartRows)]
}

// usageWindow reads the report's window (since, until) and user as the
// API's usage route does, and the ledger's intervals in it; false: it has
// answered.
func (s *Server) usageWindow(w http.ResponseWriter, r *http.Request, u *auth.User) (since, until time.Time, ivs []store.Interval, ok bool) {
	q := r.URL.Query()
	since, until, err := report.Window(q.Get("since"), q.Get("until"), time.Now())
	if err != nil {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad filter", err.Error())
		return since, until, nil, false
	}
	ivs, err = s.admin.records.Intervals(r.Context(), store.LedgerFilter{OwnerName: q.Get("user"), Since: since, Until: until})
	if err != nil {
		s.fail(w, r, u, err)
		return since, until, nil, false
	}
	return since, until, ivs, true
}

// adminUsageCSV is the API's usage report as CSV (GET
// /api/v1/admin/usage?format=csv), as a file to download.
func (s *Server) adminUsageCSV(w http.ResponseWriter, r *http.Request, u *auth.User) {
	by, err := report.ParseBy(r.URL.Query().Get("by"))
	if err != nil {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad filter", err.Error())
		return
	}
	since, until, ivs, ok := s.usageWindow(w, r, u)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := report.WriteCSV(&buf, report.Report(ivs, since, until, by)); err != nil {
		s.fail(w, r, u, err)
		return
	}
	const day = "20060102"
	name := "gateway-usage-by-" + by + "-" + since.UTC().Format(day) + "-" + until.UTC().Format(day) + ".csv"
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	_, _ = w.Write(buf.Bytes())
}

// --- the audit log ----------------------------------------------------------

type auditRow struct {
	At                             time.Time
	Actor, ActorID, Action, Target string
	Change                         string
}

type adminAuditData struct {
	adminTab
	Since, Target, Actor, Limit string // the filter, as given
	Rows                        []auditRow
}

// adminAuditPage is the audit log, newest first, with the filters of
// `gateway admin audit` (since, target, actor, limit).
func (s *Server) adminAuditPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	q := r.URL.Query()
	d := adminAuditData{adminTab: adminTab{"audit"}, Since: q.Get("since"), Target: q.Get("target"), Actor: q.Get("actor"), Limit: q.Get("limit")}
	f, err := report.AuditFilter(d.Since, d.Target, d.Actor, d.Limit)
	if err != nil {
		s.errorPage(w, r, u, http.StatusUnprocessableEntity, "Bad filter", err.Error())
		return
	}
	entries, err := s.admin.records.AuditLog(r.Context(), f)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	for _, e := range entries {
		d.Rows = append(d.Rows, auditRow{At: e.At, Actor: e.Actor, ActorID: e.ActorID, Action: e.Action, Target: e.Target,
			Change: report.Change([]byte(e.Before), []byte(e.After))})
	}
	s.render(w, r, http.StatusOK, "admin_audit", view{Title: "Audit log", User: u, Nav: "admin", Data: d})
}
