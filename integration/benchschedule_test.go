package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBenchScheduleFires: gateway bench schedule stores a suite with a
// cron expression; the gateway itself runs it when due (here every
// minute, looking every second) under the owner's identity, records the
// run with the schedule's id, stops its clusters, and shows the firing in
// the schedule list. Bad input is refused before anything is stored, and
// a schedule can be deleted. bench.python is not set: gateway dev runs
// scheduled suites with the Python of its clusters (providers.local.python),
// not python3 on PATH, which here has no Dask (as a pyenv shim may not).
func TestBenchScheduleFires(t *testing.T) {
	t.Parallel()
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "python3"), []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "GATEWAY_BENCH_SCHEDULE_INTERVAL=1s", "PATH="+shim+":"+os.Getenv("PATH"))
	e.startGateway()
	suite := writeSuite(t, map[string]string{
		// The client runs next to the scheduler, as the bench agent's
		// child: not on the gateway's host with a Python of its own.
		"bench_ok.py": "import os\n\n\ndef bench_fast(client):\n    assert client.submit(sum, range(10)).result() == 45\n" +
			"    assert client.run_on_scheduler(os.getpid) == os.getppid(), 'the client does not run next to the scheduler'\n",
	})
	t0 := time.Now()
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

	t.Logf("bad input refused in %s", time.Since(t0).Round(time.Millisecond))
	out := e.gwOK("bench", "schedule", suite, "--cron", "* * * * *", "--repeat", "2", "--workers", "1", "--python", python)
	t.Logf("scheduled after %s", time.Since(t0).Round(time.Millisecond))
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
	t.Logf("fired and ended after %s", time.Since(t0).Round(time.Millisecond))
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

// TestBenchScheduleOnServe: a deployed gateway (gateway serve, with no
// Python on its PATH and bench.python unset, as in the container image
// Terraform runs) accepts a schedule and runs it: the suite's client runs
// next to the cluster's scheduler. A bench.python an operator sets that
// has no Dask is refused up front, saying what to configure, and nothing
// is stored.
func TestBenchScheduleOnServe(t *testing.T) {
	t.Parallel()
	noDask := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(noDask, []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := writeSuite(t, map[string]string{"bench_ok.py": "import os\n\n\ndef bench_fast(client):\n" +
		"    assert client.run_on_scheduler(os.getpid) == os.getppid(), 'the client does not run next to the scheduler'\n"})

	dev := newEnv(t, "GATEWAY_BENCH_SCHEDULE_INTERVAL=1s", "GATEWAY_BENCH_PYTHON="+noDask)
	dev.startGateway()
	out, err := dev.gw("bench", "schedule", suite, "--cron", "* * * * *", "--python", python)
	for _, want := range []string{"runs no benchmark schedules", "has no distributed", noDask, "set bench.python (GATEWAY_BENCH_PYTHON)", "or leave it empty"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("bench schedule with a bench.python without Dask: %v, want an error saying %q:\n%s", err, want, out)
		}
	}
	if strings.Contains(dev.gwLog.String(), "bench schedule created") {
		t.Errorf("a schedule was stored:\n%s", dev.gwLog.String())
	}

	// gateway serve (the dev gateway is its issuer) with nothing on PATH.
	issuer := dev.devIssuer()
	dataDir := filepath.Join(t.TempDir(), "serve")
	url, log := startServe(t, dev.bin, dataDir, issuer, "PATH="+t.TempDir(), "GATEWAY_BENCH_SCHEDULE_INTERVAL=1s")
	user := &env{t: t, bin: dev.bin, home: t.TempDir(), gwLog: log, url: url}
	user.vars = append(filterEnv(os.Environ()), "HOME="+user.home, "XDG_CONFIG_HOME="+filepath.Join(user.home, "config"),
		"GATEWAY_URL="+url, "GATEWAY_CA_FILE="+filepath.Join(dataDir, "gateway-tls.crt"), "GATEWAY_TOKEN="+strings.TrimSpace(dev.gwOK("print-token")))
	out = user.gwOK("bench", "schedule", suite, "--cron", "* * * * *", "--repeat", "1", "--workers", "1", "--python", python)
	m := regexp.MustCompile(`Schedule (bs-[0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no schedule id in:\n%s", out)
	}
	var got struct {
		LastRunID string `json:"last_run_id"`
		LastError string `json:"last_error"`
	}
	for deadline := time.Now().Add(2 * time.Minute); got.LastRunID == ""; time.Sleep(time.Second) {
		var list []struct {
			LastRunID string `json:"last_run_id"`
			LastError string `json:"last_error"`
		}
		user.gwJSON(&list, "bench", "schedule", "--list")
		if len(list) == 1 {
			got = list[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule did not fire within 2 minutes:\n%s", log.String())
		}
	}
	if got.LastError != "" {
		t.Errorf("the firing on gateway serve failed: %s\n%s", got.LastError, log.String())
	}
	user.gwOK("bench", "schedule", "--delete", m[1])
}

// startServe runs gateway serve (local clusters, TLS on a free loopback
// port) with issuer as its OIDC provider, until the test ends, and
// returns its public URL and its log; env is added to its environment.
func startServe(t *testing.T, bin, dataDir, issuer string, env ...string) (string, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	srv := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	srv.Env = append(append(filterEnv(os.Environ()), "GATEWAY_AUTH_OIDC_ISSUER="+issuer, "GATEWAY_PROVIDERS_LOCAL_TRUST_USERS=true"), env...)
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = srv.Process.Kill()
		}
	})
	addrRE := regexp.MustCompile(`public_url=(https://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; {
		if m := addrRE.FindStringSubmatch(log.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url, log
}
