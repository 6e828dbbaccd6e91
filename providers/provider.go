// Package providers defines the contract between the scheduling core and the
// backends that run Dask schedulers and workers (local processes, Docker,
// EC2, Fargate, Compute Engine).
//
// The contract is shaped for crash safety: every resource has a
// deterministic name chosen by the caller, and every call is idempotent, so
// the reconcile loop can repeat any call after a crash without starting a
// second machine. Calls return once the request is accepted; progress is
// observed with Describe, as a cloud API would report it.
package providers

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/providers/catalog"
)

// Role tells a scheduler from a worker.
type Role string

// The roles of a cluster member.
const (
	RoleScheduler Role = "scheduler"
	RoleWorker    Role = "worker"
)

// State is what the backend reports of one resource.
type State string

// Resource states.
const (
	StatePending State = "pending" // accepted, not yet serving
	StateRunning State = "running"
	StateStopped State = "stopped" // gone, or exited; Reason says why when it was not asked to stop
)

// Errors callers match with errors.Is.
var (
	// ErrNotFound is returned by calls on resources the backend does not know.
	ErrNotFound = errors.New("provider: resource not found")
	// ErrUnsupported is returned for a spec the backend cannot run at all
	// (GPUs on Fargate): the message says what to use instead.
	ErrUnsupported = errors.New("provider: not supported by this backend")
	// ErrCapacity is returned when the cloud had no capacity for the spec
	// anywhere it was allowed to look; the message lists what was tried.
	ErrCapacity = errors.New("provider: no capacity")
)

// MinGatewayBits is the shortest prefix a backend accepts for the
// gateway's address range: anything wider (0.0.0.0/1 and 128.0.0.0/1
// together are the whole internet) would expose schedulers.
func MinGatewayBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 8
	}
	return 32
}

// Machine is what one member runs on, as the cluster was admitted.
type Machine struct {
	// InstanceType is the cloud's machine type ("m6i.xlarge",
	// "n2-standard-4"); empty for backends sized by resources alone
	// (local, docker, Fargate).
	InstanceType string
	VCPUs        float64
	MemoryGiB    float64
	GPUs         int
	GPUType      string // short lower-case name: t4, a10g, l4, v100, a100, h100
	// Alternatives are other allowed instance types that fit the request,
	// cheapest first: where InstanceType has no capacity, a backend tries
	// them in turn.
	Alternatives []string
}

// ClusterSpec is what a backend needs to run one cluster.
type ClusterSpec struct {
	Name      string // the cluster name, unique per gateway
	Owner     string // user name, recorded in the ownership tag
	GatewayID string // which gateway owns the resources (ownership tag)

	TLSCert []byte // PEM; CA, server and client certificate in one
	TLSKey  []byte // PEM

	// DashboardPrefix is the URL path under which the gateway publishes the
	// scheduler's HTTP server; schedulers serve under it so that links in
	// their pages resolve through the gateway.
	DashboardPrefix string

	WorkerThreads int
	WorkerMemory  int64 // bytes; 0 means the backend's default
	// Image is the container image with the user's software (cloud and
	// docker backends); empty means the backend's default.
	Image string
	// EnvExpect is the client's versions of the packages that must match
	// (images.ExpectValue): backends that run images start each member
	// through images.LauncherCommand with it in images.ExpectEnv, so that a
	// member with other software stops at once with a table of the
	// differences. Empty skips the check.
	EnvExpect string
	// Env are the owner's environment variables for every member
	// (clusteropts.Options.Environ, checked by clusteropts.CheckEnviron):
	// Dask config values among them. Set before the backend's own, which
	// win. Never logged: the values are the owner's.
	Env map[string]string

	// Scheduler and Worker are the members' machines; Region is where the
	// cluster runs ("" for the backend's default); Spot asks for workers
	// on spot/preemptible capacity, falling back to on-demand.
	Scheduler Machine
	Worker    Machine
	Region    string
	Spot      bool
}

// Member is one scheduler or worker as the backend sees it.
type Member struct {
	Cluster string
	Name    string // deterministic: the scheduler is "scheduler", workers are chosen by the caller
	Role    Role
	State   State
	Owner   string
	// Address is where the gateway reaches the member: host:port of the
	// scheduler's TLS listener; empty until known.
	Address string
	// DashboardURL is the base URL of the scheduler's HTTP server.
	DashboardURL string
	Reason       string // why a member stopped on its own, e.g. the last lines of its log
	StartedAt    time.Time
}

// CompareMembers orders members by cluster, then name: the order of
// List's and ListMembers' answers.
func CompareMembers(a, b Member) int {
	return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Name, b.Name))
}

// Provider is what every backend implements.
type Provider interface {
	// Name is the backend's configured name ("local", "ec2", ...).
	Name() string
	// StartScheduler launches the cluster's scheduler, or does nothing if it
	// already runs.
	StartScheduler(ctx context.Context, spec ClusterSpec) error
	// StartWorker launches the named worker connected to the scheduler at
	// schedulerAddress, or does nothing if it already runs.
	StartWorker(ctx context.Context, spec ClusterSpec, worker, schedulerAddress string) error
	// StopWorker stops the named worker; a worker already gone is not an error.
	StopWorker(ctx context.Context, cluster, worker string) error
	// Describe reports the cluster's members, stopped ones included while the
	// backend remembers them.
	Describe(ctx context.Context, cluster string) ([]Member, error)
	// List reports every member carrying this gateway's ownership tag, for
	// the reaper and for re-adoption after a restart.
	List(ctx context.Context) ([]Member, error)
	// StopCluster stops every member of the cluster and frees what the
	// backend made for it; an unknown cluster is not an error.
	StopCluster(ctx context.Context, cluster string) error
}

// InstanceTypes is implemented by backends whose machines come in types:
// the gateway picks the cheapest allowed type that fits a request from
// what the backend lists (its cloud's own listing, cached, with the
// built-in table when the listing cannot be had).
type InstanceTypes interface {
	InstanceTypes(ctx context.Context) ([]catalog.InstanceType, error)
}

// Spot is implemented by backends that can put workers on spot or
// preemptible capacity (falling back to on-demand) without instance types,
// such as Fargate with FARGATE_SPOT: the spot option is offered for them
// too. Backends with instance types offer it anyway.
type Spot interface {
	SpotCapacity()
}

// Regional is implemented by backends that run in one configured region:
// every cloud backend (quotas' allowed_regions are checked against it).
// Local and docker members run where the operator put the gateway or its
// Docker engine, and have no region to check.
type Regional interface {
	Region() string
}

// Immediate is implemented by backends whose Describe lists a member as
// soon as its start call returns (no eventual consistency): a member such
// a backend does not list was never started, or was forgotten after it
// stopped. The usage ledger counts no time for a member never started.
type Immediate interface {
	ListsImmediately()
}

// StopTimes is implemented by backends that know when the members of a
// cluster they stopped with StopCluster ended; the usage ledger dates
// their stops by it rather than by when the call returned.
type StopTimes interface {
	// StoppedAt reports when the member ended, if known; a backend may
	// answer only once.
	StoppedAt(cluster, member string) (time.Time, bool)
}

// LogReader is implemented by backends that keep members' logs.
type LogReader interface {
	// Logs writes the cluster's logs, each line prefixed by the member name,
	// at most tail lines per member when tail > 0.
	Logs(ctx context.Context, cluster string, tail int, w io.Writer) error
}

// MemberLister is implemented by backends that report every cluster's
// members in one call, each member exactly as Describe would report it:
// the scheduler's sweep then lists once per interval instead of
// describing each settled cluster.
type MemberLister interface {
	ListMembers(ctx context.Context) ([]Member, error)
}

// LeftoverLister is implemented by backends that can find the resources a
// cluster shares (security groups, parameters, secrets, task definitions,
// firewall rules) by their ownership tags alone, without a member to lead
// to them: a cluster whose members are all gone, or that the cloud has
// forgotten, would otherwise leave them behind.
type LeftoverLister interface {
	// ListLeftovers lists every such resource of this gateway (by its
	// ownership tags or labels, checked exactly), whatever its cluster.
	ListLeftovers(ctx context.Context) ([]Leftover, error)
	// DeleteLeftover removes one; one already gone is success.
	DeleteLeftover(ctx context.Context, l Leftover) error
}

// StartPacer is implemented by backends whose members take a while to
// boot and whose Describe calls a cloud API metered per account (EC2,
// Fargate, Compute Engine): StartPoll is the first wait between polls of
// a member coming up, so that a booting cluster does not spend the
// account's request rate.
type StartPacer interface {
	StartPoll() time.Duration
}

// Closer is implemented by backends that hold resources of their own
// (child processes, connections). Close with leave=true leaves members
// running so that a restarted gateway re-adopts them.
type Closer interface {
	Close(ctx context.Context, leave bool) error
}

// EnvList is a ClusterSpec's Env as NAME=value entries, sorted by name, as
// processes and containers take them.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
