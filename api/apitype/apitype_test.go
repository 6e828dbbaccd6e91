package apitype_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/quota"
)

type wireSample struct {
	name string
	v    any
	new  func() any
}

// TestWireJSON pins the JSON of the main bodies, field for field and in
// order: dask-gateway's client builds its cluster model from these names
// and rejects fields it does not know, and the CLI and older gateways read
// the rest. Each sample encodes to its golden text, and the golden text
// decodes to a value that encodes to it again. The golden texts are what
// the types gave in package api before they moved here.
func TestWireJSON(t *testing.T) {
	samples := wireSamples()
	if len(samples) != len(goldenJSON) {
		t.Errorf("%d samples, %d golden texts", len(samples), len(goldenJSON))
	}
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			want, ok := goldenJSON[s.name]
			if !ok {
				t.Fatalf("no golden text for %s", s.name)
			}
			got, err := json.Marshal(s.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("encodes to\n%s\nwant\n%s", got, want)
			}
			v := s.new()
			if err := json.Unmarshal([]byte(want), v); err != nil {
				t.Fatalf("decoding the golden text: %v", err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != want {
				t.Errorf("decoded and encoded again:\n%s\nwant\n%s", again, want)
			}
		})
	}
}

var goldenJSON = map[string]string{
	"ScaleRequest":         `{"count":2}`,
	"AdaptRequest":         `{"minimum":1,"maximum":null,"active":true}`,
	"CreateTokenRequest":   `{"name":"ci","expires_in":"90d","read_only":true}`,
	"Cluster":              `{"name":"c1","status":"RUNNING","dashboard_route":"/clusters/c1/status","start_time":1796648645000,"stop_time":1796654045000,"options":{"workers":2},"tls_cert":"CERT","tls_key":"KEY"}`,
	"ClusterDetail":        `{"name":"c1","status":"RUNNING","dashboard_route":"/clusters/c1/status","start_time":1796648645000,"stop_time":1796654045000,"options":{"workers":2},"tls_cert":"CERT","tls_key":"KEY","phase":"running","state":"RUNNING","reason":"asked","owner":"oidc:ann","owner_name":"ann","provider":"local","workers":{"requested":2,"ready":1},"adaptive":{"minimum":1,"maximum":4},"scheduler_address":"tls://127.0.0.1:8786","gateway_address":"gateway://127.0.0.1:8786/c1","tls_server_name":"daskgateway-c1","dashboard_url":"http://127.0.0.1:8786/clusters/c1/status","dashboard_problem":"no bokeh","created_at":"2026-12-07T13:04:05Z","started_at":"2026-12-07T13:04:05Z","stopped_at":"2026-12-07T14:34:05Z"}`,
	"SharedClusterDetail":  `{"name":"c1","status":"RUNNING","dashboard_route":"/clusters/c1/status","start_time":1796648645000,"stop_time":1796654045000,"options":{"workers":2},"tls_cert":null,"tls_key":null,"phase":"running","state":"RUNNING","reason":"asked","owner":"oidc:ann","owner_name":"ann","provider":"local","workers":{"requested":2,"ready":1},"adaptive":{"minimum":1,"maximum":4},"scheduler_address":"tls://127.0.0.1:8786","gateway_address":"gateway://127.0.0.1:8786/c1","tls_server_name":"daskgateway-c1","dashboard_url":"http://127.0.0.1:8786/clusters/c1/status","dashboard_problem":"no bokeh","created_at":"2026-12-07T13:04:05Z","started_at":"2026-12-07T13:04:05Z","stopped_at":"2026-12-07T14:34:05Z","access":{"shared":true,"via":["group:ops"],"allow":["scale"]}}`,
	"ShareRequest":         `{"with":["group:ops","user:bob"],"allow":["scale","stop"]}`,
	"Shares":               `{"cluster":"c1","sharing":"groups","shares":[{"with":"user:oidc:bob","name":"bob","allow":["stop"],"created_at":"2026-12-07T13:04:05Z","created_by":"ann"}],"removed":[{"with":"group:ops","allow":[],"created_at":"2026-12-07T13:04:05Z"}]}`,
	"EventJSON":            `{"time":"2026-12-07T13:04:05Z","kind":"started","message":"scheduler up"}`,
	"Error":                `{"error":"no","code":"invalid_request","message":"no"}`,
	"CreateClusterRequest": `{"cluster_options":{"workers":2}}`,
	"EnvStatus":            `{"hash":"ab","image":"reg/x:1","digest":"sha256:00","state":"ready","built":true,"steps":["probing"],"error":"e","versions":{"dask":"2024.8.0"},"started_at":"2026-12-07T13:04:05Z","finished_at":"2026-12-07T14:34:05Z","layers":{"layers":2,"reused":1,"reused_size":"3.0 MiB","uploaded":1,"uploaded_size":"12 B"}}`,
	"PublishedEnv":         `{"name":"team","image":"reg/team:1","description":"the team's","versions":{"python":"3.11"}}`,
	"PublishEnvRequest":    `{"env":"ab","image":"reg/x:1","description":"d"}`,
	"BenchRunJSON":         `{"id":"r1","owner":"oidc:ann","owner_name":"ann","suite":"s","envs":[{"label":"A","name":"prod","hash":"ab","image":"reg/x:1","packages":{"dask":"1"}}],"tests":["sum"],"shape":{"workers":2},"provider":"local","region":"here","gateway_version":"v1","options":{},"schedule_id":"s1","status":"ok","error":"e","started_at":"2026-12-07T13:04:05Z","finished_at":"2026-12-07T14:34:05Z","samples":[{"run_id":"r1","test":"sum","env":"A","repeat":2,"wall_seconds":1.25,"peak_managed":1048576,"peak_unmanaged":2097152,"avg_managed":3,"avg_unmanaged":4,"spilled":5,"transferred":6,"cpu_seconds":2.5,"status":"ok","error":"none","at":"2026-12-07T13:04:05Z"}]}`,
	"BenchPointJSON":       `{"run_id":"r1","test":"sum","env":"A","repeat":2,"wall_seconds":1.25,"peak_managed":1048576,"peak_unmanaged":2097152,"avg_managed":3,"avg_unmanaged":4,"spilled":5,"transferred":6,"cpu_seconds":2.5,"status":"ok","error":"none","at":"2026-12-07T13:04:05Z","owner":"oidc:ann","suite":"s","env_name":"prod","env_hash":"ab","run_started_at":"2026-12-07T13:04:05Z"}`,
	"BenchCheckJSON":       `{"env":"prod","window":"7d","threshold":0.1,"alpha":0.05,"regressions":1,"findings":[{"suite":"s","test":"sum","run":"r1","run_started_at":"2026-12-07T13:04:05Z","baseline_samples":6,"baseline_runs":0,"latest_samples":3,"baseline_median":1.5,"latest_median":1.5,"change":0.25,"p":null,"regressed":true,"note":"n"}]}`,
	"BenchScheduleRequest": `{"suite":"s","suite_archive":"UEs=","cron":"0 3 * * *","options":{"envs":[{"label":"","name":"prod","options":null}],"repeat":3,"workers":2,"window":"7d","threshold":0.1}}`,
	"BenchScheduleJSON":    `{"id":"s1","owner":"oidc:ann","owner_name":"ann","suite":"s","envs":["prod"],"cron":"0 3 * * *","options":{"envs":[{"label":"","name":"prod","options":null}],"repeat":3,"workers":2,"window":"7d","threshold":0.1},"next_run":"2026-12-07T14:34:05Z","last_run":"2026-12-07T13:04:05Z","last_run_id":"r1","last_error":"e","created_at":"2026-12-07T13:04:05Z"}`,
	"BenchPriceJSON":       `{"provider":"ec2","region":"eu-west-1","workers":2,"worker":{"vcpus":2,"memory_gib":8,"instance_type":"m7i.large","price_hour":0.1},"scheduler":{"vcpus":1,"memory_gib":2},"price_hour":0.25}`,
	"QuotaEntryJSON":       `{"subject":"user:ann","limits":{"max_clusters":4,"max_vcpus":"unlimited","allowed_regions":["eu-west-1"],"max_idle_timeout":"1h0m0s"},"sources":{"max_clusters":"api"},"builtin":{"max_clusters":4,"max_vcpus":"unlimited","allowed_regions":["eu-west-1"],"max_idle_timeout":"1h0m0s"},"updated_at":"2026-12-07T13:04:05Z","updated_by":"root"}`,
	"UsageReport":          `{"since":"2026-12-07T13:04:05Z","until":"2026-12-07T14:34:05Z","by":"user","rows":[{"user":"ann","user_id":"oidc:ann","cluster":"c1","clusters":1,"running":true,"vcpu_hours":2,"memory_gib_hours":8,"gpu_hours":1,"gpu_hours_by_type":{"t4":1},"estimated_cost_usd":0.5}]}`,
	"AuditJSON":            `{"id":7,"at":"2026-12-07T13:04:05Z","actor":"root","actor_id":"oidc:root","action":"quota.set","target":"user:ann","before":null,"after":{"max_clusters":4}}`,
	"TokenJSON":            `{"id":"t1","name":"ci","read_only":true,"created_at":"2026-12-07T13:04:05Z","expires_at":"2026-12-07T14:34:05Z","last_used_at":"2026-12-07T13:04:05Z","revoked":true,"token":"gw_x"}`,
	"SessionJSON":          `{"id":"s1","via":"login","token_id":"t1","read_only":true,"created_at":"2026-12-07T13:04:05Z","expires_at":"2026-12-07T14:34:05Z"}`,
}

func wireSamples() []wireSample {
	at := time.Date(2026, 12, 7, 13, 4, 5, 0, time.UTC)
	later := at.Add(90 * time.Minute)
	stop := later.UnixMilli()
	route, cert, key := "/clusters/c1/status", "CERT", "KEY"
	four, unlimited := quota.Amount(4), quota.Amount(math.Inf(1))
	hour := quota.Duration(time.Hour)
	median, change := 1.5, 0.25
	limits := quota.Limits{MaxClusters: &four, MaxVCPUs: &unlimited, MaxIdleTimeout: &hour, AllowedRegions: []string{"eu-west-1"}}
	cluster := apitype.Cluster{Name: "c1", Status: "RUNNING", DashboardRoute: &route, StartTime: at.UnixMilli(), StopTime: &stop,
		Options: json.RawMessage(`{"workers":2}`), TLSCert: &cert, TLSKey: &key}
	detail := apitype.ClusterDetail{Cluster: cluster, Phase: "running", State: "RUNNING", Reason: "asked", Owner: "oidc:ann", OwnerName: "ann",
		Provider: "local", SchedulerAddress: "tls://127.0.0.1:8786", GatewayAddress: "gateway://127.0.0.1:8786/c1",
		ServerName: apitype.SNIPrefix + "c1", DashboardURL: "http://127.0.0.1:8786/clusters/c1/status", DashboardProblem: "no bokeh",
		CreatedAt: at, StartedAt: &at, StoppedAt: &later}
	detail.Workers.Requested, detail.Workers.Ready = 2, 1
	detail.Adaptive = &struct {
		Minimum int `json:"minimum"`
		Maximum int `json:"maximum"`
	}{1, 4}
	sample := apitype.BenchSampleJSON{RunID: "r1", Test: "sum", Env: "A", Repeat: 2, WallSeconds: 1.25, PeakManaged: 1 << 20, PeakUnmanaged: 2 << 20,
		AvgManaged: 3, AvgUnmanaged: 4, Spilled: 5, Transferred: 6, CPUSeconds: 2.5, Status: "ok", Error: "none", At: at}
	opts := schedspec.Options{Envs: []schedspec.Env{{Name: "prod"}}, Repeat: 3, Workers: 2, Window: "7d", Threshold: 0.1}
	two, one, yes := 2, 1, true
	return []wireSample{
		{"ScaleRequest", apitype.ScaleRequest{Count: &two}, func() any { return new(apitype.ScaleRequest) }},
		{"AdaptRequest", apitype.AdaptRequest{Minimum: &one, Active: &yes}, func() any { return new(apitype.AdaptRequest) }},
		{"CreateTokenRequest", apitype.CreateTokenRequest{Name: "ci", ExpiresIn: "90d", ReadOnly: true}, func() any { return new(apitype.CreateTokenRequest) }},
		{"Cluster", cluster, func() any { return new(apitype.Cluster) }},
		{"ClusterDetail", detail, func() any { return new(apitype.ClusterDetail) }},
		{"SharedClusterDetail", func() apitype.ClusterDetail {
			d := detail
			d.Access = &apitype.Access{Shared: true, Via: []string{"group:ops"}, Allow: []string{"scale"}}
			d.TLSCert, d.TLSKey = nil, nil
			return d
		}(), func() any { return new(apitype.ClusterDetail) }},
		{"ShareRequest", apitype.ShareRequest{With: []string{"group:ops", "user:bob"}, Allow: []string{"scale", "stop"}}, func() any { return new(apitype.ShareRequest) }},
		{"Shares", apitype.Shares{Cluster: "c1", Sharing: "groups", Shares: []apitype.Share{{With: "user:oidc:bob", Name: "bob", Allow: []string{"stop"}, CreatedAt: at, CreatedBy: "ann"}},
			Removed: []apitype.Share{{With: "group:ops", Allow: []string{}, CreatedAt: at}}}, func() any { return new(apitype.Shares) }},
		{"EventJSON", apitype.EventJSON{Time: at, Kind: "started", Message: "scheduler up"}, func() any { return new(apitype.EventJSON) }},
		{"Error", apitype.Error{Error: "no", Code: "invalid_request", Message: "no"}, func() any { return new(apitype.Error) }},
		{"CreateClusterRequest", apitype.CreateClusterRequest{ClusterOptions: map[string]json.RawMessage{"workers": json.RawMessage(`2`)}}, func() any { return new(apitype.CreateClusterRequest) }},
		{"EnvStatus", apitype.EnvStatus{Hash: "ab", Image: "reg/x:1", Digest: "sha256:00", State: "ready", Built: true, Steps: []string{"probing"}, Error: "e",
			Versions: map[string]string{"dask": "2024.8.0"}, StartedAt: at, FinishedAt: later,
			Layers: &apitype.EnvLayers{Layers: 2, Reused: 1, ReusedSize: "3.0 MiB", Uploaded: 1, UploadedSize: "12 B"}}, func() any { return new(apitype.EnvStatus) }},
		{"PublishedEnv", apitype.PublishedEnv{Name: "team", Image: "reg/team:1", Description: "the team's", Versions: map[string]string{"python": "3.11"}}, func() any { return new(apitype.PublishedEnv) }},
		{"PublishEnvRequest", apitype.PublishEnvRequest{Env: "ab", Image: "reg/x:1", Description: "d"}, func() any { return new(apitype.PublishEnvRequest) }},
		{"BenchRunJSON", apitype.BenchRunJSON{ID: "r1", Owner: "oidc:ann", OwnerName: "ann", Suite: "s", Envs: []apitype.BenchEnvJSON{{Label: "A", Name: "prod", Hash: "ab", Image: "reg/x:1",
			Packages: map[string]string{"dask": "1"}}}, Tests: []string{"sum"}, Shape: json.RawMessage(`{"workers":2}`), Provider: "local", Region: "here",
			GatewayVersion: "v1", Options: json.RawMessage(`{}`), ScheduleID: "s1", Status: "ok", Error: "e", StartedAt: at, FinishedAt: &later,
			Samples: []apitype.BenchSampleJSON{sample}}, func() any { return new(apitype.BenchRunJSON) }},
		{"BenchPointJSON", apitype.BenchPointJSON{BenchSampleJSON: sample, Owner: "oidc:ann", Suite: "s", EnvName: "prod", EnvHash: "ab", RunStartedAt: at}, func() any { return new(apitype.BenchPointJSON) }},
		{"BenchCheckJSON", apitype.BenchCheckJSON{Env: "prod", Window: "7d", Threshold: 0.1, Alpha: 0.05, Regressions: 1, Findings: []apitype.BenchFindingJSON{{Suite: "s", Test: "sum",
			Run: "r1", RunStartedAt: at, Baseline: 6, Latest: 3, BaselineMedian: &median, LatestMedian: &median, Change: &change, Regressed: true, Note: "n"}}}, func() any { return new(apitype.BenchCheckJSON) }},
		{"BenchScheduleRequest", apitype.BenchScheduleRequest{Suite: "s", Archive: []byte("PK"), Cron: "0 3 * * *", Options: opts}, func() any { return new(apitype.BenchScheduleRequest) }},
		{"BenchScheduleJSON", apitype.BenchScheduleJSON{ID: "s1", Owner: "oidc:ann", OwnerName: "ann", Suite: "s", Envs: []string{"prod"}, Cron: "0 3 * * *", Options: opts,
			NextRun: later, LastRun: &at, LastRunID: "r1", LastError: "e", CreatedAt: at}, func() any { return new(apitype.BenchScheduleJSON) }},
		{"BenchPriceJSON", apitype.BenchPriceJSON{Provider: "ec2", Region: "eu-west-1", Workers: 2, Worker: quota.Size{VCPUs: 2, MemoryGiB: 8, InstanceType: "m7i.large", PriceHour: 0.1},
			Scheduler: quota.Size{VCPUs: 1, MemoryGiB: 2}, PriceHour: 0.25}, func() any { return new(apitype.BenchPriceJSON) }},
		{"QuotaEntryJSON", apitype.QuotaEntryJSON{Subject: "user:ann", Limits: limits, Sources: map[string]string{"max_clusters": "api"}, Builtin: &limits,
			UpdatedAt: &at, UpdatedBy: "root"}, func() any { return new(apitype.QuotaEntryJSON) }},
		{"UsageReport", apitype.UsageReport{Since: at, Until: later, By: "user", Rows: []apitype.UsageRow{{User: "ann", UserID: "oidc:ann", Cluster: "c1", Clusters: 1, Running: true,
			VCPUHours: 2, MemoryGiBHours: 8, GPUHours: 1, GPUHoursByType: map[string]float64{"t4": 1}, CostUSD: 0.5}}}, func() any { return new(apitype.UsageReport) }},
		{"AuditJSON", apitype.AuditJSON{ID: 7, At: at, Actor: "root", ActorID: "oidc:root", Action: "quota.set", Target: "user:ann", Before: json.RawMessage(`null`),
			After: json.RawMessage(`{"max_clusters":4}`)}, func() any { return new(apitype.AuditJSON) }},
		{"TokenJSON", apitype.TokenJSON{ID: "t1", Name: "ci", ReadOnly: true, CreatedAt: at, ExpiresAt: &later, LastUsed: &at, Revoked: true, Token: "gw_x"}, func() any { return new(apitype.TokenJSON) }},
		{"SessionJSON", apitype.SessionJSON{ID: "s1", Via: "login", TokenID: "t1", ReadOnly: true, CreatedAt: at, ExpiresAt: later}, func() any { return new(apitype.SessionJSON) }},
	}
}
