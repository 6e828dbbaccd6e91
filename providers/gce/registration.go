package gce

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Section is the Compute Engine backend's configuration, providers.gce.*.
type Section struct {
	Project         string   `mapstructure:"project" doc:"Google Cloud project"`
	Zones           []string `mapstructure:"zones" doc:"zones members run in, tried in order (one region)"`
	Network         string   `mapstructure:"network" doc:"VPC network (default: default)"`
	Subnetwork      string   `mapstructure:"subnetwork" doc:"subnetwork (empty: the network's auto subnet)"`
	GatewayCIDRs    []string `mapstructure:"gateway_cidrs" doc:"fallback to gateway_service_account: the gateway's address range, admitted to the schedulers' ports (shared with whatever else runs there)"`
	GatewaySA       string   `mapstructure:"gateway_service_account" doc:"service account the gateway's instances run as: the only source admitted to the schedulers' ports"`
	ServiceAccount  string   `mapstructure:"service_account" doc:"service account members run as (it reads its cluster's TLS secret)"`
	Image           string   `mapstructure:"image" doc:"boot image for CPU members (default: Container-Optimized OS)"`
	GPUImage        string   `mapstructure:"gpu_image" doc:"boot image for GPU members (default: a Deep Learning VM image with NVIDIA drivers)"`
	DiskGiB         int      `mapstructure:"disk_gib" doc:"boot disk of each member, GiB (0: the provider's default)"`
	ContainerImage  string   `mapstructure:"container_image" doc:"container image when a cluster names none (needs Python with distributed)"`
	Python          string   `mapstructure:"python" doc:"interpreter inside images that runs the version check (launcher) and then Dask"`
	Endpoint        string   `mapstructure:"endpoint" doc:"Compute Engine API URL override (tests)"`
	SecretsEndpoint string   `mapstructure:"secretmanager_endpoint" doc:"Secret Manager API URL override (tests)"`
}

// Registration is the Compute Engine backend for the gateway's list of
// backends. Credentials come from the usual places (workload identity,
// GOOGLE_APPLICATION_CREDENTIALS), never from the section.
func Registration() providers.Registration {
	return providers.Register(providers.Backend[Section]{
		Name:     Name,
		Defaults: func() *Section { return &Section{Python: "python3"} },
		New: func(ctx context.Context, s *Section, d providers.Deps) (providers.Provider, error) {
			return providers.Made(New(ctx, Config{
				Project: s.Project, Zones: s.Zones, Network: s.Network, Subnetwork: s.Subnetwork,
				GatewayCIDRs: s.GatewayCIDRs, GatewayServiceAccount: s.GatewaySA, ServiceAccount: s.ServiceAccount, Image: s.Image, GPUImage: s.GPUImage,
				DiskGiB: s.DiskGiB, ContainerImage: s.ContainerImage, Python: s.Python, Endpoint: s.Endpoint,
				SecretManagerEndpoint: s.SecretsEndpoint, GatewayID: d.GatewayID, Logger: d.Logger,
			}))
		},
		// The first zone: the region is the zones' (quotas' allowed_regions
		// are checked against the provider's own Region).
		Region: func(s *Section) string {
			if len(s.Zones) > 0 {
				return s.Zones[0]
			}
			return ""
		},
		DefaultImage: func(s *Section) string { return s.ContainerImage },
		StartTimeout: 10 * time.Minute,
		TypicalStart: 2 * time.Minute,
	})
}
