package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// The usage page: this calendar month (UTC) so far, as gateway usage and
// gateway quota show it, from the same sources as the API's /usage and
// /quota (the ledger's intervals of the user's members, the effective
// limits with their sources, what the live clusters hold), with a chart
// by day.

// figures are one row's use, formatted.
type figures struct {
	VCPUHours, MemoryGiBHours, GPUHours, Cost string
}

func figuresOf(t store.Totals) figures {
	return figures{VCPUHours: hoursText(t.VCPUSeconds), MemoryGiBHours: hoursText(t.MemoryGiBSeconds), GPUHours: hoursText(t.GPUSeconds),
		Cost: fmt.Sprintf("$%.2f", t.Cost)}
}

func hoursText(seconds float64) string { return strconv.FormatFloat(seconds/3600, 'f', 2, 64) }

type budgetRow struct {
	Label, Limit, Used, Source string
	// Metered: a finite limit, drawn as a meter of Value out of Max.
	Metered    bool
	Value, Max float64
	Percent    int
	Spent      bool // used up: no new clusters or workers until next month
}

type dayRow struct {
	Date, Label string // 2026-12-03, 3 Dec
	figures
}

type clusterUse struct {
	Name    string
	Running bool
	figures
}

type limitRow struct {
	quota.Row
	InUse string
	// SetIn says which layer set it: the configuration file, stored by an
	// admin, the built-in default, or nothing.
	SetIn string
}

type usageData struct {
	Since, Until string
	Total        figures
	Budgets      []budgetRow
	Days         []dayRow
	Chart        dayChartView
	Clusters     []clusterUse
	Running      bool // a cluster still runs: its figures grow
	Limits       []limitRow
	OnExceed     string
}

func (s *Server) usagePage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	d, err := s.usageData(r.Context(), u)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	s.render(w, r, http.StatusOK, "usage", view{Title: "Usage", User: u, Nav: "usage", Data: d})
}

func (s *Server) usageData(ctx context.Context, u *auth.User) (usageData, error) {
	now := s.account.Now().UTC()
	since := quota.MonthStart(now)
	who := quota.Who{ID: u.Owner(), Name: u.Name, Groups: u.Groups}
	ivs, err := s.account.Records.Intervals(ctx, store.LedgerFilter{Owner: who.ID, Since: since, Until: now})
	if err != nil {
		return usageData{}, err
	}
	eff, err := s.account.Quotas.Effective(ctx, who)
	if err != nil {
		return usageData{}, err
	}
	live, err := s.account.Records.OwnerUsage(ctx, who.ID)
	if err != nil {
		return usageData{}, err
	}
	d := usageData{Since: since.Format("2 January 2006"), Until: now.Format("2 January 2006 15:04 UTC"), OnExceed: s.account.OnExceed}

	var total store.Totals
	perCluster := map[string]*store.Totals{}
	var names []string
	running := map[string]bool{}
	for _, iv := range ivs {
		if iv.Owner != who.ID {
			continue // never another user's, whatever the store returned
		}
		total.Add(iv)
		if perCluster[iv.Cluster] == nil {
			perCluster[iv.Cluster] = &store.Totals{}
			names = append(names, iv.Cluster)
		}
		perCluster[iv.Cluster].Add(iv)
		running[iv.Cluster] = running[iv.Cluster] || iv.Open
	}
	d.Total = figuresOf(total)
	slices.Sort(names)
	for _, n := range names {
		d.Clusters = append(d.Clusters, clusterUse{Name: n, Running: running[n], figures: figuresOf(*perCluster[n])})
		d.Running = d.Running || running[n]
	}

	days := byDay(ivs, since, now)
	for i, t := range days {
		day := since.AddDate(0, 0, i)
		d.Days = append(d.Days, dayRow{Date: day.Format("2006-01-02"), Label: day.Format("2 Jan"), figures: figuresOf(t)})
	}
	d.Chart = dayChart(days, since)

	for _, b := range []struct {
		field, label string
		limit        *quota.Amount
		used         float64
	}{
		{"monthly_vcpu_hours", "vCPU-hours", eff.Limits.MonthlyVCPUHours, total.VCPUSeconds / 3600},
		{"monthly_gpu_hours", "GPU-hours", eff.Limits.MonthlyGPUHours, total.GPUSeconds / 3600},
	} {
		if b.limit == nil {
			continue
		}
		row := budgetRow{Label: b.label, Limit: b.limit.String(), Used: strconv.FormatFloat(b.used, 'f', 2, 64), Source: eff.Source(b.field)}
		if !b.limit.IsUnlimited() {
			row.Metered, row.Value, row.Max = true, min(b.used, float64(*b.limit)), float64(*b.limit)
			if *b.limit > 0 {
				row.Percent = int(100 * b.used / float64(*b.limit))
			}
			row.Spent = b.used >= float64(*b.limit)
		}
		d.Budgets = append(d.Budgets, row)
	}

	inUse := quota.InUseOf(live)
	for _, row := range eff.Rows() {
		v, _ := inUse.Of(row.Name)
		d.Limits = append(d.Limits, limitRow{Row: row, InUse: v, SetIn: setIn(row.Source)})
	}
	return d, nil
}

// setIn says which layer a limit's source ("user:ann (api)", "default
// (config)", quota.BuiltinSource) is.
func setIn(source string) string {
	switch {
	case source == "":
		return "nothing limits it"
	case source == quota.BuiltinSource:
		return "the gateway's built-in default"
	case strings.HasSuffix(source, "("+quota.FromConfig+")"):
		return "the configuration file"
	case strings.HasSuffix(source, "("+quota.FromAPI+")"):
		return "stored by an admin"
	}
	return ""
}

// byDay is the intervals' use on each day (UTC) from since (a midnight)
// to until, each interval split at midnights.
func byDay(ivs []store.Interval, since, until time.Time) []store.Totals {
	const day = 24 * time.Hour
	n := int(until.Sub(since) / day)
	if since.Add(time.Duration(n) * day).Before(until) {
		n++
	}
	out := make([]store.Totals, max(n, 1))
	for _, iv := range ivs {
		first := max(int(iv.Start.Sub(since)/day), 0)
		for i := first; i < len(out); i++ {
			from, to := since.Add(time.Duration(i)*day), since.Add(time.Duration(i+1)*day)
			if !iv.Stop.After(from) {
				break
			}
			part := iv
			if part.Start.Before(from) {
				part.Start = from
			}
			if part.Stop.After(to) {
				part.Stop = to
			}
			if part.Stop.After(part.Start) {
				out[i].Add(part)
			}
		}
	}
	return out
}
