package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Section is the docker backend's configuration, providers.docker.*. The
// image builder reaches its Docker engine through the same keys, whatever
// the provider.
type Section struct {
	Endpoint  string        `mapstructure:"endpoint" doc:"Docker Engine to run containers on (unix:///var/run/docker.sock, tcp://host:2376; empty: DOCKER_HOST or the local socket)"`
	TLSCACert string        `mapstructure:"tls_ca_cert" doc:"CA certificate of a remote engine's TLS endpoint"`
	TLSCert   string        `mapstructure:"tls_cert" doc:"client certificate for a remote engine"`
	TLSKey    string        `mapstructure:"tls_key" doc:"client key for a remote engine"`
	Image     string        `mapstructure:"image" doc:"container image when a cluster names none and builds none (needs python3 with distributed)"`
	Python    string        `mapstructure:"python" doc:"interpreter inside images that starts Dask"`
	Host      string        `mapstructure:"host" doc:"address the gateway reaches members on: schedulers' ports are published there (network cluster), or members bind it (network host)"`
	StopGrace time.Duration `mapstructure:"stop_grace" doc:"time a container gets after SIGTERM before SIGKILL"`
	Network   string        `mapstructure:"network" doc:"cluster (a bridge network per cluster, isolated from the others) or host (the host's network, shared by every cluster's members)"`
	Egress    bool          `mapstructure:"egress" doc:"network cluster: let members reach beyond their cluster as the engine routes (clusters then kept apart by the engine's iptables rules alone); false turns forwarding off on each cluster's bridge (needs root on the engine's host)"`
	// SchedulerMemory bounds a scheduler container as worker_memory bounds
	// a worker's.
	SchedulerMemory float64 `mapstructure:"scheduler_memory" doc:"memory limit of each scheduler container, in GiB (the engine's memory limit, no swap beyond it); 0: unbounded"`
}

// EngineConfig is the part of the section that reaches the engine.
func (s *Section) EngineConfig() Config {
	return Config{Endpoint: s.Endpoint, TLSCACert: s.TLSCACert, TLSCert: s.TLSCert, TLSKey: s.TLSKey}
}

// Registration is the docker backend for the gateway's list of backends.
func Registration() providers.Registration {
	return providers.Register(providers.Backend[Section]{
		Name: Name,
		Defaults: func() *Section {
			return &Section{Python: "python3", Host: "127.0.0.1", StopGrace: 10 * time.Second, Network: NetworkCluster, SchedulerMemory: 2}
		},
		Problems: func(s *Section, _ bool) []string {
			problems := providers.SchedulerMemoryProblems(Name, s.SchedulerMemory)
			if s.Image == "" {
				problems = append(problems, "providers.docker.image must name the image clusters run by default (one with Python and dask distributed)")
			}
			if (s.TLSCert == "") != (s.TLSKey == "") {
				problems = append(problems, "providers.docker.tls_cert and providers.docker.tls_key must be set together")
			}
			if s.StopGrace < 0 {
				problems = append(problems, "providers.docker.stop_grace must not be negative")
			}
			if s.Network != NetworkCluster && s.Network != NetworkHost {
				problems = append(problems, fmt.Sprintf("providers.docker.network %q must be cluster (a network per cluster) or host (the host's network, shared by every cluster)", s.Network))
			}
			return problems
		},
		New: func(ctx context.Context, s *Section, d providers.Deps) (providers.Provider, error) {
			cfg := s.EngineConfig()
			cfg.Image, cfg.Python, cfg.Host, cfg.Network, cfg.Egress, cfg.StopGrace = s.Image, s.Python, s.Host, s.Network, s.Egress, s.StopGrace
			cfg.GatewayID, cfg.Dir, cfg.PullAuth, cfg.Logger = d.GatewayID, filepath.Join(d.DataDir, "containers"), d.PullAuth, d.Logger
			cfg.SchedulerMemory = providers.GiBBytes(s.SchedulerMemory)
			return providers.Made(New(ctx, cfg))
		},
		DefaultImage: func(s *Section) string { return s.Image },
		EngineImages: true,
		StartTimeout: 10 * time.Minute,
		TypicalStart: 30 * time.Second,
	})
}
