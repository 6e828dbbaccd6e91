package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
)

// leftoverAge is how long a container may stay "created" before it is
// taken for the leftover of a gateway that died between creating and
// starting it (rather than a start under way in another gateway process).
const leftoverAge = time.Minute

// cleanupTimeout bounds the removal of a half-started container once the
// caller's context is gone.
const cleanupTimeout = 30 * time.Second

// memberPids bounds the processes and threads of one member.
const memberPids = 4096

// StartScheduler implements providers.Provider.
func (p *Provider) StartScheduler(ctx context.Context, spec providers.ClusterSpec) error {
	// A caller that gave up must not find a member started anyway.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkCluster(spec.Name); err != nil {
		return err
	}
	// With a network of its own the scheduler listens on fixed ports on
	// its interface there; on the host's network it binds Host, with ports
	// chosen at start.
	listen := []string{"--host", p.cfg.Host, "--port", "0"}
	dashboard := joinHostPort(p.cfg.Host, "0")
	mode := p.cfg.Network
	if mode == NetworkCluster {
		listen = []string{"--host", schedulerAlias, "--port", strconv.Itoa(schedulerPort)}
		dashboard = ":" + strconv.Itoa(dashboardPort)
	}
	args := append(listen, "--protocol", "tls",
		"--tls-ca-file", certPath, "--tls-cert", certPath, "--tls-key", keyPath,
		"--dashboard-address", dashboard,
		"--scheduler-file", schedulerFile, "--no-show",
	)
	if spec.DashboardPrefix != "" {
		args = append(args, "--dashboard-prefix", spec.DashboardPrefix)
	}
	return p.startIn(ctx, mode, spec, "scheduler", providers.RoleScheduler, args)
}

// StartWorker implements providers.Provider.
func (p *Provider) StartWorker(ctx context.Context, spec providers.ClusterSpec, worker, schedulerAddress string) error {
	if err := checkWorker(worker); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkCluster(spec.Name); err != nil {
		return err
	}
	if schedulerAddress == "" {
		return errors.New("docker provider: worker needs the scheduler address")
	}
	threads := spec.WorkerThreads
	if threads <= 0 {
		threads = 1
	}
	// On the cluster's network workers reach the scheduler by its alias
	// there (schedulerAddress is where the gateway reaches it), and bind
	// their own host name, which is their address on it: the one they
	// advertise to the others.
	mode := p.clusterNetwork(ctx, spec.Name)
	args := []string{"tls://" + schedulerAddress, "--host", p.cfg.Host}
	if mode == NetworkCluster {
		args = []string{"tls://" + joinHostPort(schedulerAlias, strconv.Itoa(schedulerPort)), "--host", workerHostname}
	}
	args = append(args,
		"--tls-ca-file", certPath, "--tls-cert", certPath, "--tls-key", keyPath,
		"--nthreads", strconv.Itoa(threads), "--name", worker,
		"--no-dashboard",
		"--local-directory", spaceDir,
		// A worker whose scheduler is gone exits by itself: no orphans
		// even if the gateway is not there to stop it.
		"--death-timeout", "60",
	)
	if spec.WorkerMemory > 0 {
		args = append(args, "--memory-limit", strconv.FormatInt(spec.WorkerMemory, 10))
	}
	// The container is the unit the engine supervises: a nanny process
	// would only double the Python processes per worker.
	args = append(args, "--no-nanny")
	return p.startIn(ctx, mode, spec, worker, providers.RoleWorker, args)
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// start creates and starts the member's container, or does nothing if it
// runs. A container of that name that is not running is replaced: a
// "created" one is the leftover of a crash, an exited one is restarted
// afresh (its log saved first).
func (p *Provider) start(ctx context.Context, spec providers.ClusterSpec, member string, role providers.Role, daskArgs []string) error {
	return p.startIn(ctx, p.cfg.Network, spec, member, role, daskArgs)
}

// startIn is start with the cluster's networking mode (NetworkCluster or
// NetworkHost).
func (p *Provider) startIn(ctx context.Context, mode string, spec providers.ClusterSpec, member string, role providers.Role, daskArgs []string) error {
	img := spec.Image
	if img == "" {
		img = p.cfg.Image
	}
	if img == "" {
		return errors.New("docker provider: no image: set providers.docker.image, or name one for the cluster (--image)")
	}
	if images.LooksLikeImageID(img) {
		// The engine would resolve it against every image it holds,
		// whoever built it: only references reach containers.
		return fmt.Errorf("docker provider: image %q looks like an image ID; name it by repository and tag", img)
	}
	if len(spec.TLSCert) == 0 || len(spec.TLSKey) == 0 {
		return fmt.Errorf("docker provider: cluster %s has no TLS certificate and key", spec.Name)
	}
	if mode == NetworkCluster {
		if err := p.ensureNetwork(ctx, spec); err != nil {
			return err
		}
	}
	key := memberKey(spec.Name, member)
	unlock, err := p.locks.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	name := containerName(p.cfg.GatewayID, spec.Name, member)

	insp, err := p.cli.ContainerInspect(ctx, name)
	switch {
	case err == nil:
		if !p.owns(insp.Config.Labels, spec.Name, member) {
			return fmt.Errorf("docker provider: the container name %s is taken by a container this gateway did not make for %s of %s", name, member, spec.Name)
		}
		switch insp.State.Status {
		case "running", "paused", "restarting":
			return nil
		case "created":
			p.log.Warn("removing a container that was created but never started (the gateway stopped while starting it)", "cluster", spec.Name, "member", member, "container", name)
		default:
			p.log.Info("replacing an exited container", "cluster", spec.Name, "member", member, "container", name, "status", insp.State.Status, "exit", insp.State.ExitCode)
			p.saveLog(ctx, spec.Name, member, insp.ID)
		}
		if err := p.cli.ContainerRemove(ctx, insp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker provider: remove old container %s: %w", name, err)
		}
		p.forget(insp.ID)
	case cerrdefs.IsNotFound(err):
	default:
		return fmt.Errorf("docker provider: inspect %s: %w", name, err)
	}

	p.setStarting(key, true)
	defer p.setStarting(key, false)
	cfg, hostCfg := p.containerConfigIn(mode, spec, member, role, img, daskArgs)
	id, err := p.create(ctx, cfg, hostCfg, p.networkingConfigIn(mode, spec, role), name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			// Another gateway process created it between our inspect and
			// create: that process is starting the member.
			p.log.Info("member's container was created concurrently", "cluster", spec.Name, "member", member, "container", name)
			return nil
		}
		return fmt.Errorf("docker provider: create %s of %s: %w", member, spec.Name, err)
	}
	if err := p.provision(ctx, id, spec, member, role); err != nil {
		p.discard(id, name)
		return err
	}
	p.log.Info("started member", "cluster", spec.Name, "member", member, "container", name, "image", img)
	return nil
}

// create makes the container, pulling the image first when the engine does
// not have it (as `docker run` would).
func (p *Provider) create(ctx context.Context, cfg *container.Config, hostCfg *container.HostConfig, netCfg *network.NetworkingConfig, name string) (string, error) {
	resp, err := p.cli.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, name)
	if err == nil {
		return resp.ID, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", err
	}
	p.log.Info("pulling image", "image", cfg.Image)
	if perr := p.pull(ctx, cfg.Image); perr != nil {
		// The user sees a summary: the registry's own answer is not
		// repeated to them.
		p.log.Warn("pulling image failed", "image", cfg.Image, "err", perr)
		return "", fmt.Errorf("image %s is not on the engine, and pulling it failed: %s (pull or build it on the engine first)", cfg.Image, images.SummarizePullError(perr.Error()))
	}
	resp, err = p.cli.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, name)
	if err != nil {
		return "", err
	}
	return resp.ID, nil
}

// pull pulls an image; the engine reports failures inside the progress
// stream, not as the call's status.
func (p *Provider) pull(ctx context.Context, ref string) error {
	var opts image.PullOptions
	if p.cfg.PullAuth != nil {
		enc, err := p.cfg.PullAuth(ctx, ref)
		if err != nil {
			return fmt.Errorf("registry credentials: %w", err)
		}
		opts.RegistryAuth = enc
	}
	rc, err := p.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return err
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// provision copies the TLS files into a created container and starts it.
func (p *Provider) provision(ctx context.Context, id string, spec providers.ClusterSpec, member string, role providers.Role) error {
	archive, err := tlsArchive(spec.TLSCert, spec.TLSKey)
	if err != nil {
		return err
	}
	// CopyUIDGID makes the files the image user's, so that a non-root
	// image can read its key and write the scheduler file next to it.
	if err := p.cli.CopyToContainer(ctx, id, "/", archive, container.CopyToContainerOptions{CopyUIDGID: true}); err != nil {
		return fmt.Errorf("docker provider: copy TLS files into %s of %s: %w", member, spec.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		if machine(spec, role).GPUs > 0 && strings.Contains(err.Error(), "device driver") {
			return fmt.Errorf("docker provider: start %s of %s: this engine cannot give containers GPUs (install the NVIDIA Container Toolkit on it): %w: %w", member, spec.Name, providers.ErrUnsupported, err)
		}
		return fmt.Errorf("docker provider: start %s of %s: %w", member, spec.Name, err)
	}
	return nil
}

// discard removes a container whose start failed or was abandoned, with a
// context of its own: the caller's may be the reason it failed.
func (p *Provider) discard(id, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		p.log.Warn("could not remove a container whose start failed", "container", name, "err", err)
	}
}

// tlsArchive is the tar stream CopyToContainer extracts at "/": the
// cluster's certificate and key in /run/gateway.
func tlsArchive(cert, key []byte) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := strings.TrimPrefix(tlsDir, "/") + "/"
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o700, ModTime: now}); err != nil {
		return nil, fmt.Errorf("docker provider: TLS archive: %w", err)
	}
	for _, f := range []struct {
		path string
		mode int64
		data []byte
	}{{certPath, 0o644, cert}, {keyPath, 0o600, key}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Size: int64(len(f.data)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("docker provider: TLS archive: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("docker provider: TLS archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("docker provider: TLS archive: %w", err)
	}
	return &buf, nil
}

// machine is the member's machine in the spec.
func machine(spec providers.ClusterSpec, role providers.Role) providers.Machine {
	if role == providers.RoleScheduler {
		return spec.Scheduler
	}
	return spec.Worker
}

// containerConfig is the container a member runs in. The launcher is the
// entrypoint (whatever the image's own is) so that the member checks the
// image's software against the client's before Dask starts.
func (p *Provider) containerConfig(spec providers.ClusterSpec, member string, role providers.Role, img string, daskArgs []string) (*container.Config, *container.HostConfig) {
	return p.containerConfigIn(p.cfg.Network, spec, member, role, img, daskArgs)
}

// containerConfigIn is containerConfig with the cluster's networking mode
// (NetworkCluster or NetworkHost).
func (p *Provider) containerConfigIn(mode string, spec providers.ClusterSpec, member string, role providers.Role, img string, daskArgs []string) (*container.Config, *container.HostConfig) {
	// The owner's variables first: the gateway's, later, win.
	env := append(providers.EnvList(spec.Env), "PYTHONUNBUFFERED=1")
	if role == providers.RoleScheduler {
		// The dashboard is served over TLS with the cluster's certificate,
		// which the gateway verifies (pki.MemberTLS): nothing but that
		// cluster's scheduler can answer for it, and nothing on the way
		// reads it. Paths, not the key, are in the environment.
		env = append(env, "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT="+certPath,
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY="+keyPath)
	}
	if spec.EnvExpect != "" {
		env = append(env, images.ExpectEnv+"="+spec.EnvExpect)
	}
	grace := stopSeconds(p.cfg.StopGrace)
	cfg := &container.Config{
		Image:      img,
		Entrypoint: images.LauncherCommand(p.cfg.Python, append([]string{string(role)}, daskArgs...)...),
		Cmd:        nil,
		Env:        env,
		Labels:     p.labels(spec, member, role),
		// SIGTERM whatever the image says: Dask closes gracefully on it.
		StopSignal:  "SIGTERM",
		StopTimeout: &grace,
	}
	m := machine(spec, role)
	res := container.Resources{}
	if m.VCPUs > 0 {
		res.NanoCPUs = int64(math.Round(m.VCPUs * 1e9))
	}
	// Every member is bounded, so that one that grows (a big graph on the
	// scheduler, a task on a worker) is killed by the engine, not the host:
	// by its machine, else the options' worker memory or SchedulerMemory.
	switch {
	case m.MemoryGiB > 0:
		res.Memory = providers.GiBBytes(m.MemoryGiB)
	case role == providers.RoleScheduler:
		res.Memory = p.cfg.SchedulerMemory
	default:
		res.Memory = spec.WorkerMemory
	}
	if res.Memory > 0 {
		// No swap beyond the limit: Dask sizes its spilling to the limit,
		// and a swapping worker is slower than one that spills.
		res.MemorySwap = res.Memory
	}
	// Bounds a fork bomb in user code to its own container.
	pids := int64(memberPids)
	res.PidsLimit = &pids
	if m.GPUs > 0 {
		res.DeviceRequests = []container.DeviceRequest{{Driver: "nvidia", Count: m.GPUs, Capabilities: [][]string{{"gpu"}}}}
	}
	netMode := container.NetworkMode(NetworkHost)
	var ports nat.PortMap
	if mode == NetworkCluster {
		netMode = container.NetworkMode(networkName(p.cfg.GatewayID, spec.Name))
		// The engine maps a container's host name to its address on the
		// network (/etc/hosts): what Dask binds and advertises.
		cfg.Hostname = workerHostname
		if role == providers.RoleScheduler {
			cfg.Hostname = schedulerAlias
		}
		if role == providers.RoleScheduler {
			// Published on Host only, at ports the engine picks: the
			// gateway's door to the scheduler, which it reads back from
			// the engine (never from the member).
			ports = nat.PortMap{}
			cfg.ExposedPorts = nat.PortSet{}
			for _, port := range []int{schedulerPort, dashboardPort} {
				cp := nat.Port(strconv.Itoa(port) + "/tcp")
				ports[cp] = []nat.PortBinding{{HostIP: p.cfg.Host}}
				cfg.ExposedPorts[cp] = struct{}{}
			}
		}
	}
	init := true
	hostCfg := &container.HostConfig{
		NetworkMode:  netMode,
		PortBindings: ports,
		// tini as PID 1 passes SIGTERM on to Python (which, as PID 1,
		// would ignore it) and reaps whatever user code forks.
		Init: &init,
		// Kept after exiting, for the exit status and log that explain it.
		AutoRemove:    false,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Resources:     res,
		// The provider reads members' logs back (exit reasons, `gateway
		// logs`): a driver that can be read, rotated so that a chatty
		// member cannot fill the engine's disk.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "16m", "max-file": "2"}},
		// Members run user code, and nothing in Dask needs to gain
		// privileges (setuid binaries).
		SecurityOpt: []string{"no-new-privileges"},
		// Dask needs no capability: without them, root in a member cannot
		// open raw sockets on the host's network, change file ownership
		// or bind ports below 1024.
		CapDrop: []string{"ALL"},
	}
	return cfg, hostCfg
}

// clusterNetwork is how a cluster's members are networked: as its
// scheduler is, when it has one (a cluster started before
// providers.docker.network changed keeps its way), else as configured.
func (p *Provider) clusterNetwork(ctx context.Context, cluster string) string {
	insp, err := p.cli.ContainerInspect(ctx, containerName(p.cfg.GatewayID, cluster, "scheduler"))
	if err != nil || insp.HostConfig == nil || !p.owns(insp.Config.Labels, cluster, "scheduler") {
		return p.cfg.Network
	}
	switch {
	case insp.HostConfig.NetworkMode.IsHost():
		return NetworkHost
	case string(insp.HostConfig.NetworkMode) == networkName(p.cfg.GatewayID, cluster):
		return NetworkCluster
	}
	return p.cfg.Network
}

// networkingConfig gives the scheduler its alias on the cluster's network.
func (p *Provider) networkingConfig(spec providers.ClusterSpec, role providers.Role) *network.NetworkingConfig {
	return p.networkingConfigIn(p.cfg.Network, spec, role)
}

func (p *Provider) networkingConfigIn(mode string, spec providers.ClusterSpec, role providers.Role) *network.NetworkingConfig {
	if mode != NetworkCluster || role != providers.RoleScheduler {
		return nil
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		networkName(p.cfg.GatewayID, spec.Name): {Aliases: []string{schedulerAlias}},
	}}
}

// stopSeconds is the engine's stop timeout for a grace period, in whole
// seconds, at least one.
func stopSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
