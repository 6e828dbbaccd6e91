package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/store"
)

func TestChange(t *testing.T) {
	cases := []struct{ before, after, want string }{
		{`null`, `{"max_vcpus":8}`, "max_vcpus: - -> 8"},
		{`{"max_vcpus":8,"max_clusters":2}`, `{"max_vcpus":16,"max_clusters":2}`, "max_vcpus: 8 -> 16"},
		{`{"max_gpus_by_type":{"a100":1}}`, `null`, `max_gpus_by_type: {"a100":1} -> -`},
		{`{"status":"RUNNING","workers":2}`, `{"status":"STOPPING","workers":2}`, `status: "RUNNING" -> "STOPPING"`},
		{`{"a":1}`, `{"a":1}`, "(no change)"},
		{`[1]`, `null`, "[1] -> -"},
		{``, `"x"`, `- -> "x"`},
	}
	for _, tc := range cases {
		if got := Change([]byte(tc.before), []byte(tc.after)); got != tc.want {
			t.Errorf("Change(%s, %s) = %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
}

func TestWindow(t *testing.T) {
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		since, until         string
		wantSince, wantUntil time.Time
		err                  string
	}{
		{"", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), now, ""},
		{"2026-11-01", "2026-12-01", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), ""},
		{"2026-12-10T08:00:00Z", "2030-01-01", time.Date(2026, 12, 10, 8, 0, 0, 0, time.UTC), now, ""},
		{"yesterday", "", time.Time{}, time.Time{}, `since: "yesterday" is not a date like 2026-12-01`},
		{"", "soon", time.Time{}, time.Time{}, `until: "soon" is not a date`},
		{"2026-12-02", "2026-12-01", time.Time{}, time.Time{}, "since (2026-12-02T00:00:00Z) must be before until (2026-12-01T00:00:00Z)"},
	}
	for _, tt := range tests {
		since, until, err := Window(tt.since, tt.until, now)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Window(%q, %q): %v, want %q", tt.since, tt.until, err, tt.err)
			}
			continue
		}
		if err != nil || !since.Equal(tt.wantSince) || !until.Equal(tt.wantUntil) {
			t.Errorf("Window(%q, %q) = %s, %s, %v; want %s, %s", tt.since, tt.until, since, until, err, tt.wantSince, tt.wantUntil)
		}
	}
}

func TestAuditFilter(t *testing.T) {
	f, err := AuditFilter("2026-12-01", "cluster:c1", "root", "50")
	if err != nil || !f.Since.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || f.Target != "cluster:c1" || f.Actor != "root" || f.Limit != 50 {
		t.Fatalf("filter %+v, %v", f, err)
	}
	if f, err := AuditFilter("", "", "", ""); err != nil || f != (store.AuditFilter{}) {
		t.Errorf("empty filter %+v, %v", f, err)
	}
	for _, tt := range []struct{ since, limit, want string }{
		{"last week", "", `since: "last week" is not a date`},
		{"", "0", "limit must be a whole number from 1 to 10000"},
		{"", "10001", "limit must be a whole number from 1 to 10000"},
		{"", "ten", "limit must be a whole number from 1 to 10000"},
	} {
		if _, err := AuditFilter(tt.since, "", "", tt.limit); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("AuditFilter(since %q, limit %q): %v, want %q", tt.since, tt.limit, err, tt.want)
		}
	}
}

var day0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func iv(cluster, owner string, start, stop time.Duration, vcpus float64, gpus int, price float64) store.Interval {
	return store.Interval{Cluster: cluster, Member: "w", Owner: "id-" + owner, OwnerName: owner, Start: day0.Add(start), Stop: day0.Add(stop),
		VCPUs: vcpus, MemoryGiB: 2 * vcpus, GPUs: gpus, GPUType: "t4", PriceHour: price}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// An interval across midnight counts on each day by its part of it; the
// days without use are listed too.
func TestDaily(t *testing.T) {
	ivs := []store.Interval{
		iv("c1", "ann", 22*time.Hour, 26*time.Hour, 2, 1, 0.5), // 2h on day 1, 2h on day 2
		iv("c2", "bob", 72*time.Hour+time.Hour, 72*time.Hour+2*time.Hour, 4, 0, 1),
	}
	days := Daily(ivs, day0, day0.Add(4*24*time.Hour))
	if len(days) != 4 {
		t.Fatalf("%d days, want 4: %+v", len(days), days)
	}
	want := []Figures{{VCPUHours: 4, MemoryGiBHours: 8, GPUHours: 2, CostUSD: 1}, {VCPUHours: 4, MemoryGiBHours: 8, GPUHours: 2, CostUSD: 1}, {}, {VCPUHours: 4, MemoryGiBHours: 8, CostUSD: 1}}
	for i, d := range days {
		if !d.Day.Equal(day0.AddDate(0, 0, i)) {
			t.Errorf("day %d is %s", i, d.Day)
		}
		g := d.Figures
		if !near(g.VCPUHours, want[i].VCPUHours) || !near(g.MemoryGiBHours, want[i].MemoryGiBHours) || !near(g.GPUHours, want[i].GPUHours) || !near(g.CostUSD, want[i].CostUSD) {
			t.Errorf("day %d: %+v, want %+v", i, g, want[i])
		}
	}
	// A window starting mid-day starts with that day.
	if days := Daily(nil, day0.Add(5*time.Hour), day0.Add(30*time.Hour)); len(days) != 2 || !days[0].Day.Equal(day0) {
		t.Errorf("mid-day window: %+v", days)
	}
}

// A cluster counts for each group its owner had when it was made; one
// without groups counts under "".
func TestByGroup(t *testing.T) {
	ivs := []store.Interval{
		iv("c1", "ann", 0, time.Hour, 2, 0, 0.1),
		iv("c2", "bob", 0, 2*time.Hour, 1, 0, 0.1),
		iv("c3", "ann", 0, time.Hour, 1, 0, 0),
		iv("c4", "cat", 0, time.Hour, 8, 0, 0),
	}
	rows := ByGroup(ivs, map[string][]string{"c1": {"analysts", "gpu"}, "c2": {"analysts"}, "c3": {"gpu"}})
	type got struct {
		group           string
		users, clusters int
		vcpuHours       float64
	}
	want := []got{{"", 1, 1, 8}, {"analysts", 2, 2, 4}, {"gpu", 1, 2, 3}}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for i, r := range rows {
		if g := (got{r.Group, r.Users, r.Clusters, r.VCPUHours}); g.group != want[i].group || g.users != want[i].users || g.clusters != want[i].clusters || !near(g.vcpuHours, want[i].vcpuHours) {
			t.Errorf("row %d: %+v, want %+v", i, g, want[i])
		}
	}
}

// Names a spreadsheet would run as formulas are defused; by cluster, the
// cluster comes first.
func TestWriteCSV(t *testing.T) {
	rep := apitype.UsageReport{Since: day0, Until: day0.Add(time.Hour), By: "cluster", Rows: []apitype.UsageRow{
		{User: "=cmd|'/c calc'!A1", UserID: "@id", Cluster: "c1", Clusters: 1, VCPUHours: 1.5, GPUHoursByType: map[string]float64{"+t4": 1, "a100": 2}},
	}}
	var b bytes.Buffer
	if err := WriteCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0][0] != "cluster" || rows[0][1] != "user" {
		t.Fatalf("rows %q", rows)
	}
	r := rows[1]
	if r[0] != "c1" || r[1] != "'=cmd|'/c calc'!A1" || r[2] != "'@id" || r[4] != "1.5000" || r[7] != "'+t4=1.0000;a100=2.0000" || r[11] != "2026-12-01T01:00:00Z" {
		t.Errorf("record %q", r)
	}
}
