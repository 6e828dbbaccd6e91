package gateway

import (
	"context"
	"encoding/json"
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
	"github.com/gatewayhq/gateway/store"
)

// envBuilder is what the environment service needs of the image builder.
type envBuilder interface {
	EnsureFor(ctx context.Context, owner build.Owner, spec images.Spec, code map[string][]byte) (build.Status, error)
	// Used records that the environment of hash was asked for (the image
	// garbage collector keeps it for images.retention from now).
	Used(hash string)
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
	// defaultImage is the backend's image for clusters that name none;
	// allowed are images.allowed_registries' globs (see mayRun).
	defaultImage string
	allowed      []*regexp.Regexp
	// quotas gives each user's max_builds (nil: defaultMaxBuilds).
	quotas buildQuotas
	// envRepo is the environment repository's full name when there is no
	// builder to ask (its images are still users' code).
	envRepo string

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

// buildQuotas is what the environment service needs of the quota service.
type buildQuotas interface {
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
}

// defaultMaxBuilds is max_builds without a quota service: the built-in
// default's value.
const defaultMaxBuilds = 2

// compileAllowed reads images.allowed_registries: globs over a full image
// reference, where * matches any run of characters (including '/') and ?
// one character.
func compileAllowed(globs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for i, g := range globs {
		g = strings.TrimSpace(g)
		if g == "" || strings.ContainsAny(g, " \t\n") {
			return nil, fmt.Errorf("images.allowed_registries[%d] %q must be a glob over image references, like ghcr.io/myorg/*", i, g)
		}
		var sb strings.Builder
		sb.WriteString("^")
		for _, r := range g {
			switch r {
			case '*':
				sb.WriteString(".*")
			case '?':
				sb.WriteString(".")
			default:
				sb.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		sb.WriteString("$")
		out = append(out, regexp.MustCompile(sb.String()))
	}
	return out, nil
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
	owner, src, err := e.buildOwner(ctx, who)
	if err != nil {
		return api.EnvStatus{}, err
	}
	st, err := e.builder.EnsureFor(ctx, owner, spec, code)
	if errors.Is(err, build.ErrNeedCode) {
		return api.EnvStatus{}, fmt.Errorf("%w: %v", api.ErrCodeRequired, err)
	}
	var tooMany *build.TooManyBuildsError
	if errors.As(err, &tooMany) {
		short := make([]string, len(tooMany.Hashes))
		for i, h := range tooMany.Hashes {
			short[i] = h[:16]
		}
		sort.Strings(short)
		user := who.Name
		if user == "" {
			user = "NAME"
		}
		return api.EnvStatus{}, &quota.ExceededError{Limit: "max_builds", Source: src, Msg: fmt.Sprintf(
			"%d environment builds of yours are queued or running (%s), and your limit is %d (max_builds, from %s): wait for one to end (gateway env logs <hash> shows its progress), or ask an admin to raise it (gateway admin quota set user:%s --max-builds N)",
			tooMany.Active, strings.Join(short, ", "), tooMany.Max, src, user)}
	}
	if err != nil {
		return api.EnvStatus{}, err
	}
	e.note(who, st.Hash)
	return statusJSON(st), nil
}

// buildOwner is who's build.Owner: their id and max_builds, and where that
// limit comes from.
func (e *envService) buildOwner(ctx context.Context, who quota.Who) (build.Owner, string, error) {
	if e.quotas == nil {
		return build.Owner{ID: who.ID, MaxBuilds: defaultMaxBuilds}, quota.BuiltinSource, nil
	}
	eff, err := e.quotas.Effective(ctx, who)
	if err != nil {
		return build.Owner{}, "", err
	}
	m := eff.Limits.MaxBuilds
	if m == nil || m.IsUnlimited() {
		return build.Owner{ID: who.ID, MaxBuilds: -1}, eff.Source("max_builds"), nil
	}
	return build.Owner{ID: who.ID, MaxBuilds: int(*m)}, eff.Source("max_builds"), nil
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
			e.builder.Used(st.Hash)
			return st.Ref, st.Contents, true, nil
		}
	}
	// Decided before any engine or registry hears of the image: a refusal
	// must not depend on whether it exists, and a registry that is not
	// allowed must not be contacted.
	ref, err := e.mayRun(who, image)
	if err != nil {
		return "", images.Spec{}, false, err
	}
	if e.builder == nil {
		return image, images.Spec{}, false, nil
	}
	if hash, ok := e.askedHash(who, ref.Identifier()); ok && ref.Context().Name() == e.envRepoName() {
		// Kept by the image collector from now on, as if asked for again.
		e.builder.Used(hash)
	}
	spec, err := e.builder.Inspect(ctx, image)
	var rerr *build.RegistryError
	switch {
	case errors.Is(err, images.ErrNotFound):
		return "", images.Spec{}, false, fmt.Errorf("%w: image %s: no such image in its registry or the engine", scheduler.ErrInvalid, image)
	case errors.Is(err, images.ErrNoSpec) || errors.Is(err, images.ErrInvalidSpec):
		// An image made elsewhere: it runs, and its members check their
		// versions at start.
		return image, images.Spec{}, false, nil
	case errors.As(err, &rerr):
		// Only the summary: what a registry answered is not repeated.
		return "", images.Spec{}, false, fmt.Errorf("%w: cannot look into image %s: %s", scheduler.ErrUnavailable, image, rerr.Summary)
	case err != nil:
		return "", images.Spec{}, false, fmt.Errorf("%w: cannot look into image %s: %v", scheduler.ErrUnavailable, image, err)
	}
	return image, spec, true, nil
}

// mayRun is the one policy for images that users name: whether who may
// run raw, decided from the reference alone. raw must be a repository
// reference (never an image ID or a prefix of one, which an engine would
// resolve against every image it holds). An image of the environment
// repository holds users' code: it runs only for the users who asked for
// its environment, or for everyone when it is published; the allow-list
// does not open it. Published images and the backend's default image are
// always allowed; anything else only when images.allowed_registries
// matches it. Every refusal has the same message, whether the image
// exists or not.
func (e *envService) mayRun(who quota.Who, raw string) (name.Reference, error) {
	ref, err := images.ParseUserReference(raw)
	if errors.Is(err, images.ErrImageID) {
		return nil, fmt.Errorf("%w: an image ID or a prefix of one is not accepted as an image: name the image by repository and tag (registry/repository:tag)", scheduler.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", scheduler.ErrInvalid, err)
	}
	// The same words for every refusal: they say nothing of whether the
	// image exists.
	refused := fmt.Errorf("%w: you may not run that image: name your own environment (--env auto), a published one (gateway env list), or an image that images.allowed_registries allows (ask an admin)", scheduler.ErrInvalid)
	for _, p := range e.published {
		if sameImage(p.Image, ref) {
			return ref, nil
		}
	}
	if ref.Context().Name() == e.envRepoName() {
		if _, ok := e.askedHash(who, ref.Identifier()); ok {
			return ref, nil
		}
		return nil, refused
	}
	if e.defaultImage != "" && sameImage(e.defaultImage, ref) {
		return ref, nil
	}
	for _, re := range e.allowed {
		for _, n := range images.ReferenceNames(ref) {
			if re.MatchString(n) {
				return ref, nil
			}
		}
	}
	return nil, refused
}

// envRepoName is the environment repository's full name.
func (e *envService) envRepoName() string {
	repo := e.envRepo
	if e.builder != nil {
		repo = e.builder.Ref(strings.Repeat("0", 64))
	}
	r, err := name.ParseReference(repo)
	if err != nil {
		return build.LocalRepository // never empty: the local repository is always the environments'
	}
	return r.Context().Name()
}

// sameImage reports whether the configured reference cfg names ref.
func sameImage(cfg string, ref name.Reference) bool {
	c, err := name.ParseReference(cfg)
	return err == nil && c.Name() == ref.Name()
}

// askedHash finds the environment who asked for whose image has this tag.
func (e *envService) askedHash(who quota.Who, tag string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for hash, owners := range e.askers {
		if owners[who.ID] && tag == images.TagForHash(hash) {
			return hash, true
		}
	}
	return "", false
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
	allowed, err := compileAllowed(cfg.Images.AllowedRegistries)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	policy := func(svc *envService) *envService {
		svc.defaultImage, svc.allowed = defaultImage(cfg), allowed
		svc.envRepo = build.LocalRepository + ":x"
		if cfg.Images.Repository != "" {
			svc.envRepo = strings.TrimSuffix(cfg.Images.Repository, "/") + ":x"
		}
		return svc
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
		return policy(newEnvService(nil, published, maxCode)), nil, nil
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
	svc := policy(newEnvService(b, published, maxCode))
	if cfg.Provider != docker.Name && cfg.Images.Repository == "" {
		// Images built into the gateway's engine cannot be pulled by
		// machines in the cloud.
		svc.noBuild = "its " + cfg.Provider + " machines pull images from a registry, and images.repository names none"
		log.Warn("environments are not built: set images.repository", "provider", cfg.Provider)
	}
	return svc, b, nil
}

// clusterLister is what the image garbage collector needs of the store.
type clusterLister interface {
	ListClusters(ctx context.Context, f store.Filter) ([]*store.Cluster, error)
}

// imagesInUse lists the images of the active clusters (those that hold or
// may soon hold containers).
func imagesInUse(ctx context.Context, st clusterLister) ([]string, error) {
	cls, err := st.ListClusters(ctx, store.Filter{Statuses: store.ActiveStatuses})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cls {
		var o struct {
			Image string `json:"image"`
		}
		if err := json.Unmarshal([]byte(c.Options), &o); err != nil {
			return nil, fmt.Errorf("cluster %s: options: %w", c.Name, err)
		}
		if o.Image != "" {
			out = append(out, o.Image)
		}
	}
	return out, nil
}

// imageGCInterval is how often built images are collected.
const imageGCInterval = time.Hour

// startImageGC removes, every imageGCInterval, the built environment images
// that no active cluster uses and nobody asked for within retention.
func startImageGC(b *build.Builder, st clusterLister, retention time.Duration) {
	b.StartGC(imageGCInterval, retention, func(ctx context.Context) ([]string, error) { return imagesInUse(ctx, st) })
}
