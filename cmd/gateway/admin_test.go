package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/quota"
)

func TestQuotaPatch(t *testing.T) {
	cases := []struct {
		name  string
		given map[string]string
		want  string   // the patch as JSON, when it parses
		errs  []string // parts of the error, when it does not
	}{
		{"no flag", map[string]string{}, "", []string{"nothing to set", "--max-clusters", "--max-gpus-by-type", "--monthly-gpu-hours"}},
		{"numbers", map[string]string{"max_clusters": "2", "max_vcpus": "16.5", "max_memory_gib": " 64 "},
			`{"max_clusters":2,"max_vcpus":16.5,"max_memory_gib":64}`, nil},
		{"unlimited", map[string]string{"max_vcpus": "unlimited", "max_clusters": "Unlimited", "monthly_gpu_hours": "UNLIMITED"},
			`{"max_clusters":"unlimited","max_vcpus":"unlimited","monthly_gpu_hours":"unlimited"}`, nil},
		{"zero", map[string]string{"max_gpus": "0"}, `{"max_gpus":0}`, nil},
		{"bad number", map[string]string{"max_vcpus": "lots"}, "", []string{`--max-vcpus: want a number of at least 0 or "unlimited", got "lots"`}},
		{"negative", map[string]string{"monthly_vcpu_hours": "-1"}, "", []string{"--monthly-vcpu-hours: want a number of at least 0"}},
		{"fraction of a count", map[string]string{"max_clusters": "2.5"}, "", []string{`--max-clusters: want a whole number of at least 0 or "unlimited", got "2.5"`}},
		{"not a number at all", map[string]string{"max_workers_per_cluster": "NaN"}, "", []string{"--max-workers-per-cluster: want a whole number"}},
		{"gpu types", map[string]string{"max_gpus_by_type": "a100=2, t4=unlimited"}, `{"max_gpus_by_type":{"a100":2,"t4":"unlimited"}}`, nil},
		{"gpu count not a number", map[string]string{"max_gpus_by_type": "a100=x"}, "", []string{`--max-gpus-by-type: a100: want a whole number of at least 0 or "unlimited", got "x"`}},
		{"gpu without count", map[string]string{"max_gpus_by_type": "a100"}, "", []string{`--max-gpus-by-type: want type=count pairs such as a100=2,t4=4, got "a100"`}},
		{"gpu without type", map[string]string{"max_gpus_by_type": "=2"}, "", []string{"--max-gpus-by-type: want type=count"}},
		{"gpu twice", map[string]string{"max_gpus_by_type": "a100=1,a100=2"}, "", []string{"GPU type a100 is given twice"}},
		{"gpu type with a space", map[string]string{"max_gpus_by_type": "a 100=2"}, "", []string{`"a 100" is not a GPU type`}},
		{"lists", map[string]string{"allowed_providers": "local, ec2", "allowed_regions": "*"},
			`{"allowed_providers":["local","ec2"],"allowed_regions":["*"]}`, nil},
		{"empty list", map[string]string{"allowed_providers": ""}, "", []string{"--allowed-providers: want a list of names", "gateway admin quota unset SUBJECT allowed_providers"}},
		{"empty name in a list", map[string]string{"allowed_instance_types": "m5.large,,c5.xlarge"}, "", []string{"--allowed-instance-types: want a list of names"}},
		{"name with a space", map[string]string{"allowed_regions": "eu west"}, "", []string{`allowed_regions: "eu west" is not a name`}},
		{"durations", map[string]string{"max_idle_timeout": "90m", "max_lifetime": "unlimited"},
			`{"max_idle_timeout":"1h30m0s","max_lifetime":"unlimited"}`, nil},
		{"bad duration", map[string]string{"max_lifetime": "8 hours"}, "", []string{`--max-lifetime: want a duration of at least 1s such as "2h", or "unlimited", got "8 hours"`}},
		{"zero duration", map[string]string{"max_idle_timeout": "0"}, "", []string{"--max-idle-timeout: want a duration of at least 1s"}},
		{"every problem at once", map[string]string{"max_vcpus": "x", "max_lifetime": "y", "bogus": "1"}, "",
			[]string{"--max-vcpus: want", "--max-lifetime: want", "unknown limit bogus"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := quotaPatch(tc.given)
			if tc.errs != nil {
				if err == nil {
					t.Fatalf("no error; patch %+v", l)
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(l)
			if string(b) != tc.want {
				t.Errorf("patch %s, want %s", b, tc.want)
			}
		})
	}
}

func TestEveryLimitHasAFlag(t *testing.T) {
	set := newAdminQuotaSetCmd(&globals{})
	for _, name := range quota.FieldNames() {
		if quota.KindOf(name) == quota.KindUnknown {
			t.Errorf("limit %s: the CLI does not know its kind", name)
		}
		if set.Flags().Lookup(flagOf(name)) == nil {
			t.Errorf("limit %s: quota set has no --%s", name, flagOf(name))
		}
	}
}

func TestUnsetNames(t *testing.T) {
	got, err := unsetNames([]string{"max-vcpus", "--max-lifetime", "max_gpus_by_type.a100", "max-gpus-by-type.t4-x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"max_vcpus", "max_lifetime", "max_gpus_by_type.a100", "max_gpus_by_type.t4-x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
	if names, err := unsetNames(nil); err != nil || len(names) != 0 {
		t.Errorf("no names: %v %v", names, err)
	}
	if _, err := unsetNames([]string{"max_vcpu"}); err == nil || !strings.Contains(err.Error(), "unknown limit(s) max_vcpu; known limits are max_clusters") {
		t.Errorf("typo: %v", err)
	}
}

func amount(v float64) *quota.Amount { a := quota.Amount(v); return &a }

func TestPrintQuotaList(t *testing.T) {
	dur := quota.Duration(8 * time.Hour)
	entries := []apitype.QuotaEntryJSON{
		{Subject: "default", Limits: quota.Limits{MaxClusters: amount(1), MaxLifetime: &dur}, Sources: map[string]string{"max_clusters": "config", "max_lifetime": "api"}},
		{
			Subject: "group:org/team",
			Limits:  quota.Limits{MaxGPUs: amount(4), MaxGPUsByType: map[string]quota.Amount{"t4": 2, "a100": quota.Unlimited}, AllowedProviders: []string{"local", "ec2"}},
			// The server names only the whole map; per type, config and stored tell.
			Sources: map[string]string{"max_gpus": "api", "max_gpus_by_type": "api", "allowed_providers": "config"},
			Config:  &quota.Limits{MaxGPUsByType: map[string]quota.Amount{"t4": 1}, AllowedProviders: []string{"local", "ec2"}},
			Stored:  &quota.Limits{MaxGPUs: amount(4), MaxGPUsByType: map[string]quota.Amount{"a100": quota.Unlimited, "t4": 2}},
		},
		{Subject: "user:ann", Limits: quota.Limits{MaxGPUsByType: map[string]quota.Amount{"t4": 1}}, Sources: map[string]string{"max_gpus_by_type": "api"},
			Config: &quota.Limits{MaxGPUsByType: map[string]quota.Amount{"t4": 1}}, Stored: &quota.Limits{MaxVCPUs: amount(2)}},
		{Subject: "user:empty", Sources: map[string]string{}},
	}
	var b bytes.Buffer
	if err := printQuotaList(&b, entries); err != nil {
		t.Fatal(err)
	}
	want := `SUBJECT         LIMIT                  VALUE      FROM
default         max_clusters           1          config
default         max_lifetime           8h0m0s     api
group:org/team  max_gpus               4          api
group:org/team  allowed_providers      local,ec2  config
group:org/team  max_gpus_by_type.a100  unlimited  api
group:org/team  max_gpus_by_type.t4    2          api
user:ann        max_gpus_by_type.t4    1          config
user:empty      -                      -          -
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := printQuotaList(&b, nil); err != nil || !strings.Contains(b.String(), "No quota entries") {
		t.Errorf("empty: %q %v", b.String(), err)
	}
}

func TestPrintQuotaDetail(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	d := &client.QuotaDetail{
		Entry: apitype.QuotaEntryJSON{Subject: "user:ann", Limits: quota.Limits{MaxVCPUs: amount(8)}, Sources: map[string]string{"max_vcpus": "api"},
			UpdatedAt: &at, UpdatedBy: "root"},
		Effective: &quota.Effective{
			Limits: quota.Limits{MaxClusters: amount(2), MaxVCPUs: amount(8), AllowedProviders: []string{"ec2", "local"},
				MaxGPUsByType: map[string]quota.Amount{"a100": 1}, MaxBuilds: amount(2)},
			Sources: map[string]string{"max_clusters": "group:a (config)", "max_vcpus": "user:ann (api)", "allowed_providers": "group:a (config), group:b (api)",
				"max_gpus_by_type.a100": "group:b (api)", "max_builds": quota.BuiltinSource},
		},
		Groups:     []string{},
		GroupsFrom: "none known: the user has made no cluster; pass ?groups=a,b",
	}
	var b bytes.Buffer
	if err := printQuotaDetail(&b, d); err != nil {
		t.Fatal(err)
	}
	want := `Subject:  user:ann
Changed:  ` + at.Local().Format(time.RFC3339) + ` by root (through the admin API)

LIMIT      VALUE  FROM
max_vcpus  8      api

What applies to ann, with no groups (groups from none known: the user has made no cluster; pass --groups a,b):

LIMIT                    VALUE      SOURCE
max_clusters             2          group:a (config)
max_workers_per_cluster  unlimited  -
max_vcpus                8          user:ann (api)
max_memory_gib           unlimited  -
max_gpus                 unlimited  -
allowed_instance_types   any        -
allowed_providers        ec2,local  group:a (config), group:b (api)
allowed_regions          any        -
max_idle_timeout         unlimited  -
max_lifetime             unlimited  -
monthly_vcpu_hours       unlimited  -
monthly_gpu_hours        unlimited  -
max_builds               2          built-in default
max_gpus_by_type.a100    1          group:b (api)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	// A group has no effective limits of its own.
	b.Reset()
	if err := printQuotaDetail(&b, &client.QuotaDetail{Entry: apitype.QuotaEntryJSON{Subject: "group:x"}}); err != nil {
		t.Fatal(err)
	}
	if want := "Subject:  group:x\nLimits:   none set for group:x\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestPrintAdminClusters(t *testing.T) {
	var a, b apitype.ClusterDetail
	a.Name, a.OwnerName, a.Owner, a.State, a.Provider, a.CreatedAt = "c1", "ann", "id-ann", "RUNNING", "local", time.Now().Add(-3*time.Hour)
	a.Workers.Ready, a.Workers.Requested = 1, 2
	b.Name, b.Owner, b.State, b.CreatedAt = "c2", "id-bob", "PENDING", time.Now().Add(-90*time.Second)
	var out bytes.Buffer
	if err := printAdminClusters(&out, []apitype.ClusterDetail{a, b}); err != nil {
		t.Fatal(err)
	}
	want := `NAME  OWNER   STATUS   WORKERS  PROVIDER  AGE
c1    ann     RUNNING  1/2      local     3h
c2    id-bob  PENDING  0/0      -         1m
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestPrintUsageReport(t *testing.T) {
	since, until := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 15, 10, 30, 0, 0, time.UTC)
	rows := []apitype.UsageRow{
		{User: "ann", Clusters: 2, VCPUHours: 10, MemoryGiBHours: 40.126, GPUHours: 3, GPUHoursByType: map[string]float64{"t4": 2, "a100": 1}, CostUSD: 12.346},
		{User: "bob", Clusters: 1, Running: true, VCPUHours: 0.5, MemoryGiBHours: 1, GPUHoursByType: map[string]float64{}},
	}
	var b bytes.Buffer
	if err := printUsageReport(&b, &apitype.UsageReport{Since: since, Until: until, By: "user", Rows: rows}); err != nil {
		t.Fatal(err)
	}
	want := `Usage from 2026-12-01 00:00 UTC to 2026-12-15 10:30 UTC, by user

USER   CLUSTERS  VCPU-H  GIB-H  GPU-H  GPU-H BY TYPE      EST. COST
ann    2         10.00   40.13  3.00   a100=1.00 t4=2.00  $12.35
bob*   1         0.50    1.00   0.00   -                  $0.00
TOTAL  3         10.50   41.13  3.00   a100=1.00 t4=2.00  $12.35

* still running: its figures keep growing
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	rows[0].Cluster, rows[1].Cluster = "c1", "c2"
	b.Reset()
	if err := printUsageReport(&b, &apitype.UsageReport{Since: since, Until: until, By: "cluster", Rows: rows[:1]}); err != nil {
		t.Fatal(err)
	}
	want = `Usage from 2026-12-01 00:00 UTC to 2026-12-15 10:30 UTC, by cluster

CLUSTER  USER  VCPU-H  GIB-H  GPU-H  GPU-H BY TYPE      EST. COST
c1       ann   10.00   40.13  3.00   a100=1.00 t4=2.00  $12.35
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestPrintAudit(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	var b bytes.Buffer
	err := printAudit(&b, []apitype.AuditJSON{
		{ID: 2, At: at, Actor: "root", Action: "quota.unset", Target: "user:ann", Before: json.RawMessage(`{"max_vcpus":8}`), After: json.RawMessage(`null`)},
		{ID: 1, At: at, Actor: "root", Action: "quota.set", Target: "user:ann", Before: json.RawMessage(`null`), After: json.RawMessage(`{"max_vcpus":8}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := at.Local().Format(time.RFC3339)
	pad := "  " // an RFC 3339 time is wider than "TIME"
	want := "TIME" + strings.Repeat(" ", len(ts)-len("TIME")+2) + "ACTOR  ACTION       TARGET    BEFORE -> AFTER\n" +
		ts + pad + "root   quota.unset  user:ann  max_vcpus: 8 -> -\n" +
		ts + pad + "root   quota.set    user:ann  max_vcpus: - -> 8\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		output string
		extra  []string
		want   string
	}{
		{"text", nil, "text"}, {"table", nil, "text"}, {"JSON", nil, "json"}, {"csv", []string{"csv"}, "csv"}, {"csv", nil, ""}, {"yaml", []string{"csv"}, ""},
	} {
		got, err := (&globals{output: tc.output}).format(tc.extra...)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("format(%q, %v) = %q, %v; want %q", tc.output, tc.extra, got, err, tc.want)
		}
	}
}

// --- against the API ---------------------------------------------------------

func TestAdminQuotaCommands(t *testing.T) {
	tg := newTestGateway(t)

	out := tg.mustRun(t, "root", "admin", "quota", "set", "group:org/team", "--max-gpus", "4", "--max-gpus-by-type", "a100=2,t4=unlimited", "--max-lifetime", "8h")
	for _, want := range []string{"Subject:  group:org/team", "by root", "max_gpus               4          api", "max_lifetime           8h0m0s     api",
		"max_gpus_by_type.a100  2          api", "max_gpus_by_type.t4    unlimited  api"} {
		if !strings.Contains(out, want) {
			t.Errorf("set: lacks %q:\n%s", want, out)
		}
	}
	// The subject reached the server whole, "/" and all.
	if _, ok := tg.rec.quotas["group:org/team"]; !ok {
		t.Fatalf("stored subjects: %v", tg.rec.quotas)
	}

	// A set on a subject of the configuration file overrides it limit by limit.
	tg.mustRun(t, "root", "admin", "quota", "set", "group:analysts", "--max-gpus-by-type", "a100=1")
	out = tg.mustRun(t, "root", "admin", "quota", "list")
	for _, want := range []string{
		"SUBJECT         LIMIT                    VALUE      FROM",
		"default         max_clusters             1          config",
		"default         monthly_vcpu_hours       100        config",
		"default         max_builds               2          built-in",
		"group:analysts  max_vcpus                32         config",
		"group:analysts  max_gpus_by_type.a100    1          api",
		"group:analysts  max_gpus_by_type.t4      2          config",
		"group:org/team  max_gpus                 4          api",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("list: lacks %q:\n%s", want, out)
		}
	}

	out = tg.mustRun(t, "root", "admin", "quota", "get", "user:ann", "--groups", "analysts,org/team")
	for _, want := range []string{"Limits:   none set for user:ann", "What applies to ann, with groups analysts, org/team (groups from the request)",
		"max_clusters             1          default (config)", "max_vcpus                32         group:analysts (config)",
		"max_gpus                 4          group:org/team (api)", "max_gpus_by_type.a100    2          group:org/team (api)",
		"max_gpus_by_type.t4      unlimited  group:org/team (api)", "max_memory_gib           unlimited  -"} {
		if !strings.Contains(out, want) {
			t.Errorf("get: lacks %q:\n%s", want, out)
		}
	}
	out = tg.mustRun(t, "root", "admin", "quota", "get", "user:ann")
	if !strings.Contains(out, "pass --groups a,b") {
		t.Errorf("get without groups:\n%s", out)
	}
	out = tg.mustRun(t, "root", "admin", "quota", "get", "user:ann", "-o", "json")
	var d client.QuotaDetail
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Effective == nil || d.Effective.Sources["max_clusters"] != "default (config)" || d.Groups == nil {
		t.Errorf("get -o json: %v %+v\n%s", err, d, out)
	}

	out = tg.mustRun(t, "root", "admin", "quota", "unset", "group:org/team", "max-gpus", "max_gpus_by_type.t4")
	if strings.Contains(out, "max_gpus ") || strings.Contains(out, ".t4") || !strings.Contains(out, "max_gpus_by_type.a100  2") {
		t.Errorf("unset fields:\n%s", out)
	}
	out = tg.mustRun(t, "root", "admin", "quota", "unset", "group:org/team")
	if !strings.Contains(out, "none set for group:org/team") {
		t.Errorf("unset all:\n%s", out)
	}
	if _, err := tg.run(t, "root", "admin", "quota", "unset", "group:org/team"); !strings.Contains(fmtErr(err), "no stored quota entry for group:org/team") {
		t.Errorf("unset nothing: %v", err)
	}

	out = tg.mustRun(t, "root", "admin", "audit", "--target", "group:org/team")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "quota.unset  group:org/team  max_gpus_by_type: {\"a100\":2} -> -, max_lifetime: \"8h0m0s\" -> -") ||
		!strings.Contains(lines[3], `quota.set    group:org/team  max_gpus: - -> 4, max_gpus_by_type: - -> {"a100":2,"t4":"unlimited"}, max_lifetime: - -> "8h0m0s"`) {
		t.Errorf("audit:\n%s", out)
	}
	out = tg.mustRun(t, "root", "admin", "audit", "--limit", "1", "-o", "json")
	var entries []apitype.AuditJSON
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries) != 1 || entries[0].Action != "quota.unset" {
		t.Errorf("audit -o json: %v %+v", err, entries)
	}
}

// fmtErr is how main prints an error.
func fmtErr(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code != "" {
		return "error: " + ae.Message + " (" + ae.Code + ")"
	}
	if err == nil {
		return ""
	}
	return "error: " + err.Error()
}

func TestAdminQuotaSetChecksBeforeAsking(t *testing.T) {
	tg := newTestGateway(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "quota", "set", "user:ann"}, "nothing to set: give at least one of --max-clusters"},
		{[]string{"admin", "quota", "set", "user:ann", "--max-gpus-by-type", "a100=x"}, `--max-gpus-by-type: a100: want a whole number`},
		{[]string{"admin", "quota", "set", "ann", "--max-vcpus", "2"}, `SUBJECT: invalid quota: subject "ann" must be default, user:<name> or group:<name>`},
		{[]string{"admin", "quota", "get", "group:x", "--groups", "a"}, "--groups applies to user:NAME subjects only"},
		{[]string{"admin", "quota", "unset", "user:ann", "max_vcpu"}, "unknown limit(s) max_vcpu"},
		{[]string{"admin", "usage", "--by", "team"}, `--by "team": use user or cluster`},
		{[]string{"admin", "clusters", "-o", "csv"}, `--output "csv": use text (or table), json`},
	} {
		_, err := tg.run(t, "root", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if len(tg.rec.quotas) != 0 || len(tg.rec.audit) != 0 {
		t.Errorf("a refused command changed something: %v %v", tg.rec.quotas, tg.rec.audit)
	}
}

func TestAdminClustersAndStop(t *testing.T) {
	tg := newTestGateway(t)
	out := tg.mustRun(t, "root", "admin", "clusters")
	want := `NAME  OWNER   STATUS   WORKERS  PROVIDER  AGE
c2    id-bob  PENDING  0/3      local     5m
c1    ann     RUNNING  1/2      local     2h
`
	if out != want {
		t.Errorf("clusters: got\n%s\nwant\n%s", out, want)
	}
	tg.mustRun(t, "root", "admin", "stop", "c1")
	out = tg.mustRun(t, "root", "admin", "clusters", "--status", "RUNNING")
	if out != "No clusters\n" {
		t.Errorf("after stop:\n%s", out)
	}
	out = tg.mustRun(t, "root", "admin", "clusters", "--all", "-o", "json")
	var list []apitype.ClusterDetail
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 || list[1].State != "STOPPING" || list[1].OwnerName != "ann" {
		t.Errorf("clusters -o json: %v %+v", err, list)
	}
	if _, err := tg.run(t, "root", "admin", "stop", "nope"); fmtErr(err) != "error: cluster nope not found (cluster_not_found)" {
		t.Errorf("stop unknown: %v", err)
	}
	out = tg.mustRun(t, "root", "admin", "audit", "--actor", "root")
	if !strings.Contains(out, `cluster.stop  cluster:c1  status: "RUNNING" -> "STOPPING"`) {
		t.Errorf("audit of the stop:\n%s", out)
	}
}

func TestAdminUsage(t *testing.T) {
	tg := newTestGateway(t)
	out := tg.mustRun(t, "root", "admin", "usage")
	for _, want := range []string{", by user\n", "USER   CLUSTERS  VCPU-H  GIB-H  GPU-H  GPU-H BY TYPE  EST. COST",
		"ann    1         10.00   36.00  2.00   a100=2.00      $6.50", "bob*   1         0.50    1.00   0.00   -              $0.00",
		"TOTAL  2         10.50   37.00  2.00   a100=2.00      $6.50", "* still running"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage: lacks %q:\n%s", want, out)
		}
	}
	out = tg.mustRun(t, "root", "admin", "usage", "--user", "ann", "--by", "cluster", "-o", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "cluster,user,user_id,clusters,vcpu_hours") || !strings.HasPrefix(lines[1], "c1,ann,id-ann,1,10.0000,36.0000,2.0000,a100=2.0000,6.5000,false,") {
		t.Errorf("usage -o csv:\n%s", out)
	}
	out = tg.mustRun(t, "root", "admin", "usage", "--output", "json")
	var rep apitype.UsageReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.By != "user" || len(rep.Rows) != 2 {
		t.Errorf("usage -o json: %v %+v", err, rep)
	}
	if _, err := tg.run(t, "root", "admin", "usage", "--since", "yesterday"); !strings.Contains(fmtErr(err), `since: "yesterday" is not a date like 2026-12-01`) {
		t.Errorf("bad date: %v", err)
	}
}

func TestAdminOnly(t *testing.T) {
	tg := newTestGateway(t)
	for _, args := range [][]string{
		{"admin", "quota", "list"}, {"admin", "quota", "get", "default"}, {"admin", "quota", "set", "user:ann", "--max-vcpus", "unlimited"},
		{"admin", "quota", "unset", "user:ann"}, {"admin", "clusters"}, {"admin", "stop", "c1"}, {"admin", "usage", "-o", "csv"}, {"admin", "audit"},
	} {
		_, err := tg.run(t, "ann", args...)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || fmtErr(err) != "error: admin only: your account is not an admin of this gateway (forbidden)" {
			t.Errorf("%v as ann: %v", args, err)
		}
	}
	if len(tg.rec.quotas) != 0 || len(tg.rec.audit) != 0 {
		t.Errorf("ann changed something: %v %v", tg.rec.quotas, tg.rec.audit)
	}
}

func TestMyUsageAndQuota(t *testing.T) {
	tg := newTestGateway(t)
	out := tg.mustRun(t, "ann", "usage")
	for _, want := range []string{"  vCPU-hours:      10.00\n", "  GiB-hours:       36.00\n", "  GPU-hours:       2.00  (a100=2.00)\n", "  Estimated cost:  $6.50\n",
		"  vCPU-hours:      10.00 of 100 (10%), from default (config)\n",
		"CLUSTER  VCPU-H  GIB-H  GPU-H  GPU-H BY TYPE  EST. COST\nc1       10.00   36.00  2.00   a100=2.00      $6.50\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage: lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GPU-hours:       unlimited") || strings.Contains(out, "bob") {
		t.Errorf("usage shows what it should not:\n%s", out)
	}
	out = tg.mustRun(t, "ann", "usage", "--since", quota.MonthStart(tg.now).Format("2006-01-02"))
	if !strings.Contains(out, "  vCPU-hours:      100 per calendar month, from default (config)\n") {
		t.Errorf("usage with a window:\n%s", out)
	}
	out = tg.mustRun(t, "ann", "usage", "-o", "json")
	var u client.MyUsageInfo
	if err := json.Unmarshal([]byte(out), &u); err != nil || u.Total.VCPUHours != 10 || u.Budgets["monthly_vcpu_hours"].Limit != 100 || len(u.Clusters) != 1 {
		t.Errorf("usage -o json: %v %+v", err, u)
	}

	out = tg.mustRun(t, "ann", "quota")
	for _, want := range []string{
		"LIMIT                    VALUE      IN USE  SOURCE\n",
		"max_clusters             1          1       default (config)\n",
		"max_workers_per_cluster  4          -       default (config)\n",
		"max_vcpus                32         5       group:analysts (config)\n",
		"max_memory_gib           unlimited  10      -\n",
		"max_gpus                 unlimited  2       -\n",
		"monthly_vcpu_hours       100        -       default (config)\n",
		"max_builds               2          -       built-in default\n",
		"max_gpus_by_type.t4      2          2       group:analysts (config)\n",
		"A scale beyond a limit is clamped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("quota: lacks %q:\n%s", want, out)
		}
	}
	out = tg.mustRun(t, "ann", "quota", "-o", "json")
	var q client.MyQuotaInfo
	if err := json.Unmarshal([]byte(out), &q); err != nil || q.InUse.GPUsByType["t4"] != 2 || q.OnExceed != "clamp" || q.Sources["max_vcpus"] != "group:analysts (config)" {
		t.Errorf("quota -o json: %v %+v", err, q)
	}
}

// TestMainPrintsServerMessages runs main in a child process (this test
// binary) to see what a user sees: the server's message, and exit status 1.
func TestMainPrintsServerMessages(t *testing.T) {
	if os.Getenv("GATEWAY_TEST_MAIN") == "1" {
		os.Args = append([]string{"gateway"}, strings.Fields(os.Getenv("GATEWAY_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	tg := newTestGateway(t)
	for _, tc := range []struct {
		args, want string
	}{
		{"admin quota list --token ann", "error: admin only: your account is not an admin of this gateway (forbidden)\n"},
		{"new-cluster --token ann", "error: quota exceeded: 1 running cluster is your limit of 1 clusters (max_clusters, from default (config)) (quota_exceeded)\n"},
		{"scale c1 --workers 9 --token ann", "error: quota exceeded: Scale request of 9 workers refused: 9 workers is over your limit of 4 workers per cluster " +
			"(max_workers_per_cluster, from default (config)) (the cluster keeps its 2 workers) (quota_exceeded)\n"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainPrintsServerMessages$")
		cmd.Env = append(os.Environ(), "GATEWAY_TEST_MAIN=1", "GATEWAY_TEST_ARGS="+tc.args+" --gateway "+tg.url, "XDG_CONFIG_HOME="+t.TempDir(), "GATEWAY_TOKEN=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("gateway %s: exit %v, want status 1", tc.args, err)
		}
		if stderr.String() != tc.want {
			t.Errorf("gateway %s: stderr %q, want %q", tc.args, stderr.String(), tc.want)
		}
	}
}

// TestJSONOutputIsTheServers checks that -o json prints what the gateway
// answered, though the CLI reads it into its types first.
func TestJSONOutputIsTheServers(t *testing.T) {
	tg := newTestGateway(t)
	tg.mustRun(t, "root", "admin", "quota", "set", "group:org/team", "--max-gpus-by-type", "a100=2", "--allowed-regions", "*", "--max-idle-timeout", "unlimited")
	tg.mustRun(t, "root", "admin", "stop", "c1")
	for _, tc := range []struct {
		token, path string
		args        []string
	}{
		{"root", "/api/v1/admin/quotas", []string{"admin", "quota", "list"}},
		{"root", "/api/v1/admin/quotas/user:ann?groups=analysts,org%2Fteam", []string{"admin", "quota", "get", "user:ann", "--groups", "analysts,org/team"}},
		{"root", "/api/v1/admin/quotas/user:ann", []string{"admin", "quota", "get", "user:ann"}},
		{"root", "/api/v1/admin/quotas/group:org%2Fteam", []string{"admin", "quota", "get", "group:org/team"}},
		{"root", "/api/v1/admin/clusters?status=all", []string{"admin", "clusters", "--all"}},
		{"root", "/api/v1/admin/audit", []string{"admin", "audit"}},
		{"root", "/api/v1/admin/usage?by=cluster", []string{"admin", "usage", "--by", "cluster"}},
		{"ann", "/api/v1/quota", []string{"quota"}},
		{"ann", "/api/v1/usage", []string{"usage"}},
	} {
		req, _ := http.NewRequest(http.MethodGet, tg.url+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var server any
		err = json.NewDecoder(resp.Body).Decode(&server)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", tc.path, resp.StatusCode, err)
		}
		out := tg.mustRun(t, tc.token, append(tc.args, "-o", "json")...)
		var cli any
		if err := json.Unmarshal([]byte(out), &cli); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		if slices.Contains(tc.args, "clusters") { // the CLI lists newest first
			byName := func(l any) {
				list, _ := l.([]any)
				sort.Slice(list, func(i, j int) bool {
					return list[i].(map[string]any)["name"].(string) < list[j].(map[string]any)["name"].(string)
				})
			}
			byName(server)
			byName(cli)
		}
		if !reflect.DeepEqual(normalize(server), normalize(cli)) {
			s, _ := json.Marshal(server)
			t.Errorf("%v -o json differs from the server's answer:\ncli:    %s\nserver: %s", tc.args, strings.TrimSpace(out), s)
		}
	}
}

// normalize drops what differs between two reads of one answer: the
// usage window's end is the time of each request.
func normalize(v any) any {
	if m, ok := v.(map[string]any); ok {
		delete(m, "until")
		for k, x := range m {
			m[k] = normalize(x)
		}
	}
	if l, ok := v.([]any); ok {
		for i, x := range l {
			l[i] = normalize(x)
		}
	}
	return v
}
