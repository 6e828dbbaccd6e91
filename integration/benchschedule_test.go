package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchScheduleFires: gateway bench schedule stores a suite with a
// cron expression; the gateway itself runs it when due (here every
// minute, looking every second) under the owner's identity, records the
// run with the schedule's id, stops its clusters, and shows the firing in
// the schedule list. Bad input is refused before anything is stored, and
// a schedule can be deleted.
func TestBenchScheduleFires(t *testing.T) {
	e := newEnv(t, "GATEWAY_BENCH_SCHEDULE_INTERVAL=1s", "GATEWAY_BENCH_PYTHON="+python)
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		"bench_ok.py": "def bench_fast(client):\n    assert client.submit(sum, range(10)).result() == 45\n",
	})
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--cron", "0 2 * *"}, "five fields"},
		{[]string{}, "--cron is required"},
		{[]string{"--cron", "0 2 * * *", "--threshold", "lots"}, "--threshold"},
		{[]string{"--cron", "0 2 * * *", "--null"}, "--null is for gateway bench run"},
	} {
		out, err := e.gw(append([]string{"bench", "schedule", suite, "--python", python}, bad.args...)...)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("bench schedule %v: %v\n%s\nwant an error with %q", bad.args, err, out, bad.want)
		}
	}
	if out, err := e.gw("bench", "schedule", t.TempDir(), "--cron", "0 2 * * *", "--python", python); err == nil || !strings.Contains(out, "no bench_*.py") {
		t.Errorf("a suite without benchmarks was accepted: %v\n%s", err, out)
	}

	out := e.gwOK("bench", "schedule", suite, "--cron", "* * * * *", "--repeat", "2", "--workers", "1", "--python", python)
	m := regexp.MustCompile(`Schedule (bs-[0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no schedule id in:\n%s", out)
	}
	id := m[1]
	type sched struct {
		ID        string `json:"id"`
		LastRunID string `json:"last_run_id"`
		LastError string `json:"last_error"`
	}
	deadline := time.Now().Add(2 * time.Minute)
	var got sched
	for {
		var list []sched
		e.gwJSON(&list, "bench", "schedule", "--list")
		if len(list) != 1 || list[0].ID != id {
			t.Fatalf("schedules %+v, want %s", list, id)
		}
		if got = list[0]; got.LastRunID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule did not fire within 2 minutes:\n%s", e.gwLog.String())
		}
		time.Sleep(time.Second)
	}
	if got.LastError != "" {
		t.Errorf("the firing failed: %s\n%s", got.LastError, e.gwLog.String())
	}
	var rep struct {
		Run struct {
			ID         string `json:"id"`
			OwnerName  string `json:"owner_name"`
			ScheduleID string `json:"schedule_id"`
			Status     string `json:"status"`
		} `json:"run"`
		Tests []struct {
			Test string `json:"test"`
		} `json:"tests"`
	}
	raw := e.gwStdout("bench", "report", got.LastRunID, "-o", "json")
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	if rep.Run.ScheduleID != id || rep.Run.OwnerName != "dev" || rep.Run.Status != "ok" || len(rep.Tests) != 1 {
		t.Errorf("the scheduled run is recorded as %+v with tests %+v", rep.Run, rep.Tests)
	}
	e.gwOK("bench", "schedule", "--delete", id)
	var list []sched
	e.gwJSON(&list, "bench", "schedule", "--list")
	if len(list) != 0 {
		t.Errorf("schedules after delete: %+v", list)
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(e.activeClusters()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("clusters left active after the scheduled run: %v", e.activeClusters())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
