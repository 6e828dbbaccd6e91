package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

const (
	benchAlice = "alice-token-000000"
	benchBob   = "bob-token-00000000"
	benchRoot  = "root-token-0000000"
	benchRO    = "alice-readonly-000"
)

// benchServer serves the API over a real store (SQLite, and PostgreSQL
// when configured) with users alice and bob, an admin root, and a
// read-only token of alice.
func benchServer(t *testing.T, url string) (*httptest.Server, *store.DB) {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core := &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{
		benchAlice: {Name: "alice"},
		benchBob:   {Name: "bob"},
		benchRoot:  {Name: "root", Admin: true},
		benchRO:    {Name: "alice", ReadOnly: true},
	})
	s := New(Config{Version: "v-test", Provider: "ec2", Region: "eu-west-1"}, core, a, nil, nil)
	s.SetBench(st)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, st
}

const benchRunBody = `{"suite":"smoke","envs":[{"label":"A","name":"base","hash":"aaaaaaaaaaaaaaaa","packages":{"dask":"2024.1.0"}},
{"label":"B","name":"cand","hash":"bbbbbbbbbbbbbbbb"}],"shape":{"workers":2},"provider":"docker","region":"local","options":{"repeat":2},
"owner":"mallory","status":"ok"}`

// TestBenchResultsAPI: a run is recorded through the API and read back by
// its owner and by admins; any other user gets 404 for reads and writes,
// and sees none of it in lists or history.
func TestBenchResultsAPI(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		srv, _ := benchServer(t, url)
		code, _, body := do(t, srv, "POST", "/api/v1/bench/runs", benchAlice, benchRunBody)
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		var run apitype.BenchRunJSON
		if err := json.Unmarshal(body, &run); err != nil {
			t.Fatal(err)
		}
		if run.Owner != "alice" || run.Status != "running" || run.GatewayVersion != "v-test" || !strings.HasPrefix(run.ID, "br-") || len(run.Envs) != 2 {
			t.Fatalf("created run: %+v (owner and status are the gateway's, not the body's)", run)
		}
		// The backend is the gateway's word: the clusters ran there.
		if run.Provider != "ec2" || run.Region != "eu-west-1" {
			t.Errorf("created run on %q %q, want the gateway's ec2 eu-west-1 (the body said docker, local)", run.Provider, run.Region)
		}
		samples := `{"samples":[
{"test":"bench_sum","env":"A","repeat":0,"wall_seconds":1.5,"peak_managed":100,"spilled":7,"transferred":9,"cpu_seconds":2,"status":"ok"},
{"test":"bench_sum","env":"B","repeat":0,"wall_seconds":3,"status":"timeout","error":"timed out"}]}`
		if code, _, body := do(t, srv, "POST", "/api/v1/bench/runs/"+run.ID+"/samples", benchAlice, samples); code != 204 {
			t.Fatalf("samples: %d %s", code, body)
		}
		for _, who := range []string{benchBob, ""} {
			want := 404
			if who == "" {
				want = 401
			}
			for _, req := range [][3]string{
				{"GET", "/api/v1/bench/runs/" + run.ID, ""},
				{"POST", "/api/v1/bench/runs/" + run.ID + "/samples", samples},
				{"POST", "/api/v1/bench/runs/" + run.ID + "/finish", `{"status":"ok"}`},
			} {
				if code, _, body := do(t, srv, req[0], req[1], who, req[2]); code != want {
					t.Errorf("%s %s as %q: %d %s, want %d", req[0], req[1], who, code, body, want)
				}
			}
		}
		// An admin reads it but does not write another's run.
		if code, _, body := do(t, srv, "POST", "/api/v1/bench/runs/"+run.ID+"/finish", benchRoot, `{"status":"ok"}`); code != 404 {
			t.Errorf("admin finishing alice's run: %d %s", code, body)
		}
		code, _, body = do(t, srv, "POST", "/api/v1/bench/runs/"+run.ID+"/finish", benchAlice, `{"status":"ok"}`)
		if code != 200 || !strings.Contains(string(body), `"status":"ok"`) || !strings.Contains(string(body), `"finished_at"`) {
			t.Fatalf("finish: %d %s", code, body)
		}
		for _, tok := range []string{benchAlice, benchRoot, benchRO} {
			code, _, body := do(t, srv, "GET", "/api/v1/bench/runs/"+run.ID, tok, "")
			var got apitype.BenchRunJSON
			if code != 200 || json.Unmarshal(body, &got) != nil {
				t.Fatalf("get as %s: %d %s", tok, code, body)
			}
			if len(got.Samples) != 2 || got.Samples[0].PeakManaged != 100 || got.Samples[0].Spilled != 7 || got.Samples[0].Transferred != 9 ||
				got.Samples[1].Status != "timeout" || got.Samples[1].Error != "timed out" || got.Envs[0].Packages["dask"] != "2024.1.0" ||
				string(got.Shape) != `{"workers":2}` || strings.Join(got.Tests, ",") != "bench_sum" {
				t.Errorf("get as %s: %s", tok, body)
			}
		}
		count := func(tok, path string) int {
			t.Helper()
			code, _, body := do(t, srv, "GET", path, tok, "")
			var v []json.RawMessage
			if code != 200 || json.Unmarshal(body, &v) != nil {
				t.Fatalf("GET %s as %s: %d %s", path, tok, code, body)
			}
			return len(v)
		}
		for _, c := range []struct {
			tok, path string
			want      int
		}{
			{benchAlice, "/api/v1/bench/runs", 1},
			{benchBob, "/api/v1/bench/runs", 0},
			{benchRoot, "/api/v1/bench/runs", 1},
			{benchRoot, "/api/v1/bench/runs?owner=bob", 0},
			{benchAlice, "/api/v1/bench/runs?suite=other", 0},
			{benchAlice, "/api/v1/bench/history?test=bench_sum", 2},
			{benchAlice, "/api/v1/bench/history?test=bench_sum&env=base", 1},
			{benchAlice, "/api/v1/bench/history?test=bench_sum&env=bbbbbbbbbbbbbbbb", 1},
			{benchAlice, "/api/v1/bench/history?since=1d", 2},
			{benchAlice, "/api/v1/bench/history?since=2999-01-01T00:00:00Z", 0},
			{benchBob, "/api/v1/bench/history?test=bench_sum", 0},
			{benchRoot, "/api/v1/bench/history?test=bench_sum", 2},
			{benchRoot, "/api/v1/bench/history?owner=alice", 2},
		} {
			if got := count(c.tok, c.path); got != c.want {
				t.Errorf("GET %s as %s: %d items, want %d", c.path, c.tok, got, c.want)
			}
		}
		code, _, body = do(t, srv, "GET", "/api/v1/bench/history?test=bench_sum&env=base", benchAlice, "")
		var pts []apitype.BenchPointJSON
		if json.Unmarshal(body, &pts) != nil || len(pts) != 1 || pts[0].RunID != run.ID || pts[0].EnvName != "base" || pts[0].Suite != "smoke" ||
			pts[0].WallSeconds != 1.5 || pts[0].Owner != "alice" {
			t.Errorf("history point: %d %s", code, body)
		}
	})
}

// TestBenchAPIErrors: each bad request gets its status and a message that
// says what to fix, and changes nothing.
func TestBenchAPIErrors(t *testing.T) {
	srv, st := benchServer(t, "sqlite://"+t.TempDir()+"/g.db")
	_, _, body := do(t, srv, "POST", "/api/v1/bench/runs", benchAlice, benchRunBody)
	var run apitype.BenchRunJSON
	if err := json.Unmarshal(body, &run); err != nil {
		t.Fatal(err)
	}
	_, _, body = do(t, srv, "POST", "/api/v1/bench/runs", benchAlice, benchRunBody)
	var done apitype.BenchRunJSON
	_ = json.Unmarshal(body, &done)
	if code, _, body := do(t, srv, "POST", "/api/v1/bench/runs/"+done.ID+"/finish", benchAlice, `{"status":"failed","error":"cluster died"}`); code != 200 {
		t.Fatalf("finish: %d %s", code, body)
	}
	many := `{"samples":[` + strings.TrimSuffix(strings.Repeat(`{"test":"t","env":"A","status":"ok"},`, 1001), ",") + `]}`
	samples := "/api/v1/bench/runs/" + run.ID + "/samples"
	for _, c := range []struct {
		name, method, path, tok, body string
		code                          int
		want                          string
	}{
		{"no suite", "POST", "/api/v1/bench/runs", benchAlice, `{"envs":[{"label":"A"}]}`, 422, "needs an owner and a suite"},
		{"no envs", "POST", "/api/v1/bench/runs", benchAlice, `{"suite":"s"}`, 422, "at least one environment"},
		{"bad label", "POST", "/api/v1/bench/runs", benchAlice, `{"suite":"s","envs":[{"label":"X"}]}`, 422, `label \"X\": want A, B or A2`},
		{"shape not object", "POST", "/api/v1/bench/runs", benchAlice, `{"suite":"s","envs":[{"label":"A"}],"shape":[1]}`, 422, "shape must be a JSON object"},
		{"not JSON", "POST", "/api/v1/bench/runs", benchAlice, `suite=s`, 400, "not valid JSON"},
		{"read-only token", "POST", "/api/v1/bench/runs", benchRO, benchRunBody, 403, "read-only"},
		{"no samples", "POST", samples, benchAlice, `{"samples":[]}`, 422, "no samples"},
		{"too many samples", "POST", samples, benchAlice, many, 422, "send at most 1000"},
		{"bad sample env", "POST", samples, benchAlice, `{"samples":[{"test":"t","env":"A2","status":"ok"}]}`, 422, "has no environment A2"},
		{"bad sample status", "POST", samples, benchAlice, `{"samples":[{"test":"t","env":"A","status":"meh"}]}`, 422, `status \"meh\"`},
		{"NaN-free times", "POST", samples, benchAlice, `{"samples":[{"test":"t","env":"A","status":"ok","wall_seconds":-2}]}`, 422, "not negative"},
		{"wrong type", "POST", samples, benchAlice, `{"samples":[{"test":"t","env":"A","status":"ok","repeat":"one"}]}`, 422, "repeat"},
		{"finished run", "POST", "/api/v1/bench/runs/" + done.ID + "/samples", benchAlice, `{"samples":[{"test":"t","env":"A","status":"ok"}]}`, 409, "only be added while it runs"},
		{"finish twice", "POST", "/api/v1/bench/runs/" + done.ID + "/finish", benchAlice, `{"status":"ok"}`, 409, "already finished"},
		{"bad finish status", "POST", "/api/v1/bench/runs/" + run.ID + "/finish", benchAlice, `{"status":"great"}`, 422, `status \"great\"`},
		{"unknown run", "GET", "/api/v1/bench/runs/br-0000", benchAlice, "", 404, "br-0000 not found"},
		{"bad limit", "GET", "/api/v1/bench/runs?limit=0", benchAlice, "", 422, "limit"},
		{"other's runs", "GET", "/api/v1/bench/runs?owner=bob", benchAlice, "", 403, "only admins"},
		{"other's history", "GET", "/api/v1/bench/history?owner=bob", benchAlice, "", 403, "only admins"},
		{"bad since", "GET", "/api/v1/bench/history?since=yesterday", benchAlice, "", 422, "RFC 3339 time or a length of time"},
		{"check without env", "GET", "/api/v1/bench/check", benchAlice, "", 422, "env is required"},
		{"bad window", "GET", "/api/v1/bench/check?env=base&window=week", benchAlice, "", 422, "such as 7d"},
		{"zero window", "GET", "/api/v1/bench/check?env=base&window=0d", benchAlice, "", 422, "such as 7d"},
		{"bad threshold", "GET", "/api/v1/bench/check?env=base&threshold=-5%25", benchAlice, "", 422, "positive percentage"},
		{"other's check", "GET", "/api/v1/bench/check?env=base&owner=bob", benchAlice, "", 403, "only admins"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := do(t, srv, c.method, c.path, c.tok, c.body)
			if code != c.code || !strings.Contains(string(body), c.want) || strings.Contains(string(body), ": invalid\"") || strings.Contains(string(body), "store:") {
				t.Errorf("%d %s, want %d with %q", code, body, c.code, c.want)
			}
		})
	}
	if ss, _ := st.BenchSamples(context.Background(), run.ID); len(ss) != 0 {
		t.Errorf("refused requests stored samples: %+v", ss)
	}
	if runs, _ := st.ListBenchRuns(context.Background(), store.BenchRunFilter{}); len(runs) != 2 {
		t.Errorf("refused requests made runs: %d", len(runs))
	}

	// A gateway without a bench store says so.
	a := auth.NewStaticTokens(map[string]auth.User{benchAlice: {Name: "alice"}})
	bare := httptest.NewServer(New(Config{}, &fakeCore{}, a, nil, nil))
	defer bare.Close()
	if code, _, body := do(t, bare, "GET", "/api/v1/bench/runs", benchAlice, ""); code != 404 || !strings.Contains(string(body), "keeps no benchmark results") {
		t.Errorf("no bench store: %d %s", code, body)
	}
}

// storeNightly stores nights of runs of suite "nightly" on environment
// "prod" for owner, five samples of each test a night, drawn by value.
func storeNightly(t *testing.T, st *store.DB, owner string, start time.Time, nights int, value func(test string, night int, r *rand.Rand) float64, tests ...string) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	for n := range nights {
		at := start.Add(time.Duration(n) * 24 * time.Hour)
		run := &store.BenchRun{Owner: owner, Suite: "nightly", StartedAt: at,
			Envs: []store.BenchEnv{{Label: "A", Name: "prod", Hash: "cafecafecafecafe"}}}
		if err := st.CreateBenchRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		var batch []*store.BenchSample
		for _, test := range tests {
			for rep := range 5 {
				batch = append(batch, &store.BenchSample{Test: test, Env: "A", Repeat: rep, WallSeconds: value(test, n, r),
					Status: store.SampleOK, At: at.Add(time.Duration(rep+1) * time.Minute)})
			}
		}
		// A failed sample with an absurd time is not part of any check.
		batch = append(batch, &store.BenchSample{Test: tests[0], Env: "A", Repeat: 9, WallSeconds: 1e6, Status: store.SampleFailed, At: at})
		if err := st.AddBenchSamples(ctx, run.ID, batch); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishBenchRun(ctx, run.ID, store.BenchOK, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBenchCheckRegressions: over a stored synthetic history of ten
// nights, a test whose time steps up 40 % on the last night is flagged
// with its p-value and size; a test that scatters ±25 % around a flat
// level every night is not; nor is a step smaller than the threshold, or
// anyone else's history.
func TestBenchCheckRegressions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		srv, st := benchServer(t, url)
		start := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Minute)
		storeNightly(t, st, "alice", start, 10, func(test string, night int, r *rand.Rand) float64 {
			switch test {
			case "bench_step":
				if night == 9 {
					return 1.4 * (1 + 0.02*r.NormFloat64())
				}
				return 1 + 0.02*r.NormFloat64()
			case "bench_small_step":
				if night == 9 {
					return 1.05 * (1 + 0.005*r.NormFloat64())
				}
				return 1 + 0.005*r.NormFloat64()
			default: // bench_flat
				return 2 * (1 + 0.25*(2*r.Float64()-1))
			}
		}, "bench_step", "bench_flat", "bench_small_step")
		// Bob's history of an environment of the same name regressed
		// badly: it is not alice's.
		storeNightly(t, st, "bob", start, 10, func(_ string, night int, r *rand.Rand) float64 {
			if night == 9 {
				return 3 * (1 + 0.01*r.Float64())
			}
			return 1 + 0.01*r.Float64()
		}, "bench_flat")

		code, _, body := do(t, srv, "GET", "/api/v1/bench/check?env=prod&window=7d&threshold=10%25", benchAlice, "")
		var res apitype.BenchCheckJSON
		if code != 200 || json.Unmarshal(body, &res) != nil {
			t.Fatalf("check: %d %s", code, body)
		}
		if res.Regressions != 1 || len(res.Findings) != 3 {
			t.Fatalf("want one regression among 3 tests: %s", body)
		}
		for _, f := range res.Findings {
			if f.Suite != "nightly" || f.Baseline != 35 || f.Latest != 5 {
				t.Errorf("%s: suite %q, %d baseline and %d latest samples; want nightly, 7 nights × 5, 5", f.Test, f.Suite, f.Baseline, f.Latest)
			}
			if f.Regressed != (f.Test == "bench_step") {
				t.Errorf("%s regressed=%v: %+v", f.Test, f.Regressed, f)
			}
			if f.Test == "bench_step" && (f.P == nil || *f.P >= 0.001 || f.Change == nil || math.Abs(*f.Change-0.4) > 0.05) {
				t.Errorf("step: p %v change %v; want p < 0.001, change ≈ +40%%", f.P, f.Change)
			}
		}
		// A threshold above the step flags nothing.
		res, err := bench.Check(context.Background(), st, "alice", "prod", 7*24*time.Hour, 0.5)
		if err != nil || res.Regressions != 0 {
			t.Errorf("threshold 50%%: %+v %v", res, err)
		}
		// Bob's own check finds his.
		res, err = bench.Check(context.Background(), st, "bob", "prod", 7*24*time.Hour, 0.1)
		if err != nil || res.Regressions != 1 {
			t.Errorf("bob's check: %+v %v", res, err)
		}
		// An environment with no history: nothing to check.
		code, _, body = do(t, srv, "GET", "/api/v1/bench/check?env=nope", benchAlice, "")
		if code != 200 || !strings.Contains(string(body), `"findings":[]`) || !strings.Contains(string(body), `"regressions":0`) {
			t.Errorf("no history: %d %s", code, body)
		}
		_ = fmt.Sprint()
	})
}
