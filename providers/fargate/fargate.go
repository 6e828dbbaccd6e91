// Package fargate runs Dask schedulers and workers as AWS ECS tasks on
// Fargate.
//
// Each member is one task, found again by what the gateway chose for it:
// startedBy "gateway-<cluster>" narrows ECS's listing to the cluster, and the
// task's tags (gateway-id, gateway-cluster, gateway-member, gateway-owner)
// say whose it is and which member. Every launch carries a client token
// derived from the gateway, cluster and member, so that a launch repeated
// after a crash or a lost answer returns the task already started instead of
// starting a second one.
//
// Per cluster the provider makes a security group (the gateway's security
// group may reach the scheduler's TLS and dashboard ports, served over TLS
// with the cluster's certificate; the cluster's own tasks reach each other;
// no address range is admitted), and a
// Secrets Manager secret with the cluster's TLS material, which ECS hands to
// the containers through the task definition's secrets: the PEM never
// appears in a task definition, an override or plain environment. Both are
// deleted by StopCluster once the tasks have stopped.
//
// AWS permissions the gateway needs: ecs:RegisterTaskDefinition,
// DescribeTaskDefinition, ListTaskDefinitionFamilies, ListTaskDefinitions,
// DeregisterTaskDefinition, DeleteTaskDefinitions, RunTask, ListTasks, DescribeTasks, StopTask and
// TagResource (tags at launch), iam:PassRole on the execution and task
// roles, secretsmanager:CreateSecret, DescribeSecret, DeleteSecret,
// ListSecrets (the reaper lists the TLS secrets by name and tag) and
// TagResource, and ec2:DescribeSubnets, DescribeSecurityGroups,
// CreateSecurityGroup, AuthorizeSecurityGroupIngress,
// RevokeSecurityGroupIngress, DeleteSecurityGroup and CreateTags. The execution role needs secretsmanager:GetSecretValue on
// gateway/<hash>/* secrets (plus the usual image pull and logs
// permissions); the task role, whose credentials users' code holds, must
// not be able to read them.
package fargate

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/keylock"
	"github.com/gatewayhq/gateway/internal/sdkhttp"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Name is the provider name this package registers under.
const Name = "fargate"

// RegionKey is the configuration key of the region, named by the error
// when neither it nor the AWS SDK's settings give one.
const RegionKey = "providers." + Name + ".region"

// Config configures the Fargate backend.
type Config struct {
	// Region is the AWS region of the ECS cluster and subnets. Empty takes
	// the one the AWS SDK's standard settings give (AWS_REGION,
	// AWS_DEFAULT_REGION, the profile's region in the shared config file;
	// see awsutil.Region).
	Region string
	// Cluster is the ECS cluster (name or ARN) the tasks run in.
	Cluster string
	// Subnets the tasks run in, tried in this order when one has no
	// capacity. They must be in one VPC: each cluster's security group is
	// made there.
	Subnets []string
	// GatewaySecurityGroup is the security group of the gateway's own tasks
	// (sg-..., in the subnets' VPC): the only source admitted to the
	// scheduler (8786) and dashboard (8787) ports. A group rather than an
	// address range keeps other clusters' tasks, which may share the
	// gateway's subnets, out.
	GatewaySecurityGroup string
	// GatewayCIDRs is the fallback when the gateway is in no security group
	// of the VPC: its address ranges are admitted instead, and with them
	// anything else there. Only one of the two may be set; a /0 is refused.
	GatewayCIDRs []string
	// ExecutionRoleArn is the role ECS uses to pull images, write logs and
	// read each cluster's TLS secret.
	ExecutionRoleArn string
	// TaskRoleArn is the role the Dask processes run as (for their own
	// access to S3 and the like); empty for none.
	TaskRoleArn string
	// AssignPublicIP gives tasks a public IP: needed only in public subnets
	// without a NAT gateway, to pull images. Default off.
	AssignPublicIP bool
	// Image is the container image when a cluster asks for none; it must
	// have Python with distributed, and /bin/sh.
	Image string
	// Python is the interpreter in the images that runs the launcher
	// (images.LauncherScript), which checks the member's software against
	// the client's and then runs "python -m dask scheduler|worker";
	// default "python3", looked up on the image's PATH.
	Python string
	// CPUArchitecture is X86_64 (default) or ARM64.
	CPUArchitecture string
	// LogGroup, when set, sends the containers' output to this CloudWatch
	// Logs group (awslogs driver, stream prefix "gateway").
	LogGroup string
	// KMSKeyID encrypts the TLS secrets; empty means the account's
	// aws/secretsmanager key.
	KMSKeyID string
	// GatewayID is this gateway's ownership tag value.
	GatewayID string

	// Endpoints override the services' URLs (tests, VPC endpoints).
	Endpoints Endpoints
	// Credentials, when set, are used instead of the default chain
	// (environment, shared files, container or instance role).
	Credentials aws.CredentialsProvider
	// HTTPClient, when set, sends the requests.
	HTTPClient aws.HTTPClient

	Retry Retry
	// StopTimeout bounds how long StopCluster waits for the tasks to stop
	// and their network interfaces to release the security group.
	StopTimeout time.Duration
	// PollInterval is the pause between two looks while waiting.
	PollInterval time.Duration
	// Sleep waits for d or until ctx ends; tests replace it to run without
	// real delays. Used for every backoff and poll.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the read budgets' clock (nil: time.Now); tests pair it with
	// Sleep to count calls against simulated time.
	Now    func() time.Time
	Logger *slog.Logger
}

// Endpoints are base URLs of the services; empty means AWS's own.
type Endpoints struct {
	ECS            string
	SecretsManager string
	EC2            string
	Logs           string // CloudWatch Logs
}

// Retry bounds the retries of throttled calls and of AWS's own failures
// (5xx): exponential backoff with full jitter, the wait before attempt n+1
// being uniform in [0, min(MaxDelay, BaseDelay*2^(n-1))].
type Retry struct {
	MaxAttempts int           // attempts per call, the first included (default 8)
	BaseDelay   time.Duration // default 200ms
	MaxDelay    time.Duration // default 20s
	// Jitter picks the wait in [0, max]; nil is uniform. Tests make it
	// deterministic.
	Jitter func(max time.Duration) time.Duration
}

// Defaults applied by New.
const (
	DefaultImage        = "ghcr.io/dask/dask:latest"
	defaultStopTimeout  = 5 * time.Minute
	defaultPollInterval = 3 * time.Second
)

// Provider is the Fargate backend.
type Provider struct {
	cfg   Config
	log   *slog.Logger
	ecs   ecsAPI
	sm    secretsAPI
	ec2   ec2API
	logs  logsAPI
	gwKey string // short hash of the gateway id, in names AWS restricts
	locks keylock.Locks

	// region is the one the SDK's clients were made for, which Region
	// reports to quotas.
	region string

	mu  sync.Mutex
	vpc string
	// tables holds the launcher's tables read from stopped tasks' logs,
	// by cluster and task ARN (a stopped task's log no longer changes).
	tables   map[string]map[string]string
	groups   map[string]string            // cluster -> security group id
	secrets  map[string]string            // cluster -> secret ARN
	taskDefs map[string]string            // family -> task definition ARN
	launched map[string]map[string]string // cluster -> task ARN -> member: tasks this process started
	ends     providers.EndTimes           // when StopCluster saw each member end
	budgets  budgets                      // rate budgets of reads, per service

	// launchedAt is when this process started each task of launched.
	launchedAt map[string]time.Time
}

var _ providers.Provider = (*Provider)(nil)
var _ providers.StopTimes = (*Provider)(nil)
var _ providers.Spot = (*Provider)(nil)
var _ providers.Regional = (*Provider)(nil)

// validate reports every problem of the configuration at once, so that an
// operator fixes them in one go; regionErr is the region's resolution's
// (awsutil.Region), reported among them.
func (c *Config) validate(regionErr error) error {
	var (
		subnetRE   = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
		groupRE    = regexp.MustCompile(`^sg-[0-9a-f]{8}([0-9a-f]{9})?$`)
		roleARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]+$`)
		logGroupRE = regexp.MustCompile(`^[A-Za-z0-9_./#-]{1,512}$`)
		regionRE   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case regionErr != nil:
		errs = append(errs, regionErr)
	case !regionRE.MatchString(c.Region):
		bad("region %q is not an AWS region such as us-east-1", c.Region)
	}
	if strings.TrimSpace(c.Cluster) == "" {
		bad("cluster: name the ECS cluster the tasks run in")
	}
	if len(c.Subnets) == 0 {
		bad("subnets: at least one subnet is needed")
	}
	seen := map[string]bool{}
	for _, s := range c.Subnets {
		if !subnetRE.MatchString(s) {
			bad("subnets: %q is not a subnet id (subnet-...)", s)
		}
		if seen[s] {
			bad("subnets: %s is listed twice", s)
		}
		seen[s] = true
	}
	switch {
	case c.GatewaySecurityGroup == "" && len(c.GatewayCIDRs) == 0:
		bad("gateway_security_group: name the security group of the gateway's tasks (sg-...): the only source admitted to schedulers")
	case c.GatewaySecurityGroup != "" && len(c.GatewayCIDRs) > 0:
		bad("gateway_security_group and gateway_cidrs are both set; set only gateway_security_group (gateway_cidrs would also admit everything else in those ranges)")
	case c.GatewaySecurityGroup != "" && !groupRE.MatchString(c.GatewaySecurityGroup):
		bad("gateway_security_group: %q is not a security group id (sg-...)", c.GatewaySecurityGroup)
	}
	for _, s := range c.GatewayCIDRs {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			bad("gateway_cidrs: %q is not a CIDR block such as 10.0.0.0/16", s)
		case p.Bits() < providers.MinGatewayBits(p):
			bad("gateway_cidrs: %s would open the schedulers to much of the internet; name the gateway's own network (a /8 or narrower)", s)
		case p.Masked() != p:
			bad("gateway_cidrs: %s has host bits set; did you mean %s?", s, p.Masked())
		}
	}
	if !roleARNRE.MatchString(c.ExecutionRoleArn) {
		bad("execution_role_arn: %q is not an IAM role ARN; ECS needs it to pull images and read the TLS secret", c.ExecutionRoleArn)
	}
	if c.TaskRoleArn != "" && !roleARNRE.MatchString(c.TaskRoleArn) {
		bad("task_role_arn: %q is not an IAM role ARN", c.TaskRoleArn)
	}
	if c.TaskRoleArn != "" && c.TaskRoleArn == c.ExecutionRoleArn {
		// The task role's credentials reach user code; the execution role
		// reads every cluster's TLS secret.
		bad("task_role_arn must not be the execution role: users' code would get credentials that read every cluster's TLS secret")
	}
	if strings.ContainsAny(c.Image, " \t\n") {
		bad("image: %q has white space", c.Image)
	}
	if c.Python != "" && (strings.TrimSpace(c.Python) == "" || strings.ContainsAny(c.Python, " \t\n")) {
		bad("python: %q is not an interpreter's name or path", c.Python)
	}
	switch c.CPUArchitecture {
	case "", "X86_64", "ARM64":
	default:
		bad("Config.CPUArchitecture: %q is not X86_64 or ARM64", c.CPUArchitecture)
	}
	if c.LogGroup != "" && !logGroupRE.MatchString(c.LogGroup) {
		bad("log_group: %q is not a CloudWatch Logs group name", c.LogGroup)
	}
	if strings.TrimSpace(c.GatewayID) == "" {
		bad("gateway id: empty; it is the ownership tag of every task")
	}
	for name, e := range map[string]string{"ecs_endpoint": c.Endpoints.ECS, "secretsmanager_endpoint": c.Endpoints.SecretsManager, "ec2_endpoint": c.Endpoints.EC2, "logs_endpoint": c.Endpoints.Logs} {
		if e == "" {
			continue
		}
		if u, err := url.Parse(e); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("%s: %q is not an http(s) URL", name, e)
		}
	}
	if c.Retry.MaxAttempts < 0 || c.Retry.BaseDelay < 0 || c.Retry.MaxDelay < 0 {
		bad("retry: attempts and delays cannot be negative")
	}
	if c.Retry.BaseDelay > 0 && c.Retry.MaxDelay > 0 && c.Retry.MaxDelay < c.Retry.BaseDelay {
		bad("retry: max delay %s is below the base delay %s", c.Retry.MaxDelay, c.Retry.BaseDelay)
	}
	if c.StopTimeout < 0 || c.PollInterval < 0 {
		bad("Config.StopTimeout and Config.PollInterval cannot be negative")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("fargate provider: invalid configuration:\n  %w", joinIndented(errs))
}

// joinIndented joins errors one per line, keeping them all for errors.Is.
func joinIndented(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &multiError{msg: strings.Join(msgs, "\n  "), errs: errs}
}

type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

// New makes the backend. It sends no request: credentials and the network
// are first used by the first call.
func New(cfg Config) (*Provider, error) {
	region, regionErr := awsutil.Region(context.Background(), cfg.Region, RegionKey)
	cfg.Region = region
	if err := cfg.validate(regionErr); err != nil {
		return nil, err
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.CPUArchitecture == "" {
		cfg.CPUArchitecture = "X86_64"
	}
	if cfg.Retry.MaxAttempts == 0 {
		cfg.Retry.MaxAttempts = 8
	}
	if cfg.Retry.BaseDelay == 0 {
		cfg.Retry.BaseDelay = 200 * time.Millisecond
	}
	if cfg.Retry.MaxDelay == 0 {
		cfg.Retry.MaxDelay = 20 * time.Second
	}
	if cfg.Retry.Jitter == nil {
		cfg.Retry.Jitter = func(max time.Duration) time.Duration {
			if max <= 0 {
				return 0
			}
			return rand.N(max + 1)
		}
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = defaultPollInterval
	}
	if cfg.Sleep == nil {
		cfg.Sleep = backoff.Sleep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	// The SDK's standard configuration is loaded even when credentials
	// are given, so that its endpoint settings (AWS_ENDPOINT_URL,
	// AWS_ENDPOINT_URL_<SERVICE>, endpoint_url in the shared config) apply
	// to every client. The default credential chain: environment, shared
	// files, SSO, container and instance roles. Loading reads files only;
	// credentials are fetched when first needed.
	loadOpts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region)}
	if cfg.Credentials != nil {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.HTTPClient != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background(), loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("fargate provider: load AWS configuration: %w", err)
	}
	// Retries are this package's (bounded, with an injectable sleep and a
	// log line each), not the SDK's: two layers would multiply.
	awsCfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	// After loading, which configures the SDK's own client (AWS_CA_BUNDLE).
	awsCfg.HTTPClient = sdkhttp.Client(awsCfg.HTTPClient)
	p := &Provider{
		cfg:    cfg,
		log:    cfg.Logger.With("provider", Name),
		region: awsCfg.Region,
		// A configured endpoint replaces the SDK's; an unset one leaves what
		// the SDK resolved (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>,
		// endpoint_url in the shared config) in place.
		ecs: ecs.NewFromConfig(awsCfg, func(o *ecs.Options) {
			if cfg.Endpoints.ECS != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoints.ECS)
			}
		}),
		sm: secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) {
			if cfg.Endpoints.SecretsManager != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoints.SecretsManager)
			}
		}),
		ec2: ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
			if cfg.Endpoints.EC2 != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoints.EC2)
			}
		}),
		logs: cloudwatchlogs.NewFromConfig(awsCfg, func(o *cloudwatchlogs.Options) {
			if cfg.Endpoints.Logs != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoints.Logs)
			}
		}),
		tables:   map[string]map[string]string{},
		gwKey:    shortHash(cfg.GatewayID, 8),
		groups:   map[string]string{},
		secrets:  map[string]string{},
		taskDefs: map[string]string{},
		launched: map[string]map[string]string{},

		launchedAt: map[string]time.Time{},
	}
	return p, nil
}

// SpotCapacity implements providers.Spot: workers asked for on spot run on
// FARGATE_SPOT, falling back to FARGATE.
func (p *Provider) SpotCapacity() {}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Region implements providers.Regional: the region of the SDK
// configuration the clients were made with (the configured region, which
// takes precedence over AWS_REGION and the profile's, or else theirs),
// which quotas' allowed_regions are checked against.
func (p *Provider) Region() string { return p.region }
