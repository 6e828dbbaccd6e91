package providers

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/crashpoint"
)

// Deps is what the composition root hands every backend's constructor
// besides its configuration section.
type Deps struct {
	// GatewayID is the ownership tag put on every resource.
	GatewayID string
	// DataDir is the gateway's data directory; a backend keeps its files
	// in a folder of its own there.
	DataDir string
	// PullAuth returns the registry credentials for an image (the image
	// builder's), nil when there are none.
	PullAuth func(ctx context.Context, image string) (string, error)
	Logger   *slog.Logger
}

// Backend is what a backend package declares of itself, with S its
// configuration section: a struct whose fields carry mapstructure and doc
// tags as internal/config's Config does. Register turns it into the
// Registration the composition root lists; nothing outside the backend's
// folder switches on its name.
type Backend[S any] struct {
	// Name is the value of the provider key, and the section's key under
	// providers.
	Name string
	// Defaults returns a new section holding the defaults of its keys.
	Defaults func() *S
	// Problems says what is wrong with the section when this backend is
	// the configured one (dev: gateway dev); nil checks nothing.
	Problems func(s *S, dev bool) []string
	// New makes the backend. Its errors are prefixed with where its keys
	// live (providers.<name>.* or GATEWAY_PROVIDERS_<NAME>_*) unless
	// NamesKeys says they name them in full.
	New       func(ctx context.Context, s *S, d Deps) (Provider, error)
	NamesKeys bool
	// Region is where clusters run (a cloud's region, or Compute Engine's
	// first zone); nil for backends without one.
	Region func(s *S) string
	// DefaultImage is the container image of clusters that name none; nil
	// for backends that run no images.
	DefaultImage func(s *S) string
	// EngineImages says the backend runs images from the Docker engine the
	// gateway builds environments into: they need no registry.
	EngineImages bool
	// StartTimeout is how long a scheduler may take to be ready when
	// cluster.start_timeout is 0: cloud machines boot and pull the image.
	StartTimeout time.Duration
	// TypicalStart is how long a cluster typically takes to start with its
	// workers, which a benchmark's cost estimate counts for a suite
	// without history: processes and containers start in seconds, cloud
	// machines and tasks in minutes (booting, pulling the image).
	TypicalStart time.Duration
	// CrashPoints are the backend's crash points, in the order a cluster's
	// life meets them (listed by `gateway debug crash-points`).
	CrashPoints []crashpoint.Name
}

// Registration is one backend as the composition root sees it, whatever
// its section's type.
type Registration struct {
	Name string
	// Section is the backend's part of the configuration.
	Section config.Section
	// RunsImages says clusters run container images (DefaultImage set):
	// the environment service and software options apply.
	RunsImages   bool
	EngineImages bool
	StartTimeout time.Duration
	TypicalStart time.Duration
	CrashPoints  []crashpoint.Name
	NamesKeys    bool

	newFn        func(ctx context.Context, section any, d Deps) (Provider, error)
	region       func(section any) string
	defaultImage func(section any) string
}

// Register erases a backend's section type.
func Register[S any](b Backend[S]) Registration {
	typed := func(section any) (*S, error) {
		s, ok := section.(*S)
		if !ok || s == nil {
			return nil, fmt.Errorf("provider %s: the configuration holds %T for its section, want %T", b.Name, section, s)
		}
		return s, nil
	}
	r := Registration{
		Name:         b.Name,
		RunsImages:   b.DefaultImage != nil,
		EngineImages: b.EngineImages,
		StartTimeout: b.StartTimeout,
		TypicalStart: b.TypicalStart,
		CrashPoints:  b.CrashPoints,
		NamesKeys:    b.NamesKeys,
		Section:      config.Section{Name: b.Name, Defaults: func() any { return b.Defaults() }},
		newFn: func(ctx context.Context, section any, d Deps) (Provider, error) {
			s, err := typed(section)
			if err != nil {
				return nil, err
			}
			return b.New(ctx, s, d)
		},
	}
	if b.Problems != nil {
		r.Section.Problems = func(section any, dev bool) []string {
			s, err := typed(section)
			if err != nil {
				return []string{err.Error()}
			}
			return b.Problems(s, dev)
		}
	}
	if b.Region != nil {
		r.region = func(section any) string {
			if s, err := typed(section); err == nil {
				return b.Region(s)
			}
			return ""
		}
	}
	if b.DefaultImage != nil {
		r.defaultImage = func(section any) string {
			if s, err := typed(section); err == nil {
				return b.DefaultImage(s)
			}
			return ""
		}
	}
	return r
}

// New makes the backend from its decoded section.
func (r Registration) New(ctx context.Context, section any, d Deps) (Provider, error) {
	return r.newFn(ctx, section, d)
}

// Region is where the backend runs clusters, "" when it has no region.
func (r Registration) Region(section any) string {
	if r.region == nil {
		return ""
	}
	return r.region(section)
}

// DefaultImage is the image of clusters that name none, "" when the
// backend runs no images or has no default.
func (r Registration) DefaultImage(section any) string {
	if r.defaultImage == nil {
		return ""
	}
	return r.defaultImage(section)
}

// Made returns a backend constructor's result as a Provider, and a nil
// Provider (not a nil pointer in an interface) when it failed.
func Made[P Provider](p P, err error) (Provider, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

// GiBBytes is a size in GiB (as options and settings give it) in bytes.
func GiBBytes(gib float64) int64 { return int64(gib * (1 << 30)) }

// SchedulerMemoryProblems checks a backend's providers.<name>.scheduler_memory:
// 0 (unbounded) or enough for a scheduler to start.
func SchedulerMemoryProblems(backend string, gib float64) []string {
	if gib != 0 && (gib < 0.25 || math.IsNaN(gib)) {
		return []string{fmt.Sprintf("providers.%s.scheduler_memory %g must be 0 (unbounded) or at least 0.25 (GiB): a scheduler needs that much to start", backend, gib)}
	}
	return nil
}
