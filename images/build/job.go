package build

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/image"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gatewayhq/gateway/images"
)

// job is one build: its status, its log file, and a channel closed when it
// ends.
type job struct {
	spec   images.Spec // normalised
	hash   string
	ref    string
	secret *redactor
	done   chan struct{}
	owner  string        // who started it ("" for none)
	slot   chan struct{} // closed when it may run (acquire)

	// layers are the layers to add (the code, spooled); spool is their
	// file. Both are dropped when the build ends.
	layers []images.Layer
	spool  *spooled

	mu           sync.Mutex
	st           Status
	file         *os.File // the build log; nil once closed
	progressStep int      // index in st.Steps of the progress line being updated, or -1
	lastLogged   time.Time
	// onUpdate is Config.OnUpdate (nil: none); lastNotified throttles it
	// for progress lines.
	onUpdate     func(Status)
	lastNotified time.Time
}

// maxErrorLines is how many lines of a failure Status.Error keeps.
const maxErrorLines = 15

func (b *Builder) newJob(spec images.Spec, hash, ref string) (*job, error) {
	f, err := os.OpenFile(b.logPath(hash), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("build log: %w", err)
	}
	j := &job{
		spec: spec, hash: hash, ref: ref, secret: b.secret, done: make(chan struct{}), file: f, progressStep: -1,
		st:       Status{Hash: hash, Ref: ref, State: StateBuilding, Built: true, Started: time.Now()},
		onUpdate: b.cfg.OnUpdate,
	}
	doc, _ := spec.Canonical()
	j.logf("build of %s started (spec hash %s)", ref, hash)
	j.logf("spec: %s", doc)
	return j, nil
}

// logf writes a timestamped line (each line of a multi-line message) to the
// build log, with secrets masked.
func (j *job) logf(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.writeLocked(fmt.Sprintf(format, args...))
}

func (j *job) writeLocked(msg string) {
	if j.file == nil {
		return
	}
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	var sb strings.Builder
	for _, line := range strings.Split(strings.TrimRight(j.secret.redact(msg), "\n"), "\n") {
		sb.WriteString(ts)
		sb.WriteByte(' ')
		sb.WriteString(strings.TrimRight(line, "\r"))
		sb.WriteByte('\n')
	}
	_, _ = j.file.WriteString(sb.String())
}

// step adds a progress line to the status and the log.
func (j *job) step(format string, args ...any) {
	msg := j.secret.redact(fmt.Sprintf(format, args...))
	j.mu.Lock()
	j.st.Steps = append(j.st.Steps, msg)
	j.progressStep = -1
	j.writeLocked("step: " + msg)
	j.mu.Unlock()
	j.notify(true)
}

// notify calls onUpdate with the job's status, outside its lock; unless
// always, at most about once a second.
func (j *job) notify(always bool) {
	if j.onUpdate == nil {
		return
	}
	j.mu.Lock()
	if !always && time.Since(j.lastNotified) < time.Second {
		j.mu.Unlock()
		return
	}
	j.lastNotified = time.Now()
	j.mu.Unlock()
	j.onUpdate(j.snapshot())
}

// progress sets the job's current progress line (the previous one of the
// same series is replaced), logging it at most every few seconds and when
// final.
func (j *job) progress(msg string, final bool) {
	msg = j.secret.redact(msg)
	j.mu.Lock()
	if j.progressStep >= 0 && j.progressStep == len(j.st.Steps)-1 {
		j.st.Steps[j.progressStep] = msg
	} else {
		j.st.Steps = append(j.st.Steps, msg)
		j.progressStep = len(j.st.Steps) - 1
	}
	if final || time.Since(j.lastLogged) >= 2*time.Second {
		j.lastLogged = time.Now()
		j.writeLocked("step: " + msg)
	}
	j.mu.Unlock()
	j.notify(final)
}

func (j *job) setDigest(d string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st.Digest = d
}

func (j *job) snapshot() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.st
	st.Steps = slices.Clone(j.st.Steps)
	return st
}

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// fail ends the job as failed: Status.Error has the first lines of err and
// where the whole log is.
func (j *job) fail(b *Builder, err error) {
	msg := j.secret.redact(err.Error())
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	if len(lines) > maxErrorLines {
		lines = append(lines[:maxErrorLines], fmt.Sprintf("… (%d more lines)", len(lines)-maxErrorLines))
	}
	summary := strings.Join(lines, "\n") + "\nsee `gateway env logs " + j.hash + "`"
	j.mu.Lock()
	j.writeLocked("build failed: " + msg)
	j.st.State = StateFailed
	j.st.Error = summary
	j.st.Finished = time.Now()
	j.closeLocked()
	started := j.st.Started
	j.mu.Unlock()
	// The final update is delivered before Wait returns, so that
	// whoever records it has the final state by then.
	j.notify(true)
	close(j.done)
	b.logger.Warn("environment image build failed", "hash", j.hash, "ref", j.ref, "error", lines[0], "duration", time.Since(started).Round(time.Millisecond))
}

func (j *job) succeed(b *Builder, contents images.Spec) {
	j.mu.Lock()
	j.writeLocked("build finished: " + j.ref + " is ready")
	j.st.State = StateReady
	j.st.Contents = contents
	j.st.Finished = time.Now()
	j.st.Steps = append(j.st.Steps, "ready")
	j.closeLocked()
	started := j.st.Started
	j.mu.Unlock()
	// The final update is delivered before Wait returns, so that
	// whoever records it has the final state by then.
	j.notify(true)
	close(j.done)
	b.logger.Info("environment image built", "hash", j.hash, "ref", j.ref, "duration", time.Since(started).Round(time.Millisecond))
}

func (j *job) closeLocked() {
	if j.file != nil {
		_ = j.file.Close()
		j.file = nil
	}
	j.spool.remove()
	j.spool, j.layers = nil, nil
}

// run is a build, from waiting for a slot to the stored image.
func (b *Builder) run(j *job, base Base) {
	ctx := b.ctx
	b.logger.Info("environment image build started", "hash", j.hash, "ref", j.ref, "base", base.Image, "owner", j.owner)
	if err := b.acquire(ctx, j); err != nil {
		j.fail(b, errors.New("cancelled before it started: the image builder was closed"))
		return
	}
	defer b.release(j)
	bctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	j.mu.Lock()
	layers := j.layers
	j.mu.Unlock()
	contents, err := b.produce(bctx, j, base, layers)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("cancelled: the image builder was closed (%w)", err)
		case bctx.Err() != nil:
			err = fmt.Errorf("the build took longer than %s (images.build_timeout) and was stopped (%w)", b.cfg.Timeout, err)
		}
		j.fail(b, err)
		return
	}
	j.succeed(b, contents)
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// produce builds and stores the image and returns what it contains.
func (b *Builder) produce(ctx context.Context, j *job, base Base, layers []images.Layer) (images.Spec, error) {
	if b.cfg.Mode != ModeDocker {
		return b.produceLayers(ctx, j, base, layers)
	}
	spec := j.spec
	j.logf("base: %s", base)
	j.step("probing base %s", base.Image)
	have, err := b.inspect(ctx, base.Image, false, j)
	if err != nil {
		return images.Spec{}, fmt.Errorf("base image %s (images.bases): %w", base.Image, err)
	}
	if have.Python != spec.Python {
		return images.Spec{}, fmt.Errorf("base image %s has Python %s, but images.bases lists it for Python %s", base.Image, have.Python, spec.Python)
	}
	if have.Platform != "" && have.Platform != spec.Platform {
		return images.Spec{}, fmt.Errorf("base image %s is for %s, but images.bases lists it for %s", base.Image, have.Platform, spec.Platform)
	}
	missing := missingPackages(spec, have)
	j.logf("base has Python %s and %s; the spec has %s, %d of them missing or at another version",
		have.Python, plural(len(have.Packages), "package"), plural(len(spec.Packages), "package"), len(missing))
	j.logMissing(missing, have)

	dir, err := os.MkdirTemp("", "gateway-env-build-")
	if err != nil {
		return images.Spec{}, err
	}
	defer os.RemoveAll(dir)

	var src v1.Image
	contents := have
	if len(missing) == 0 {
		j.step("no packages to install: assembling on the base (no Docker build)")
		if src, err = b.readImage(ctx, base.Image, spec.Platform, dir); err != nil {
			return images.Spec{}, fmt.Errorf("read base image %s: %w", base.Image, err)
		}
	} else {
		if b.docker == nil {
			return images.Spec{}, fmt.Errorf("%s must be installed on base %s, which needs a Docker engine, and none is configured", plural(len(missing), "package"), base.Image)
		}
		buildRef := buildRepository + ":" + images.TagForHash(j.hash)
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, err := b.docker.ImageRemove(rctx, buildRef, image.RemoveOptions{PruneChildren: true}); err != nil && !isEngineNotFound(err) {
				j.logf("removing the intermediate image %s: %v", buildRef, err)
			}
		}()
		j.step("installing %s", plural(len(missing), "package"))
		if err := b.dockerBuild(ctx, j, base.Image, missing, buildRef); err != nil {
			return images.Spec{}, err
		}
		j.step("verifying packages")
		got, err := b.inspect(ctx, buildRef, true, j)
		if err != nil {
			return images.Spec{}, fmt.Errorf("probe the built image: %w", err)
		}
		if ms := verify(spec, got); len(ms) > 0 {
			return images.Spec{}, fmt.Errorf("the built image does not have the spec's packages at their versions (client: the spec, image: what pip installed):\n%s", images.FormatMismatches(ms))
		}
		contents = got
		if src, err = b.readImage(ctx, buildRef, spec.Platform, dir); err != nil {
			return images.Spec{}, fmt.Errorf("read the built image: %w", err)
		}
	}

	if err := b.assembleAndStore(ctx, j, src, layers); err != nil {
		return images.Spec{}, err
	}
	return contents, nil
}

// logMissing writes the missing packages to the build log, each with the
// version the base has.
func (j *job) logMissing(missing []images.Package, have images.Spec) {
	haveVersions := versions(have)
	for _, p := range missing {
		if v, ok := haveVersions[p.Name]; ok {
			j.logf("  %s==%s (base has %s)", p.Name, p.Version, v)
		} else {
			j.logf("  %s==%s (not in the base)", p.Name, p.Version)
		}
	}
}

// assembleAndStore adds the code layers and labels to src and stores the
// result as the job's image.
func (b *Builder) assembleAndStore(ctx context.Context, j *job, src v1.Image, code []images.Layer) error {
	j.step("assembling the image (%s)", plural(len(j.spec.Code), "code part"))
	img, err := images.Assemble(src, j.spec, code)
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	if img, err = withBuiltLabel(img); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	return b.store(ctx, j, img)
}

// missingPackages returns the spec's packages that have is missing or has
// at another version.
func missingPackages(spec, have images.Spec) []images.Package {
	hv := versions(have)
	var out []images.Package
	for _, p := range spec.Packages {
		if v, ok := hv[images.NormalizeName(p.Name)]; !ok || v != strings.TrimSpace(p.Version) {
			out = append(out, p)
		}
	}
	return out
}

// verify returns the spec's packages that got does not have at their
// versions, as mismatches (Client: the spec's version, Image: got's).
func verify(spec, got images.Spec) []images.Mismatch {
	gv := versions(got)
	var out []images.Mismatch
	for _, p := range spec.Packages {
		v := gv[images.NormalizeName(p.Name)]
		if v != strings.TrimSpace(p.Version) {
			out = append(out, images.Mismatch{Package: p.Name, Client: p.Version, Image: v})
		}
	}
	return out
}

func versions(s images.Spec) map[string]string {
	m := make(map[string]string, len(s.Packages))
	for _, p := range s.Packages {
		n := images.NormalizeName(p.Name)
		if _, dup := m[n]; !dup {
			m[n] = strings.TrimSpace(p.Version)
		}
	}
	return m
}

// lenient normalises a probed environment: like Spec.Normalize, but an
// entry that does not normalise (an odd version string) is dropped instead
// of failing the whole spec, and the first of two versions of a name wins.
func lenient(s images.Spec) images.Spec {
	out := images.Spec{Python: strings.TrimSpace(s.Python), Platform: strings.TrimSpace(s.Platform), GPU: s.GPU}
	if py, err := images.NormalizePython(s.Python); err == nil {
		out.Python = py
	}
	if n, err := (images.Spec{Python: "3.0", Platform: s.Platform}).Normalize(); err == nil {
		out.Platform = n.Platform
	}
	seen := map[string]bool{}
	for _, p := range s.Packages {
		n, err := (images.Spec{Python: "3.0", Platform: images.PlatformAMD64, Packages: []images.Package{p}}).Normalize()
		if err != nil || seen[n.Packages[0].Name] {
			continue
		}
		seen[n.Packages[0].Name] = true
		out.Packages = append(out.Packages, n.Packages[0])
	}
	slices.SortFunc(out.Packages, func(a, b images.Package) int { return strings.Compare(a.Name, b.Name) })
	if n, err := (images.Spec{Python: "3.0", Platform: images.PlatformAMD64, Channels: s.Channels}).Normalize(); err == nil {
		out.Channels = n.Channels
	}
	return out
}

// redactor masks secrets (registry passwords and tokens, the password of
// the pip index URL) in everything written to logs, steps and errors.
type redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// reURLUserinfo is the userinfo of a URL: a user name alone is often a
// token (https://TOKEN@host/simple), so all of it is masked.
var reURLUserinfo = regexp.MustCompile(`(://)[^/@\s]+@`)

func newRedactor() *redactor { return &redactor{} }

func (r *redactor) add(s string) {
	if len(s) < 3 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.secrets, s) {
		r.secrets = append(r.secrets, s)
		// Longest first, so a secret containing another is masked whole.
		slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	}
}

func (r *redactor) addURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return
	}
	if pw, ok := u.User.Password(); ok {
		r.add(pw)
		r.add(url.QueryEscape(pw))
	} else if name := u.User.Username(); name != "" {
		r.add(name) // a token in the user name's place
	}
}

func (r *redactor) redact(s string) string {
	s = reURLUserinfo.ReplaceAllString(s, "${1}****@")
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "****")
	}
	return s
}
