package fargate

import (
	"context"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Section is the Fargate backend's configuration, providers.fargate.*.
type Section struct {
	Region           string   `mapstructure:"region" doc:"AWS region of the ECS cluster (default: the AWS SDK's, from AWS_REGION, AWS_DEFAULT_REGION or the profile's region)"`
	Cluster          string   `mapstructure:"cluster" doc:"ECS cluster (name or ARN) tasks run in"`
	Subnets          []string `mapstructure:"subnets" doc:"subnets tasks run in, tried in order (one VPC)"`
	GatewayCIDRs     []string `mapstructure:"gateway_cidrs" doc:"fallback to gateway_security_group: the gateway's address range, admitted to the schedulers' ports (shared with whatever else runs there)"`
	GatewaySG        string   `mapstructure:"gateway_security_group" doc:"security group of the gateway's tasks or instances: the only source admitted to the schedulers' ports"`
	ExecutionRoleArn string   `mapstructure:"execution_role_arn" doc:"role ECS pulls images and reads each cluster's TLS secret with"`
	TaskRoleArn      string   `mapstructure:"task_role_arn" doc:"role the Dask processes run as (empty: none)"`
	AssignPublicIP   bool     `mapstructure:"assign_public_ip" doc:"give tasks a public IP (public subnets without NAT only)"`
	Image            string   `mapstructure:"image" doc:"container image when a cluster names none (needs Python with distributed, and /bin/sh)"`
	Python           string   `mapstructure:"python" doc:"interpreter inside images that runs the version check (launcher) and then Dask"`
	LogGroup         string   `mapstructure:"log_group" doc:"CloudWatch Logs group for the containers' output (empty: none)"`
	ECSEndpoint      string   `mapstructure:"ecs_endpoint" doc:"ECS API URL override (tests)"`
	SecretsEndpoint  string   `mapstructure:"secretsmanager_endpoint" doc:"Secrets Manager API URL override (tests)"`
	EC2Endpoint      string   `mapstructure:"ec2_endpoint" doc:"EC2 API URL override (tests)"`
	LogsEndpoint     string   `mapstructure:"logs_endpoint" doc:"CloudWatch Logs API URL override (tests)"`
}

// Registration is the Fargate backend for the gateway's list of backends.
// Credentials come from the SDK's usual places, never from the section.
func Registration() providers.Registration {
	return providers.Register(providers.Backend[Section]{
		Name:     Name,
		Defaults: func() *Section { return &Section{Python: "python3"} },
		Problems: func(s *Section, _ bool) []string { return awsutil.RegionProblems(s.Region, RegionKey) },
		New: func(_ context.Context, s *Section, d providers.Deps) (providers.Provider, error) {
			return providers.Made(New(Config{
				Region: s.Region, Cluster: s.Cluster, Subnets: s.Subnets, GatewayCIDRs: s.GatewayCIDRs,
				GatewaySecurityGroup: s.GatewaySG, ExecutionRoleArn: s.ExecutionRoleArn, TaskRoleArn: s.TaskRoleArn,
				AssignPublicIP: s.AssignPublicIP, Image: s.Image, Python: s.Python, LogGroup: s.LogGroup, GatewayID: d.GatewayID, Logger: d.Logger,
				Endpoints: Endpoints{ECS: s.ECSEndpoint, SecretsManager: s.SecretsEndpoint, EC2: s.EC2Endpoint, Logs: s.LogsEndpoint},
			}))
		},
		Region:       func(s *Section) string { return awsutil.ResolvedRegion(s.Region, RegionKey) },
		DefaultImage: func(s *Section) string { return s.Image },
		StartTimeout: 10 * time.Minute,
		TypicalStart: 2 * time.Minute,
		CrashPoints: []crashpoint.Name{
			pointGroupCreated, pointGroupAuthorized, pointSecretCreated, pointTaskDefRegistered,
			pointSchedulerRun, pointWorkerRun, pointWorkerStopped, pointClusterStopAsked,
			pointClusterTasksStopped, pointClusterGroupDeleted, pointClusterSecretDeleted,
			pointTaskDefsDeregistered, pointTaskDefsDeleted, pointLeftoverGroupDeleted,
			pointLeftoverSecretDeleted, pointLeftoverFamiliesDeleted,
		},
	})
}
