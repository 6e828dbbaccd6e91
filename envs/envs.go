// Package envs is the environment service: it serves the environment
// routes (api.Envs), turns a cluster's software options into an image
// (scheduler.EnvResolver), and lets admins publish environments.
//
// Its state is in the store, so that it outlives a restart and replicas on
// one database share it: each environment's latest build (status, steps,
// what the image holds, its digest), its build log, who asked for it, and
// the environments published at run time. A build is claimed in the store
// before it starts, so two replicas never build one environment at once;
// the replica building it beats for it, and a build whose replica fell
// silent counts as failed and may be asked for again.
//
// Images are content-addressed and shared: two users with the same
// environment get the same image. A build's status and log are shown only
// to users who asked for that environment, since package lists and build
// output describe what someone is working on; an environment's image runs
// only for them, or for everyone once published.
package envs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// Builder is what the service needs of the image builder (images/build).
type Builder interface {
	EnsureFor(ctx context.Context, owner build.Owner, spec images.Spec, code images.Code) (build.Status, error)
	// Active lists the owner's builds queued or running.
	Active(owner string) []string
	// Used records that the environment of hash was asked for (the image
	// garbage collector keeps it for images.retention from now).
	Used(hash string)
	Logs(hash string) ([]byte, error)
	Inspect(ctx context.Context, ref string) (images.Spec, error)
	Ref(hash string) string
}

// Quotas is what the service needs of the quota service.
type Quotas interface {
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
}

// Store is what the service needs of the store.
type Store interface {
	EnvBuild(ctx context.Context, hash string) (*store.EnvBuild, error)
	EnvBuildHashes(ctx context.Context, prefix string, limit int) ([]string, error)
	ClaimEnvBuild(ctx context.Context, hash, ref, holder string, stale time.Duration) (bool, *store.EnvBuild, error)
	ReleaseEnvBuild(ctx context.Context, hash, holder string, prev *store.EnvBuild) error
	UpdateEnvBuild(ctx context.Context, b *store.EnvBuild) error
	BeatEnvBuilds(ctx context.Context, holder string) (int, error)
	AbandonEnvBuilds(ctx context.Context, holder, reason string) (int, error)
	PutEnvLog(ctx context.Context, hash string, log []byte) error
	EnvLog(ctx context.Context, hash string) ([]byte, error)
	NoteEnvAsker(ctx context.Context, hash, user string) error
	EnvAsked(ctx context.Context, hash, user string) (bool, error)
	EnvAskedHashes(ctx context.Context, user, prefix string, limit int) ([]string, error)
	AskedEnvBuilds(ctx context.Context, user string, limit int) ([]*store.EnvBuild, error)
	EnvBuildGeneration(ctx context.Context, hash string) (int64, error)
	AskedEnvBuildsGeneration(ctx context.Context, user string) (int64, error)
	PublishEnv(ctx context.Context, p *store.PublishedEnv, by store.Actor) error
	UnpublishEnv(ctx context.Context, name string, by store.Actor) error
	PublishedEnvs(ctx context.Context) ([]store.PublishedEnv, error)
}

// Config configures a Service.
type Config struct {
	// Store keeps the service's state (required).
	Store Store
	// Builder builds and looks into images; nil: there is no engine or
	// registry to build with, and named images run unchecked.
	Builder Builder
	// ReplicaID names this replica in the builds it claims (required).
	ReplicaID string
	// Published are the environments of the config (images.environments).
	Published []apitype.PublishedEnv
	// MaxCodeBytes bounds the user code of one environment.
	MaxCodeBytes int64
	// NoBuild, when set, says why images are looked into but not built.
	NoBuild string
	// DefaultImage is the backend's image for clusters that name none;
	// Allowed are images.allowed_registries' globs (see CompileAllowed).
	DefaultImage string
	Allowed      []*regexp.Regexp
	// EnvRepo is the environment repository's full name when there is no
	// builder to ask (its images are still users' code).
	EnvRepo string
	// Quotas gives each user's max_builds (nil: DefaultMaxBuilds).
	Quotas Quotas
	// StaleAfter is how long a build's replica may stay silent before the
	// build counts as failed (default 2 minutes); it beats every
	// StaleAfter/4.
	StaleAfter time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock of staleness (default time.Now).
	Now func() time.Time
}

// Service is the environment service. It is safe for concurrent use.
type Service struct {
	cfg     Config
	store   Store
	builder Builder
	log     *slog.Logger

	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu sync.Mutex
	// versions of published images, looked into once per publishedTTL:
	// listing must not pull every image each time someone asks.
	versions map[string]publishedVersions
	// lastLog is when a running build's log was last stored, by hash.
	lastLog map[string]time.Time
	// uploads counts, by user id, the requests admitted (Admit) that are
	// still uploading code: each holds one of the user's max_builds.
	uploads map[string]int
}

type publishedVersions struct {
	at time.Time
	v  map[string]string
}

const (
	publishedTTL = 10 * time.Minute
	// logEvery is how often a running build's log is stored (its status
	// is stored at every step).
	logEvery = 5 * time.Second
	// DefaultMaxBuilds is max_builds without a quota service: the
	// built-in default's value.
	DefaultMaxBuilds = 2
	// DefaultStaleAfter is Config.StaleAfter's default.
	DefaultStaleAfter = 2 * time.Minute
)

// stoppedMessage is the error of a build whose replica fell silent.
const stoppedMessage = "the gateway building it stopped; ask again (gateway env build, or gateway new-cluster)"

// New returns a Service and starts its heartbeat (Close stops it). The
// builds this replica held before it started again are failed: they ended
// with the process that ran them.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("envs: no store")
	}
	if cfg.ReplicaID == "" {
		return nil, errors.New("envs: no replica id")
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, store: cfg.Store, builder: cfg.Builder, log: cfg.Logger,
		stop: make(chan struct{}), done: make(chan struct{}), versions: map[string]publishedVersions{}, lastLog: map[string]time.Time{}, uploads: map[string]int{}}
	n, err := s.store.AbandonEnvBuilds(ctx, cfg.ReplicaID, "the gateway building it restarted; ask again (gateway env build, or gateway new-cluster)")
	if err != nil {
		return nil, fmt.Errorf("envs: %w", err)
	}
	if n > 0 {
		s.log.Warn("environment builds of this replica's previous run are failed: ask for them again", "builds", n)
	}
	go s.beat()
	return s, nil
}

// Close stops the heartbeat. Close the builder first: its builds, failed
// as cancelled, are then stored as such.
func (s *Service) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// beat says, every StaleAfter/4, that this replica still builds what it
// holds.
func (s *Service) beat() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.StaleAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StaleAfter/4)
			if _, err := s.store.BeatEnvBuilds(ctx, s.cfg.ReplicaID); err != nil {
				s.log.Warn("cannot record that this replica still builds its environments", "err", err)
			}
			cancel()
		}
	}
}

// MaxCodeBytes implements api.Envs.
func (s *Service) MaxCodeBytes() int64 { return s.cfg.MaxCodeBytes }

func (s *Service) note(ctx context.Context, who quota.Who, hash string) error {
	return s.store.NoteEnvAsker(ctx, hash, who.ID)
}

// own finds the hash of an environment the user asked for, given whole or
// by a unique prefix of at least 8 digits (the CLI shows 16).
func (s *Service) own(ctx context.Context, who quota.Who, hash string) (string, bool, error) {
	if len(hash) == 64 {
		ok, err := s.store.EnvAsked(ctx, hash, who.ID)
		return hash, ok, err
	}
	if len(hash) < 8 || !reHexPrefix.MatchString(hash) {
		return "", false, nil
	}
	found, err := s.store.EnvAskedHashes(ctx, who.ID, hash, 2)
	if err != nil || len(found) != 1 { // none, or ambiguous
		return "", false, err
	}
	return found[0], true, nil
}

// askedHash finds the environment who asked for whose image has this tag.
func (s *Service) askedHash(ctx context.Context, who quota.Who, tag string) (string, bool, error) {
	prefix, ok := strings.CutPrefix(tag, "env-")
	if !ok || len(prefix) != 16 || !reHexPrefix.MatchString(prefix) {
		return "", false, nil
	}
	hashes, err := s.store.EnvAskedHashes(ctx, who.ID, prefix, 16)
	if err != nil {
		return "", false, err
	}
	for _, h := range hashes {
		if images.TagForHash(h) == tag {
			return h, true, nil
		}
	}
	return "", false, nil
}

// status is the stored build as the builder reports one; a build whose
// replica fell silent is failed.
func (s *Service) status(b *store.EnvBuild) build.Status {
	st := build.Status{Hash: b.Hash, Ref: b.Ref, Digest: b.Digest, State: build.State(b.State), Error: b.Error, Built: b.Built,
		Steps: b.Steps, Started: b.StartedAt, Finished: b.FinishedAt}
	if b.Contents != "" {
		_ = json.Unmarshal([]byte(b.Contents), &st.Contents) // written by row below
	}
	if b.State == store.EnvBuilding && s.cfg.Now().Sub(b.Heartbeat) >= s.cfg.StaleAfter {
		st.State, st.Error = build.StateFailed, stoppedMessage
	}
	return st
}

// row is a build's status as stored by this replica.
func (s *Service) row(st build.Status) *store.EnvBuild {
	contents, _ := json.Marshal(st.Contents)
	return &store.EnvBuild{Hash: st.Hash, Ref: st.Ref, State: string(st.State), Steps: st.Steps, Error: st.Error,
		Contents: string(contents), Digest: st.Digest, Built: st.Built, StartedAt: st.Started, FinishedAt: st.Finished, Holder: s.cfg.ReplicaID}
}

func statusJSON(st build.Status) apitype.EnvStatus {
	out := apitype.EnvStatus{Hash: st.Hash, Image: st.Ref, Digest: st.Digest, State: string(st.State), Built: st.Built, Steps: st.Steps, Error: st.Error,
		StartedAt: st.Started.UTC(), FinishedAt: st.Finished.UTC()}
	if st.State == build.StateReady {
		out.Versions = images.ExpectedVersions(st.Contents)
	}
	for i := len(st.Steps) - 1; i >= 0; i-- {
		if p, ok := build.ParsePushStep(st.Steps[i]); ok {
			out.Layers = &apitype.EnvLayers{Layers: p.Layers, Reused: p.Reused, ReusedSize: p.ReusedSize, Uploaded: p.Uploaded, UploadedSize: p.UploadedSize}
			break
		}
	}
	return out
}

// Updated stores a build's status (the builder's Config.OnUpdate): at
// every step, and its log every few seconds and when it ends.
func (s *Service) Updated(st build.Status) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.write(ctx, st)
}

// write stores st, which this replica holds, and its log when due.
func (s *Service) write(ctx context.Context, st build.Status) {
	if err := s.store.UpdateEnvBuild(ctx, s.row(st)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			// Taken over by another replica (this one was silent too long),
			// or ended already: its word stands.
			s.log.Debug("environment build no longer held by this replica", "hash", st.Hash, "state", st.State)
			return
		}
		s.log.Warn("cannot store an environment build's status", "hash", st.Hash, "err", err)
	}
	if !st.Built || s.builder == nil {
		return
	}
	ended := st.State != build.StateBuilding
	now := time.Now()
	s.mu.Lock()
	due := ended || now.Sub(s.lastLog[st.Hash]) >= logEvery
	if ended {
		delete(s.lastLog, st.Hash)
	} else if due {
		s.lastLog[st.Hash] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	b, err := s.builder.Logs(st.Hash)
	if err == nil {
		err = s.store.PutEnvLog(ctx, st.Hash, b)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot store an environment build's log", "hash", st.Hash, "err", err)
	}
}

// Ensure implements api.Envs.
func (s *Service) Ensure(ctx context.Context, who quota.Who, spec images.Spec, code images.Code) (apitype.EnvStatus, error) {
	if err := s.canBuild(); err != nil {
		return apitype.EnvStatus{}, err
	}
	if total := code.Size(); total > s.cfg.MaxCodeBytes {
		return apitype.EnvStatus{}, fmt.Errorf("%w: the code is %d MiB, more than this gateway's limit of %d MiB (images.max_code_mib)", images.ErrInvalidSpec, total>>20, s.cfg.MaxCodeBytes>>20)
	}
	owner, src, err := s.buildOwner(ctx, who)
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	n, err := spec.Normalize()
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	hash, err := n.Hash()
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	// One replica builds an environment at a time: the others share its
	// build.
	won, prev, err := s.store.ClaimEnvBuild(ctx, hash, s.builder.Ref(hash), s.cfg.ReplicaID, s.cfg.StaleAfter)
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	if !won {
		if err := s.note(ctx, who, hash); err != nil {
			return apitype.EnvStatus{}, err
		}
		return statusJSON(s.status(prev)), nil
	}
	st, err := s.builder.EnsureFor(ctx, owner, spec, code)
	if err != nil {
		// Nothing started: the stored build is as it was.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if rerr := s.store.ReleaseEnvBuild(rctx, hash, s.cfg.ReplicaID, prev); rerr != nil {
			s.log.Warn("cannot give up the claim of an environment build", "hash", hash, "err", rerr)
		}
		cancel()
		return apitype.EnvStatus{}, s.ensureError(who, src, err)
	}
	if err := s.note(ctx, who, st.Hash); err != nil {
		return apitype.EnvStatus{}, err
	}
	s.write(ctx, st)
	return statusJSON(st), nil
}

// canBuild says why this service builds nothing, if it does not.
func (s *Service) canBuild() error {
	if s.builder == nil {
		return fmt.Errorf("%w: it has no Docker engine to build with (start one on the gateway's host, or use --image)", ErrNoBuilder)
	}
	if s.cfg.NoBuild != "" {
		return fmt.Errorf("%w: %s (or use --image)", ErrNoBuilder, s.cfg.NoBuild)
	}
	return nil
}

// Admit implements api.Envs: before a request's code is read, it refuses
// a user whose builds queued or running, and other requests uploading
// code, already reach max_builds; else the request holds one of those
// builds until release. Concurrent uploads over the cap would otherwise
// each be read whole before the builder refuses all but one.
func (s *Service) Admit(ctx context.Context, who quota.Who) (release func(), err error) {
	if err := s.canBuild(); err != nil {
		return nil, err
	}
	owner, src, err := s.buildOwner(ctx, who)
	if err != nil {
		return nil, err
	}
	if owner.MaxBuilds < 0 {
		return func() {}, nil
	}
	active := s.builder.Active(owner.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if uploading := s.uploads[who.ID]; len(active)+uploading >= owner.MaxBuilds {
		return nil, s.tooManyBuilds(who, src, &build.TooManyBuildsError{Active: len(active), Max: owner.MaxBuilds, Hashes: active}, uploading)
	}
	s.uploads[who.ID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.uploads[who.ID]--; s.uploads[who.ID] <= 0 {
				delete(s.uploads, who.ID)
			}
		})
	}, nil
}

// ensureError maps the builder's refusals to the API's.
func (s *Service) ensureError(who quota.Who, src string, err error) error {
	if errors.Is(err, build.ErrNeedCode) {
		return fmt.Errorf("%w: %v", ErrCodeRequired, err)
	}
	var tooMany *build.TooManyBuildsError
	if errors.As(err, &tooMany) {
		return s.tooManyBuilds(who, src, tooMany, 0)
	}
	return err
}

// tooManyBuilds is the quota error of a user at max_builds, with their
// builds and the requests of theirs still uploading code.
func (s *Service) tooManyBuilds(who quota.Who, src string, e *build.TooManyBuildsError, uploading int) error {
	short := make([]string, len(e.Hashes))
	for i, h := range e.Hashes {
		short[i] = h[:16]
	}
	sort.Strings(short)
	user := who.Name
	if user == "" {
		user = "NAME"
	}
	what := fmt.Sprintf("%d environment builds of yours are queued or running (%s)", e.Active, strings.Join(short, ", "))
	uploads := "1 request of yours is uploading code for a build"
	if uploading > 1 {
		uploads = fmt.Sprintf("%d requests of yours are uploading code for builds", uploading)
	}
	switch {
	case uploading > 0 && e.Active == 0:
		what = uploads
	case uploading > 0:
		what += " and " + uploads
	}
	return &quota.ExceededError{Limit: "max_builds", Source: src, Msg: fmt.Sprintf(
		"%s, and your limit is %d (max_builds, from %s): wait for one to end (gateway env logs <hash> shows its progress), or ask an admin to raise it (gateway admin quota set user:%s --max-builds N)",
		what, e.Max, src, user)}
}

// buildOwner is who's build.Owner: their id and max_builds, and where that
// limit comes from.
func (s *Service) buildOwner(ctx context.Context, who quota.Who) (build.Owner, string, error) {
	if s.cfg.Quotas == nil {
		return build.Owner{ID: who.ID, MaxBuilds: DefaultMaxBuilds}, quota.BuiltinSource, nil
	}
	eff, err := s.cfg.Quotas.Effective(ctx, who)
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
func (s *Service) Status(ctx context.Context, who quota.Who, hash string) (apitype.EnvStatus, error) {
	full, ok, err := s.own(ctx, who, hash)
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	if !ok {
		return apitype.EnvStatus{}, fmt.Errorf("%w: %.64s (only those who asked for an environment see it: ask for it with gateway env build, or gateway new-cluster)", ErrNotFound, hash)
	}
	b, err := s.store.EnvBuild(ctx, full)
	if errors.Is(err, store.ErrNotFound) {
		return apitype.EnvStatus{}, fmt.Errorf("%w: %.64s", ErrNotFound, full)
	}
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	return statusJSON(s.status(b)), nil
}

// Builds are the builds of the environments who asked for, the most
// recently asked first, at most limit: what the console lists.
func (s *Service) Builds(ctx context.Context, who quota.Who, limit int) ([]apitype.EnvStatus, error) {
	bs, err := s.store.AskedEnvBuilds(ctx, who.ID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]apitype.EnvStatus, len(bs))
	for i, b := range bs {
		out[i] = statusJSON(s.status(b))
	}
	return out, nil
}

// BuildGeneration moves whenever the build of hash (a whole hash) or its
// stored log changes, on any replica: the console's pages of a build
// watch it. It does not say who may see the build (Status does).
func (s *Service) BuildGeneration(ctx context.Context, hash string) (int64, error) {
	g, err := s.store.EnvBuildGeneration(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%w: %.64s", ErrNotFound, hash)
	}
	return g, err
}

// BuildsGeneration moves whenever the list Builds gives the user (by
// id) may change, on any replica: the console's list of builds watches it.
func (s *Service) BuildsGeneration(ctx context.Context, user string) (int64, error) {
	return s.store.AskedEnvBuildsGeneration(ctx, user)
}

// Logs implements api.Envs.
func (s *Service) Logs(ctx context.Context, who quota.Who, hash string) ([]byte, error) {
	full, ok, err := s.own(ctx, who, hash)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: no build log of %.64s for you (logs are shown to the users who asked for the environment)", ErrNotFound, hash)
	}
	b, err := s.store.EnvBuild(ctx, full)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if b != nil && b.Holder == s.cfg.ReplicaID && b.State == store.EnvBuilding && s.builder != nil {
		// Built here: the builder's log is newer than the stored one.
		if log, err := s.builder.Logs(full); err == nil {
			return log, nil
		}
	}
	log, err := s.store.EnvLog(ctx, full)
	if errors.Is(err, store.ErrNotFound) {
		if b != nil && !b.Built {
			return nil, fmt.Errorf("%w: no build log of %.64s (the image existed: nothing was built)", ErrNotFound, full)
		}
		return nil, fmt.Errorf("%w: no build log of %.64s yet", ErrNotFound, full)
	}
	return log, err
}

// published are the environments of the config and those published at
// run time; the config's win a name both have.
func (s *Service) published(ctx context.Context) ([]apitype.PublishedEnv, error) {
	out := make([]apitype.PublishedEnv, len(s.cfg.Published), len(s.cfg.Published)+4)
	copy(out, s.cfg.Published)
	stored, err := s.store.PublishedEnvs(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range stored {
		if s.configured(p.Name) {
			continue
		}
		out = append(out, apitype.PublishedEnv{Name: p.Name, Image: p.Image, Description: p.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Service) configured(name string) bool {
	for _, p := range s.cfg.Published {
		if p.Name == name {
			return true
		}
	}
	return false
}

// Published implements api.Envs: the published environments, with the
// versions their images hold when they can be told.
func (s *Service) Published(ctx context.Context) ([]apitype.PublishedEnv, error) {
	out, err := s.published(ctx)
	if err != nil || s.builder == nil {
		return out, err
	}
	for i := range out {
		ref := out[i].Image
		s.mu.Lock()
		pv, ok := s.versions[ref]
		s.mu.Unlock()
		if !ok || time.Since(pv.at) > publishedTTL {
			// An image that cannot be looked into is listed without
			// versions, and tried again after the TTL.
			pv = publishedVersions{at: time.Now()}
			if spec, err := s.builder.Inspect(ctx, ref); err == nil {
				pv.v = images.ExpectedVersions(spec)
			} else if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.mu.Lock()
			s.versions[ref] = pv
			s.mu.Unlock()
		}
		out[i].Versions = pv.v
	}
	return out, nil
}

// Publish implements api.EnvPublisher: it publishes image, or the image
// of the environment env (its hash, or a unique prefix of 8 digits or
// more, built and ready), under name for every user.
func (s *Service) Publish(ctx context.Context, by store.Actor, name string, req apitype.PublishEnvRequest) (apitype.PublishedEnv, error) {
	if !validName(name) {
		return apitype.PublishedEnv{}, fmt.Errorf("%w: %q is not a name to publish under: no spaces, '/' or ':', and not an environment hash", ErrInvalid, name)
	}
	if (req.Image == "") == (req.Env == "") {
		return apitype.PublishedEnv{}, fmt.Errorf("%w: give an environment (--env HASH) or an image (--image REF), not both", ErrInvalid)
	}
	if s.configured(name) {
		return apitype.PublishedEnv{}, fmt.Errorf("%w: %q is published in the config (images.environments): choose another name, or change the config", ErrConflict, name)
	}
	p := store.PublishedEnv{Name: name, Image: req.Image, Description: req.Description}
	if req.Env != "" {
		hash, err := s.builtHash(ctx, req.Env)
		if err != nil {
			return apitype.PublishedEnv{}, err
		}
		b, err := s.store.EnvBuild(ctx, hash)
		if err != nil {
			return apitype.PublishedEnv{}, err
		}
		if st := s.status(b); st.State != build.StateReady {
			return apitype.PublishedEnv{}, fmt.Errorf("%w: environment %.16s is %s, not ready: only a ready environment's image can be published", ErrConflict, hash, st.State)
		}
		p.Image, p.EnvHash = b.Ref, hash
	} else if _, err := images.ParseUserReference(req.Image); err != nil {
		return apitype.PublishedEnv{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	err := s.store.PublishEnv(ctx, &p, by)
	if errors.Is(err, store.ErrExists) {
		return apitype.PublishedEnv{}, fmt.Errorf("%w: %q is published already: unpublish it first (gateway admin env unpublish %s)", ErrConflict, name, name)
	}
	if err != nil {
		return apitype.PublishedEnv{}, err
	}
	s.log.Info("environment published", "name", name, "image", p.Image, "by", by.Name)
	return apitype.PublishedEnv{Name: p.Name, Image: p.Image, Description: p.Description}, nil
}

// builtHash finds the stored build of a hash, or of a unique prefix of one.
func (s *Service) builtHash(ctx context.Context, env string) (string, error) {
	env = strings.ToLower(strings.TrimSpace(env))
	if len(env) < 8 || len(env) > 64 || !reHexPrefix.MatchString(env) {
		return "", fmt.Errorf("%w: %q is not an environment hash (64 hex digits, or the first 8 or more of them)", ErrInvalid, env)
	}
	found, err := s.store.EnvBuildHashes(ctx, env, 2)
	switch {
	case err != nil:
		return "", err
	case len(found) == 0:
		return "", fmt.Errorf("%w: no build of environment %s is known", ErrNotFound, env)
	case len(found) > 1:
		return "", fmt.Errorf("%w: %s is the start of more than one environment hash: give more of it", ErrInvalid, env)
	}
	return found[0], nil
}

// Unpublish implements api.EnvPublisher.
func (s *Service) Unpublish(ctx context.Context, by store.Actor, name string) error {
	if s.configured(name) {
		return fmt.Errorf("%w: %q is published in the config (images.environments): remove it there", ErrConflict, name)
	}
	err := s.store.UnpublishEnv(ctx, name, by)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no environment %q is published (gateway env list)", ErrNotFound, name)
	}
	if err == nil {
		s.log.Info("environment unpublished", "name", name, "by", by.Name)
	}
	return err
}

// Resolve implements scheduler.EnvResolver.
func (s *Service) Resolve(ctx context.Context, who quota.Who, image, env string) (string, images.Spec, bool, error) {
	if env != "" {
		published, err := s.published(ctx)
		if err != nil {
			return "", images.Spec{}, false, err
		}
		for _, p := range published {
			if p.Name == env {
				image = p.Image
				break
			}
		}
		if image == "" {
			return s.resolveEnv(ctx, who, env)
		}
	}
	// Decided before any engine or registry hears of the image: a refusal
	// must not depend on whether it exists, and a registry that is not
	// allowed must not be contacted.
	ref, err := s.mayRun(ctx, who, image)
	if err != nil {
		return "", images.Spec{}, false, err
	}
	if s.builder == nil {
		return image, images.Spec{}, false, nil
	}
	if ref.Context().Name() == s.envRepoName() {
		if hash, ok, err := s.askedHash(ctx, who, ref.Identifier()); err != nil {
			return "", images.Spec{}, false, err
		} else if ok {
			// Kept by the image collector from now on, as if asked for again.
			s.builder.Used(hash)
		}
	}
	spec, err := s.builder.Inspect(ctx, image)
	var rerr *build.RegistryError
	switch {
	case errors.Is(err, images.ErrNotFound):
		return "", images.Spec{}, false, fmt.Errorf("%w: image %s: no such image in its registry or the engine", ErrInvalid, image)
	case errors.Is(err, images.ErrNoSpec) || errors.Is(err, images.ErrInvalidSpec):
		// An image made elsewhere: it runs, and its members check their
		// versions at start.
		return image, images.Spec{}, false, nil
	case errors.As(err, &rerr):
		// Only the summary: what a registry answered is not repeated.
		return "", images.Spec{}, false, fmt.Errorf("%w: cannot look into image %s: %s", ErrUnavailable, image, rerr.Summary)
	case err != nil:
		return "", images.Spec{}, false, fmt.Errorf("%w: cannot look into image %s: %v", ErrUnavailable, image, err)
	}
	return image, spec, true, nil
}

// resolveEnv is the image of an environment by its hash, for one who
// asked for it.
func (s *Service) resolveEnv(ctx context.Context, who quota.Who, env string) (string, images.Spec, bool, error) {
	if !reHash.MatchString(env) {
		return "", images.Spec{}, false, fmt.Errorf("%w: no environment %q (gateway env list shows the published ones; --env auto builds yours)", ErrInvalid, env)
	}
	asked, err := s.store.EnvAsked(ctx, env, who.ID)
	if err != nil {
		return "", images.Spec{}, false, err
	}
	if !asked {
		return "", images.Spec{}, false, fmt.Errorf("%w: no environment %q (gateway env list shows the published ones; --env auto builds yours)", ErrInvalid, env)
	}
	b, err := s.store.EnvBuild(ctx, env)
	if errors.Is(err, store.ErrNotFound) {
		return "", images.Spec{}, false, fmt.Errorf("%w: environment %.16s has no build: ask for it again (gateway env build)", ErrInvalid, env)
	}
	if err != nil {
		return "", images.Spec{}, false, err
	}
	st := s.status(b)
	if st.State != build.StateReady {
		return "", images.Spec{}, false, fmt.Errorf("%w: environment %.16s is %s, not ready (gateway env logs %s)", ErrInvalid, env, st.State, env)
	}
	if s.builder != nil {
		s.builder.Used(st.Hash)
	}
	return st.Ref, st.Contents, true, nil
}
