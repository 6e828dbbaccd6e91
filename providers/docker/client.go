package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/client"
)

// NewClient connects to the engine cfg names (Endpoint and the TLS files;
// the rest of cfg is not used) and checks that it answers, for other users
// of the same engine (the image builder).
func NewClient(ctx context.Context, cfg Config) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if cfg.Endpoint != "" {
		opts = append(opts, client.WithHost(cfg.Endpoint))
	}
	if cfg.TLSCACert != "" || cfg.TLSCert != "" {
		opts = append(opts, client.WithTLSClientConfig(cfg.TLSCACert, cfg.TLSCert, cfg.TLSKey))
	}
	opts = append(opts, client.WithAPIVersionNegotiation())
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: engine client for %q: %w", endpointName(cfg.Endpoint), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("docker: no Docker engine answers at %s (start dockerd or set DOCKER_HOST / providers.docker.endpoint): %w", endpointName(cli.DaemonHost()), err)
	}
	return cli, nil
}
