package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers/docker"
	"github.com/gatewayhq/gateway/providers/ec2"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/gce"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
)

// envBuilder is what the environment service needs of the image builder.
type envBuilder interface {
	Ensure(ctx context.Context, spec images.Spec, code map[string][]byte) (build.Status, error)
	Status(hash string) (build.Status, bool)
	Logs(hash string) ([]byte, error)
	Inspect(ctx context.Context, ref string) (images.Spec, error)
	Ref(hash string) string
}

// envService serves the environment routes (api.Envs) and turns a
// cluster's software options into an image (scheduler.EnvResolver).
//
// Images are content-addressed and shared: two users with the same
// environment get the same image. A build's status and log are shown only
// to users who asked for that environment, since package lists and build
// output describe what someone is working on.
type envService struct {
	builder   envBuilder // nil: no engine to build or inspect with
	published []api.PublishedEnv
	maxCode   int64
	// noBuild, when set, says why images are looked into but not built.
	noBuild string

	mu     sync.Mutex
	askers map[string]map[string]bool // hash -> owner ids that asked for it
	// versions of published images, looked into once per publishedTTL:
	// listing must not pull every image each time someone asks.
	versions map[string]publishedVersions
}

type publishedVersions struct {
	at time.Time
	v  map[string]string
}

const publishedTTL = 10 * time.Minute

var (
	reHash      = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reHexPrefix = regexp.MustCompile(`^[0-9a-f]+$`)
)

func newEnvService(b envBuilder, published []api.PublishedEnv, maxCode int64) *envService {
	return &envService{builder: b, published: published, maxCode: maxCode, askers: map[string]map[string]bool{}, versions: map[string]publishedVersions{}}
}

// parsePublished reads images.environments.
func parsePublished(entries []map[string]any) ([]api.PublishedEnv, error) {
	var out []api.PublishedEnv
	seen := map[string]bool{}
	for i, e := range entries {
		var p api.PublishedEnv
		for k, v := range e {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("images.environments[%d].%s must be a string", i, k)
			}
			switch k {
			case "name":
				p.Name = s
			case "image":
				p.Image = s
			case "description":
				p.Description = s
			default:
				return nil, fmt.Errorf("images.environments[%d]: unknown key %q (known: name, image, description)", i, k)
			}
		}
		if p.Name == "" || p.Image == "" || strings.ContainsAny(p.Name, " \t\n/:") || reHash.MatchString(p.Name) {
			return nil, fmt.Errorf("images.environments[%d] needs a name (no spaces, '/' or ':') and an image", i)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("images.environments: %q is published twice", p.Name)
		}
		seen[p.Name] = true
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (e *envService) MaxCodeBytes() int64 { return e.maxCode }

func (e *envService) note(who quota.Who, hash string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.askers[hash] == nil {
		e.askers[hash] = map[string]bool{}
	}
	e.askers[hash][who.ID] = true
}

func (e *envService) asked(who quota.Who, hash string) bool {
	_, ok := e.own(who, hash)
	return ok
}

// own finds the hash of an environment the user asked for, given whole or
// by a unique prefix of at least 8 digits (the CLI shows 16).
func (e *envService) own(who quota.Who, hash string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(hash) == 64 {
		return hash, e.askers[hash][who.ID]
	}
	if len(hash) < 8 || !reHexPrefix.MatchString(hash) {
		return "", false
	}
	var found string
	for h, owners := range e.askers {
		if owners[who.ID] && strings.HasPrefix(h, hash) {
			if found != "" {
				return "", false // ambiguous
			}
			found = h
		}
	}
	return found, found != ""
}

func statusJSON(st build.Status) api.EnvStatus {
	out := api.EnvStatus{Hash: st.Hash, Image: st.Ref, State: string(st.State), Built: st.Built, Steps: st.Steps, Error: st.Error}
	if st.State == build.StateReady {
		out.Versions = images.ExpectedVersions(st.Contents)
	}
	return out
}

// Ensure implements api.Envs.
func (e *envService) Ensure(ctx context.Context, who quota.Who, spec images.Spec, code map[string][]byte) (api.EnvStatus, error) {
	if e.builder == nil {
		return api.EnvStatus{}, fmt.Errorf("%w: it has no Docker engine to build with (start one on the gateway's host, or use --image)", api.ErrNoBuilder)
	}
	if e.noBuild != "" {
		return api.EnvStatus{}, fmt.Errorf("%w: %s (or use --image)", api.ErrNoBuilder, e.noBuild)
	}
	var total int64
	for _, b := range code {
		total += int64(len(b))
	}
	if total > e.maxCode {
		return api.EnvStatus{}, fmt.Errorf("%w: the code is %d MiB, more than this gateway's limit of %d MiB (images.max_code_mib)", images.ErrInvalidSpec, total>>20, e.maxCode>>20)
	}
	st, err := e.builder.Ensure(ctx, spec, code)
	if errors.Is(err, build.ErrNeedCode) {
		return api.EnvStatus{}, fmt.Errorf("%w: %v", api.ErrCodeRequired, err)
	}
	if err != nil {
		return api.EnvStatus{}, err
	}
	e.note(who, st.Hash)
	return statusJSON(st), nil
}

// Status implements api.Envs.
func (e *envService) Status(ctx context.Context, who quota.Who, hash string) (api.EnvStatus, error) {
	full, ok := e.own(who, hash)
	if e.builder == nil || !ok {
		return api.EnvStatus{}, fmt.Errorf("%w: %.64s (ask for it with gateway env build, or gateway new-cluster; this gateway forgets who asked when it restarts)", api.ErrEnvNotFound, hash)
	}
	hash = full
	st, ok := e.builder.Status(hash)
	if !ok {
		return api.EnvStatus{}, fmt.Errorf("%w: %.64s", api.ErrEnvNotFound, hash)
	}
	return statusJSON(st), nil
}

// Logs implements api.Envs.
func (e *envService) Logs(ctx context.Context, who quota.Who, hash string) ([]byte, error) {
	full, ok := e.own(who, hash)
	if e.builder == nil || !ok {
		return nil, fmt.Errorf("%w: no build log of %.64s for you (logs are shown to the users who asked for the environment since this gateway started)", api.ErrEnvNotFound, hash)
	}
	hash = full
	b, err := e.builder.Logs(hash)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no build log of %.64s (the image existed: nothing was built)", api.ErrEnvNotFound, hash)
	}
	return b, err
}

// Published implements api.Envs: the published environments, with the
// versions their images hold when they can be told.
func (e *envService) Published(ctx context.Context) ([]api.PublishedEnv, error) {
	out := make([]api.PublishedEnv, len(e.published))
	copy(out, e.published)
	if e.builder == nil {
		return out, nil
	}
	for i := range out {
		ref := out[i].Image
		e.mu.Lock()
		pv, ok := e.versions[ref]
		e.mu.Unlock()
		if !ok || time.Since(pv.at) > publishedTTL {
			// An image that cannot be looked into is listed without
			// versions, and tried again after the TTL.
			pv = publishedVersions{at: time.Now()}
			if spec, err := e.builder.Inspect(ctx, ref); err == nil {
				pv.v = images.ExpectedVersions(spec)
			} else if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.mu.Lock()
			e.versions[ref] = pv
			e.mu.Unlock()
		}
		out[i].Versions = pv.v
	}
	return out, nil
}

// Resolve implements scheduler.EnvResolver.
func (e *envService) Resolve(ctx context.Context, who quota.Who, image, env string) (string, images.Spec, bool, error) {
	if env != "" {
		for _, p := range e.published {
			if p.Name == env {
				image = p.Image
				break
			}
		}
		if image == "" {
			if !reHash.MatchString(env) || e.builder == nil || !e.asked(who, env) {
				return "", images.Spec{}, false, fmt.Errorf("%w: no environment %q (gateway env list shows the published ones; --env auto builds yours)", scheduler.ErrInvalid, env)
			}
			st, ok := e.builder.Status(env)
			switch {
			case !ok:
				return "", images.Spec{}, false, fmt.Errorf("%w: environment %.16s is not known to this gateway: ask for it again (gateway env build)", scheduler.ErrInvalid, env)
			case st.State != build.StateReady:
				return "", images.Spec{}, false, fmt.Errorf("%w: environment %.16s is %s, not ready (gateway env logs %s)", scheduler.ErrInvalid, env, st.State, env)
			}
			return st.Ref, st.Contents, true, nil
		}
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", images.Spec{}, false, fmt.Errorf("%w: image %q: %v", scheduler.ErrInvalid, image, err)
	}
	if e.builder == nil {
		return image, images.Spec{}, false, nil
	}
	if env == "" && !e.mayRun(who, ref) {
		return "", images.Spec{}, false, fmt.Errorf("%w: image %s is another user's environment (--env auto builds yours)", scheduler.ErrInvalid, image)
	}
	spec, err := e.builder.Inspect(ctx, image)
	switch {
	case errors.Is(err, images.ErrNotFound):
		return "", images.Spec{}, false, fmt.Errorf("%w: %v", scheduler.ErrInvalid, err)
	case errors.Is(err, images.ErrNoSpec) || errors.Is(err, images.ErrInvalidSpec):
		// An image made elsewhere: it runs, and its members check their
		// versions at start.
		return image, images.Spec{}, false, nil
	case err != nil:
		return "", images.Spec{}, false, fmt.Errorf("%w: cannot look into image %s: %v", scheduler.ErrUnavailable, image, err)
	}
	return image, spec, true, nil
}

// mayRun says whether the user may run an image by its reference. Images
// of the environment repository hold users' code: each is run only by the
// users who asked for its environment (or by everyone when published),
// whoever learnt its tag.
func (e *envService) mayRun(who quota.Who, ref name.Reference) bool {
	envRepo, err := name.ParseReference(e.builder.Ref(strings.Repeat("0", 64)))
	if err != nil || ref.Context().Name() != envRepo.Context().Name() {
		return true
	}
	for _, p := range e.published {
		if pr, err := name.ParseReference(p.Image); err == nil && pr.Name() == ref.Name() {
			return true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for hash, owners := range e.askers {
		if owners[who.ID] && ref.Identifier() == images.TagForHash(hash) {
			return true
		}
	}
	return false
}

// defaultImage is the configured backend's image for clusters that name
// none.
func defaultImage(cfg *config.Config) string {
	p := cfg.Providers
	switch cfg.Provider {
	case docker.Name:
		return p.Docker.Image
	case ec2.Name:
		return p.EC2.Image
	case fargate.Name:
		return p.Fargate.Image
	case gce.Name:
		return p.GCE.ContainerImage
	}
	return ""
}

// parseBases reads images.bases.
func parseBases(entries []map[string]any) ([]build.Base, error) {
	var out []build.Base
	for i, e := range entries {
		var b build.Base
		for k, v := range e {
			switch k {
			case "python", "image", "platform":
				s := fmt.Sprint(v) // YAML reads 3.11 as a number
				switch k {
				case "python":
					b.Python = s
				case "image":
					b.Image = s
				default:
					b.Platform = s
				}
			case "gpu":
				g, ok := v.(bool)
				if !ok {
					return nil, fmt.Errorf("images.bases[%d].gpu must be true or false", i)
				}
				b.GPU = g
			default:
				return nil, fmt.Errorf("images.bases[%d]: unknown key %q (known: python, image, gpu, platform)", i, k)
			}
		}
		if b.Python == "" || b.Image == "" {
			return nil, fmt.Errorf("images.bases[%d] needs python (like 3.11) and image", i)
		}
		out = append(out, b)
	}
	return out, nil
}

// setupEnvs makes the environment service of a backend that runs images.
// Builds need a Docker engine (the docker provider's, or one on the
// gateway's host); without one, clusters still run named images, unchecked.
func setupEnvs(ctx context.Context, cfg *config.Config, log *slog.Logger) (*envService, *build.Builder, error) {
	published, err := parsePublished(cfg.Images.Environments)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	bases, err := parseBases(cfg.Images.Bases)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	maxCode := int64(cfg.Images.MaxCodeMiB) << 20
	d := cfg.Providers.Docker
	cli, err := docker.NewClient(ctx, docker.Config{Endpoint: d.Endpoint, TLSCACert: d.TLSCACert, TLSCert: d.TLSCert, TLSKey: d.TLSKey})
	if err != nil {
		log.Warn("no Docker engine to build environments with: clusters run the images they name, unchecked", "err", err)
		return newEnvService(nil, published, maxCode), nil, nil
	}
	bcfg := build.Config{
		Docker: cli, Repository: cfg.Images.Repository, Python: d.Python, PipIndexURL: cfg.Images.PipIndexURL,
		LogDir: filepath.Join(cfg.DataDir, "builds"), Logger: log,
		Timeout: cfg.Images.BuildTimeout, Network: cfg.Images.BuildNetwork, SourceBuilds: cfg.Images.SourceBuilds,
		Auth: build.Auth{Kind: cfg.Images.Auth, Username: cfg.Images.Username, Password: cfg.Images.Password, AWSRegion: cfg.Images.AWSRegion},
	}
	if len(bases) == 0 {
		// Without bases, the default image is the base for its own Python:
		// learn which by looking inside it.
		if img := defaultImage(cfg); img != "" {
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
	b, err := build.New(bcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: image builder: %w", err)
	}
	svc := newEnvService(b, published, maxCode)
	if cfg.Provider != docker.Name && cfg.Images.Repository == "" {
		// Images built into the gateway's engine cannot be pulled by
		// machines in the cloud.
		svc.noBuild = "its " + cfg.Provider + " machines pull images from a registry, and images.repository names none"
		log.Warn("environments are not built: set images.repository", "provider", cfg.Provider)
	}
	return svc, b, nil
}
