package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/store"
)

// ParseBy reads what a report has a row per: "user" (also for "") or
// "cluster".
func ParseBy(s string) (string, error) {
	switch s {
	case "", "user":
		return "user", nil
	case "cluster":
		return s, nil
	}
	return "", fmt.Errorf("by must be user or cluster, got %q", s)
}

// Report sums the ledger's intervals (already clipped to the window) per
// user (by "user") or per cluster (by "cluster"), sorted by user name
// then cluster.
func Report(ivs []store.Interval, since, until time.Time, by string) apitype.UsageReport {
	rows := map[string]*apitype.UsageRow{}
	clusters := map[string]map[string]bool{}
	var keys []string
	for _, iv := range ivs {
		key := iv.Owner
		if by == "cluster" {
			key = iv.Cluster
		}
		row := rows[key]
		if row == nil {
			row = &apitype.UsageRow{User: iv.OwnerName, UserID: iv.Owner, GPUHoursByType: map[string]float64{}}
			if by == "cluster" {
				row.Cluster = iv.Cluster
			}
			rows[key], clusters[key] = row, map[string]bool{}
			keys = append(keys, key)
		}
		clusters[key][iv.Cluster] = true
		row.Clusters = len(clusters[key])
		row.Running = row.Running || iv.Open
		var t store.Totals
		t.Add(iv)
		row.VCPUHours += t.VCPUSeconds / 3600
		row.MemoryGiBHours += t.MemoryGiBSeconds / 3600
		row.GPUHours += t.GPUSeconds / 3600
		for k, v := range t.GPUSecondsByType {
			row.GPUHoursByType[k] += v / 3600
		}
		row.CostUSD += t.Cost
	}
	out := apitype.UsageReport{Since: since.UTC(), Until: until.UTC(), By: by, Rows: []apitype.UsageRow{}}
	for _, k := range keys {
		out.Rows = append(out.Rows, *rows[k])
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		a, b := out.Rows[i], out.Rows[j]
		if a.User != b.User {
			return a.User < b.User
		}
		return a.Cluster < b.Cluster
	})
	return out
}

// WriteCSV writes a report as CSV: a header, then one record per row.
func WriteCSV(w io.Writer, rep apitype.UsageReport) error {
	cw := csv.NewWriter(w)
	head := []string{"user", "user_id", "clusters", "vcpu_hours", "memory_gib_hours", "gpu_hours", "gpu_hours_by_type", "estimated_cost_usd", "running", "since", "until"}
	if rep.By == "cluster" {
		head = append([]string{"cluster"}, head...)
	}
	_ = cw.Write(head)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, row := range rep.Rows {
		var types []string
		for k, v := range row.GPUHoursByType {
			types = append(types, csvSafe(k)+"="+f(v))
		}
		sort.Strings(types)
		rec := []string{csvSafe(row.User), csvSafe(row.UserID), strconv.Itoa(row.Clusters), f(row.VCPUHours), f(row.MemoryGiBHours), f(row.GPUHours),
			strings.Join(types, ";"), f(row.CostUSD), strconv.FormatBool(row.Running), rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339)}
		if rep.By == "cluster" {
			rec = append([]string{csvSafe(row.Cluster)}, rec...)
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a cell from being read as a formula by spreadsheets
// (names and ids come from the identity provider, not from us).
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// Figures are what some use amounts to.
type Figures struct {
	VCPUHours, MemoryGiBHours, GPUHours, CostUSD float64
}

// Plus adds o's figures to f's.
func (f *Figures) Plus(o Figures) {
	f.VCPUHours += o.VCPUHours
	f.MemoryGiBHours += o.MemoryGiBHours
	f.GPUHours += o.GPUHours
	f.CostUSD += o.CostUSD
}

func (f *Figures) add(iv store.Interval) {
	var t store.Totals
	t.Add(iv)
	f.VCPUHours += t.VCPUSeconds / 3600
	f.MemoryGiBHours += t.MemoryGiBSeconds / 3600
	f.GPUHours += t.GPUSeconds / 3600
	f.CostUSD += t.Cost
}

// GroupRow is one group's use: that of the clusters made by its members
// while they were in it. Group is "" for clusters whose owner had no
// group.
type GroupRow struct {
	Group           string
	Users, Clusters int
	Figures
}

// ByGroup sums the intervals per group of each cluster's owner when the
// cluster was made (groups has each cluster's; store.Cluster.OwnerGroups).
// A cluster counts for each of its owner's groups: the groups' rows
// overlap and do not add up to the total. Sorted by group name.
func ByGroup(ivs []store.Interval, groups map[string][]string) []GroupRow {
	rows := map[string]*GroupRow{}
	users, clusters := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, iv := range ivs {
		gs := groups[iv.Cluster]
		if len(gs) == 0 {
			gs = []string{""}
		}
		for _, g := range gs {
			row := rows[g]
			if row == nil {
				row = &GroupRow{Group: g}
				rows[g], users[g], clusters[g] = row, map[string]bool{}, map[string]bool{}
			}
			users[g][iv.Owner], clusters[g][iv.Cluster] = true, true
			row.Users, row.Clusters = len(users[g]), len(clusters[g])
			row.add(iv)
		}
	}
	out := make([]GroupRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// DayRow is one UTC day's use.
type DayRow struct {
	Day time.Time // midnight UTC
	Figures
}

// Daily sums the intervals per UTC day of [since, until), every day
// listed, those without use too; each interval counts on each day by the
// part of it that falls on that day.
func Daily(ivs []store.Interval, since, until time.Time) []DayRow {
	first := dayOf(since)
	var out []DayRow
	for d := first; d.Before(until); d = d.AddDate(0, 0, 1) {
		out = append(out, DayRow{Day: d})
	}
	for _, iv := range ivs {
		for d := dayOf(iv.Start); d.Before(iv.Stop); d = d.AddDate(0, 0, 1) {
			i := int(d.Sub(first).Hours() / 24)
			if i < 0 || i >= len(out) {
				continue // outside the window: the ledger clips, this guards
			}
			part := iv
			part.Start, part.Stop = later(iv.Start, d), earlier(iv.Stop, d.AddDate(0, 0, 1))
			out[i].add(part)
		}
	}
	return out
}

func dayOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
