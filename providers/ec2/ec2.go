package ec2

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/gatewayhq/gateway/internal/sdkhttp"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Name is the provider name this package registers under.
const Name = "ec2"

// RegionKey is the configuration key of the region, named by the error
// when neither it nor the AWS SDK's settings give one.
const RegionKey = "providers." + Name + ".region"

// Tags that mark what the provider made. gateway-id is the ownership
// marker List and the reaper go by; the others let Describe map an
// instance back to its member without any state of the provider's own.
const (
	tagGateway = "gateway-id"
	tagCluster = "gateway-cluster"
	tagMember  = "gateway-member"
	tagOwner   = "gateway-owner"
)

// Ports the scheduler listens on; the security group opens them to the
// gateway only.
const (
	schedulerPort = 8786
	dashboardPort = 8787
)

// Provider is the EC2 backend. It keeps no state that matters across
// restarts: every resource is found again by its tags, and the caches below
// only spare API calls.
type Provider struct {
	cfg Config
	log *slog.Logger
	ec2 ec2API
	ssm ssmAPI
	// region is the one the SDK's clients were made for, which Region
	// reports to quotas.
	region string

	mu sync.Mutex
	// net is the subnets' VPC and zones, looked up once.
	net *network
	// groups caches each cluster's security group id.
	groups map[string]string
	// groupLocks serialises the creation of one cluster's security group
	// within this process (other processes are handled by EC2's
	// duplicate-name error).
	groupLocks map[string]*sync.Mutex
	// secrets notes the clusters whose TLS parameter this process stored.
	secrets map[string]bool
	// launched remembers instances this process launched until
	// DescribeInstances lists them by tag: the EC2 API is eventually
	// consistent, and a member must not vanish between its launch and its
	// first listing.
	launched map[string]map[string]launch
	// stopped holds, per cluster, the instances this process terminated
	// and when, so that Describe reports them without a reason (they were
	// asked to stop). Entries outlive the cluster's stop, as EC2 lists
	// terminated instances for about an hour, and are pruned after
	// stoppedMemory.
	stopped map[string]map[string]time.Time
	// ready holds, per cluster, the scheduler instances that have accepted
	// a connection.
	ready map[string]map[string]bool
	// consoles holds, per cluster, what the console output of instances
	// that shut themselves down said (consoleVerdict).
	consoles map[string]map[string]*consoleVerdict
	// describes is the rate budget of Describe* calls, shared by every
	// cluster (describeBudget).
	describes *rateBudget
	// ends records when members stopped by StopCluster ended, for
	// StoppedAt (its records are dropped after a while if nobody asks:
	// clusters the reaper tidied).
	ends providers.EndTimes
	// amis caches AMI ids by SSM parameter; images, what DescribeImages
	// said of each AMI.
	amis   map[string]cached[string]
	images map[string]imageInfo
	// types caches DescribeInstanceTypes.
	types *cached[map[string]typeInfo]
}

type launch struct {
	id        string
	role      providers.Role
	owner     string
	startedAt time.Time
}

type cached[T any] struct {
	v       T
	expires time.Time
}

// New checks the configuration and makes the SDK clients. It calls no AWS
// API, so a gateway starts even while AWS is unreachable; Check does the
// live checks.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	cfg = cfg.withDefaults()
	region, regionErr := awsutil.Region(ctx, cfg.Region, RegionKey)
	cfg.Region = region
	problems := cfg.validate()
	if regionErr != nil {
		problems = append([]string{regionErr.Error()}, problems...)
	}
	if len(problems) > 0 {
		if len(problems) == 1 {
			return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, problems[0])
		}
		for i := range problems {
			problems[i] = fmt.Sprintf("(%d) %s", i+1, problems[i])
		}
		return nil, fmt.Errorf("%w (%d problems): %s", ErrInvalidConfig, len(problems), strings.Join(problems, "; "))
	}
	awsCfg, err := awsConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		cfg:    cfg,
		log:    cfg.Logger.With("provider", Name),
		region: awsCfg.Region,
		ec2: awsec2.NewFromConfig(awsCfg, func(o *awsec2.Options) {
			if cfg.EC2Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.EC2Endpoint)
			}
		}),
		ssm: ssm.NewFromConfig(awsCfg, func(o *ssm.Options) {
			if cfg.SSMEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.SSMEndpoint)
			}
		}),
		groups:     map[string]string{},
		groupLocks: map[string]*sync.Mutex{},
		secrets:    map[string]bool{},
		launched:   map[string]map[string]launch{},
		stopped:    map[string]map[string]time.Time{},
		ready:      map[string]map[string]bool{},
		consoles:   map[string]map[string]*consoleVerdict{},
		amis:       map[string]cached[string]{},
		images:     map[string]imageInfo{},
	}
	return p, nil
}

// awsConfig builds the SDK configuration. The region is the one New
// resolved (never looked up from instance metadata). The SDK's own
// retries are off: call retries with backoff itself, so that MaxAttempts is
// the real bound and tests control every wait.
func awsConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	if cfg.Credentials != nil {
		// Explicit credentials: nothing from the environment, shared files or
		// instance metadata, so that what runs is exactly what was configured.
		return aws.Config{
			Region:      cfg.Region,
			Credentials: aws.NewCredentialsCache(cfg.Credentials),
			Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
			HTTPClient:  sdkhttp.Client(cfg.HTTPClient),
		}, nil
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(cfg.Region),
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	}
	c, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("ec2 provider: load AWS configuration: %w", err)
	}
	// After loading, which configures the SDK's own client (AWS_CA_BUNDLE).
	c.HTTPClient = sdkhttp.Client(c.HTTPClient)
	return c, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Region implements providers.Regional: the region of the SDK
// configuration the clients were made with (the configured region, which
// takes precedence over AWS_REGION and the profile's, or else theirs),
// which quotas' allowed_regions are checked against.
func (p *Provider) Region() string { return p.region }

// Check makes the live checks New does not: the subnets exist and share a
// VPC, and the default AMI parameter resolves to an image. The gateway may
// call it at start-up to report a broken set-up before the first cluster.
func (p *Provider) Check(ctx context.Context) error {
	if _, err := p.network(ctx); err != nil {
		return err
	}
	if _, _, err := p.image(ctx, p.cfg.DefaultWorkerType, providers.Machine{}); err != nil {
		return err
	}
	return nil
}

// clientToken makes RunInstances idempotent at the EC2 level: the same
// member launched with the same parameters (attempt) always sends the same
// token, so a call repeated after a timeout or a crash returns the instance
// already launched instead of a second one. EC2 allows 64 ASCII characters.
func clientToken(gatewayID, cluster, member string, attempt int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", gatewayID, cluster, member, attempt))
	return "gw-" + hex.EncodeToString(h[:24])
}

// parameterName is where a cluster's TLS material is kept.
func (p *Provider) parameterName(cluster string) string {
	return fmt.Sprintf("/gateway/%s/%s/tls", p.cfg.GatewayID, cluster)
}

// groupName is the name of a cluster's security group, unique per VPC.
func (p *Provider) groupName(cluster string) string {
	return fmt.Sprintf("gateway-%s-%s", p.cfg.GatewayID, cluster)
}

// checkSpec rejects what the provider cannot run or would mis-tag.
func (p *Provider) checkSpec(spec providers.ClusterSpec) error {
	if !reName.MatchString(spec.Name) {
		return fmt.Errorf("ec2 provider: cluster name %q may only use letters, digits, '.', '_' and '-'", spec.Name)
	}
	if spec.GatewayID != "" && spec.GatewayID != p.cfg.GatewayID {
		// List finds members by the configured id: members tagged with
		// another would run on unseen by this gateway's reaper.
		return fmt.Errorf("ec2 provider: the cluster belongs to gateway %q but this provider is configured for %q", spec.GatewayID, p.cfg.GatewayID)
	}
	if spec.Region != "" && spec.Region != p.cfg.Region {
		return fmt.Errorf("%w: the ec2 provider runs clusters in %s only, not %s: configure another ec2 provider for that region", providers.ErrUnsupported, p.cfg.Region, spec.Region)
	}
	if spec.DashboardPrefix != "" && !reDashboardPrefix.MatchString(spec.DashboardPrefix) {
		return fmt.Errorf("ec2 provider: dashboard prefix %q must be a URL path of letters, digits and ._-/", spec.DashboardPrefix)
	}
	image := orDefault(spec.Image, p.cfg.Image)
	if !reImage.MatchString(image) {
		return fmt.Errorf("ec2 provider: %q is not a container image reference", image)
	}
	return nil
}

// memberTags are the tags of everything made for a member (instance and
// volume); the security group gets them without gateway-member.
func (p *Provider) memberTags(cluster, member, owner string) map[string]string {
	t := make(map[string]string, len(p.cfg.ExtraTags)+5)
	for k, v := range p.cfg.ExtraTags {
		t[k] = v
	}
	t[tagGateway] = p.cfg.GatewayID
	t[tagCluster] = cluster
	if owner != "" {
		t[tagOwner] = truncate(owner, 256)
	}
	if member != "" {
		t[tagMember] = member
		t["Name"] = fmt.Sprintf("dask-%s-%s", cluster, member)
	} else {
		t["Name"] = p.groupName(cluster)
	}
	return t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// StoppedAt implements providers.StopTimes; each answer is given once.
func (p *Provider) StoppedAt(cluster, member string) (time.Time, bool) {
	return p.ends.StoppedAt(cluster, member)
}

// groupLock returns the mutex that serialises work on one cluster's
// security group.
func (p *Provider) groupLock(cluster string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.groupLocks[cluster]
	if l == nil {
		l = &sync.Mutex{}
		p.groupLocks[cluster] = l
	}
	return l
}

// forget drops what this process remembers of a cluster it has stopped.
func (p *Provider) forget(cluster string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.groups, cluster)
	delete(p.groupLocks, cluster)
	delete(p.secrets, cluster)
	delete(p.launched, cluster)
	delete(p.ready, cluster)
	delete(p.consoles, cluster)
}
