package ec2

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Section is the EC2 backend's configuration, providers.ec2.*.
type Section struct {
	Region          string   `mapstructure:"region" doc:"AWS region of the subnets, e.g. us-east-1 (default: the AWS SDK's, from AWS_REGION, AWS_DEFAULT_REGION or the profile's region)"`
	Subnets         []string `mapstructure:"subnets" doc:"subnets members run in, tried in order when one has no capacity (one VPC)"`
	GatewayCIDRs    []string `mapstructure:"gateway_cidrs" doc:"fallback to gateway_security_group: the gateway's address range, admitted to the schedulers' ports (shared with whatever else runs there)"`
	GatewaySG       string   `mapstructure:"gateway_security_group" doc:"security group of the gateway's tasks or instances: the only source admitted to the schedulers' ports"`
	AMI             string   `mapstructure:"ami" doc:"AMI every member boots (default: the Amazon Linux 2023 ECS-optimized image from SSM, per architecture and GPU)"`
	InstanceProfile string   `mapstructure:"instance_profile" doc:"instance profile members run as (needs ssm:GetParameter on /gateway/<gateway_id>/*)"`
	VolumeGiB       int      `mapstructure:"volume_gib" doc:"root volume of each member, GiB"`
	Image           string   `mapstructure:"image" doc:"container image members run when a cluster names none (needs Python with distributed)"`
	Python          string   `mapstructure:"python" doc:"interpreter inside images that runs the version check (launcher) and then Dask"`
	EC2Endpoint     string   `mapstructure:"ec2_endpoint" doc:"EC2 API URL override (VPC endpoints, tests)"`
	SSMEndpoint     string   `mapstructure:"ssm_endpoint" doc:"SSM API URL override (VPC endpoints, tests)"`
}

// Registration is the EC2 backend for the gateway's list of backends.
// Credentials come from the SDK's usual places, never from the section.
func Registration() providers.Registration {
	return providers.Register(providers.Backend[Section]{
		Name:     Name,
		Defaults: func() *Section { return &Section{VolumeGiB: DefaultVolumeGiB, Python: DefaultPython} },
		Problems: func(s *Section, _ bool) []string { return awsutil.RegionProblems(s.Region, RegionKey) },
		New: func(ctx context.Context, s *Section, d providers.Deps) (providers.Provider, error) {
			return providers.Made(New(ctx, Config{
				Region: s.Region, Subnets: s.Subnets, GatewayCIDRs: s.GatewayCIDRs, GatewaySecurityGroup: s.GatewaySG, AMI: s.AMI,
				InstanceProfile: s.InstanceProfile, VolumeGiB: int32(s.VolumeGiB), Image: s.Image, Python: s.Python,
				EC2Endpoint: s.EC2Endpoint, SSMEndpoint: s.SSMEndpoint, GatewayID: d.GatewayID, Logger: d.Logger,
			}))
		},
		Region:       func(s *Section) string { return awsutil.ResolvedRegion(s.Region, RegionKey) },
		DefaultImage: func(s *Section) string { return s.Image },
		StartTimeout: 10 * time.Minute,
		TypicalStart: 3 * time.Minute,
		CrashPoints: []crashpoint.Name{
			pointGroupCreated, pointGroupAuthorized, pointParameterPut, pointSchedulerLaunched,
			pointWorkerLaunched, pointWorkerTerminated, pointClusterTerminated, pointClusterInstancesGone,
			pointClusterGroupDeleted, pointClusterParameterDeleted, pointLeftoverGroupDeleted, pointLeftoverParameterDeleted,
		},
	})
}
