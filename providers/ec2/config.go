package ec2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers"
)

// Default SSM public parameters naming the current Amazon Linux 2023
// ECS-optimized images: they come with Docker running (and, for the GPU
// variant, the NVIDIA driver and container toolkit), which is all a member
// needs to run the cluster's container image.
const (
	DefaultAMIParameter      = "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id"
	DefaultAMIParameterARM64 = "/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id"
	DefaultAMIParameterGPU   = "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
)

// Defaults applied by New to fields left at their zero value.
const (
	DefaultVolumeGiB     = 40
	DefaultImage         = "ghcr.io/dask/dask:latest"
	DefaultPython        = "python3"
	DefaultConsoleWait   = 2 * time.Minute
	DefaultSchedulerType = "m6i.large"
	DefaultWorkerType    = "m6i.xlarge"
	DefaultMaxAttempts   = 8
	DefaultBaseDelay     = 250 * time.Millisecond
	DefaultMaxDelay      = 20 * time.Second
	DefaultCacheTTL      = 6 * time.Hour
	DefaultStopTimeout   = 10 * time.Minute
	DefaultPollInterval  = 5 * time.Second
)

// Config configures the EC2 backend. The names in error messages are the
// lower-case keys of the gateway's configuration file
// (providers.ec2.<key>).
type Config struct {
	// Region is the AWS region the subnets are in ("us-east-1"). Empty
	// takes the one the AWS SDK's standard settings give (AWS_REGION,
	// AWS_DEFAULT_REGION, the profile's region in the shared config file;
	// see awsutil.Region); it is never looked up from instance metadata.
	Region string
	// Subnets are where members run, tried in order when one has no
	// capacity; each implies its Availability Zone. They must all be in one
	// VPC, private ones preferably (members need outbound access to pull
	// the image and reach SSM, through a NAT gateway or VPC endpoints).
	Subnets []string
	// GatewaySecurityGroup is the security group the gateway's own tasks
	// or instances are in (sg-..., in the subnets' VPC): the only source
	// admitted to the schedulers' TLS port (8786) and dashboard (8787).
	// Admitting a group rather than an address range keeps other clusters'
	// members, which may share the gateway's subnets, out.
	GatewaySecurityGroup string
	// GatewayCIDRs is the fallback when the gateway is in no security group
	// of the VPC: its address range is admitted instead, and with it
	// anything else in that range (members in the same subnets included).
	// Only one of the two may be set.
	GatewayCIDRs []string

	// AMI is the image every member boots; when empty the image is read
	// from the SSM parameters below, per architecture, and cached.
	AMI string
	// AMIParameter (x86_64), AMIParameterARM64 (Graviton) and
	// AMIParameterGPU (NVIDIA GPU types) name SSM parameters whose value is
	// an AMI id; they default to the Amazon Linux 2023 ECS-optimized
	// images. The image must run Docker (and the NVIDIA container toolkit
	// for GPU types) and have curl; the AWS CLI is installed when missing.
	AMIParameter      string
	AMIParameterARM64 string
	AMIParameterGPU   string

	// InstanceProfile (a name or an ARN) is the role members run as. It
	// needs ssm:GetParameter on arn:aws:ssm:<region>:<account>:parameter/gateway/<gateway-id>/*
	// and kms:Decrypt on the key of those parameters (aws/ssm unless
	// ParameterKMSKey is set): that is how members read their cluster's TLS
	// key, which is never put in user data.
	InstanceProfile string
	// VolumeGiB is the size of each member's root volume (gp3, encrypted,
	// deleted with the instance); it holds the container image and Dask's
	// spill space, and must be at least the AMI's snapshot size.
	VolumeGiB int32
	// Image is the container image members run when the cluster names none;
	// it needs Python with distributed.
	Image string
	// Python is the interpreter in the images (the container's
	// entrypoint), which runs the launcher (images.LauncherScript) and
	// then Dask; default "python3", looked up on the image's PATH.
	Python string
	// DefaultSchedulerType and DefaultWorkerType are the instance types used
	// when a cluster's spec names none.
	DefaultSchedulerType string
	DefaultWorkerType    string
	// ExtraTags are added to every instance, volume and security group (cost
	// allocation, ownership); they may not use the gateway's own keys.
	ExtraTags map[string]string
	// ParameterKMSKey is the KMS key (id, alias or ARN) that encrypts the
	// TLS parameters; empty uses the account's aws/ssm key.
	ParameterKMSKey string

	// GatewayID marks every resource as this gateway's (tag gateway-id, the
	// SSM parameter path, the security group name); List finds members by it.
	GatewayID string

	// CacheTTL is how long instance types and AMI ids are cached.
	CacheTTL time.Duration
	// StopTimeout bounds how long StopCluster waits for the cluster's
	// instances to terminate and its security group to be deletable.
	StopTimeout time.Duration
	// PollInterval is the wait between DescribeInstances calls while
	// StopCluster waits.
	PollInterval time.Duration

	// MaxAttempts bounds the calls made for one request that is throttled
	// or meets a server error; BaseDelay and MaxDelay shape the exponential
	// backoff with full jitter between them.
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	// Sleep waits between attempts and polls; nil uses a timer. Tests
	// replace it to run without waiting.
	Sleep func(ctx context.Context, d time.Duration) error

	// ConsoleWait bounds how long a member that shut itself down is
	// reported pending while its console output (where the launcher's
	// table of differences is) has not reached EC2 yet: EC2 posts the
	// console shortly after the instance's state changes. Default 2m.
	ConsoleWait time.Duration

	// ProbeScheduler reports whether a scheduler accepts connections at
	// address (host:port): Describe reports a running scheduler as pending
	// until it does, because the instance runs long before the container is
	// pulled and serving. nil dials TCP with a short timeout.
	ProbeScheduler func(ctx context.Context, address string) error

	// Credentials, when set, are used as they are, and nothing is read from
	// the environment, shared files or instance metadata; nil uses the SDK's
	// default chain (environment, shared files, SSO, web identity, ECS,
	// instance metadata).
	Credentials aws.CredentialsProvider
	// EC2Endpoint and SSMEndpoint override the services' URLs (VPC
	// endpoints, tests).
	EC2Endpoint string
	SSMEndpoint string
	// HTTPClient, when set, sends every request.
	HTTPClient aws.HTTPClient

	Logger *slog.Logger
}

// ErrInvalidConfig marks a configuration New refuses; the message lists
// every problem with what to change.
var ErrInvalidConfig = errors.New("ec2 provider: invalid configuration")

var (
	reRegion       = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	reSubnet       = regexp.MustCompile(`^subnet-[0-9a-f]{8}([0-9a-f]{9})?$`)
	reAMI          = regexp.MustCompile(`^ami-[0-9a-f]{8}([0-9a-f]{9})?$`)
	reGroup        = regexp.MustCompile(`^sg-[0-9a-f]{8}([0-9a-f]{9})?$`)
	reGatewayID    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	reProfileName  = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	reProfileARN   = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:instance-profile/[\w+=,.@/-]{1,128}$`)
	reInstanceType = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)
	// Image references go into a shell script and a systemd unit: only the
	// characters an image reference can have.
	reImage = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$`)
	// The interpreter goes into a systemd unit as Docker's entrypoint.
	rePython = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)*/?[A-Za-z0-9._-]+$`)
	// Cluster and member names go into tags, a parameter path, a security
	// group name and the member's command line.
	reName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	// The dashboard prefix goes into the scheduler's command line.
	reDashboardPrefix = regexp.MustCompile(`^/[A-Za-z0-9_./-]{0,200}$`)
)

// reservedTagKeys are the tags the provider sets itself; ExtraTags may not
// override them, or members would be lost to Describe and List.
func reservedTagKeys() []string { return []string{tagGateway, tagCluster, tagMember, tagOwner, "Name"} }

// withDefaults fills in zero values.
func (c Config) withDefaults() Config {
	if c.AMI == "" {
		if c.AMIParameter == "" {
			c.AMIParameter = DefaultAMIParameter
		}
		if c.AMIParameterARM64 == "" {
			c.AMIParameterARM64 = DefaultAMIParameterARM64
		}
		if c.AMIParameterGPU == "" {
			c.AMIParameterGPU = DefaultAMIParameterGPU
		}
	}
	if c.VolumeGiB == 0 {
		c.VolumeGiB = DefaultVolumeGiB
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.Python == "" {
		c.Python = DefaultPython
	}
	if c.DefaultSchedulerType == "" {
		c.DefaultSchedulerType = DefaultSchedulerType
	}
	if c.DefaultWorkerType == "" {
		c.DefaultWorkerType = DefaultWorkerType
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.ProbeScheduler == nil {
		c.ProbeScheduler = dialProbe
	}
	if c.ConsoleWait == 0 {
		c.ConsoleWait = DefaultConsoleWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate returns every problem with the configuration, each saying what
// to change, so that an operator fixes them all in one go.
func (c Config) validate() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	// An empty region is New's to report: it was looked for in the SDK's
	// settings too.
	if c.Region != "" && !reRegion.MatchString(c.Region) {
		add("region %q is not an AWS region name; use one like us-east-1", c.Region)
	}
	switch {
	case c.GatewayID == "":
		add("gateway id is empty; set it (it marks every resource as this gateway's)")
	case !reGatewayID.MatchString(c.GatewayID):
		add("gateway id %q may only use letters, digits, '.', '_' and '-' (at most 63, starting with a letter or digit)", c.GatewayID)
	}

	if len(c.Subnets) == 0 {
		add("subnets is empty; list one or more subnet ids (subnet-...) of one VPC, one per Availability Zone to fall back on")
	}
	seen := map[string]bool{}
	for _, s := range c.Subnets {
		switch {
		case !reSubnet.MatchString(s):
			add("subnets: %q is not a subnet id; use ids like subnet-0123456789abcdef0", s)
		case seen[s]:
			add("subnets: %q is listed twice; remove the duplicate", s)
		}
		seen[s] = true
	}

	switch {
	case c.GatewaySecurityGroup == "" && len(c.GatewayCIDRs) == 0:
		add("gateway_security_group is empty; set it to the security group of the gateway's tasks or instances (sg-...): it is the only source allowed to reach schedulers")
	case c.GatewaySecurityGroup != "" && len(c.GatewayCIDRs) > 0:
		add("gateway_security_group and gateway_cidrs are both set; set only gateway_security_group (gateway_cidrs would also admit everything else in those ranges)")
	case c.GatewaySecurityGroup != "" && !reGroup.MatchString(c.GatewaySecurityGroup):
		add("gateway_security_group %q is not a security group id; use one like sg-0123456789abcdef0", c.GatewaySecurityGroup)
	}
	for _, s := range c.GatewayCIDRs {
		pfx, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			add("gateway_cidrs: %q is not a CIDR block; use one like 10.0.1.0/24 (a single address is 10.0.1.5/32)", s)
		case pfx.Bits() < providers.MinGatewayBits(pfx):
			// Wider than a /8 (a /32 for IPv6) is the internet in slices.
			add("gateway_cidrs: %q would open every scheduler to much of the internet; use the gateway's own address range (a /8 or narrower)", s)
		case pfx.Masked() != pfx:
			add("gateway_cidrs: %q has host bits set; use %s", s, pfx.Masked())
		}
	}

	if c.AMI != "" {
		if !reAMI.MatchString(c.AMI) {
			add("ami %q is not an image id; use one like ami-0123456789abcdef0, or leave it empty to use the default image", c.AMI)
		}
		if c.AMIParameter != "" || c.AMIParameterARM64 != "" || c.AMIParameterGPU != "" {
			add("ami and Config.AMIParameter* are both set; set only one of them")
		}
	}
	for _, f := range []field{{"Config.AMIParameter", c.AMIParameter}, {"Config.AMIParameterARM64", c.AMIParameterARM64}, {"Config.AMIParameterGPU", c.AMIParameterGPU}} {
		if f.v != "" && (strings.ContainsAny(f.v, " \t\n") || len(f.v) > 2048) {
			add("%s %q is not an SSM parameter name; use one like %s", f.key, f.v, DefaultAMIParameter)
		}
	}

	switch {
	case c.InstanceProfile == "":
		add("instance_profile is empty; set it to an IAM instance profile (name or ARN) allowed ssm:GetParameter on /gateway/%s/* and kms:Decrypt", orDefault(c.GatewayID, "<gateway-id>"))
	case strings.HasPrefix(c.InstanceProfile, "arn:"):
		if !reProfileARN.MatchString(c.InstanceProfile) {
			add("instance_profile %q is not an instance profile ARN; use arn:aws:iam::<account>:instance-profile/<name>, or the name alone", c.InstanceProfile)
		}
	case !reProfileName.MatchString(c.InstanceProfile):
		add("instance_profile %q is not an instance profile name (letters, digits and +=,.@_- only)", c.InstanceProfile)
	}

	if c.VolumeGiB < 8 || c.VolumeGiB > 16384 {
		add("volume_gib is %d; set it between 8 and 16384 (at least the image's snapshot size, 30 for the default image)", c.VolumeGiB)
	}
	if !reImage.MatchString(c.Image) {
		add("image %q is not a container image reference; use one like ghcr.io/dask/dask:2024.8.0", c.Image)
	}
	if !rePython.MatchString(c.Python) {
		add("python %q is not an interpreter's name or absolute path; use one like python3 or /opt/conda/bin/python", c.Python)
	}
	for _, f := range []field{{"default_scheduler_type", c.DefaultSchedulerType}, {"default_worker_type", c.DefaultWorkerType}} {
		if !reInstanceType.MatchString(f.v) {
			add("%s %q is not an EC2 instance type; use one like m6i.xlarge", f.key, f.v)
		}
	}

	keys := make([]string, 0, len(c.ExtraTags))
	for k := range c.ExtraTags {
		keys = append(keys, k)
	}
	slices.Sort(keys) // stable messages
	for _, k := range keys {
		v := c.ExtraTags[k]
		switch {
		case k == "" || len(k) > 128:
			add("Config.ExtraTags: key %q must have 1 to 128 characters", k)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			add("Config.ExtraTags: key %q uses the reserved prefix aws:; rename it", k)
		case slices.Contains(reservedTagKeys(), k):
			add("Config.ExtraTags: key %q is set by the gateway itself; rename it", k)
		}
		if len(v) > 256 {
			add("Config.ExtraTags: the value of %q is longer than 256 characters; shorten it", k)
		}
	}
	// EC2 allows 50 tags per resource.
	if n := len(c.ExtraTags) + len(reservedTagKeys()); n > 50 {
		add("Config.ExtraTags has %d tags; with the gateway's own %d a resource may have at most 50", len(c.ExtraTags), len(reservedTagKeys()))
	}

	for _, f := range []field{{"ec2_endpoint", c.EC2Endpoint}, {"ssm_endpoint", c.SSMEndpoint}} {
		if f.v == "" {
			continue
		}
		if u, err := url.Parse(f.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("%s %q is not a URL; use one like https://ec2.us-east-1.amazonaws.com", f.key, f.v)
		}
	}

	if c.MaxAttempts < 1 {
		add("Config.MaxAttempts is %d; set it to 1 or more", c.MaxAttempts)
	}
	if c.BaseDelay < 0 || c.MaxDelay < 0 || c.MaxDelay < c.BaseDelay {
		add("Config.BaseDelay (%s) and Config.MaxDelay (%s) must be positive, BaseDelay <= MaxDelay", c.BaseDelay, c.MaxDelay)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"cache_ttl", c.CacheTTL}, {"stop_timeout", c.StopTimeout}, {"poll_interval", c.PollInterval}} {
		if d.v < 0 {
			add("%s is %s; set it to a positive duration", d.key, d.v)
		}
	}
	return p
}

// field is one named setting, in the order validate reports them.
type field struct{ key, v string }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
