// Package gce runs each Dask cluster on Google Compute Engine: one VM for
// the scheduler and one per worker, in the gateway's own project and VPC.
//
// How a cluster is laid out:
//
//   - Every member is an instance named gw-<cluster>-<member> (a valid,
//     deterministic GCE name; long or unusual names get a hash suffix), with
//     the labels gateway-id, gateway-cluster, gateway-member, gateway-role
//     and gateway-owner. The labels are what Describe and List filter on;
//     the exact names are repeated in instance metadata, because label
//     values are restricted to lower-case letters, digits, "_" and "-".
//   - Instances get no external address: the gateway reaches the scheduler's
//     private IP, which must be routable from where the gateway runs (same
//     VPC, peering or VPN). Two firewall rules per cluster:
//     tcp:8786-8787 (Dask TLS, and the dashboard over HTTPS with the
//     cluster's certificate) from Config.GatewayServiceAccount only (a
//     rule by service account, targeting the members' account: Google
//     does not let one rule mix accounts and tags), and all tcp between the
//     cluster's own instances by its network tag gw-<cluster>. No address
//     range is admitted (Config.GatewayCIDRs is a fallback that does), and
//     nothing is ever opened to 0.0.0.0/0.
//   - Each instance boots a Container-Optimized OS image (a Deep Learning VM
//     image with NVIDIA drivers for GPU machines), and its startup script
//     pulls the container image and runs `dask scheduler` or `dask worker`
//     with TLS, as the local provider's command line does.
//
// Where the TLS key lives: never in instance metadata, which anyone with
// compute.instances.get can read. The provider stores the cluster's
// certificate and key in a per-cluster Secret Manager secret
// (gw-<cluster>-tls, labelled like the instances), grants the instances'
// service account roles/secretmanager.secretAccessor on that one secret
// (so the account needs no project-wide access to secrets), and the
// startup script fetches it through Secret Manager's REST API with the
// instance's own service-account token from the metadata server. The files
// live under /run (memory only) on the VM. The secret is deleted with the
// cluster. The provider talks to Secret Manager with plain net/http (its Go
// client would be another module). Every cluster runs as the same service
// account, which may read every live cluster's secret; so once the startup
// script has read its key and pulled its image, and before any of the
// image's code runs, it refuses the metadata server (and so the account's
// tokens) to every process but its own, which runs as a uid drawn at random
// then and which the container, started without CAP_SETUID, CAP_SETGID and
// new privileges, cannot take (script.go, metadataCutoff). A service
// account per cluster would also do, but is slow to create and limited to
// 100 per project.
//
// Operator set-up: the gateway's identity needs roles/compute.instanceAdmin.v1
// (instances, operations, guest attributes), roles/compute.securityAdmin
// (firewall rules), roles/iam.serviceAccountUser on the instances' service
// account (to run instances as it), and roles/secretmanager.admin (secrets
// and their IAM policies). The instances' service account needs
// roles/logging.logWriter and, for private images,
// roles/artifactregistry.reader. The subnetwork needs Private Google Access.
//
// Readiness: a VM that is RUNNING has not necessarily started Dask yet
// (the image pull alone takes a while). The startup script sets the guest
// attribute gateway/ready once the scheduler accepts connections, and
// Describe reports the scheduler running only then. When Dask exits, the
// script records why in the guest attribute gateway/status and powers the
// VM off, so a dead member shows as stopped with a reason instead of
// running on, and an orphaned worker (its scheduler gone) stops costing
// money after Dask's death timeout.
//
// Capacity: an insert whose operation fails for a stock-out
// (ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS], other resource availability
// errors, a machine type or GPU the zone does not offer) moves on to the
// next zone, then to the next alternative machine type; a quota error
// (QUOTA_EXCEEDED) moves straight to the next type, as quotas are regional
// and all the zones are in one region. Spot workers then fall back to
// on-demand. HTTP 429 and 5xx answers are retried with exponential backoff
// and full jitter, a bounded number of times; inserts carry a request ID, so
// a retry after a lost answer never makes a second instance. When nothing
// could be had, the error wraps providers.ErrCapacity and lists every
// (type, zone, code) tried.
//
// GPUs: A2, A3 and G2 machine types come with their GPUs. T4, V100, P100
// and P4 attach to N1 machines; InstanceTypes offers those combinations
// under names like "n1-standard-8+2xt4", which StartScheduler and
// StartWorker understand, as they do a plain N1 type with Machine.GPUs and
// GPUType. Any machine with GPUs gets onHostMaintenance TERMINATE and no
// automatic restart, and boots Config.GPUImage.
package gce

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
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
)

// Name is the provider name this package registers under.
const Name = "gce"

// Ports the scheduler listens on; the firewall rule opens exactly these to
// the gateway.
const (
	SchedulerPort = 8786
	DashboardPort = 8787
)

// Defaults of Config.
const (
	DefaultImage          = "projects/cos-cloud/global/images/family/cos-stable"
	DefaultGPUImage       = "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570"
	DefaultContainerImage = "ghcr.io/dask/dask:latest"
	DefaultNetwork        = "default"
	DefaultDiskType       = "pd-balanced"
	DefaultDiskGiB        = 50
	DefaultGPUDiskGiB     = 100
	DefaultSchedulerType  = "e2-standard-2"
	DefaultWorkerType     = "e2-standard-4"
	DefaultSecretEndpoint = "https://secretmanager.googleapis.com/"
	// CloudPlatformScope is the scope the instances need: Secret Manager
	// accepts no narrower one. What they may do is then up to the service
	// account's IAM roles.
	CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"
)

// ErrInvalidConfig marks a Config that New refuses; the message lists every
// problem with what to fix.
var ErrInvalidConfig = errors.New("gce provider: invalid configuration")

// RetryConfig bounds the retries of calls that failed transiently (HTTP
// 429 and 5xx, rate-limit reasons, dropped connections).
type RetryConfig struct {
	// MaxAttempts is the number of tries of one call, the first included
	// (default 5).
	MaxAttempts int
	// BaseDelay and MaxDelay bound the exponential backoff; each pause is
	// drawn uniformly from [0, min(MaxDelay, BaseDelay*2^n)) ("full
	// jitter"), so that gateways retrying together spread out (defaults
	// 500ms and 30s). A Retry-After header raises the pause, up to MaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Sleep pauses between tries, returning early with ctx's error; tests
	// replace it to run without waiting (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Config configures the Compute Engine backend.
type Config struct {
	// Project is the project ID the instances run in. It is never looked up
	// from the metadata server.
	Project string
	// Zones are tried in order for each member, all in one region (the
	// provider's Region); a cluster's workers try the scheduler's zone
	// first.
	Zones []string
	// Network is the VPC network (name or partial URL, default "default");
	// Subnetwork optionally names the subnetwork (name, taken in the
	// zone's region, or partial URL). The subnetwork needs Private Google
	// Access (for Secret Manager and Artifact Registry) or Cloud NAT (for
	// other registries), since instances have no external address.
	Network    string
	Subnetwork string
	// GatewayServiceAccount is the email of the service account the
	// gateway's own instances run as: the only source admitted to the
	// schedulers' ports 8786 (Dask TLS) and 8787 (dashboard), by a firewall
	// rule with sourceServiceAccounts. An address range would also admit
	// other clusters' members that share the gateway's subnetwork.
	GatewayServiceAccount string
	// GatewayCIDRs is the fallback when the gateway does not run on GCE
	// instances of this network (a VPN, another cloud): its addresses as
	// the VPC sees them, admitted instead, and with them anything else
	// there. Only one of the two may be set. IPv4 ranges; 0.0.0.0/0 is
	// refused.
	GatewayCIDRs []string
	// ServiceAccount is the email of the service account the instances run
	// as; use a dedicated one with no roles beyond log writing and image
	// pulling: the provider grants it access to each cluster's secret.
	// Scopes default to cloud-platform, which the instances need.
	ServiceAccount string
	Scopes         []string
	// Image is the boot image (default Container-Optimized OS, stable
	// family); GPUImage the one for machines with GPUs (default a Deep
	// Learning VM family with NVIDIA drivers, Docker and the NVIDIA
	// container toolkit). Either may be a Container-Optimized OS image: the
	// startup script then installs the GPU driver with cos-extensions.
	Image    string
	GPUImage string
	// DiskGiB and GPUDiskGiB size the boot disks (defaults 50 and 100);
	// DiskType is the disk type (default pd-balanced).
	DiskGiB    int
	GPUDiskGiB int
	DiskType   string
	// ContainerImage is the image with Dask when the cluster asks for none
	// (default ghcr.io/dask/dask:latest; pin a version in production).
	ContainerImage string
	// Python is the interpreter in the images (the container's
	// entrypoint), which runs the launcher (images.LauncherScript) and
	// then Dask; default "python3", looked up on the image's PATH.
	Python string
	// SchedulerMachineType and WorkerMachineType are used when the spec
	// names no instance type and no size (defaults e2-standard-2 and
	// e2-standard-4).
	SchedulerMachineType string
	WorkerMachineType    string
	// Labels are added to every instance and secret (not to the gateway-*
	// keys, which are the provider's).
	Labels map[string]string
	// Endpoint replaces the Compute Engine endpoint (tests, emulators);
	// SecretManagerEndpoint the Secret Manager one (defaults to Endpoint
	// when that is set). Unset, each client resolves its endpoint as
	// Google's own clients do: the universe domain
	// (GOOGLE_CLOUD_UNIVERSE_DOMAIN or option.WithUniverseDomain) and the
	// mTLS settings apply. The instances themselves always use Google's
	// Secret Manager endpoint.
	Endpoint              string
	SecretManagerEndpoint string
	// ClientOptions are passed to every client: credentials
	// (option.WithCredentialsFile), option.WithoutAuthentication for tests,
	// option.WithHTTPClient.
	ClientOptions []option.ClientOption
	Retry         RetryConfig
	// OperationTimeout bounds the wait for one zonal or global operation
	// (default 5 minutes).
	OperationTimeout time.Duration
	// InstanceTypesTTL is how long the listed machine types are cached
	// (default 1 hour; a failed listing is retried after a minute).
	InstanceTypesTTL time.Duration
	// GatewayID is the ownership tag: every instance carries it as the
	// gateway-id label, and List finds instances by it.
	GatewayID string
	Logger    *slog.Logger
}

// Provider is the Compute Engine backend.
type Provider struct {
	cfg     Config
	log     *slog.Logger
	catalog *catalog.Catalog
	network string // partial URL "global/networks/N" or a full one
	gwLabel string // label value of GatewayID

	instances    *compute.InstancesClient
	zoneOps      *compute.ZoneOperationsClient
	globalOps    *compute.GlobalOperationsClient
	firewalls    *compute.FirewallsClient
	machineTypes *compute.MachineTypesClient
	accelTypes   *compute.AcceleratorTypesClient
	secrets      *secretClient

	mu       sync.Mutex
	clusters map[string]*clusterState
	gen      uint64             // counts member registrations (see Describe)
	ready    map[uint64]bool    // instance id -> scheduler signalled ready
	reasons  map[uint64]string  // instance id -> why it stopped on its own
	ends     providers.EndTimes // when StopCluster saw each member end
	// pullAdvised: the operator was told what a member's network needs to
	// pull its image (pullAdvice), once.
	pullAdvised bool
	types       typeCache
	reads       *readBudgetT // rate budget of Compute Engine reads (readBudget)
}

// clusterState is what this process learnt about a cluster. None of it is
// needed for correctness after a restart: it saves calls, and remembers
// members that vanished (a Spot VM deleted on preemption) so that Describe
// can report them stopped, with the reason, until the core forgets them.
type clusterState struct {
	infraReady bool // firewall rules and secret ensured
	schedZone  string
	members    map[string]*memberState
}

type memberState struct {
	zone     string
	id       uint64
	role     providers.Role
	owner    string
	spot     bool
	gen      uint64 // registration number
	stopping bool   // this process asked to delete it
	lost     *providers.Member
}

// New validates cfg, reporting every problem at once, and makes the
// clients. It sends no request: credentials are found (or not, with
// option.WithoutAuthentication) when the first call is made.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	cfg = withDefaults(cfg)
	if problems := validate(cfg); len(problems) > 0 {
		if len(problems) == 1 {
			return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, problems[0])
		}
		for i := range problems {
			problems[i] = fmt.Sprintf("(%d) %s", i+1, problems[i])
		}
		return nil, fmt.Errorf("%w (%d problems): %s", ErrInvalidConfig, len(problems), strings.Join(problems, " "))
	}
	cat, err := catalog.New(catalog.Builtin(), nil)
	if err != nil {
		return nil, fmt.Errorf("gce provider: built-in catalog: %w", err)
	}
	p := &Provider{
		cfg: cfg, log: cfg.Logger.With("provider", Name), catalog: cat,
		network: networkURL(cfg.Project, cfg.Network), gwLabel: labelValue(cfg.GatewayID),
		clusters: map[string]*clusterState{}, ready: map[uint64]bool{}, reasons: map[uint64]string{},
	}
	opts := slices.Clone(cfg.ClientOptions)
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if err := p.newClients(ctx, opts); err != nil {
		_ = p.closeClients()
		return nil, err
	}
	return p, nil
}

func (p *Provider) newClients(ctx context.Context, opts []option.ClientOption) error {
	var err error
	// Each client's built-in retry settings are cleared: the provider
	// retries itself, with a bound, jitter and an injectable sleep, and
	// two layers of retries would multiply.
	if p.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: instances client: %w", err)
	}
	*p.instances.CallOptions = compute.InstancesCallOptions{}
	if p.zoneOps, err = compute.NewZoneOperationsRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: zone operations client: %w", err)
	}
	*p.zoneOps.CallOptions = compute.ZoneOperationsCallOptions{}
	if p.globalOps, err = compute.NewGlobalOperationsRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: global operations client: %w", err)
	}
	*p.globalOps.CallOptions = compute.GlobalOperationsCallOptions{}
	if p.firewalls, err = compute.NewFirewallsRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: firewalls client: %w", err)
	}
	*p.firewalls.CallOptions = compute.FirewallsCallOptions{}
	if p.machineTypes, err = compute.NewMachineTypesRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: machine types client: %w", err)
	}
	*p.machineTypes.CallOptions = compute.MachineTypesCallOptions{}
	if p.accelTypes, err = compute.NewAcceleratorTypesRESTClient(ctx, opts...); err != nil {
		return fmt.Errorf("gce provider: accelerator types client: %w", err)
	}
	*p.accelTypes.CallOptions = compute.AcceleratorTypesCallOptions{}
	endpoint := p.cfg.SecretManagerEndpoint
	if endpoint == "" {
		endpoint = p.cfg.Endpoint
	}
	if p.secrets, err = newSecretClient(ctx, p.cfg.Project, endpoint, p.cfg.ClientOptions); err != nil {
		return fmt.Errorf("gce provider: secret manager client: %w", err)
	}
	return nil
}

func withDefaults(cfg Config) Config {
	if cfg.Network == "" {
		cfg.Network = DefaultNetwork
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{CloudPlatformScope}
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.GPUImage == "" {
		cfg.GPUImage = DefaultGPUImage
	}
	if cfg.DiskGiB == 0 {
		cfg.DiskGiB = DefaultDiskGiB
	}
	if cfg.GPUDiskGiB == 0 {
		cfg.GPUDiskGiB = DefaultGPUDiskGiB
	}
	if cfg.DiskType == "" {
		cfg.DiskType = DefaultDiskType
	}
	if cfg.ContainerImage == "" {
		cfg.ContainerImage = DefaultContainerImage
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.SchedulerMachineType == "" {
		cfg.SchedulerMachineType = DefaultSchedulerType
	}
	if cfg.WorkerMachineType == "" {
		cfg.WorkerMachineType = DefaultWorkerType
	}
	if cfg.Retry.MaxAttempts == 0 {
		cfg.Retry.MaxAttempts = 5
	}
	if cfg.Retry.BaseDelay == 0 {
		cfg.Retry.BaseDelay = 500 * time.Millisecond
	}
	if cfg.Retry.MaxDelay == 0 {
		cfg.Retry.MaxDelay = 30 * time.Second
	}
	if cfg.Retry.Sleep == nil {
		cfg.Retry.Sleep = backoff.Sleep
	}
	if cfg.OperationTimeout == 0 {
		cfg.OperationTimeout = 5 * time.Minute
	}
	if cfg.InstanceTypesTTL == 0 {
		cfg.InstanceTypesTTL = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

var (
	projectRE   = regexp.MustCompile(`^([a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	zoneRE      = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)
	gceNameRE   = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	resourceRE  = regexp.MustCompile(`^[a-zA-Z0-9][-a-zA-Z0-9_./:]*$`)
	labelKeyRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValRE  = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	emailRE     = regexp.MustCompile(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-z]{2,}$`)
	imageRefRE  = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$`)
	pythonRE    = regexp.MustCompile(`^/?[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
	reservedKey = "gateway-"
)

// validate returns every problem with cfg, each saying what to fix.
func validate(cfg Config) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	switch {
	case cfg.Project == "":
		add("project is empty; set it to the project ID the clusters run in (it is never looked up from the metadata server)")
	case !projectRE.MatchString(cfg.Project):
		add("project %q is not a project ID; use the ID (e.g. my-project-123), not the name or number", cfg.Project)
	}
	if len(cfg.Zones) == 0 {
		add(`zones is empty; list the zones to try in order, e.g. ["us-central1-a", "us-central1-b"]`)
	}
	seen := map[string]bool{}
	var regions []string
	for _, z := range cfg.Zones {
		if !zoneRE.MatchString(z) {
			add("zone %q is not a zone name; use names such as us-central1-a", z)
		}
		if seen[z] {
			add("zone %q is listed twice; remove one", z)
		}
		seen[z] = true
		if r := regionOf(z); !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
	}
	if len(regions) > 1 {
		// Quotas allow regions by the provider's one region, and a
		// cluster's traffic should not cross regions; another region is
		// another gateway (or provider) configuration.
		add("zones span the regions %q; list zones of one region (the provider runs in one region)", regions)
	}
	switch {
	case cfg.GatewayServiceAccount == "" && len(cfg.GatewayCIDRs) == 0:
		add("gateway_service_account is empty; set it to the email of the service account the gateway's instances run as: only they may reach the schedulers")
	case cfg.GatewayServiceAccount != "" && len(cfg.GatewayCIDRs) > 0:
		add("gateway_service_account and gateway_cidrs are both set; set only gateway_service_account (gateway_cidrs would also admit everything else in those ranges)")
	case cfg.GatewayServiceAccount != "" && !emailRE.MatchString(cfg.GatewayServiceAccount):
		add("gateway_service_account %q is not an email; use e.g. gateway@PROJECT.iam.gserviceaccount.com", cfg.GatewayServiceAccount)
	case cfg.GatewayServiceAccount != "" && strings.EqualFold(cfg.GatewayServiceAccount, cfg.ServiceAccount):
		// Every member would then be admitted to every other cluster's
		// scheduler and dashboard.
		add("gateway_service_account is the members' service_account; the gateway needs an account of its own, or every cluster's members reach every other cluster's scheduler")
	}
	for _, c := range cfg.GatewayCIDRs {
		if msg := checkCIDR(c); msg != "" {
			add("gateway_cidrs entry %q %s", c, msg)
		}
	}
	switch {
	case cfg.ServiceAccount == "":
		add("service_account is empty; set it to the email of a dedicated service account for the instances (the default compute account has far too many rights)")
	case !emailRE.MatchString(cfg.ServiceAccount):
		add("service_account %q is not an email; use e.g. dask-workers@PROJECT.iam.gserviceaccount.com", cfg.ServiceAccount)
	}
	if !slices.Contains(cfg.Scopes, CloudPlatformScope) {
		add("scopes %q lack %s, which the instances need to read their TLS secret from Secret Manager; add it (IAM roles still decide what they may do)", cfg.Scopes, CloudPlatformScope)
	}
	for _, f := range []struct{ name, v string }{{"image", cfg.Image}, {"gpu_image", cfg.GPUImage}, {"disk_type", cfg.DiskType}, {"network", cfg.Network}, {"subnetwork", cfg.Subnetwork}} {
		if f.v != "" && !resourceRE.MatchString(f.v) {
			add("%s %q is not a resource name or partial URL; use e.g. projects/cos-cloud/global/images/family/cos-stable", f.name, f.v)
		}
	}
	if cfg.DiskGiB < 10 {
		add("disk_gib is %d; set it to at least 10 (the images need 10 GiB, and the container image room)", cfg.DiskGiB)
	}
	if cfg.GPUDiskGiB < 50 {
		add("Config.GPUDiskGiB is %d; set it to at least 50 (GPU images with drivers need it)", cfg.GPUDiskGiB)
	}
	if !imageRefRE.MatchString(cfg.ContainerImage) {
		add("container_image %q is not an image reference; use e.g. ghcr.io/dask/dask:2024.12.1", cfg.ContainerImage)
	}
	if !pythonRE.MatchString(cfg.Python) {
		add("Config.Python %q is not an interpreter's name or absolute path; use e.g. python3 or /opt/conda/bin/python", cfg.Python)
	}
	for _, f := range []struct{ name, v string }{{"scheduler_machine_type", cfg.SchedulerMachineType}, {"worker_machine_type", cfg.WorkerMachineType}} {
		if !gceNameRE.MatchString(f.v) {
			add("%s %q is not a machine type name; use e.g. e2-standard-4", f.name, f.v)
		}
	}
	keys := make([]string, 0, len(cfg.Labels))
	for k := range cfg.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := cfg.Labels[k]
		switch {
		case strings.HasPrefix(k, reservedKey):
			add("label %q uses the reserved prefix %q; rename it", k, reservedKey)
		case !labelKeyRE.MatchString(k):
			add("label key %q is invalid; use lower-case letters, digits, _ and -, starting with a letter, at most 63 characters", k)
		case !labelValRE.MatchString(v):
			add("label %q has value %q; use lower-case letters, digits, _ and -, at most 63 characters", k, v)
		}
	}
	if len(cfg.Labels) > 64-5 {
		add("labels has %d entries; at most %d fit beside the provider's own 5", len(cfg.Labels), 64-5)
	}
	for _, f := range []struct{ name, v string }{{"endpoint", cfg.Endpoint}, {"secretmanager_endpoint", cfg.SecretManagerEndpoint}} {
		if f.v == "" {
			continue
		}
		if u, err := url.Parse(f.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("%s %q is not an http(s) URL", f.name, f.v)
		}
	}
	if cfg.Retry.MaxAttempts < 1 {
		add("retry.max_attempts is %d; set it to 1 or more", cfg.Retry.MaxAttempts)
	}
	if cfg.Retry.BaseDelay < 0 || cfg.Retry.MaxDelay < 0 || cfg.Retry.MaxDelay < cfg.Retry.BaseDelay {
		add("retry delays (base %s, max %s) must be positive with max >= base", cfg.Retry.BaseDelay, cfg.Retry.MaxDelay)
	}
	if cfg.OperationTimeout < 0 {
		add("Config.OperationTimeout is %s; set it to a positive duration such as 5m", cfg.OperationTimeout)
	}
	if cfg.InstanceTypesTTL < 0 {
		add("Config.InstanceTypesTTL is %s; set it to a positive duration such as 1h", cfg.InstanceTypesTTL)
	}
	if strings.TrimSpace(cfg.GatewayID) == "" {
		add("gateway id is empty; every instance is tagged with it so that List and the reaper find them")
	}
	return p
}

// checkCIDR says what is wrong with a gateway source range, or "".
func checkCIDR(c string) string {
	pfx, err := netip.ParsePrefix(c)
	switch {
	case err != nil:
		return "is not a CIDR range; write it as 10.0.0.0/24 (a single address as 10.0.0.5/32)"
	case !pfx.Addr().Is4():
		return "is IPv6; the instances have IPv4 addresses only, give the gateway's IPv4 range"
	case pfx.Bits() < providers.MinGatewayBits(pfx):
		return "opens the schedulers to much of the Internet; give the gateway's own range (a /8 or narrower)"
	case pfx.Masked() != pfx:
		return fmt.Sprintf("has host bits set; did you mean %s?", pfx.Masked())
	}
	return ""
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Region implements providers.Regional: the region of the configured
// zones, which quotas' allowed regions are checked against.
func (p *Provider) Region() string { return regionOf(p.cfg.Zones[0]) }

// Close implements providers.Closer. It only closes the API clients:
// clusters are stopped by the core, which knows which of them this replica
// holds; stopping every instance with the ownership tag here would stop
// the clusters other replicas of the same gateway run.
func (p *Provider) Close(ctx context.Context, leave bool) error {
	return p.closeClients()
}

func (p *Provider) closeClients() error {
	var errs []error
	for _, c := range []interface{ Close() error }{p.instances, p.zoneOps, p.globalOps, p.firewalls, p.machineTypes, p.accelTypes} {
		if c == nil || isNilClient(c) {
			continue
		}
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// isNilClient reports a typed nil among the clients (New failed half-way).
func isNilClient(c interface{ Close() error }) bool {
	switch v := c.(type) {
	case *compute.InstancesClient:
		return v == nil
	case *compute.ZoneOperationsClient:
		return v == nil
	case *compute.GlobalOperationsClient:
		return v == nil
	case *compute.FirewallsClient:
		return v == nil
	case *compute.MachineTypesClient:
		return v == nil
	case *compute.AcceleratorTypesClient:
		return v == nil
	}
	return false
}

// state returns the cluster's in-memory state, making it; the caller holds
// p.mu.
func (p *Provider) state(cluster string) *clusterState {
	st := p.clusters[cluster]
	if st == nil {
		st = &clusterState{members: map[string]*memberState{}}
		p.clusters[cluster] = st
	}
	return st
}

// remember records a member seen or started, keeping what was known.
func (p *Provider) remember(cluster, member string, ms memberState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state(cluster)
	old := st.members[member]
	if old != nil && old.id == ms.id && old.lost == nil {
		old.zone = ms.zone
		return
	}
	p.gen++
	ms.gen = p.gen
	if old != nil && old.id == ms.id {
		ms.stopping = old.stopping
	}
	st.members[member] = &ms
	if ms.role == providers.RoleScheduler {
		st.schedZone = ms.zone
	}
}

var _ providers.Provider = (*Provider)(nil)
var _ providers.InstanceTypes = (*Provider)(nil)
var _ providers.StopTimes = (*Provider)(nil)
var _ providers.Closer = (*Provider)(nil)
var _ providers.Regional = (*Provider)(nil)
