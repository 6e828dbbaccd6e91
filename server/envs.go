package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/images/conda"
	"github.com/gatewayhq/gateway/images/pkgcache"
	"github.com/gatewayhq/gateway/images/pyindex"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/docker"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// The environment service is what the API's environment and admin routes
// and the core's resolution of software options use.
var (
	_ api.Envs              = (*envs.Service)(nil)
	_ api.EnvPublisher      = (*envs.Service)(nil)
	_ scheduler.EnvResolver = (*envs.Service)(nil)
)

// setupEnvs makes the environment service of a backend that runs images,
// with its state in st. The layers builder (images.builder auto or layers)
// needs no engine when images go to a registry; the Docker builder, and
// images kept in the engine, need one (the docker provider's, or one on
// the gateway's host). Without a builder, clusters still run named images,
// unchecked.
func setupEnvs(ctx context.Context, b providers.Registration, cfg *config.Config, st *store.DB, replicaID string, quotas envs.Quotas, log *slog.Logger) (*envs.Service, *build.Builder, error) {
	published, err := envs.ParsePublished(cfg.Images.Environments)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	allowed, err := envs.CompileAllowed(cfg.Images.AllowedRegistries)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	bases, err := envs.ParseBases(cfg.Images.Bases)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	ecfg := envs.Config{
		Store: st, ReplicaID: replicaID, Published: published, MaxCodeBytes: int64(cfg.Images.MaxCodeMiB) << 20,
		DefaultImage: b.DefaultImage(cfg.ProviderSection(b.Name)), Allowed: allowed, EnvRepo: build.LocalRepository + ":x", Quotas: quotas, Logger: log,
	}
	if cfg.Images.Repository != "" {
		ecfg.EnvRepo = strings.TrimSuffix(cfg.Images.Repository, "/") + ":x"
	}
	// Builds run on the Docker engine of providers.docker.*, whatever the
	// provider: the gateway's own, unless configured otherwise.
	d, _ := cfg.ProviderSection(docker.Name).(*docker.Section)
	if d == nil {
		d = new(docker.Section)
	}
	bcfg := build.Config{
		Repository: cfg.Images.Repository, Python: d.Python, PipIndexURL: cfg.Images.PipIndexURL,
		LogDir: filepath.Join(cfg.DataDir, "builds"), Logger: log,
		Timeout: cfg.Images.BuildTimeout, Network: cfg.Images.BuildNetwork, SourceBuilds: cfg.Images.SourceBuilds,
		Auth: build.Auth{Kind: cfg.Images.Auth, Username: cfg.Images.Username, Password: cfg.Images.Password, AWSRegion: cfg.Images.AWSRegion},
		Mode: cfg.Images.Builder, MaxPackageBytes: int64(cfg.Images.MaxPackageMiB) << 20,
	}
	if bcfg.Mode != build.ModeDocker {
		cacheDir := cfg.Images.WheelCacheDir
		if cacheDir == "" {
			cacheDir = filepath.Join(cfg.DataDir, "cache")
		}
		// Downloaded wheels, and the layers made of them, each bounded by
		// images.wheel_cache_mib.
		limit := int64(cfg.Images.WheelCacheMiB) << 20
		wheels, err := pkgcache.New(filepath.Join(cacheDir, "wheels"), limit)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: images.wheel_cache_dir: %w", err)
		}
		index, err := pyindex.New(pyindex.Config{URL: cfg.Images.PipIndexURL, Cache: wheels, MaxFileBytes: bcfg.MaxPackageBytes, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: images.pip_index_url: %w", err)
		}
		bcfg.Index, bcfg.LayerCacheDir, bcfg.LayerCacheBytes = index, filepath.Join(cacheDir, "layers"), limit
		channels, err := envs.ParseCondaChannels(cfg.Images.CondaChannels)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: %w", err)
		}
		if len(channels) > 0 {
			chans, err := conda.New(conda.Config{Channels: channels, Cache: wheels, MaxPackageBytes: bcfg.MaxPackageBytes})
			if err != nil {
				return nil, nil, fmt.Errorf("gateway: %w", err)
			}
			bcfg.Conda = chans
		}
	}
	cli, err := docker.NewClient(ctx, d.EngineConfig())
	switch {
	case err == nil:
		bcfg.Docker = cli
	case bcfg.Mode != build.ModeDocker && cfg.Images.Repository != "":
		// The layers builder needs no engine: bases come from the
		// registry and images go to it.
		log.Info("no Docker engine: environments are built from wheels alone (images.builder)", "builder", bcfg.Mode, "err", err)
	default:
		log.Warn("no Docker engine to build environments with: clusters run the images they name, unchecked", "err", err)
		svc, err := envs.New(ctx, ecfg)
		return svc, nil, err
	}
	if len(bases) == 0 {
		// Without bases, the default image is the base for its own Python:
		// learn which by looking inside it.
		if img := ecfg.DefaultImage; img != "" {
			probe, err := build.New(bcfg)
			if err != nil {
				return nil, nil, fmt.Errorf("gateway: image builder: %w", err)
			}
			spec, err := probe.Inspect(ctx, img)
			_ = probe.Close()
			if err != nil {
				log.Warn("cannot look inside the default image: environments cannot be built until images.bases is set", "image", img, "err", err)
			} else {
				bases = append(bases, build.Base{Python: spec.Python, GPU: spec.GPU, Platform: spec.Platform, Image: img})
			}
		}
	}
	bcfg.Bases = bases
	// The builder reports each build's progress to the service, which
	// stores it; no build starts before the service exists.
	var svc *envs.Service
	bcfg.OnUpdate = func(s build.Status) { svc.Updated(s) }
	builder, err := build.New(bcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: image builder: %w", err)
	}
	ecfg.Builder = builder
	if !b.EngineImages && cfg.Images.Repository == "" {
		// Images built into the gateway's engine cannot be pulled by
		// machines in the cloud.
		ecfg.NoBuild = "its " + cfg.Provider + " machines pull images from a registry, and images.repository names none"
		log.Warn("environments are not built: set images.repository", "provider", cfg.Provider)
	}
	if svc, err = envs.New(ctx, ecfg); err != nil {
		_ = builder.Close()
		return nil, nil, err
	}
	return svc, builder, nil
}
