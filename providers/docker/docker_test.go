package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
)

// TestClusterLifecycle runs a real cluster (a scheduler and two workers),
// computes on it through the reported address, checks what the engine was
// asked for, re-adopts it from a second provider (a restarted gateway), and
// stops it, its logs remaining readable.
func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cfg := e.config()
	p := e.provider(cfg)
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.Scheduler = providers.Machine{VCPUs: 0.5, MemoryGiB: 0.5}
	spec.Worker = providers.Machine{VCPUs: 1, MemoryGiB: 1.5}
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })

	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	// Immediate: listed as soon as the call returns.
	ms, err := p.Describe(ctx, cluster)
	if err != nil || len(ms) != 1 || ms[0].Name != "scheduler" || ms[0].State == providers.StateStopped {
		t.Fatalf("Describe right after StartScheduler = %+v, %v; want the scheduler, pending or running", ms, err)
	}
	sched := waitMember(t, p, cluster, "scheduler", "running with an address", schedulerRunning)
	if !strings.HasPrefix(sched.Address, "127.0.0.1:") || !strings.HasPrefix(sched.DashboardURL, "https://127.0.0.1:") {
		t.Errorf("scheduler address %q, dashboard %q; want both on 127.0.0.1", sched.Address, sched.DashboardURL)
	}
	if sched.Owner != "ann" || sched.Role != providers.RoleScheduler || sched.StartedAt.IsZero() || time.Since(sched.StartedAt) > time.Minute {
		t.Errorf("scheduler = %+v", sched)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		if err := p.StartWorker(ctx, spec, w, sched.Address); err != nil {
			t.Fatalf("StartWorker(%s): %v", w, err)
		}
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		waitMember(t, p, cluster, w, "running", running)
	}

	// The workers really joined the scheduler (on the cluster's network),
	// and the gateway's side reaches it at the reported address, the port
	// the engine published on loopback: a Dask client on this host
	// computes there.
	hostClient(t, spec, sched.Address, 2)
	net := networkName(e.gatewayID, cluster)

	t.Run("container configuration", func(t *testing.T) {
		s := e.inspect(cluster, "scheduler")
		w := e.inspect(cluster, "worker-0")
		for _, c := range []struct {
			insp   container.InspectResponse
			member string
			role   providers.Role
			nano   int64
			mem    int64
		}{{s, "scheduler", providers.RoleScheduler, 5e8, 1 << 29}, {w, "worker-0", providers.RoleWorker, 1e9, 3 << 29}} {
			insp := c.insp
			if got, want := strings.TrimPrefix(insp.Name, "/"), "gw-"+e.gatewayID+"-"+cluster+"-"+c.member; got != want {
				t.Errorf("container name %q, want %q", got, want)
			}
			wantLabels := map[string]string{labelGateway: e.gatewayID, labelCluster: cluster, labelMember: c.member, labelRole: string(c.role), labelOwner: "ann"}
			for k, v := range wantLabels {
				if insp.Config.Labels[k] != v {
					t.Errorf("%s: label %s = %q, want %q", c.member, k, insp.Config.Labels[k], v)
				}
			}
			hc := insp.HostConfig
			if hc.NanoCPUs != c.nano || hc.Memory != c.mem {
				t.Errorf("%s: NanoCPUs %d, Memory %d; want %d, %d", c.member, hc.NanoCPUs, hc.Memory, c.nano, c.mem)
			}
			if hc.Init == nil || !*hc.Init || hc.AutoRemove || !hc.RestartPolicy.IsNone() || string(hc.NetworkMode) != net || len(hc.DeviceRequests) != 0 {
				t.Errorf("%s: host config %+v; want init, no auto-remove, no restarts, network %s, no devices", c.member, hc, net)
			}
			if nets := insp.NetworkSettings.Networks; len(nets) != 1 || nets[net] == nil {
				t.Errorf("%s: networks %v; want %s alone", c.member, slices.Collect(maps.Keys(nets)), net)
			}
			published := 0
			for port, bs := range insp.NetworkSettings.Ports {
				for _, b := range bs {
					published++
					if b.HostIP != "127.0.0.1" || (port != "8786/tcp" && port != "8787/tcp") {
						t.Errorf("%s: port %s published on %s:%s; want 8786 and 8787 on 127.0.0.1 alone", c.member, port, b.HostIP, b.HostPort)
					}
				}
			}
			if want := map[providers.Role]int{providers.RoleScheduler: 2, providers.RoleWorker: 0}[c.role]; published != want {
				t.Errorf("%s: %d ports published, want %d: %v", c.member, published, want, insp.NetworkSettings.Ports)
			}
			if len(insp.Config.Entrypoint) < 4 || insp.Config.Entrypoint[0] != "python3" || insp.Config.Entrypoint[1] != "-c" ||
				insp.Config.Entrypoint[2] != images.LauncherScript || insp.Config.Entrypoint[3] != string(c.role) || len(insp.Config.Cmd) != 0 {
				t.Errorf("%s: entrypoint %q, cmd %q; want the launcher with role %s", c.member, head(insp.Config.Entrypoint, 4), insp.Config.Cmd, c.role)
			}
			if !slices.Contains(insp.Config.Env, "PYTHONUNBUFFERED=1") {
				t.Errorf("%s: env %q lacks PYTHONUNBUFFERED=1", c.member, insp.Config.Env)
			}
			if insp.Config.User != "" || insp.State.Status != "running" {
				t.Errorf("%s: user %q, status %s", c.member, insp.Config.User, insp.State.Status)
			}
		}
		args := strings.Join(w.Config.Entrypoint[4:], " ")
		for _, want := range []string{"tls://scheduler:8786 ", "--host worker ", "--name worker-0", "--nthreads 1", "--memory-limit 1073741824",
			"--no-nanny", "--tls-key " + keyPath, "--local-directory " + spaceDir, "--death-timeout 60", "--no-dashboard"} {
			if !strings.Contains(args+" ", want) {
				t.Errorf("worker arguments %q lack %q", args, want)
			}
		}
		args = strings.Join(s.Config.Entrypoint[4:], " ")
		for _, want := range []string{"--host scheduler --port 8786 --protocol tls", "--dashboard-address :8787", "--scheduler-file " + schedulerFile,
			"--no-show", "--dashboard-prefix /clusters/" + cluster} {
			if !strings.Contains(args, want) {
				t.Errorf("scheduler arguments %q lack %q", args, want)
			}
		}
	})

	t.Run("TLS key stays out of inspect", func(t *testing.T) {
		keyBody := pemBody(spec.TLSKey)
		for _, member := range []string{"scheduler", "worker-0", "worker-1"} {
			name := containerName(e.gatewayID, cluster, member)
			insp, raw, err := e.cli.ContainerInspectWithRaw(ctx, name, false)
			if err != nil {
				t.Fatal(err)
			}
			visible := strings.Join(insp.Config.Env, "\n") + strings.Join(insp.Config.Cmd, " ") + strings.Join(insp.Config.Entrypoint, " ") + fmt.Sprint(insp.Config.Labels)
			for _, secret := range []string{"PRIVATE KEY", keyBody} {
				if strings.Contains(visible, secret) || bytes.Contains(raw, []byte(secret)) {
					t.Errorf("%s: docker inspect shows the TLS key (%.20q...)", member, secret)
				}
			}
			hdr, data := e.readFile(ctx, name, keyPath)
			if hdr.Mode&0o777 != 0o600 || !bytes.Equal(data, spec.TLSKey) {
				t.Errorf("%s: %s has mode %o and %d bytes; want the key, mode 600", member, keyPath, hdr.Mode&0o777, len(data))
			}
			hdr, data = e.readFile(ctx, name, certPath)
			if hdr.Mode&0o777 != 0o644 || !bytes.Equal(data, spec.TLSCert) {
				t.Errorf("%s: %s has mode %o; want the certificate, mode 644", member, certPath, hdr.Mode&0o777)
			}
		}
	})

	var live bytes.Buffer
	if err := p.Logs(ctx, cluster, 0, &live); err != nil || !strings.HasPrefix(live.String(), "[scheduler] ") || !strings.Contains(live.String(), "[worker-1] ") {
		t.Errorf("Logs of the live cluster: %v\n%s", err, live.String())
	}

	// A restarted gateway (a second provider on the same engine, gateway id
	// and folder) finds the members by their labels and takes them over.
	p2 := e.provider(cfg)
	ids := map[string]string{}
	for _, c := range e.containers(ctx, cluster) {
		ids[c.Labels[labelMember]] = c.ID
	}
	s2 := waitMember(t, p2, cluster, "scheduler", "running with an address", schedulerRunning)
	if s2.Address != sched.Address || s2.DashboardURL != sched.DashboardURL || s2.Owner != "ann" || !s2.StartedAt.Equal(sched.StartedAt) {
		t.Errorf("re-adopted scheduler = %+v, was %+v", s2, sched)
	}
	all, err := p2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("List from the restarted gateway = %+v; want the scheduler and two workers", all)
	}
	for _, m := range all {
		if m.Cluster != cluster || m.State != providers.StateRunning || m.Owner != "ann" {
			t.Errorf("re-adopted member %+v", m)
		}
	}
	if err := p2.StartWorker(ctx, spec, "worker-0", s2.Address); err != nil {
		t.Fatalf("StartWorker of a running worker: %v", err)
	}
	if err := p2.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler of a running scheduler: %v", err)
	}
	for _, c := range e.containers(ctx, cluster) {
		if ids[c.Labels[labelMember]] != c.ID {
			t.Errorf("%s was replaced by a repeated start", c.Labels[labelMember])
		}
	}

	// Stopping a worker removes its container; its log is kept.
	if err := p2.StopWorker(ctx, cluster, "worker-1"); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	if w1 := find(describe(t, p2, cluster), "worker-1"); w1 != nil {
		t.Errorf("worker-1 after StopWorker: %+v", *w1)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, cluster, "worker-1.log")); err != nil || len(b) == 0 {
		t.Errorf("saved log of worker-1: %v (%d bytes)", err, len(b))
	}

	before := time.Now()
	if err := p2.StopCluster(ctx, cluster); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	if left := e.containers(ctx, cluster); len(left) != 0 {
		t.Errorf("containers after StopCluster: %d", len(left))
	}
	if left := e.networks(ctx, cluster); len(left) != 0 {
		t.Errorf("networks after StopCluster: %v", left)
	}
	if ms := describe(t, p2, cluster); len(ms) != 0 {
		t.Errorf("Describe after StopCluster = %+v", ms)
	}
	// The ends outlive the containers and the gateway process: one
	// restarted before the stop was recorded dates it by them, not by when
	// it found the members gone.
	p3 := e.provider(cfg)
	for _, m := range []string{"scheduler", "worker-0"} {
		at, ok := p2.StoppedAt(cluster, m)
		if !ok || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
			t.Errorf("StoppedAt(%s) = %v, %v; want a time during StopCluster", m, at, ok)
		}
		if again, ok := p3.StoppedAt(cluster, m); !ok || !again.Equal(at) {
			t.Errorf("StoppedAt(%s) after a restart = %v, %v; want %v", m, again, ok, at)
		}
	}
	if at, ok := p3.StoppedAt(cluster, "worker-1"); ok {
		t.Errorf("StoppedAt(worker-1) = %v: a worker stopped alone is in the ledger from its intent", at)
	}
	if err := p2.StopCluster(ctx, cluster); err != nil {
		t.Errorf("second StopCluster: %v", err)
	}

	var logs bytes.Buffer
	if err := p2.Logs(ctx, cluster, 0, &logs); err != nil {
		t.Fatalf("Logs after StopCluster: %v", err)
	}
	text := logs.String()
	if !strings.HasPrefix(text, "[scheduler] ") || !strings.Contains(text, "[scheduler] gateway-env:") ||
		!strings.Contains(text, "[worker-0] ") || !strings.Contains(text, "[worker-1] ") {
		t.Errorf("Logs after StopCluster lack members' lines:\n%s", text)
	}
	logs.Reset()
	if err := p2.Logs(ctx, cluster, 2, &logs); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		member, _, _ := strings.Cut(strings.TrimPrefix(l, "["), "]")
		count[member]++
	}
	if count["scheduler"] != 2 || count["worker-0"] != 2 || count["worker-1"] != 2 || len(count) != 3 {
		t.Errorf("Logs with tail 2 = %v:\n%s", count, logs.String())
	}
	if err := p2.Logs(ctx, newCluster(), 0, &logs); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Logs of an unknown cluster: %v; want ErrNotFound", err)
	}
}

// clientScript connects a Dask client to the scheduler at argv[1] with the
// cluster's TLS files (argv[2], argv[3]), waits for argv[4] workers and
// computes 41+1 on one.
const clientScript = `
import sys
from distributed import Client
from distributed.security import Security
addr, cert, key, n = sys.argv[1:5]
sec = Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
c = Client("tls://" + addr, security=sec, timeout=30)
c.wait_for_workers(int(n), timeout=30)
print("workers", len(c.scheduler_info()["workers"]))
print("result", c.submit(lambda x: x + 1, 41).result(timeout=30))
c.close()
`

// hostClient runs a Dask client on this host (Debian's python3, the
// gateway's side of the published ports) against addr, and checks that it
// sees n workers and computes.
func hostClient(t *testing.T, spec providers.ClusterSpec, addr string, n int) {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, spec.TLSCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, spec.TLSKey, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, hostPython(t), "-c", clientScript, addr, cert, key, strconv.Itoa(n)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("workers %d", n)) || !strings.Contains(string(out), "result 42") {
		t.Fatalf("Dask client on this host to %s: %v:\n%s", addr, err, out)
	}
}

// hostPython is this host's Python with distributed, or skips the test.
func hostPython(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import distributed").Run(); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("no Python with distributed on this host (%s: %v): apt-get install python3-distributed", py, err))
	}
	return py
}

// TestEnvMismatch checks that a member whose image differs from the
// client's stops at once, with the launcher's table intact in its reason.
func TestEnvMismatch(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cfg := e.config()
	p := e.provider(cfg)
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.EnvExpect = `{"numpy": "0.0.1-not-this", "python": "2.7"}`
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })

	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// A worker too, whatever its scheduler: the check runs before Dask.
	if err := p.StartWorker(ctx, spec, "worker-0", "127.0.0.1:9"); err != nil {
		t.Fatal(err)
	}
	stopped := func(m *providers.Member) bool { return m != nil && m.State == providers.StateStopped }
	s := waitMember(t, p, cluster, "scheduler", "stopped", stopped)
	w := waitMember(t, p, cluster, "worker-0", "stopped", stopped)
	for _, m := range []providers.Member{s, w} {
		if !strings.HasPrefix(m.Reason, m.Name+" exited (status 97)") || !strings.Contains(m.Reason, images.MismatchMarker) {
			t.Errorf("%s: reason %q; want the exit status and the mismatch", m.Name, m.Reason)
		}
		table, ok := images.MismatchIn(m.Reason)
		if !ok || !strings.Contains(table, "numpy") || !strings.Contains(table, "0.0.1-not-this") || !strings.Contains(table, "2.7") {
			t.Errorf("%s: mismatch table %q in reason %q", m.Name, table, m.Reason)
		}
	}
	// The table in the reason is the one the launcher printed, whole.
	var logs bytes.Buffer
	if err := p.Logs(ctx, cluster, 0, &logs); err != nil {
		t.Fatal(err)
	}
	printed, _ := images.MismatchIn(logs.String())
	inReason, _ := images.MismatchIn(s.Reason)
	if printed == "" || printed != inReason || strings.Count(printed, "\n") != 3 {
		t.Errorf("the scheduler printed the table\n%s\nits reason has\n%s", printed, inReason)
	}
	// The reason stays until the member is stopped.
	if again := find(describe(t, p, cluster), "scheduler"); again == nil || again.Reason != s.Reason || again.State != providers.StateStopped {
		t.Errorf("scheduler described again: %+v", again)
	}
	insp := e.inspect(cluster, "scheduler")
	if !slices.Contains(insp.Config.Env, images.ExpectEnv+"="+spec.EnvExpect) || insp.State.ExitCode != images.MismatchExitCode {
		t.Errorf("scheduler env %q, exit %d", insp.Config.Env, insp.State.ExitCode)
	}

	// Starting an exited member again replaces its container, its earlier
	// log saved.
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if again := e.inspect(cluster, "scheduler"); again.ID == insp.ID {
		t.Error("StartScheduler kept the exited container")
	}
	waitMember(t, p, cluster, "scheduler", "stopped again", stopped)
	if b, _ := os.ReadFile(filepath.Join(cfg.Dir, cluster, "scheduler.log")); !bytes.Contains(b, []byte(images.MismatchMarker)) {
		t.Errorf("saved log of the replaced scheduler: %q", b)
	}

	// Stopped on request: no reason, then gone.
	if err := p.StopWorker(ctx, cluster, "worker-0"); err != nil {
		t.Fatal(err)
	}
	if err := p.StopCluster(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if left := e.containers(ctx, cluster); len(left) != 0 {
		t.Errorf("containers after StopCluster: %d", len(left))
	}
	logs.Reset()
	if err := p.Logs(ctx, cluster, 0, &logs); err != nil || strings.Count(logs.String(), images.MismatchMarker) != 3 {
		t.Errorf("Logs after StopCluster (%v): want the mismatch of both schedulers and the worker:\n%s", err, logs.String())
	}
}

// TestGPURequests checks that GPUs are asked of the engine as NVIDIA device
// requests; this engine has no GPUs, so the container is created, not
// started, and starting a GPU member fails as unsupported.
func TestGPURequests(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	p := e.provider(e.config())
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.Worker = providers.Machine{VCPUs: 2, MemoryGiB: 2, GPUs: 1, GPUType: "t4"}

	if err := p.ensureNetwork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })
	cfg, hc := p.containerConfig(spec, "worker-0", providers.RoleWorker, e.image, []string{"tls://127.0.0.1:9"})
	name := containerName(e.gatewayID, cluster, "gpu-probe")
	resp, err := e.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		t.Fatalf("create a GPU container: %v", err)
	}
	insp, err := e.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	want := []container.DeviceRequest{{Driver: "nvidia", Count: 1, Capabilities: [][]string{{"gpu"}}}}
	if got := insp.HostConfig.DeviceRequests; len(got) != 1 || got[0].Driver != want[0].Driver || got[0].Count != 1 || fmt.Sprint(got[0].Capabilities) != "[[gpu]]" {
		t.Errorf("DeviceRequests = %+v; want %+v", got, want)
	}
	if insp.HostConfig.NanoCPUs != 2e9 || insp.HostConfig.Memory != 2<<30 {
		t.Errorf("NanoCPUs %d, Memory %d", insp.HostConfig.NanoCPUs, insp.HostConfig.Memory)
	}

	err = p.StartWorker(ctx, spec, "worker-0", "127.0.0.1:9")
	if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), "NVIDIA Container Toolkit") {
		t.Errorf("StartWorker with a GPU on an engine without GPUs: %v; want ErrUnsupported naming the toolkit", err)
	}
	if ms := describe(t, p, cluster); len(ms) != 0 {
		t.Errorf("members after the failed start: %+v", ms)
	}
	if _, err := e.cli.ContainerInspect(ctx, containerName(e.gatewayID, cluster, "worker-0")); err == nil {
		t.Error("the failed GPU worker's container was left behind")
	}
}

// TestNonRootImage runs a scheduler from an image whose user is not root:
// the TLS files are that user's, and the scheduler writes its file next to
// them.
func TestNonRootImage(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	base, err := e.cli.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ref := "gateway-test/dask-nobody:" + e.gatewayID
	_, err = e.cli.ContainerCommit(ctx, base.ID, container.CommitOptions{Reference: ref, Changes: []string{"USER nobody"}})
	_ = e.cli.ContainerRemove(ctx, base.ID, container.RemoveOptions{Force: true})
	if err != nil {
		t.Fatalf("commit a non-root image: %v", err)
	}
	t.Cleanup(func() {
		_, _ = e.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})

	p := e.provider(e.config())
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.Image = ref // the cluster's image wins over the configured one
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitMember(t, p, cluster, "scheduler", "running with an address", schedulerRunning)
	insp := e.inspect(cluster, "scheduler")
	if insp.Config.User != "nobody" || insp.Config.Image != ref {
		t.Errorf("scheduler runs %s as %q", insp.Config.Image, insp.Config.User)
	}
	hdr, _ := e.readFile(ctx, insp.ID, keyPath)
	if hdr.Uid != 65534 || hdr.Mode&0o777 != 0o600 {
		t.Errorf("key owned by %d with mode %o; want nobody (65534), 600", hdr.Uid, hdr.Mode&0o777)
	}
}

// TestLeftoversAndClose checks that a container left "created" by a crash
// is replaced by the next start, and that Close(leave=false) stops every
// cluster of the gateway.
func TestLeftoversAndClose(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cfg := e.config()
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "bob")

	// The crash: created, never started.
	if err := p.ensureNetwork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ccfg, hc := p.containerConfig(spec, "scheduler", providers.RoleScheduler, e.image, []string{"--no-show"})
	left, err := e.cli.ContainerCreate(ctx, ccfg, hc, nil, nil, containerName(e.gatewayID, cluster, "scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	if s := find(describe(t, p, cluster), "scheduler"); s == nil || s.State != providers.StatePending {
		t.Errorf("a fresh created container is described as %+v; want pending (another process may be starting it)", s)
	}
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if insp := e.inspect(cluster, "scheduler"); insp.ID == left.ID || insp.State.Status != "running" {
		t.Errorf("after StartScheduler on a leftover: container %.12s (the leftover was %.12s), %s; want a new one, running", insp.ID, left.ID, insp.State.Status)
	}
	other := newCluster()
	if err := p.StartScheduler(ctx, e.spec(other, "bob")); err != nil {
		t.Fatal(err)
	}

	// Leaving: members stay for the next gateway.
	if err := p.Close(ctx, true); err != nil {
		t.Fatalf("Close(leave): %v", err)
	}
	if n := len(e.containers(ctx, "")); n != 2 {
		t.Errorf("containers after Close(leave=true): %d, want 2", n)
	}
	p2, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(ctx, false); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(e.containers(ctx, "")); n != 0 {
		t.Errorf("containers after Close(leave=false): %d, want 0", n)
	}
	if n := e.networks(ctx, ""); len(n) != 0 {
		t.Errorf("networks after Close(leave=false): %v, want none", n)
	}
}

// TestStartRefusals checks the calls that must start nothing.
func TestStartRefusals(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.Image = ""
	p := e.provider(cfg)
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })

	err := p.StartScheduler(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "providers.docker.image") || !strings.Contains(err.Error(), "--image") {
		t.Errorf("StartScheduler without an image: %v; want an error naming providers.docker.image and --image", err)
	}
	spec.Image = e.image
	for _, name := range []string{"", "scheduler", "a/b", "a b", `a\b`, "..", "../x"} {
		if err := p.StartWorker(ctx, spec, name, "127.0.0.1:9"); err == nil || !strings.Contains(err.Error(), "invalid worker name") {
			t.Errorf("StartWorker(%q): %v; want invalid worker name", name, err)
		}
	}
	if err := p.StartWorker(ctx, spec, "worker-0", ""); err == nil || !strings.Contains(err.Error(), "scheduler address") {
		t.Errorf("StartWorker without a scheduler address: %v", err)
	}
	noTLS := spec
	noTLS.TLSKey = nil
	if err := p.StartScheduler(ctx, noTLS); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("StartScheduler without a key: %v", err)
	}
	// An image the engine lacks is pulled; one that cannot be pulled is
	// an error that says so.
	missing := spec
	missing.Image = "127.0.0.1:9/gateway-test/none:" + e.gatewayID
	if err := p.StartScheduler(ctx, missing); err == nil || !strings.Contains(err.Error(), "pulling it failed") {
		t.Errorf("StartScheduler with an image that cannot be pulled: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.StartWorker(cancelled, spec, "worker-0", "127.0.0.1:9"); !errors.Is(err, context.Canceled) {
		t.Errorf("StartWorker with a cancelled context: %v", err)
	}
	if n := len(e.containers(ctx, "")); n != 0 {
		t.Errorf("refused starts left %d containers", n)
	}
	// Unknown names are not errors.
	if err := p.StopWorker(ctx, cluster, "worker-9"); err != nil {
		t.Errorf("StopWorker of an unknown worker: %v", err)
	}
	if err := p.StopCluster(ctx, newCluster()); err != nil {
		t.Errorf("StopCluster of an unknown cluster: %v", err)
	}
}

// TestNewRefuses checks New's errors; none needs an engine.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "no-engine.sock")
	_, err := New(ctx, Config{Endpoint: "unix://" + sock, GatewayID: "gw", Image: "x"})
	if err == nil || !strings.Contains(err.Error(), "start dockerd or set DOCKER_HOST / providers.docker.endpoint") || !strings.Contains(err.Error(), sock) || errors.Unwrap(err) == nil {
		t.Errorf("New on a socket nobody serves: %v; want the cause, the address and what to do", err)
	}
	if _, err := New(ctx, Config{Endpoint: "unix://" + sock}); err == nil || !strings.Contains(err.Error(), "gateway id") {
		t.Errorf("New without a gateway id: %v", err)
	}
	if _, err := New(ctx, Config{Endpoint: "unix://" + sock, GatewayID: "gw", Network: "bridge"}); err == nil || !strings.Contains(err.Error(), "providers.docker.network") || !strings.Contains(err.Error(), `"cluster"`) {
		t.Errorf("New with network bridge: %v; want an error naming the key and its values", err)
	}
	if _, err := New(ctx, Config{Endpoint: "tcp://127.0.0.1:9", GatewayID: "gw", TLSCert: "/x/cert.pem"}); err == nil || !strings.Contains(err.Error(), "tls_key") {
		t.Errorf("New with a certificate and no key: %v", err)
	}
	if _, err := New(ctx, Config{Endpoint: "tcp://127.0.0.1:9", GatewayID: "gw", TLSCACert: "/nonexistent/ca.pem"}); err == nil || !strings.Contains(err.Error(), "ca.pem") {
		t.Errorf("New with a CA file that does not exist: %v", err)
	}
}

// ---- helpers that need the engine ----

// exec runs a command in a container and returns its output and status.
func (e *engine) exec(ctx context.Context, ctr string, cmd ...string) (string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ex, err := e.cli.ContainerExecCreate(ctx, ctr, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		e.t.Fatalf("exec in %s: %v", ctr, err)
	}
	att, err := e.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		e.t.Fatalf("exec in %s: %v", ctr, err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		e.t.Fatalf("exec in %s: %v", ctr, err)
	}
	st, err := e.cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		e.t.Fatalf("exec in %s: %v", ctr, err)
	}
	return out.String(), st.ExitCode
}

// readFile reads one file out of a container.
func (e *engine) readFile(ctx context.Context, ctr, path string) (*tar.Header, []byte) {
	e.t.Helper()
	rc, _, err := e.cli.CopyFromContainer(ctx, ctr, path)
	if err != nil {
		e.t.Fatalf("read %s in %s: %v", path, ctr, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		e.t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(tr); err != nil {
		e.t.Fatal(err)
	}
	return hdr, b.Bytes()
}

func describe(t *testing.T, p *Provider, cluster string) []providers.Member {
	t.Helper()
	ms, err := p.Describe(context.Background(), cluster)
	if err != nil {
		t.Fatalf("Describe(%s): %v", cluster, err)
	}
	return ms
}

func find(ms []providers.Member, name string) *providers.Member {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

// pemBody is the base64 body of a PEM block, without its armour.
func pemBody(b []byte) string {
	var body []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			body = append(body, l)
		}
	}
	return strings.Join(body, "")[:40]
}

func head(s []string, n int) []string {
	if len(s) > n {
		s = s[:n]
	}
	out := slices.Clone(s)
	for i := range out {
		if len(out[i]) > 40 {
			out[i] = out[i][:40] + "..."
		}
	}
	return out
}
