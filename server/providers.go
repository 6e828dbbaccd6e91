package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/docker"
	"github.com/gatewayhq/gateway/providers/ec2"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/gce"
	"github.com/gatewayhq/gateway/providers/local"
)

// newProvider makes the configured backend. Cloud backends take their
// credentials from their SDK's usual places (environment, shared files,
// instance or workload identity), never from the gateway's configuration.
func newProvider(ctx context.Context, cfg *config.Config, gatewayID string, pullAuth func(context.Context, string) (string, error), log *slog.Logger) (providers.Provider, error) {
	p, err := makeProvider(ctx, cfg, gatewayID, pullAuth, log)
	if err != nil && cfg.Provider != local.Name {
		// The backends name their own fields; say where they live.
		return nil, fmt.Errorf("providers.%s.* (or GATEWAY_PROVIDERS_%s_*): %w", cfg.Provider, strings.ToUpper(cfg.Provider), err)
	}
	return p, err
}

func makeProvider(ctx context.Context, cfg *config.Config, gatewayID string, pullAuth func(context.Context, string) (string, error), log *slog.Logger) (providers.Provider, error) {
	p := cfg.Providers
	switch cfg.Provider {
	case ec2.Name:
		return ec2.New(ctx, ec2.Config{
			Region: p.EC2.Region, Subnets: p.EC2.Subnets, GatewayCIDRs: p.EC2.GatewayCIDRs, GatewaySecurityGroup: p.EC2.GatewaySG, AMI: p.EC2.AMI,
			InstanceProfile: p.EC2.InstanceProfile, VolumeGiB: int32(p.EC2.VolumeGiB), Image: p.EC2.Image, Python: p.EC2.Python,
			EC2Endpoint: p.EC2.EC2Endpoint, SSMEndpoint: p.EC2.SSMEndpoint, GatewayID: gatewayID, Logger: log,
		})
	case fargate.Name:
		return fargate.New(fargate.Config{
			Region: p.Fargate.Region, Cluster: p.Fargate.Cluster, Subnets: p.Fargate.Subnets, GatewayCIDRs: p.Fargate.GatewayCIDRs,
			GatewaySecurityGroup: p.Fargate.GatewaySG, ExecutionRoleArn: p.Fargate.ExecutionRoleArn, TaskRoleArn: p.Fargate.TaskRoleArn,
			AssignPublicIP: p.Fargate.AssignPublicIP, Image: p.Fargate.Image, Python: p.Fargate.Python, LogGroup: p.Fargate.LogGroup, GatewayID: gatewayID, Logger: log,
			Endpoints: fargate.Endpoints{ECS: p.Fargate.ECSEndpoint, SecretsManager: p.Fargate.SecretsEndpoint, EC2: p.Fargate.EC2Endpoint, Logs: p.Fargate.LogsEndpoint},
		})
	case gce.Name:
		return gce.New(ctx, gce.Config{
			Project: p.GCE.Project, Zones: p.GCE.Zones, Network: p.GCE.Network, Subnetwork: p.GCE.Subnetwork,
			GatewayCIDRs: p.GCE.GatewayCIDRs, GatewayServiceAccount: p.GCE.GatewaySA, ServiceAccount: p.GCE.ServiceAccount, Image: p.GCE.Image, GPUImage: p.GCE.GPUImage,
			DiskGiB: p.GCE.DiskGiB, ContainerImage: p.GCE.ContainerImage, Python: p.GCE.Python, Endpoint: p.GCE.Endpoint,
			SecretManagerEndpoint: p.GCE.SecretsEndpoint, GatewayID: gatewayID, Logger: log,
		})
	case docker.Name:
		return docker.New(ctx, docker.Config{
			Endpoint: p.Docker.Endpoint, TLSCACert: p.Docker.TLSCACert, TLSCert: p.Docker.TLSCert, TLSKey: p.Docker.TLSKey,
			Image: p.Docker.Image, Python: p.Docker.Python, Host: p.Docker.Host, Network: p.Docker.Network, Egress: p.Docker.Egress, GatewayID: gatewayID,
			StopGrace: p.Docker.StopGrace, Dir: filepath.Join(cfg.DataDir, "containers"), PullAuth: pullAuth, Logger: log,
			SchedulerMemory: gibBytes(p.Docker.SchedulerMemory),
		})
	case local.Name:
		return local.New(local.Config{
			Dir: filepath.Join(cfg.DataDir, "clusters"), Python: p.Local.Python, Command: p.Local.Command,
			Host: p.Local.Host, Nanny: p.Local.Nanny, GatewayID: gatewayID,
			StopGrace: p.Local.StopGrace, Logger: log, SchedulerMemory: gibBytes(p.Local.SchedulerMemory),
		})
	}
	return nil, fmt.Errorf("gateway: unknown provider %q", cfg.Provider)
}

// gibBytes is a size in GiB (as the options and settings give it) in bytes.
func gibBytes(gib float64) int64 { return int64(gib * (1 << 30)) }

// startTimeout is cluster.start_timeout, or the backend's default: cloud
// machines boot and pull the image before the scheduler answers.
func startTimeout(cfg *config.Config) time.Duration {
	switch {
	case cfg.Cluster.StartTimeout > 0:
		return cfg.Cluster.StartTimeout
	case cfg.Provider == local.Name:
		return time.Minute
	}
	return 10 * time.Minute
}

// providerRegion is the region (or, for Compute Engine, the first zone) the
// configured backend runs clusters in; empty for local and docker.
func providerRegion(cfg *config.Config) string {
	p := cfg.Providers
	switch cfg.Provider {
	case ec2.Name:
		return p.EC2.Region
	case fargate.Name:
		return p.Fargate.Region
	case gce.Name:
		if len(p.GCE.Zones) > 0 {
			return p.GCE.Zones[0]
		}
	}
	return ""
}
