// Package local runs Dask schedulers and workers as child processes of the
// gateway, for development and single-machine use.
//
// Every member runs in its own process group (so that stopping it stops the
// nanny and its worker together) with its output in a per-member log file.
// A state file per member records the pid, the process start time and the
// marker placed in its environment, so that a restarted gateway can re-adopt
// members that outlived it, and never mistakes a recycled pid for one of its
// own.
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/internal/logtail"
	"github.com/gatewayhq/gateway/providers"
)

// Config configures the local backend.
type Config struct {
	// Dir holds one folder per cluster with its TLS files, logs and state.
	Dir string
	// Python is the interpreter that runs "python -m dask scheduler|worker"
	// when Command is empty.
	Python string
	// Command, when set, replaces "<Python> -m dask" (for example
	// "/opt/conda/bin/dask"); it is split on white space.
	Command string
	// Host is the address members bind to.
	Host string
	// Nanny runs each worker under a nanny process, which Dask needs for
	// client.restart(); it costs a second Python process per worker.
	Nanny bool
	// GatewayID is written into every member's environment as the
	// ownership marker.
	GatewayID string
	// StopGrace is how long a member gets to exit after SIGTERM before the
	// whole process group gets SIGKILL.
	StopGrace time.Duration
	// SchedulerMemory bounds each scheduler's memory (bytes; 0: no
	// bound), as the cluster options bound each worker's (see
	// memberLimit).
	SchedulerMemory int64
	Logger          *slog.Logger
}

// Name is the provider name this package registers under.
const Name = "local"

// Environment variables that mark a process as a member of this gateway.
const (
	envGateway = "GATEWAY_OWNER_ID"
	envMember  = "GATEWAY_MEMBER"
)

// Provider is the local backend.
type Provider struct {
	dashboardState
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	procs map[string]map[string]*proc // cluster -> member name -> process
	ends  providers.EndTimes          // when StopCluster saw each member end
}

type proc struct {
	Cluster    string         `json:"cluster"`
	Name       string         `json:"name"`
	Role       providers.Role `json:"role"`
	Owner      string         `json:"owner"`
	Pid        int            `json:"pid"`
	StartTicks uint64         `json:"start_ticks"`
	StartedAt  time.Time      `json:"started_at"`
	// StopAt is when the gateway first asked the member to stop (SIGTERM),
	// recorded before the signal: a gateway restarted after the member
	// ended unseen dates its end from it.
	StopAt time.Time `json:"stop_at,omitzero"`

	child    *exec.Cmd     // nil when adopted from an earlier gateway
	exited   chan struct{} // closed when a child has been reaped
	stopping bool          // the gateway asked it to stop
	// recordedTicks is StartTicks as its state file had it, for a record
	// that adopt found not ours (StartTicks is then 0): a process between
	// two execs shows no environment for a moment, and adoptUnrecorded
	// takes the record back when the same process shows its marker.
	recordedTicks uint64
}

// New makes the backend and re-adopts members left running by an earlier
// gateway process.
func New(cfg Config) (*Provider, error) {
	if cfg.Dir == "" {
		return nil, errors.New("local provider: no directory configured")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Python == "" && cfg.Command == "" {
		cfg.Python = "/usr/bin/python3"
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	exe := cfg.Python
	if cfg.Command != "" {
		exe = strings.Fields(cfg.Command)[0]
	}
	if _, err := exec.LookPath(exe); err != nil {
		return nil, fmt.Errorf("local provider: %q not found: install Dask (on Debian: apt-get install python3-distributed) or set providers.local.python / providers.local.command: %w", exe, err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	p := &Provider{cfg: cfg, log: cfg.Logger.With("provider", Name), procs: map[string]map[string]*proc{}}
	// Ends are saved beside the members' logs: nothing else is left of a
	// process once it has gone.
	p.ends.Dir = cfg.Dir
	p.adopt()
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// ListsImmediately implements providers.Immediate: members are listed from
// the provider's own state files, written when they start.
func (p *Provider) ListsImmediately() {}

func (p *Provider) clusterDir(cluster string) string { return filepath.Join(p.cfg.Dir, cluster) }

// logPath is where a member's output goes, and stays after it ended.
func (p *Provider) logPath(cluster, member string) string {
	return filepath.Join(p.clusterDir(cluster), member+".log")
}

func (p *Provider) command(sub string) []string {
	if p.cfg.Command != "" {
		return append(strings.Fields(p.cfg.Command), sub)
	}
	return []string{p.cfg.Python, "-m", "dask", sub}
}

// workerDashFile is where a worker's preload writes its HTTP server's port.
func (p *Provider) workerDashFile(cluster, worker string) string {
	return filepath.Join(p.clusterDir(cluster), worker+".dashboard-port")
}

// writePreload writes the gateway's member preload (images.BenchPreload)
// into the cluster's folder: every Dask version takes a preload's path.
func (p *Provider) writePreload(spec providers.ClusterSpec) (string, error) {
	path := filepath.Join(p.clusterDir(spec.Name), "gateway_preload.py")
	if err := os.WriteFile(path, []byte(images.BenchPreload), 0o600); err != nil {
		return "", fmt.Errorf("local provider: write the gateway's preload: %w", err)
	}
	return path, nil
}

func (p *Provider) writeTLS(spec providers.ClusterSpec) (cert, key string, err error) {
	dir := p.clusterDir(spec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("local provider: %w", err)
	}
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, spec.TLSCert, 0o600); err != nil {
		return "", "", fmt.Errorf("local provider: write certificate: %w", err)
	}
	if err := os.WriteFile(key, spec.TLSKey, 0o600); err != nil {
		return "", "", fmt.Errorf("local provider: write key: %w", err)
	}
	return cert, key, nil
}

// StartScheduler implements providers.Provider.
func (p *Provider) StartScheduler(ctx context.Context, spec providers.ClusterSpec) error {
	// A caller that gave up must not find a member started anyway.
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.running(spec.Name, "scheduler") {
		return nil
	}
	cert, key, err := p.writeTLS(spec)
	if err != nil {
		return err
	}
	preload, err := p.writePreload(spec)
	if err != nil {
		return err
	}
	schedFile := filepath.Join(p.clusterDir(spec.Name), "scheduler.json")
	_ = os.Remove(schedFile) // a stale file would report a dead address
	args := append(p.command("scheduler"),
		"--host", p.cfg.Host, "--port", "0", "--protocol", "tls",
		"--tls-ca-file", cert, "--tls-cert", cert, "--tls-key", key,
		"--dashboard-address", p.cfg.Host+":0",
		"--scheduler-file", schedFile, "--no-show",
		// As every backend's launcher does (images.LauncherScript).
		"--preload", preload)
	if spec.DashboardPrefix != "" {
		args = append(args, "--dashboard-prefix", spec.DashboardPrefix)
	}
	// The dashboard is served over TLS with the cluster's certificate, as
	// on every backend: the gateway verifies it (pki.MemberTLS), and
	// other local users cannot read it over plain HTTP.
	return p.spawn(ctx, spec, "scheduler", providers.RoleScheduler, args,
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT="+cert,
		"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY="+key)
}

// StartWorker implements providers.Provider.
func (p *Provider) StartWorker(ctx context.Context, spec providers.ClusterSpec, worker, schedulerAddress string) error {
	if worker == "" || worker == "scheduler" || strings.ContainsAny(worker, "/\\ ") {
		return fmt.Errorf("local provider: invalid worker name %q", worker)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.running(spec.Name, worker) {
		return nil
	}
	if schedulerAddress == "" {
		return errors.New("local provider: worker needs the scheduler address")
	}
	cert, key, err := p.writeTLS(spec)
	if err != nil {
		return err
	}
	preload, err := p.writePreload(spec)
	if err != nil {
		return err
	}
	threads := spec.WorkerThreads
	if threads <= 0 {
		threads = 1
	}
	args := append(p.command("worker"), "tls://"+schedulerAddress,
		"--host", p.cfg.Host,
		"--tls-ca-file", cert, "--tls-cert", cert, "--tls-key", key,
		"--nthreads", strconv.Itoa(threads), "--name", worker,
		// It closes the nanny's HTTP server, which answers anyone in
		// plain HTTP, as every backend's launcher does; the worker's it
		// guards as the scheduler's (below).
		"--preload", preload,
		// Spill space per worker inside the cluster's folder, not a /tmp
		// directory shared with every other user's workers.
		"--local-directory", filepath.Join(p.clusterDir(spec.Name), worker+"-space"),
		// A worker whose scheduler is gone exits by itself: no orphans
		// even if the gateway is not there to stop it.
		"--death-timeout", "60")
	if spec.WorkerMemory > 0 {
		args = append(args, "--memory-limit", strconv.FormatInt(spec.WorkerMemory, 10))
	}
	if p.cfg.Nanny {
		args = append(args, "--preload-nanny", preload)
	} else {
		args = append(args, "--no-nanny")
	}
	var env []string
	if spec.DashboardPrefix != "" && url.PathEscape(worker) == worker {
		// The worker's pages, through the gateway at
		// <prefix>/worker/<name>/ (proxy.WorkerPath; the preload serves
		// them there), over TLS with the cluster's certificate as the
		// scheduler's; the preload writes the port to dashFile, where
		// member reads it.
		dashFile := p.workerDashFile(spec.Name, worker)
		_ = os.Remove(dashFile) // a stale file would name a dead port
		args = append(args, "--dashboard", "--dashboard-address", p.cfg.Host+":0")
		env = append(env, "GATEWAY_WORKER_DASHBOARD_FILE="+dashFile,
			"GATEWAY_WORKER_DASHBOARD_PREFIX="+strings.TrimSuffix(spec.DashboardPrefix, "/")+"/worker/"+worker,
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT="+cert,
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY="+key)
	} else {
		args = append(args, "--no-dashboard")
	}
	return p.spawn(ctx, spec, worker, providers.RoleWorker, args, env...)
}

func (p *Provider) running(cluster, name string) bool {
	p.refresh(cluster)
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.procs[cluster][name]
	return pr != nil && !pr.stopping && pr.alive()
}

func (p *Provider) spawn(ctx context.Context, spec providers.ClusterSpec, name string, role providers.Role, args []string, env ...string) error {
	dir := p.clusterDir(spec.Name)
	logf, err := os.OpenFile(p.logPath(spec.Name, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("local provider: open log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd, err := startRetryingBusy(func() *exec.Cmd {
		c := exec.Command(args[0], args[1:]...)
		c.Dir = dir
		c.Stdout, c.Stderr = logf, logf
		// The owner's variables first: the gateway's, later, win.
		c.Env = append(append(childEnv(os.Environ(), p.cfg.GatewayID, spec.Name+"/"+name), providers.EnvList(spec.Env)...), env...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	})
	if err != nil {
		return fmt.Errorf("local provider: start %s of %s: %w", name, spec.Name, err)
	}
	if limit := p.memberLimit(spec, role); limit > 0 {
		if err := limitData(cmd.Process.Pid, limit); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			return fmt.Errorf("local provider: bound the memory of %s of %s: %w", name, spec.Name, err)
		}
	}
	pr := &proc{Cluster: spec.Name, Name: name, Role: role, Owner: spec.Owner, Pid: cmd.Process.Pid,
		StartedAt: time.Now(), child: cmd, exited: make(chan struct{})}
	pr.StartTicks, _ = startTicks(pr.Pid)
	go func() {
		_ = cmd.Wait() // reap, so no zombie is left
		close(pr.exited)
	}()
	if role == providers.RoleScheduler {
		crashpoint.Hit(ctx, pointSchedulerSpawned)
	} else {
		crashpoint.Hit(ctx, pointWorkerSpawned)
	}
	if err := p.writeState(pr); err != nil {
		p.killGroup(pr)
		return err
	}
	crashpoint.Hit(ctx, pointMemberRecorded)
	p.mu.Lock()
	if p.procs[spec.Name] == nil {
		p.procs[spec.Name] = map[string]*proc{}
	}
	p.procs[spec.Name][name] = pr
	p.mu.Unlock()
	p.log.Info("started member", "cluster", spec.Name, "member", name, "pid", pr.Pid)
	return nil
}

// memoryHeadroom is added to a member's memory for what its Python maps
// writable but does not use: a thread stack's 8 MiB each, the allocator's
// per-thread arenas, the interpreter and Dask's modules (a Dask worker
// starts at about 200 MiB of such mappings for 60 MiB resident).
const memoryHeadroom = 512 << 20

// memberLimit is the memory a member may map, in bytes (0: unbounded):
// a worker's from its machine or the cluster's worker_memory, the
// scheduler's from SchedulerMemory, plus memoryHeadroom.
func (p *Provider) memberLimit(spec providers.ClusterSpec, role providers.Role) int64 {
	m := spec.WorkerMemory
	if role == providers.RoleScheduler {
		m = p.cfg.SchedulerMemory
		if spec.Scheduler.MemoryGiB > 0 {
			m = providers.GiBBytes(spec.Scheduler.MemoryGiB)
		}
	} else if spec.Worker.MemoryGiB > 0 {
		m = providers.GiBBytes(spec.Worker.MemoryGiB)
	}
	if m <= 0 {
		return 0
	}
	return m + memoryHeadroom
}

// limitData sets a started member's RLIMIT_DATA (soft and hard, so that
// it cannot raise it), which its children (a nanny's worker, user code's
// processes) inherit. The kernel counts every private writable mapping
// against it, anonymous mmap included (Linux 4.7 and later), so malloc
// and NumPy's large buffers fail with MemoryError at the limit instead of
// the host running out; RLIMIT_AS would also count the address space
// Python reserves and never touches, and RLIMIT_RSS is not enforced. The
// member has only exec'd its interpreter when this runs: Dask, and any
// user code, come after.
func limitData(pid int, limit int64) error {
	l := unix.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &l, nil)
}

// startRetryingBusy starts the command build makes, retrying briefly on
// ETXTBSY: an executable that was just written (an upgrade, a generated
// wrapper) can be held open for writing by a process forked at that moment,
// until that process execs.
func startRetryingBusy(build func() *exec.Cmd) (*exec.Cmd, error) {
	for attempt := 1; ; attempt++ {
		cmd := build()
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 5 {
			return cmd, err
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}

// childEnv passes the gateway's environment on, minus its own settings
// (which may carry secrets such as a database password), plus the marker.
func childEnv(parent []string, gatewayID, member string) []string {
	env := make([]string, 0, len(parent)+3)
	for _, kv := range parent {
		if strings.HasPrefix(kv, "GATEWAY_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, envGateway+"="+gatewayID, envMember+"="+member, "PYTHONUNBUFFERED=1")
}

func (p *Provider) statePath(pr *proc) string {
	return filepath.Join(p.clusterDir(pr.Cluster), pr.Name+".proc")
}

func (p *Provider) writeState(pr *proc) error {
	b, err := json.Marshal(pr)
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	tmp := p.statePath(pr) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("local provider: write state: %w", err)
	}
	if err := os.Rename(tmp, p.statePath(pr)); err != nil {
		return fmt.Errorf("local provider: write state: %w", err)
	}
	return nil
}

// alive reports whether the process is still the one that was started.
func (pr *proc) alive() bool {
	if pr.child != nil {
		select {
		case <-pr.exited:
			return false
		default:
			return true
		}
	}
	ticks, err := startTicks(pr.Pid)
	return err == nil && ticks == pr.StartTicks
}

// startTicks reads a process's start time (clock ticks since boot) from
// /proc; with the pid it identifies a process for good. A zombie counts as
// gone.
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, errors.New("process exited")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

func hasMarker(pid int, gatewayID, member string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	var gw, mem bool
	for _, kv := range bytes.Split(b, []byte{0}) {
		switch string(kv) {
		case envGateway + "=" + gatewayID:
			gw = true
		case envMember + "=" + member:
			mem = true
		}
	}
	return gw && mem
}

// readState reads one member's state file.
func readState(path string) (proc, error) {
	var pr proc
	b, err := os.ReadFile(path)
	if err != nil {
		return pr, err
	}
	if err := json.Unmarshal(b, &pr); err != nil {
		return pr, err
	}
	if pr.Cluster == "" || pr.Name == "" {
		return pr, errors.New("state names no member")
	}
	return pr, nil
}

// ours reports whether a recorded member still runs as the process that was
// recorded, and carries this gateway's marker for it.
func (p *Provider) ours(pr *proc) bool {
	return pr.alive() && hasMarker(pr.Pid, p.cfg.GatewayID, pr.Cluster+"/"+pr.Name)
}

// adopt loads the state files of members started by an earlier gateway
// process. Live ones are adopted; dead ones are kept as stopped so that
// Describe reports them and their logs.
func (p *Provider) adopt() {
	files, _ := filepath.Glob(filepath.Join(p.cfg.Dir, "*", "*.proc"))
	for _, f := range files {
		pr, err := readState(f)
		if err != nil {
			p.log.Warn("ignoring unreadable member state", "file", f)
			continue
		}
		ok := p.ours(&pr)
		if !ok {
			// Never matches again: the pid may be recycled.
			pr.recordedTicks, pr.StartTicks = pr.StartTicks, 0
		}
		if p.procs[pr.Cluster] == nil {
			p.procs[pr.Cluster] = map[string]*proc{}
		}
		p.procs[pr.Cluster][pr.Name] = &pr
		p.log.Info("found member from an earlier run", "cluster", pr.Cluster, "member", pr.Name, "pid", pr.Pid, "alive", ok)
	}
	p.adoptUnrecorded()
}

// adoptUnrecorded finds live members that have no state file: a gateway
// killed between starting a process and recording it. Their environment
// marker says whose they are; only process group leaders are members (a
// nanny's worker carries the marker too, inside its member's group).
// Without this, such a process would run on unseen and a second one would
// be started in its place.
func (p *Provider) adoptUnrecorded() {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	prefix := []byte(envMember + "=")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pgid(pid) != pid {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		var member string
		ours := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == envGateway+"="+p.cfg.GatewayID {
				ours = true
			} else if bytes.HasPrefix(kv, prefix) {
				member = string(kv[len(prefix):])
			}
		}
		cluster, name, ok := strings.Cut(member, "/")
		if !ours || !ok || cluster == "" || name == "" {
			continue
		}
		known := p.procs[cluster][name]
		if known != nil && known.Pid == pid && known.alive() {
			continue
		}
		ticks, err := startTicks(pid)
		if err != nil {
			continue
		}
		if known != nil && known.Pid == pid && known.StartTicks == 0 && known.recordedTicks == ticks {
			// The recorded process after all (its marker was unreadable when
			// adopt looked): its record keeps its owner and start time.
			known.StartTicks, known.recordedTicks = ticks, 0
			p.log.Info("found member from an earlier run", "cluster", cluster, "member", name, "pid", pid, "alive", true)
			continue
		}
		role := providers.RoleWorker
		if name == "scheduler" {
			role = providers.RoleScheduler
		}
		pr := &proc{Cluster: cluster, Name: name, Role: role, Pid: pid, StartTicks: ticks, StartedAt: time.Now()}
		if p.procs[cluster] == nil {
			p.procs[cluster] = map[string]*proc{}
		}
		p.procs[cluster][name] = pr
		if err := os.MkdirAll(p.clusterDir(cluster), 0o700); err == nil {
			_ = p.writeState(pr)
		}
		p.log.Warn("adopted a member that was never recorded (the gateway stopped while starting it)", "cluster", cluster, "member", name, "pid", pid)
	}
}

// refresh picks up members of the cluster recorded by another gateway
// process sharing this directory (a replica that started them, then died or
// handed the cluster over), so that any replica can describe and stop them.
func (p *Provider) refresh(cluster string) {
	files, _ := filepath.Glob(filepath.Join(p.clusterDir(cluster), "*.proc"))
	for _, f := range files {
		pr, err := readState(f)
		if err != nil || pr.Cluster != cluster {
			continue
		}
		p.mu.Lock()
		known := p.procs[cluster][pr.Name]
		p.mu.Unlock()
		if known != nil && (known.Pid == pr.Pid || known.alive()) {
			continue
		}
		if !p.ours(&pr) {
			continue // a stale record: leave it to whoever stops the cluster
		}
		p.mu.Lock()
		if p.procs[cluster] == nil {
			p.procs[cluster] = map[string]*proc{}
		}
		p.procs[cluster][pr.Name] = &pr
		p.mu.Unlock()
		p.log.Info("picked up a member started by another gateway process", "cluster", cluster, "member", pr.Name, "pid", pr.Pid)
	}
}

// Describe implements providers.Provider.
func (p *Provider) Describe(ctx context.Context, cluster string) ([]providers.Member, error) {
	p.refresh(cluster)
	p.mu.Lock()
	procs := make([]*proc, 0, len(p.procs[cluster]))
	for _, pr := range p.procs[cluster] {
		procs = append(procs, pr)
	}
	p.mu.Unlock()
	out := make([]providers.Member, 0, len(procs))
	for _, pr := range procs {
		out = append(out, p.member(pr))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *Provider) member(pr *proc) providers.Member {
	m := providers.Member{Cluster: pr.Cluster, Name: pr.Name, Role: pr.Role, Owner: pr.Owner, StartedAt: pr.StartedAt, State: providers.StatePending}
	if !pr.alive() {
		m.State = providers.StateStopped
		if !pr.stopping {
			m.Reason = p.exitReason(pr)
		}
		return m
	}
	if pr.Role == providers.RoleWorker {
		m.State = providers.StateRunning
		m.DashboardURL = readWorkerDashboard(p.workerDashFile(pr.Cluster, pr.Name), p.cfg.Host)
		return m
	}
	addr, dash, err := readSchedulerFile(filepath.Join(p.clusterDir(pr.Cluster), "scheduler.json"), p.cfg.Host)
	var refused *refusedAddress
	switch {
	case errors.As(err, &refused):
		// Not routed to: the cluster fails with the reason, and
		// stopping it ends the process.
		m.State, m.Reason = providers.StateStopped, refused.Error()
	case err == nil:
		m.State, m.Address, m.DashboardURL = providers.StateRunning, addr, dash
	}
	return m
}

// refusedAddress is a scheduler file naming an address the gateway does
// not route to.
type refusedAddress struct{ addr, host string }

func (e *refusedAddress) Error() string {
	return fmt.Sprintf("the scheduler reported the address %s, which is not on %s (providers.local.host) where members bind: the gateway routes nothing to it", e.addr, e.host)
}

func (p *Provider) exitReason(pr *proc) string {
	msg := fmt.Sprintf("%s exited", pr.Name)
	if pr.child != nil && pr.child.ProcessState != nil {
		msg = fmt.Sprintf("%s exited (%s)", pr.Name, pr.child.ProcessState.String())
	}
	if tail := tailFile(p.logPath(pr.Cluster, pr.Name), 15); tail != "" {
		msg += "; last lines of its log:\n" + tail
	}
	return msg
}

// routeHost is where the gateway reaches members bound on host: loopback
// for a wildcard host; ip is host's IP, nil for a name.
func routeHost(host string) (route string, ip net.IP) {
	route = strings.Trim(host, "[]")
	if ip = net.ParseIP(route); ip != nil && ip.IsUnspecified() {
		if ip.To4() == nil {
			return "::1", ip
		}
		return "127.0.0.1", ip
	}
	return route, ip
}

// readWorkerDashboard reads the port the preload wrote for a worker's
// HTTP server (see StartWorker): its URL on Host, "" while not written.
// The worker runs users' code, which may write any port: the gateway
// still reaches only Host, and only a server presenting the cluster's
// certificate (pki.MemberTLS).
func readWorkerDashboard(path, host string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || port < 1 || port > 65535 {
		return ""
	}
	route, _ := routeHost(host)
	return "https://" + net.JoinHostPort(route, strconv.Itoa(port))
}

func readSchedulerFile(path, host string) (addr, dashboard string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var f struct {
		Address  string         `json:"address"`
		Services map[string]int `json:"services"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", "", err // written but not complete yet
	}
	addr = strings.TrimPrefix(f.Address, "tls://")
	if addr == "" || addr == f.Address {
		return "", "", fmt.Errorf("scheduler file has no tls address: %q", f.Address)
	}
	// The scheduler runs users' code, which can rewrite the file: the
	// gateway routes only to Host (loopback when Host is a wildcard),
	// never to a host the file names.
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("scheduler file address %q: %w", f.Address, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("scheduler file address %q: port out of range", f.Address)
	}
	route, ip := routeHost(host)
	if (ip == nil || !ip.IsUnspecified()) && !sameHost(h, route, ip) {
		return "", "", &refusedAddress{addr: f.Address, host: host}
	}
	addr = net.JoinHostPort(route, port)
	if port := f.Services["dashboard"]; port > 0 {
		if port > 65535 {
			return "", "", fmt.Errorf("scheduler file dashboard port %d out of range", port)
		}
		dashboard = "https://" + net.JoinHostPort(route, strconv.Itoa(port)) // see StartScheduler
	}
	return addr, dashboard, nil
}

// sameHost reports whether the host a scheduler wrote is host, whose IP
// is ip (nil for a name, whose addresses are looked up).
func sameHost(written, host string, ip net.IP) bool {
	wip := net.ParseIP(written)
	if written == host || (wip != nil && ip != nil && wip.Equal(ip)) {
		return true
	}
	if ip != nil || wip == nil {
		return false
	}
	addrs, err := net.LookupHost(host)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if aip := net.ParseIP(a); aip != nil && aip.Equal(wip) {
			return true
		}
	}
	return false
}

// List implements providers.Provider.
func (p *Provider) List(ctx context.Context) ([]providers.Member, error) {
	p.mu.Lock()
	var procs []*proc
	for _, m := range p.procs {
		for _, pr := range m {
			procs = append(procs, pr)
		}
	}
	p.mu.Unlock()
	out := make([]providers.Member, 0, len(procs))
	for _, pr := range procs {
		out = append(out, p.member(pr))
	}
	return out, nil
}

// ListMembers reports every member this process runs or re-adopted, each
// as Describe reports it, in one call: the scheduling core's sweep uses it
// instead of a Describe per running cluster. It reads no state files: a
// cluster's members are only started by the replica holding its lease,
// whose Describe (at its first pass) picked up any left by another.
func (p *Provider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	return p.List(ctx)
}

// StopWorker implements providers.Provider.
func (p *Provider) StopWorker(ctx context.Context, cluster, worker string) error {
	p.refresh(cluster)
	p.mu.Lock()
	pr := p.procs[cluster][worker]
	if pr != nil {
		pr.stopping = true
	}
	p.mu.Unlock()
	if pr == nil {
		return nil
	}
	p.stop(ctx, pr)
	crashpoint.Hit(ctx, pointWorkerStopped)
	p.mu.Lock()
	delete(p.procs[cluster], worker)
	p.mu.Unlock()
	_ = os.Remove(p.statePath(pr))
	return nil
}

// StopCluster implements providers.Provider.
func (p *Provider) StopCluster(ctx context.Context, cluster string) error {
	p.refresh(cluster)
	p.mu.Lock()
	members := p.procs[cluster]
	for _, pr := range members {
		pr.stopping = true
	}
	p.mu.Unlock()
	// Workers first, while their scheduler can still release them: a worker
	// whose scheduler is already gone waits to reconnect instead of exiting.
	var workers []*proc
	var sched *proc
	for _, pr := range members {
		if pr.Role == providers.RoleScheduler {
			sched = pr
		} else {
			workers = append(workers, pr)
		}
	}
	var wg sync.WaitGroup
	for _, pr := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.ends.Note(pr.Cluster, pr.Name, p.stop(ctx, pr))
		}()
	}
	wg.Wait()
	if len(workers) > 0 {
		crashpoint.Hit(ctx, pointClusterWorkersStopped)
	}
	if sched != nil {
		p.ends.Note(sched.Cluster, sched.Name, p.stop(ctx, sched))
	}
	if len(members) > 0 {
		crashpoint.Hit(ctx, pointClusterStopped)
	}
	p.mu.Lock()
	delete(p.procs, cluster)
	p.mu.Unlock()
	dir := p.clusterDir(cluster)
	files, _ := filepath.Glob(filepath.Join(dir, "*.proc"))
	for _, f := range files {
		_ = os.Remove(f)
	}
	// The key is only needed while members run; logs stay for `gateway logs`.
	for _, f := range []string{"tls.key", "tls.crt", "scheduler.json"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	spaces, _ := filepath.Glob(filepath.Join(dir, "*-space"))
	for _, s := range spaces {
		_ = os.RemoveAll(s)
	}
	return nil
}

// stop sends SIGTERM to the member's process group, waits for the member to
// exit, and SIGKILLs the group when the grace period runs out. It returns
// when the member ended.
func (p *Provider) stop(ctx context.Context, pr *proc) time.Time {
	if !pr.alive() {
		p.killGroupQuietly(pr) // a nanny's children may outlive it
		return p.unseenEnd(pr)
	}
	p.mu.Lock()
	first := pr.StopAt.IsZero()
	if first {
		pr.StopAt = time.Now()
	}
	p.mu.Unlock()
	if first {
		// Before the signal: a gateway killed from here on finds, once
		// restarted, when the member was asked to end.
		if err := p.writeState(pr); err != nil {
			p.log.Warn("cannot record a member's stop", "cluster", pr.Cluster, "member", pr.Name, "err", err)
		}
	}
	_ = syscall.Kill(-pr.Pid, syscall.SIGTERM)
	crashpoint.Hit(ctx, pointMemberSignalled)
	deadline := time.NewTimer(p.cfg.StopGrace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for pr.alive() {
		select {
		case <-deadline.C:
			p.log.Warn("member did not exit after SIGTERM; killing it", "cluster", pr.Cluster, "member", pr.Name, "grace", p.cfg.StopGrace)
			p.killGroup(pr)
			return time.Now()
		case <-ctx.Done():
			p.killGroup(pr)
			return time.Now()
		case <-pr.exitedChan():
		case <-tick.C:
		}
	}
	end := time.Now()
	p.killGroupQuietly(pr)
	return end
}

// unseenEnd dates the end of a member found already gone, whose exit this
// process did not watch. An earlier gateway process that watched it saved
// the time. Otherwise, if a gateway asked it to stop and then died, it
// ended between that request and now, and a Dask process that obeys
// SIGTERM logs its shutdown until its last moment: the later of the two
// is the estimate. A member that ended unasked while no gateway watched
// is dated now, as the scheduling core dates a member it finds gone.
func (p *Provider) unseenEnd(pr *proc) time.Time {
	if t, ok := p.ends.Saved(pr.Cluster, pr.Name); ok {
		return t
	}
	p.mu.Lock()
	end := pr.StopAt
	p.mu.Unlock()
	now := time.Now()
	if end.IsZero() || end.After(now) {
		return now
	}
	if fi, err := os.Stat(p.logPath(pr.Cluster, pr.Name)); err == nil && fi.ModTime().After(end) {
		end = fi.ModTime()
	}
	if end.After(now) {
		return now
	}
	return end
}

// StoppedAt implements providers.StopTimes.
func (p *Provider) StoppedAt(cluster, member string) (time.Time, bool) {
	return p.ends.StoppedAt(cluster, member)
}

func (pr *proc) exitedChan() <-chan struct{} {
	if pr.exited != nil {
		return pr.exited
	}
	return nil
}

func (p *Provider) killGroup(pr *proc) {
	_ = syscall.Kill(-pr.Pid, syscall.SIGKILL)
	if pr.child != nil {
		select {
		case <-pr.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// killGroupQuietly removes stragglers of a group whose leader has exited.
// With the leader gone the group id may already belong to an unrelated
// process group, so it never signals the group as such: it kills only the
// processes of that group that carry this member's marker.
func (p *Provider) killGroupQuietly(pr *proc) {
	member := pr.Cluster + "/" + pr.Name
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pgid(pid) != pr.Pid || !hasMarker(pid, p.cfg.GatewayID, member) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// pgid reads a process's group id from /proc, or -1.
func pgid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 3 {
		return -1
	}
	g, err := strconv.Atoi(fields[2])
	if err != nil {
		return -1
	}
	return g
}

// Close implements providers.Closer. With leave=false every member is
// stopped; with leave=true members keep running for a later gateway to
// re-adopt.
func (p *Provider) Close(ctx context.Context, leave bool) error {
	if leave {
		return nil
	}
	p.mu.Lock()
	clusters := make([]string, 0, len(p.procs))
	for c := range p.procs {
		clusters = append(clusters, c)
	}
	p.mu.Unlock()
	for _, c := range clusters {
		if err := p.StopCluster(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// Logs implements providers.LogReader.
func (p *Provider) Logs(ctx context.Context, cluster string, tail int, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(p.clusterDir(cluster), "*.log"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("local provider: no logs for cluster %s: %w", cluster, providers.ErrNotFound)
	}
	sort.Slice(files, func(i, j int) bool { // scheduler first, then workers in order
		a, b := filepath.Base(files[i]), filepath.Base(files[j])
		if (a == "scheduler.log") != (b == "scheduler.log") {
			return a == "scheduler.log"
		}
		return a < b
	})
	for _, f := range files {
		member := strings.TrimSuffix(filepath.Base(f), ".log")
		// Logs grow with whatever user code prints: never read more than
		// the end of each file.
		text, cut := logtail.ReadEnd(f, maxLogBytes)
		if cut {
			if _, err := fmt.Fprintf(w, "[%s] (earlier lines omitted: only the last %d MiB are shown)\n", member, maxLogBytes>>20); err != nil {
				return err
			}
		}
		for _, line := range logtail.LastLines(text, tail) {
			if line == "" {
				continue
			}
			if _, err := fmt.Fprintf(w, "[%s] %s\n", member, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxLogBytes is how much of each member's log Logs reads, from the end.
const maxLogBytes = 4 << 20

// tailFile returns the last n lines of a file, reading at most 64 KiB.
func tailFile(path string, n int) string {
	text, _ := logtail.ReadEnd(path, 64<<10)
	return strings.Join(logtail.LastLines(text, n), "\n")
}
