// Package build is the gateway's image service: it turns an environment
// spec (images.Spec) into a ready image, building one only when no image
// with the spec's tag exists yet.
//
// Ensure is the entry point. It normalises the spec, looks for an image
// tagged images.TagForHash(hash) (one request to the engine or the registry,
// the common case), joins a build of that hash when one is running, and
// otherwise starts one in the background. A build picks the configured base
// image (Config.Bases) for the spec's Python, GPU and platform, learns what
// the base already has (its labels, or by running images.ProbeScript in a
// throwaway container), installs what is missing with pip in a Docker build
// (none missing: no Docker build at all), adds the user's code as one layer
// and the labels with images.Assemble, checks the packages of the result,
// and stores it: in the local engine as gateway-env:<tag>, or in
// Config.Repository. Every step is written, with a timestamp, to a build
// log kept per spec hash (Logs).
package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/images"
)

// LocalRepository is the repository of env images when Config.Repository is
// empty: they are kept in the builder's engine only, as LocalRepository:<tag>.
const LocalRepository = "gateway-env"

// buildRepository holds the intermediate images of Docker builds
// (buildRepository:<tag>), removed once the env image is stored.
const buildRepository = "gateway-env-build"

// Base is a base image: the one used for environments with this Python
// (major.minor), GPU or not, and platform.
type Base struct {
	Python   string `json:"python" mapstructure:"python"`
	GPU      bool   `json:"gpu" mapstructure:"gpu"`
	Platform string `json:"platform" mapstructure:"platform"` // default linux/amd64
	Image    string `json:"image" mapstructure:"image"`
}

func (b Base) String() string { return describe(b.Python, b.GPU, b.Platform) + ": " + b.Image }

func describe(python string, gpu bool, platform string) string {
	kind := "CPU"
	if gpu {
		kind = "GPU"
	}
	return fmt.Sprintf("Python %s, %s, %s", python, kind, platform)
}

// Auth says how to authenticate to Config.Repository's registry.
type Auth struct {
	// Kind is "auto" (the default), "none", "basic", "ecr" or "google".
	// "auto" picks "ecr" for *.dkr.ecr.<region>.amazonaws.com, "google" for
	// *-docker.pkg.dev and gcr.io, "basic" when Username is set, and else
	// the default keychain (Docker's config.json and credential helpers).
	Kind string
	// Username and Password for "basic".
	Username, Password string
	// AWSRegion for "ecr" when the repository's host does not name it.
	AWSRegion string
	// ECREndpoint overrides the ECR API endpoint (tests).
	ECREndpoint string
	// TokenSource gives "google" its access tokens; nil means
	// google.DefaultTokenSource (tests set their own).
	TokenSource oauth2.TokenSource
}

// Config configures a Builder.
type Config struct {
	// Docker is the engine that probes images and runs builds. Without one
	// the Builder can only look images up in the registry and assemble
	// images on bases whose labels record their environment. An image read
	// from the engine for assembly is saved to a temporary file (under
	// os.TempDir) for the length of its build.
	Docker *client.Client
	// Repository is where env images go: "" keeps them in the engine only
	// (as gateway-env:<tag>); else a repository such as
	// "123.dkr.ecr.us-east-1.amazonaws.com/envs",
	// "us-docker.pkg.dev/p/r/envs" or "127.0.0.1:5000/envs".
	Repository string
	// Auth authenticates to Repository's registry.
	Auth Auth
	// Bases are the base images (config key images.bases).
	Bases []Base
	// Python is the interpreter inside images, default "python3".
	Python string
	// PipIndexURL is the package index builds install from ("": pip's
	// default).
	PipIndexURL string
	// LogDir holds the build logs, one file per spec hash (default: a
	// directory under os.TempDir()).
	LogDir string
	// MaxConcurrentBuilds is how many builds run at once (default 2);
	// further builds wait for a slot, and one owner runs one build at a
	// time.
	MaxConcurrentBuilds int
	// SpoolDir holds the code of queued and running builds, one mode-0600
	// file each, removed when the build ends (default: LogDir/spool).
	SpoolDir string
	// Now is the clock of the garbage collector's ages (default time.Now).
	Now func() time.Time
	// SourceBuilds lets pip build packages from source distributions,
	// which runs their build scripts (arbitrary code from the index) in the
	// build; by default only wheels are installed.
	SourceBuilds bool
	// Network is the Docker network builds run in (default "host", so that
	// an index on the gateway host's loopback can be used). "bridge" keeps
	// a build off the host's loopback services.
	Network string
	// Timeout bounds one build, from its slot to the stored image (default
	// 30m): a package whose install hangs must not hold a slot for ever.
	Timeout time.Duration
	// Logger gets one line per build started and finished (default
	// slog.Default()).
	Logger *slog.Logger
	// OnUpdate, when set, is called with a build's status after each step,
	// after a progress line changes (at most about once a second), and when
	// the build fails or succeeds; never with a job's lock held, but it
	// must not call the Builder back (a build refused at once reports with
	// the Builder's lock held). Calls for one build come one at a time, in
	// order, except that a progress line reported from the push may race
	// a step.
	OnUpdate func(Status)
	// Mode is how missing packages get into images: ModeDocker (the
	// default), ModeLayers or ModeAuto (config key images.builder).
	Mode string
	// Index is where ModeLayers and ModeAuto find wheels
	// (images.pip_index_url).
	Index WheelIndex
	// LayerCacheDir keeps the layers made from wheels (default: a
	// directory under os.TempDir()); LayerCacheBytes bounds it (default
	// 4 GiB).
	LayerCacheDir   string
	LayerCacheBytes int64
	// MaxPackageBytes bounds one wheel's unpacked files (default 2 GiB).
	MaxPackageBytes int64
	// Conda, when set, is where the layers builder gets the conda
	// packages of environments whose base is a conda environment
	// (images.conda_channels); without it, or on other bases, conda
	// packages go through the wheel path by name and version.
	Conda CondaChannels
}

// State is a build's state.
type State string

// States.
const (
	StateBuilding State = "building"
	StateReady    State = "ready"
	StateFailed   State = "failed"
)

// Status is what Ensure, Status and Wait report about an environment's
// image.
type Status struct {
	Hash string // the spec's hash
	Ref  string // the image: gateway-env:<tag> or <repository>:<tag>
	// Digest is the image's manifest digest once a build pushed it
	// ("sha256:…"; empty for images kept in the engine).
	Digest string
	State  State
	// Error says why a build failed: its first lines, then where the whole
	// log is.
	Error string
	// Built is true when this Builder built the image, false when it was
	// found ready (a cache hit).
	Built bool
	// Steps are the build's progress lines, oldest first ("probing base
	// …", "installing 3 packages", "pushed 12.1 MiB of 40.0 MiB").
	Steps []string
	// Contents is the image's environment: what the build found in it (the
	// probe) for a build, or the spec its labels record for a cache hit.
	Contents          images.Spec
	Started, Finished time.Time
}

// Errors.
var (
	// ErrNeedCode is returned by Ensure when the image has to be built and
	// the spec has code parts whose bytes were not given: upload them and
	// call again.
	ErrNeedCode = errors.New("the environment's code parts are needed to build its image")
	// ErrBuildFailed is wrapped by Wait's error when the build failed.
	ErrBuildFailed = errors.New("environment image build failed")
	// ErrUnknownBuild is wrapped by Wait's error for a hash this Builder
	// has no build of.
	ErrUnknownBuild = errors.New("no build of that environment")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("image builder is closed")
)

// Builder turns environment specs into images. It is safe for concurrent
// use.
type Builder struct {
	cfg    Config
	docker *client.Client
	repo   *name.Repository // nil: the local engine only
	bases  []Base
	logger *slog.Logger
	auth   *registryAuth
	secret *redactor

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	jobs   map[string]*job // by spec hash

	pullerMu sync.Mutex
	pullerV  *remote.Puller // lookups in the repository

	inspectMu sync.Mutex
	inspected map[string]images.Spec // by image ID or manifest digest

	// The build queue (see acquire).
	schedMu   sync.Mutex
	queue     []*job
	slotsUsed int
	runningBy map[string]int

	started atomic.Int64 // builds started, for tests

	// lstate is the layers builder's state (ModeLayers and ModeAuto).
	lstate *layersState
}

// New checks cfg and returns a Builder.
func New(cfg Config) (*Builder, error) {
	b := &Builder{cfg: cfg, docker: cfg.Docker, jobs: map[string]*job{}, inspected: map[string]images.Spec{}, runningBy: map[string]int{}}
	switch b.cfg.Mode {
	case "":
		b.cfg.Mode = ModeDocker
	case ModeDocker, ModeLayers, ModeAuto:
	default:
		return nil, fmt.Errorf("images.builder %q must be auto, layers or docker", cfg.Mode)
	}
	if b.cfg.LayerCacheDir == "" {
		b.cfg.LayerCacheDir = filepath.Join(os.TempDir(), "gateway-layers")
	}
	if b.cfg.LayerCacheBytes <= 0 {
		b.cfg.LayerCacheBytes = 4 << 30
	}
	if b.cfg.Mode != ModeDocker {
		ls, err := newLayersState(b.cfg)
		if err != nil {
			return nil, err
		}
		b.lstate = ls
	}
	if b.cfg.Now == nil {
		b.cfg.Now = time.Now
	}
	if b.cfg.Python == "" {
		b.cfg.Python = "python3"
	}
	if b.cfg.Network == "" {
		b.cfg.Network = "host"
	}
	if b.cfg.Timeout <= 0 {
		b.cfg.Timeout = 30 * time.Minute
	}
	if b.cfg.MaxConcurrentBuilds <= 0 {
		b.cfg.MaxConcurrentBuilds = 2
	}
	b.logger = cfg.Logger
	if b.logger == nil {
		b.logger = slog.Default()
	}
	if b.cfg.LogDir == "" {
		b.cfg.LogDir = filepath.Join(os.TempDir(), "gateway-env-logs")
	}
	if err := os.MkdirAll(b.cfg.LogDir, 0o750); err != nil {
		return nil, fmt.Errorf("build log directory: %w", err)
	}
	if b.cfg.SpoolDir == "" {
		b.cfg.SpoolDir = filepath.Join(b.cfg.LogDir, "spool")
	}
	// Users' code: readable by the gateway alone.
	if err := os.MkdirAll(b.cfg.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("build spool directory: %w", err)
	}
	sweepSpool(b.cfg.SpoolDir, time.Now())
	for i, base := range cfg.Bases {
		nb, err := normalizeBase(base)
		if err != nil {
			return nil, fmt.Errorf("images.bases[%d]: %w", i, err)
		}
		for _, o := range b.bases {
			if o.Python == nb.Python && o.GPU == nb.GPU && o.Platform == nb.Platform {
				return nil, fmt.Errorf("images.bases[%d]: a second base for %s (the first is %s)", i, nb, o.Image)
			}
		}
		b.bases = append(b.bases, nb)
	}
	if cfg.Repository != "" {
		r, err := name.NewRepository(strings.TrimSuffix(cfg.Repository, "/"))
		if err != nil {
			return nil, fmt.Errorf("images.repository %q: %w", cfg.Repository, err)
		}
		b.repo = &r
	} else if cfg.Docker == nil {
		return nil, errors.New("images.repository is empty (keep images in the local engine), but no Docker engine is configured")
	}
	b.secret = newRedactor()
	b.secret.add(cfg.Auth.Password)
	b.secret.addURL(cfg.PipIndexURL)
	auth, err := newRegistryAuth(cfg.Auth, b.repo, b.secret)
	if err != nil {
		return nil, err
	}
	b.auth = auth
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

func normalizeBase(base Base) (Base, error) {
	py, err := images.NormalizePython(base.Python)
	if err != nil {
		return Base{}, fmt.Errorf("python: %w", err)
	}
	base.Python = py
	if strings.TrimSpace(base.Platform) == "" {
		base.Platform = images.PlatformAMD64
	}
	s, err := images.Spec{Python: py, Platform: base.Platform}.Normalize()
	if err != nil {
		return Base{}, fmt.Errorf("platform: %w", err)
	}
	base.Platform = s.Platform
	base.Image = strings.TrimSpace(base.Image)
	if base.Image == "" {
		return Base{}, errors.New("image is empty")
	}
	if _, err := name.ParseReference(base.Image); err != nil {
		return Base{}, fmt.Errorf("image %q: %w", base.Image, err)
	}
	return base, nil
}

// Ref returns the reference of the image of a spec hash.
func (b *Builder) Ref(hash string) string {
	tag := images.TagForHash(hash)
	if b.repo == nil {
		return LocalRepository + ":" + tag
	}
	return b.repo.Tag(tag).String()
}

// Ensure is EnsureFor with no owner: no per-owner cap or slot rule.
func (b *Builder) Ensure(ctx context.Context, spec images.Spec, code images.Code) (Status, error) {
	return b.EnsureFor(ctx, Owner{}, spec, code)
}

// EnsureFor makes sure an image of spec exists and returns its status without
// waiting for a build: ready when an image tagged images.TagForHash(hash)
// exists (Built false), the running build's status when one is running for
// that hash, and else the status of a build it starts (building; failed at
// once when no base matches). code has the content of the spec's code
// parts by name; it is only needed for a build (ErrNeedCode otherwise),
// and is copied to the spool: the caller may remove it once EnsureFor
// returns. An
// invalid spec gives an error wrapping images.ErrInvalidSpec. A new build
// for an owner with MaxBuilds builds queued or running already is refused
// with a *TooManyBuildsError (ErrTooManyBuilds). The code is spooled to a
// file (SpoolDir) for as long as the build waits and runs.
func (b *Builder) EnsureFor(ctx context.Context, owner Owner, spec images.Spec, code images.Code) (Status, error) {
	n, err := spec.Normalize()
	if err != nil {
		return Status{}, err
	}
	hash, err := n.Hash()
	if err != nil {
		return Status{}, err
	}
	ref := b.Ref(hash)
	if st, ok, err := b.running(hash); err != nil || ok {
		return st, err
	}
	checked := time.Now()
	found, err := b.exists(ctx, ref)
	if err != nil {
		return Status{}, err
	}
	if found {
		now := time.Now()
		st := Status{Hash: hash, Ref: ref, State: StateReady, Contents: n, Started: now, Finished: now}
		b.remember(st)
		b.Used(hash)
		return st, nil
	}
	// Refuse over the cap before the code is read or spooled; checked
	// again below, where it counts.
	b.mu.Lock()
	err = b.checkCap(owner)
	b.mu.Unlock()
	if err != nil {
		return Status{}, err
	}

	var missing []string
	parts := make(images.Code, len(n.Code))
	for _, cp := range n.Code {
		data, ok := code[cp.Name]
		if !ok {
			missing = append(missing, cp.Name)
			continue
		}
		parts[cp.Name] = data
	}
	if len(missing) > 0 {
		return Status{}, fmt.Errorf("%w: image %s does not exist; missing code parts: %s", ErrNeedCode, ref, strings.Join(missing, ", "))
	}
	var layers []images.Layer
	var sp *spooled
	if len(n.Code) > 0 {
		l, err := images.CodeLayer(n, parts)
		if err != nil {
			return Status{}, err
		}
		if sp, l, err = b.spool(hash, l); err != nil {
			return Status{}, err
		}
		layers = append(layers, l)
	}
	clear(parts)

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		sp.remove()
		return Status{}, ErrClosed
	}
	b.forgetOldJobs()
	if j := b.jobs[hash]; j != nil {
		st := j.snapshot()
		// Running, or it ended ready since the lookup above: no second
		// build.
		if st.State == StateBuilding || (st.State == StateReady && st.Finished.After(checked)) {
			sp.remove()
			return st, nil
		}
	}
	if err := b.checkCap(owner); err != nil {
		sp.remove()
		return Status{}, err
	}
	j, err := b.newJob(n, hash, ref)
	if err != nil {
		sp.remove()
		return Status{}, err
	}
	j.owner, j.layers, j.spool = owner.ID, layers, sp
	b.jobs[hash] = j
	b.Used(hash)
	base, ok := b.baseFor(n)
	if !ok {
		j.fail(b, errors.New(b.noBaseMessage(n)))
		return j.snapshot(), nil
	}
	b.started.Add(1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.run(j, base)
	}()
	return j.snapshot(), nil
}

// remember records a cache hit, so that Status and Wait know the hash,
// unless a build of it is running.
func (b *Builder) remember(st Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.jobs[st.Hash]; b.closed || (j != nil && !j.finished()) {
		return
	}
	done := make(chan struct{})
	close(done)
	b.jobs[st.Hash] = &job{hash: st.Hash, ref: st.Ref, secret: b.secret, done: done, progressStep: -1, st: st}
}

// jobRetention is how long Status and Wait know a finished build (its log
// stays in LogDir).
const jobRetention = 24 * time.Hour

// forgetOldJobs drops builds that finished more than jobRetention ago.
// b.mu is held.
func (b *Builder) forgetOldJobs() {
	for h, j := range b.jobs {
		if j.finished() && time.Since(j.snapshot().Finished) > jobRetention {
			delete(b.jobs, h)
		}
	}
}

func (b *Builder) running(hash string) (Status, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Status{}, false, ErrClosed
	}
	if j := b.jobs[hash]; j != nil && !j.finished() {
		return j.snapshot(), true, nil
	}
	return Status{}, false, nil
}

func (b *Builder) baseFor(spec images.Spec) (Base, bool) {
	for _, base := range b.bases {
		if base.Python == spec.Python && base.GPU == spec.GPU && base.Platform == spec.Platform {
			return base, true
		}
	}
	return Base{}, false
}

func (b *Builder) noBaseMessage(spec images.Spec) string {
	msg := fmt.Sprintf("no base image for %s is configured (config key images.bases)", describe(spec.Python, spec.GPU, spec.Platform))
	if len(b.bases) == 0 {
		return msg + "; no bases are configured"
	}
	lines := make([]string, 0, len(b.bases))
	for _, base := range b.bases {
		lines = append(lines, "  "+base.String())
	}
	return msg + "; the configured bases are:\n" + strings.Join(lines, "\n")
}

var reHash = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// find returns the job of a hash, or of a unique prefix of one (at least 8
// hex digits, as in a tag).
func (b *Builder) find(hash string) (*job, error) {
	hash = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(hash)), "env-")
	if !reHash.MatchString(hash) {
		return nil, fmt.Errorf("%q is not an environment hash", hash)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.jobs[hash]; j != nil {
		return j, nil
	}
	var found *job
	for h, j := range b.jobs {
		if strings.HasPrefix(h, hash) {
			if found != nil {
				return nil, fmt.Errorf("%q is the start of more than one environment hash", hash)
			}
			found = j
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w %s", ErrUnknownBuild, hash)
	}
	return found, nil
}

// Status returns what this Builder last knew of a spec hash (or of a unique
// prefix of one): its latest build, or the cache hit of its latest Ensure.
func (b *Builder) Status(hash string) (Status, bool) {
	j, err := b.find(hash)
	if err != nil {
		return Status{}, false
	}
	return j.snapshot(), true
}

// Wait waits for the build of hash to finish and returns its status. The
// error wraps ErrBuildFailed when it failed, ErrUnknownBuild when there is
// no such build, and is ctx's error when ctx ends first.
func (b *Builder) Wait(ctx context.Context, hash string) (Status, error) {
	j, err := b.find(hash)
	if err != nil {
		return Status{}, err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		return j.snapshot(), ctx.Err()
	}
	st := j.snapshot()
	if st.State == StateFailed {
		return st, fmt.Errorf("%w: %s", ErrBuildFailed, st.Error)
	}
	return st, nil
}

// Logs returns the build log kept for a spec hash (or a unique prefix of
// one, as in a tag). The error wraps os.ErrNotExist when there is none.
func (b *Builder) Logs(hash string) ([]byte, error) {
	h := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(hash)), "env-")
	if !reHash.MatchString(h) {
		return nil, fmt.Errorf("%q is not an environment hash: %w", hash, os.ErrNotExist)
	}
	path := b.logPath(h)
	if len(h) < 64 {
		matches, err := filepath.Glob(filepath.Join(b.cfg.LogDir, h+"*.log"))
		if err != nil {
			return nil, err
		}
		matches = slices.DeleteFunc(matches, func(m string) bool { return len(filepath.Base(m)) != 64+len(".log") })
		switch len(matches) {
		case 0:
			return nil, fmt.Errorf("no build log for %s: %w", h, os.ErrNotExist)
		case 1:
			path = matches[0]
		default:
			return nil, fmt.Errorf("%q is the start of more than one environment hash with a build log", h)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("build log of %s: %w", h, err)
	}
	return data, nil
}

func (b *Builder) logPath(hash string) string { return filepath.Join(b.cfg.LogDir, hash+".log") }

// Close stops the running builds (they fail as cancelled) and waits for
// them to end.
func (b *Builder) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	return nil
}
