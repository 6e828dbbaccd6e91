package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-dask")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSchedulerCrashAtStart: a Dask that dies at start fails the cluster with
// the last lines of its log, and leaves no process behind.
func TestSchedulerCrashAtStart(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `echo "starting $1"; echo "ModuleNotFoundError: No module named 'distributed'" >&2; exit 3`)
	e := newEnv(t, "GATEWAY_PROVIDERS_LOCAL_COMMAND="+script)
	e.startGateway()
	out, err := e.gw("new-cluster", "--workers", "1")
	if err == nil {
		t.Fatalf("new-cluster succeeded with a crashing Dask:\n%s", out)
	}
	if !strings.Contains(out, "failed") || !strings.Contains(out, "No module named 'distributed'") {
		t.Fatalf("new-cluster does not say why:\n%s", out)
	}
	var list []struct {
		Name, State, Reason string
	}
	e.gwJSON(&list, "list", "--all")
	if len(list) != 1 || list[0].State != "FAILED" {
		t.Fatalf("list: %+v", list)
	}
	show := e.gwOK("show", list[0].Name)
	for _, want := range []string{"FAILED", "scheduler exited (exit status 3)", "No module named 'distributed'", "starting scheduler"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if pids := memberPIDs(list[0].Name); len(pids) != 0 {
		t.Errorf("processes left: %v", pids)
	}
}

// TestMissingDask: a gateway whose Dask interpreter does not exist refuses to
// start and says what to install or set.
func TestMissingDask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_PROVIDERS_LOCAL_PYTHON=/nonexistent/python3")
	out, err := e.gw("dev", "--listen", "127.0.0.1:0")
	if err == nil {
		t.Fatal("gateway dev started without Dask")
	}
	for _, want := range []string{"/nonexistent/python3", "apt-get install python3-distributed", "providers.local.python"} {
		if !strings.Contains(out, want) {
			t.Errorf("error lacks %q:\n%s", want, out)
		}
	}
}

// TestStopWhileStarting: a cluster stopped before its scheduler is ready
// ends STOPPED with nothing left running.
func TestStopWhileStarting(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `exec sleep 300`) // a scheduler that never gets ready
	e := newEnv(t, "GATEWAY_PROVIDERS_LOCAL_COMMAND="+script)
	e.startGateway()
	var c struct{ Name string }
	e.gwJSON(&c, "new-cluster", "--no-wait")
	deadline := time.Now().Add(10 * time.Second)
	for len(memberPIDs(c.Name)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler process never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var d struct{ Cluster struct{ State string } }
	e.gwJSON(&d, "show", c.Name)
	if d.Cluster.State != "STARTING" {
		t.Fatalf("state %s, want STARTING", d.Cluster.State)
	}
	out := e.gwOK("stop", c.Name)
	if !strings.Contains(out, "stopped") {
		t.Fatalf("stop: %s", out)
	}
	waitNoMembers(t, c.Name)
	e.gwJSON(&d, "show", c.Name)
	if d.Cluster.State != "STOPPED" {
		t.Fatalf("state %s, want STOPPED", d.Cluster.State)
	}
}

// TestShutdownStopsClusters: SIGTERM to the gateway stops its local clusters
// (the default), records them STOPPED, and leaves no process.
func TestShutdownStopsClusters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "1")
	if n := len(memberPIDs(c.Name)); n != 2 {
		t.Fatalf("%d processes, want 2", n)
	}
	e.stopGateway(syscall.SIGTERM)
	if pids := memberPIDs(c.Name); len(pids) != 0 {
		t.Fatalf("processes left after the gateway stopped: %v", pids)
	}
	if !strings.Contains(e.gwLog.String(), "gateway stopped") {
		t.Errorf("gateway did not shut down cleanly:\n%s", lastLines(e.gwLog.String(), 20))
	}
	e.startGateway()
	var list []struct{ Name, State, Reason string }
	e.gwJSON(&list, "list", "--all")
	if len(list) != 1 || list[0].State != "STOPPED" || !strings.Contains(list[0].Reason, "shut down") {
		t.Fatalf("after restart: %+v", list)
	}
}

// TestShutdownLeavesClustersForReadoption: with cluster.on_shutdown=leave a
// restarted gateway re-adopts the running cluster and routes to it again.
func TestShutdownLeavesClustersForReadoption(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_CLUSTER_ON_SHUTDOWN=leave")
	e.startGateway()
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "1")
	before := memberPIDs(c.Name)
	if len(before) != 2 {
		t.Fatalf("%d processes, want 2", len(before))
	}
	e.stopGateway(syscall.SIGTERM)
	after := memberPIDs(c.Name)
	if len(after) != 2 {
		t.Fatalf("the cluster did not survive the gateway: %v", after)
	}
	e.startGateway()
	// Same port for the Python client is not guaranteed (port 0): use the
	// snippet from the new gateway.
	out, err := e.runPython(pythonFromShow(t, e, c.Name) + `
print("sum", client.submit(sum, range(10)).result())
print("workers", len(client.scheduler_info()["workers"]))
`)
	if err != nil || !strings.Contains(out, "sum 45") || !strings.Contains(out, "workers 1") {
		t.Fatalf("client through the restarted gateway: %v\n%s\n--- gateway log:\n%s", err, out, lastLines(e.gwLog.String(), 30))
	}
	if pids := memberPIDs(c.Name); len(pids) != 2 || pids[0] != after[0] && pids[0] != after[1] {
		t.Errorf("processes changed across the restart: before %v, now %v", after, pids)
	}
	e.gwOK("stop", c.Name)
	waitNoMembers(t, c.Name)
}

func pythonFromShow(t *testing.T, e *env, name string) string {
	t.Helper()
	var s struct {
		Connection struct{ Python string } `json:"connection"`
	}
	e.gwJSON(&s, "show", name)
	if s.Connection.Python == "" {
		t.Fatalf("show %s gives no Python snippet", name)
	}
	return s.Connection.Python
}

// TestIdleTimeoutWithDask: a real scheduler's view decides idleness: a
// connected client keeps the cluster, and once it leaves the cluster stops.
func TestIdleTimeoutWithDask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms")
	e.startGateway()
	// Python has imported Dask before the cluster exists, so that only
	// connecting, not starting an interpreter on a loaded machine, comes
	// before the idle timeout (which Python missed at load 28).
	py := e.startPython()
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "1", "--idle-timeout", "8s")
	out, err := py.run(c.Python + `
import time
print("first", client.submit(sum, range(10)).result())
time.sleep(10)  # connected but idle: longer than the idle timeout
print("second", client.submit(sum, range(10)).result())
`)
	if err != nil || !strings.Contains(out, "second 45") {
		t.Fatalf("a cluster with a connected client was stopped: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d struct {
			Cluster struct{ State, Reason string }
		}
		e.gwJSON(&d, "show", c.Name)
		if d.Cluster.State == "STOPPED" {
			if !strings.Contains(d.Cluster.Reason, "idle for 8s") {
				t.Errorf("reason %q", d.Cluster.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle cluster still %s after 30s", d.Cluster.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitNoMembers(t, c.Name)
}

// TestReaperStopsWhatTheStoreDoesNotKnow: processes carrying this gateway's
// marker that no stored cluster owns (here: left running, then the database
// lost) are found and stopped after a restart.
func TestReaperStopsWhatTheStoreDoesNotKnow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_CLUSTER_ON_SHUTDOWN=leave", "GATEWAY_CLUSTER_REAP_INTERVAL=500ms", "GATEWAY_CLUSTER_REAP_GRACE=1s",
		"GATEWAY_METRICS_LISTEN=127.0.0.1:0")
	e.startGateway()
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "1")
	e.stopGateway(syscall.SIGTERM)
	if n := len(memberPIDs(c.Name)); n != 2 {
		t.Fatalf("%d processes left running, want 2", n)
	}
	for _, f := range []string{"gateway.db", "gateway.db-wal", "gateway.db-shm"} {
		_ = os.Remove(filepath.Join(e.dataDir(), f))
	}
	e.startGateway()
	waitNoMembers(t, c.Name)
	// The processes end inside the reaper's stop, before it counts and
	// logs it: waited for, not read at once.
	if !e.waitLog("reaper: stopped leftover resources") {
		t.Errorf("the reaping is not in the log:\n%s", lastLines(e.gwLog.String(), 20))
	}
	// ... and in the metrics.
	m := regexp.MustCompile(`msg=metrics url=(http://127\.0\.0\.1:\d+/metrics)`).FindAllStringSubmatch(e.gwLog.String(), -1)
	if m == nil {
		t.Fatal("no metrics URL in the log")
	}
	code, body := get(t, m[len(m)-1][1], "")
	if code != 200 || !strings.Contains(body, "gateway_reaped_total 1") || !strings.Contains(body, `gateway_clusters{status="RUNNING"} 0`) {
		t.Errorf("metrics: %d\n%s", code, grepLines(body, "gateway_"))
	}
}

// TestAdaptiveWithDask: with adaptive scaling on, a real scheduler's demand
// brings workers up for a workload and takes them away when it is done.
func TestAdaptiveWithDask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "GATEWAY_CLUSTER_POLL_INTERVAL=500ms")
	e.startGateway()
	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "0")
	out := e.gwOK("adapt", c.Name, "--minimum", "0", "--maximum", "3")
	if !strings.Contains(out, "between 0 and 3") {
		t.Fatalf("adapt: %s", out)
	}
	out, err := e.runPython(c.Python + `
import time
def slow(i):
    time.sleep(0.5)
    return i
futures = client.map(slow, range(40))
print("total", sum(client.gather(futures)))
print("workers during", len(client.scheduler_info()["workers"]))
`)
	if err != nil || !strings.Contains(out, "total 780") {
		t.Fatalf("workload on an adaptive cluster from 0 workers: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(memberPIDs(c.Name)) != 1 { // back to the scheduler alone
		if time.Now().After(deadline) {
			t.Fatalf("workers not removed after the workload: %d processes", len(memberPIDs(c.Name)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var d struct {
		Events []struct{ Kind, Message string }
	}
	e.gwJSON(&d, "show", c.Name)
	ups := 0
	for _, ev := range d.Events {
		if ev.Kind == "adaptive" && strings.HasPrefix(ev.Message, "0 -> ") {
			ups++
		}
	}
	if ups == 0 {
		t.Errorf("no adaptive scale-up recorded: %+v", d.Events)
	}
}
