// Package docker runs Dask schedulers and workers as containers on a Docker
// Engine, one container per member, for a single machine (or one remote
// engine) with per-user images.
//
// Docker itself keeps everything the provider needs to survive a restart of
// the gateway: every container has a deterministic name, so a repeated
// start finds the container of the earlier one instead of starting a second
// member, and ownership labels, so that List and Describe find the members
// of this gateway (and a restarted gateway re-adopts them) without any state
// of the provider's own. Containers that exit on their own are kept, not
// auto-removed, so that their exit status and log explain why; they go when
// the gateway stops the member, their log saved to a file first.
//
// The clusters' TLS keys never appear in what `docker inspect` shows (the
// environment, labels and command line): they are copied into each
// container's file system before it starts, which works for remote engines
// too.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/gatewayhq/gateway/internal/keylock"
	"github.com/gatewayhq/gateway/providers"
)

// Name is the provider name this package registers under.
const Name = "docker"

// Config configures the Docker backend.
type Config struct {
	// Endpoint is the engine's address in DOCKER_HOST form
	// ("unix:///var/run/docker.sock", "tcp://host:2376"); empty means the
	// DOCKER_HOST environment variable, or the default local socket.
	Endpoint string
	// TLSCACert, TLSCert and TLSKey are PEM files for an engine reached
	// over TLS: the CA that signed the engine's certificate, and the
	// client certificate and key the engine requires. When set they are
	// used instead of DOCKER_CERT_PATH.
	TLSCACert string
	TLSCert   string
	TLSKey    string
	// Image is the image members run when a cluster names none.
	Image string
	// Python is the interpreter inside the images, which runs the launcher
	// and then Dask; default "python3" (looked up on the image's PATH).
	Python string
	// Host is the address the gateway reaches members on; default
	// 127.0.0.1. With NetworkCluster the schedulers' ports are published
	// there (random host ports), with NetworkHost members bind it: on
	// loopback, the gateway is their only door from outside the machine.
	Host string
	// Network is how members are networked: NetworkCluster (the default),
	// a bridge network of its own per cluster, or NetworkHost, the
	// host's network, which every member of every cluster shares.
	Network string
	// Egress, with NetworkCluster, leaves the clusters' bridges forwarding
	// as the engine set them up: members reach what the engine routes
	// (the internet through its NAT), and clusters are kept apart only by
	// the engine's iptables rules (dockerd's default, not --iptables=false).
	// Without it the provider turns IPv4 forwarding off on each cluster's
	// bridge, which keeps clusters apart whatever the engine's rules, at
	// the price of any traffic beyond the cluster and the engine's host;
	// that needs the engine on this host and root (CAP_NET_ADMIN).
	Egress bool
	// PullAuth, when set, gives the credentials for pulling an image (the
	// engine's encoded X-Registry-Auth; "" for none): the image builder's,
	// so that environment images in a private registry can be pulled.
	PullAuth func(ctx context.Context, ref string) (string, error)
	// GatewayID is written into every container's io.gateway.id label: the
	// ownership mark by which List and Describe find members.
	GatewayID string
	// StopGrace is how long a member gets to exit after SIGTERM before the
	// engine kills it; default 10s.
	StopGrace time.Duration
	// Dir is where the logs of removed containers are saved (one folder
	// per cluster), so that `gateway logs` still works after a cluster
	// stopped; empty keeps no logs after a member is removed.
	Dir string
	// SchedulerMemory is each scheduler container's memory limit (bytes;
	// 0: none) when the cluster's scheduler machine gives none: workers
	// are bounded by the cluster's worker_memory.
	SchedulerMemory int64
	Logger          *slog.Logger
}

// Values of Config.Network.
const (
	NetworkCluster = "cluster"
	NetworkHost    = "host"
)

// Ownership labels on every container (and, but for member and role, on
// every cluster network).
const (
	labelGateway = "io.gateway.id"
	labelCluster = "io.gateway.cluster"
	labelMember  = "io.gateway.member"
	labelRole    = "io.gateway.role"
	labelOwner   = "io.gateway.owner"
)

// Paths inside the containers. /run/gateway is made by the provider (with
// the TLS files, owned by the image's user), so that the scheduler can
// write its file there whatever user the image runs as.
const (
	tlsDir        = "/run/gateway"
	certPath      = tlsDir + "/tls.crt"
	keyPath       = tlsDir + "/tls.key"
	schedulerFile = tlsDir + "/scheduler.json"
	spaceDir      = "/tmp/dask-space"
)

// Provider is the Docker backend.
type Provider struct {
	cfg   Config
	cli   *client.Client
	log   *slog.Logger
	locks keylock.Locks      // one start or stop at a time per member
	ends  providers.EndTimes // when StopCluster saw each member end

	mu sync.Mutex
	// stopping counts the stops under way per "cluster/member": a member
	// that exits because the gateway stops it must not be reported as
	// having died on its own.
	stopping map[string]int
	// starting holds the members this process is creating and starting,
	// which are "created" containers for a moment and must not be taken
	// for leftovers of a crash.
	starting map[string]bool
	// seen caches, by container id, what does not change for a container:
	// when it started, the scheduler's address once written, and the
	// reason of an exit.
	seen map[string]*seen
	// netLeftoverAge is how old a cluster network without containers must
	// be before List reports it for the reaper (leftoverAge; tests
	// shorten it).
	netLeftoverAge time.Duration
}

type seen struct {
	cluster string
	started time.Time
	// ip and ports are what the engine assigned a running container on
	// its cluster network: its address there, and the host ports its
	// scheduler and dashboard ports are published on ("" when not).
	hostNet   bool // on the host's network (as clusters are with NetworkHost)
	ip        string
	schedPort string
	dashPort  string
	addr      string
	dash      string
	// refused says why the address the scheduler reported is not routed
	// to (not where the engine put it); such a scheduler is failed.
	refused string
	exited  bool
	reason  string
}

// New connects to the engine and checks that it answers.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.GatewayID == "" {
		return nil, errors.New("docker provider: no gateway id configured (it labels the containers this gateway owns)")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("docker provider: providers.docker.tls_cert and providers.docker.tls_key must be set together")
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	switch cfg.Network {
	case "":
		cfg.Network = NetworkCluster
	case NetworkCluster, NetworkHost:
	default:
		return nil, fmt.Errorf("docker provider: providers.docker.network is %q; want %q (a network per cluster) or %q (the host's, shared by every cluster)", cfg.Network, NetworkCluster, NetworkHost)
	}
	if cfg.Network == NetworkCluster && !cfg.Egress {
		if ep := engineEndpoint(cfg.Endpoint); !localEngine(ep) {
			// The bridges are on the engine's host: this process cannot
			// turn their forwarding off.
			return nil, fmt.Errorf("docker provider: the engine at %s is on another host, where the gateway cannot turn forwarding off on the clusters' bridges; set providers.docker.egress: true there and keep the engine's iptables rules on (dockerd's default), which keep the clusters' networks apart", endpointName(ep))
		}
		if err := canIsolate(); err != nil {
			return nil, err
		}
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("docker provider: log folder: %w", err)
		}
	}
	// Fail at start-up, with what to do, rather than at the first cluster.
	cli, err := NewClient(ctx, cfg)
	if err != nil {
		return nil, err // says which engine, what to do, and why
	}
	p := &Provider{
		cfg: cfg, cli: cli, log: cfg.Logger.With("provider", Name),
		stopping: map[string]int{}, starting: map[string]bool{}, seen: map[string]*seen{},
		netLeftoverAge: leftoverAge,
	}
	// Saved beside the logs: a removed container's end is gone with it.
	p.ends.Dir = cfg.Dir
	p.log.Info("connected to the Docker engine", "endpoint", cli.DaemonHost(), "api", cli.ClientVersion())
	return p, nil
}

func endpointName(e string) string {
	if e == "" {
		return "the default socket"
	}
	return e
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// ListsImmediately implements providers.Immediate: a member's container
// exists (and is listed by its labels) before its start call returns.
func (p *Provider) ListsImmediately() {}

// StoppedAt implements providers.StopTimes.
func (p *Provider) StoppedAt(cluster, member string) (time.Time, bool) {
	return p.ends.StoppedAt(cluster, member)
}

// Close implements providers.Closer. With leave=true members keep running
// and a restarted gateway finds them by their labels; with leave=false
// every cluster of this gateway on the engine is stopped.
func (p *Provider) Close(ctx context.Context, leave bool) error {
	var err error
	if !leave {
		err = p.stopAll(ctx)
	}
	return errors.Join(err, p.cli.Close())
}

func (p *Provider) stopAll(ctx context.Context) error {
	members, err := p.List(ctx)
	if err != nil {
		return err
	}
	// Networks of clusters without containers too, however young.
	nets, err := p.networks(ctx, "")
	if err != nil {
		return err
	}
	clusters := make([]string, 0, len(members)+len(nets))
	for _, m := range members {
		clusters = append(clusters, m.Cluster)
	}
	for _, n := range nets {
		clusters = append(clusters, n.Labels[labelCluster])
	}
	done := map[string]bool{}
	var errs []error
	for _, c := range clusters {
		if done[c] {
			continue
		}
		done[c] = true
		if err := p.StopCluster(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func memberKey(cluster, member string) string { return cluster + "/" + member }

func (p *Provider) isStopping(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping[key] > 0
}

// markStopping notes that key is being stopped and returns the function
// that ends the note.
func (p *Provider) markStopping(key string) func() {
	p.mu.Lock()
	p.stopping[key]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.stopping[key]--; p.stopping[key] <= 0 {
			delete(p.stopping, key)
		}
		p.mu.Unlock()
	}
}

func (p *Provider) setStarting(key string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.starting[key] = true
	} else {
		delete(p.starting, key)
	}
}

func (p *Provider) isStarting(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starting[key]
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.seen, id)
	p.mu.Unlock()
}
