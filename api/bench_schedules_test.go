package api

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func scheduleServer(t *testing.T, url string, ready func(context.Context) error) (*httptest.Server, *store.DB) {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := auth.NewStaticTokens(map[string]auth.User{
		"alice-token-000000": {Name: "alice"},
		"bob-token-00000000": {Name: "bob"},
		"root-token-0000000": {Name: "root", Admin: true},
	})
	s := New(Config{Version: "v-test"}, &fakeCore{clusters: map[string]*store.Cluster{}, scaled: map[string]int{}}, a, nil, nil)
	s.SetBenchSchedules(st, func() time.Time { return time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC) })
	if ready != nil {
		s.SetBenchSchedulesReady(ready)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, st
}

func zipOf(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, b := range files {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(b))
	}
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestBenchSchedulesAPI: a schedule is stored with its next run from the
// cron expression; bad cron, suites and options are 422 naming the
// problem and store nothing; other users neither see nor delete it;
// admins may.
func TestBenchSchedulesAPI(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		srv, _ := scheduleServer(t, url, nil)
		const alice, bob, root = "alice-token-000000", "bob-token-00000000", "root-token-0000000"
		good := zipOf(t, map[string]string{"bench_a.py": "def bench_a(client): pass\n"})
		body := func(archive, cron, opts string) string {
			return `{"suite":"nightly","suite_archive":"` + archive + `","cron":"` + cron + `","options":` + opts + `}`
		}
		opts := `{"envs":[{"label":"A","name":"team","hash":"abcdef0123456789","options":{"env":"abcdef0123456789"}}],"repeat":5,"workers":2}`
		for _, bad := range []struct{ name, body, want string }{
			{"cron", body(good, "0 2 * *", opts), "five fields"},
			{"parent path", body(zipOf(t, map[string]string{"bench_a.py": "x", "../evil.py": "x"}), "0 2 * * *", opts), "suite_archive"},
			{"no benchmarks", body(zipOf(t, map[string]string{"helpers.py": "x"}), "0 2 * * *", opts), "no bench_"},
			{"repeat", body(good, "0 2 * * *", strings.Replace(opts, `"repeat":5`, `"repeat":0`, 1)), "repeat 0"},
			{"three envs", body(good, "0 2 * * *", `{"envs":[{"name":"a"},{"name":"b"},{"name":"c"}],"repeat":5,"workers":2}`), "one or two environments"},
			{"no suite", `{"suite_archive":"` + good + `","cron":"0 2 * * *","options":` + opts + `}`, "suite"},
		} {
			code, _, b := do(t, srv, "POST", "/api/v1/bench/schedules", alice, bad.body)
			if code != 422 || !strings.Contains(string(b), bad.want) {
				t.Errorf("%s: %d %s, want 422 with %q", bad.name, code, b, bad.want)
			}
		}
		code, _, b := do(t, srv, "POST", "/api/v1/bench/schedules", alice, body(good, "0 2 * * *", opts))
		if code != 201 {
			t.Fatalf("create: %d %s", code, b)
		}
		var s apitype.BenchScheduleJSON
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.ID, "bs-") || s.OwnerName != "alice" || !s.NextRun.Equal(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)) ||
			len(s.Envs) != 1 || s.Envs[0] != "team" || s.Options.Repeat != 5 {
			t.Fatalf("created %+v", s)
		}
		list := func(token, q string) []apitype.BenchScheduleJSON {
			code, _, b := do(t, srv, "GET", "/api/v1/bench/schedules"+q, token, "")
			if code != 200 {
				t.Fatalf("list: %d %s", code, b)
			}
			var l []apitype.BenchScheduleJSON
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatal(err)
			}
			return l
		}
		if l := list(alice, ""); len(l) != 1 || l[0].ID != s.ID {
			t.Errorf("alice lists %+v", l)
		}
		if l := list(bob, "?all=1"); len(l) != 0 {
			t.Errorf("bob lists alice's schedule: %+v", l)
		}
		if l := list(root, "?all=1"); len(l) != 1 {
			t.Errorf("an admin lists %d schedules with all, want 1", len(l))
		}
		if code, _, b := do(t, srv, "DELETE", "/api/v1/bench/schedules/"+s.ID, bob, ""); code != 404 {
			t.Errorf("bob deletes alice's schedule: %d %s", code, b)
		}
		if code, _, b := do(t, srv, "DELETE", "/api/v1/bench/schedules/"+s.ID, root, ""); code != 204 {
			t.Errorf("an admin deletes it: %d %s", code, b)
		}
		if l := list(alice, ""); len(l) != 0 {
			t.Errorf("after delete alice lists %+v", l)
		}
	})
}

// TestBenchSchedulesNotReady: while the Python that would run scheduled
// suites fails its check, every schedule route refuses with the check's
// message and nothing is stored.
func TestBenchSchedulesNotReady(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		srv, st := scheduleServer(t, url, func(context.Context) error {
			return errors.New("/opt/py has no distributed: set bench.python (GATEWAY_BENCH_PYTHON)")
		})
		const alice = "alice-token-000000"
		good := zipOf(t, map[string]string{"bench_a.py": "def bench_a(client): pass\n"})
		body := `{"suite":"nightly","suite_archive":"` + good + `","cron":"0 2 * * *","options":{"envs":[{"label":"A","name":"auto"}],"repeat":5,"workers":2}}`
		for _, req := range [][2]string{{"POST", body}, {"GET", ""}} {
			code, _, b := do(t, srv, req[0], "/api/v1/bench/schedules", alice, req[1])
			if code != 404 || !strings.Contains(string(b), "runs no benchmark schedules: /opt/py has no distributed: set bench.python") {
				t.Errorf("%s: %d %s, want 404 with the check's message", req[0], code, b)
			}
		}
		if l, err := st.ListBenchSchedules(context.Background(), ""); err != nil || len(l) != 0 {
			t.Errorf("stored: %v %v", l, err)
		}
	})
}
