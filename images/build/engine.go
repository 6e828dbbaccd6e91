package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gatewayhq/gateway/images"
)

// probeTimeout bounds one probe container's run.
const probeTimeout = 2 * time.Minute

func isEngineNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// RegistryError is a registry's or an engine's failure to give an image.
// Its message is a summary ("registry refused the image: 500"): what an
// arbitrary server answered is never repeated to the user who named it,
// only logged; Unwrap gives the cause.
type RegistryError struct {
	Ref, Summary string
	Err          error
}

func (e *RegistryError) Error() string { return "image " + e.Ref + ": " + e.Summary }
func (e *RegistryError) Unwrap() error { return e.Err }

func (b *Builder) registryError(ref, summary string, err error) error {
	b.logger.Warn("image lookup failed", "image", ref, "summary", summary, "err", b.secret.redact(err.Error()))
	return &RegistryError{Ref: ref, Summary: summary, Err: err}
}

// engineImage inspects ref in the engine; ok is false when the engine does
// not have it.
func (b *Builder) engineImage(ctx context.Context, ref string) (image.InspectResponse, bool, error) {
	ii, err := b.docker.ImageInspect(ctx, ref)
	if err != nil {
		if isEngineNotFound(err) {
			return image.InspectResponse{}, false, nil
		}
		return image.InspectResponse{}, false, fmt.Errorf("docker engine: inspect %s: %w", ref, err)
	}
	return ii, true, nil
}

// Inspect returns the environment an image contains: the spec its
// images.LabelSpec label records when that label is present and valid,
// and else what images.ProbeScript reports when run in a throwaway
// container of the image (without network; the image is pulled first when
// the engine does not have it). Probe results are cached by image ID (and
// manifest digest).
func (b *Builder) Inspect(ctx context.Context, ref string) (images.Spec, error) {
	return b.inspect(ctx, ref, false, nil)
}

// inspect is Inspect; with probe it ignores the labels. j, when not nil,
// gets the steps in its log.
func (b *Builder) inspect(ctx context.Context, ref string, probe bool, j *job) (images.Spec, error) {
	if b.docker != nil {
		ii, ok, err := b.engineImage(ctx, ref)
		if err != nil {
			return images.Spec{}, err
		}
		if ok {
			var labels map[string]string
			if ii.Config != nil {
				labels = ii.Config.Labels
			}
			return b.inspectLocal(ctx, ref, ii.ID, labels, probe, j)
		}
	}

	r, err := name.ParseReference(ref)
	if err != nil {
		return images.Spec{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	desc, err := remote.Get(r, remote.WithContext(ctx), remote.WithAuth(b.auth.forRegistry(r.Context().Registry)))
	if err != nil {
		if images.IsNotFound(err) {
			return images.Spec{}, fmt.Errorf("image %s: %w (neither the engine nor its registry has it)", ref, images.ErrNotFound)
		}
		return images.Spec{}, b.registryError(ref, images.SummarizeRegistryError(err), b.describeRegistryError(r.Context().Registry, err))
	}
	key := "digest:" + desc.Digest.String()
	if s, ok := b.cached(key); ok {
		return s, nil
	}
	if !probe {
		if img, err := desc.Image(); err == nil {
			if cf, err := img.ConfigFile(); err == nil {
				if s, err := specFromLabels(cf.Config.Labels); err == nil {
					return s, nil
				}
			}
		}
	}
	if b.docker == nil {
		return images.Spec{}, fmt.Errorf("image %s has no valid %s label, and probing what it contains needs a Docker engine (none is configured)", ref, images.LabelSpec)
	}
	if err := b.pull(ctx, ref, j); err != nil {
		return images.Spec{}, b.registryError(ref, images.SummarizePullError(err.Error()), err)
	}
	ii, ok, err := b.engineImage(ctx, ref)
	if err != nil {
		return images.Spec{}, err
	}
	if !ok {
		return images.Spec{}, fmt.Errorf("image %s: pulled, but the engine does not have it", ref)
	}
	s, err := b.inspectLocal(ctx, ref, ii.ID, nil, true, j)
	if err == nil {
		b.cache(key, s)
	}
	return s, err
}

func (b *Builder) inspectLocal(ctx context.Context, ref, id string, labels map[string]string, probe bool, j *job) (images.Spec, error) {
	if !probe {
		if s, err := specFromLabels(labels); err == nil {
			return s, nil
		}
	}
	key := "id:" + id
	if s, ok := b.cached(key); ok {
		return s, nil
	}
	s, err := b.probe(ctx, ref, j)
	if err != nil {
		return images.Spec{}, err
	}
	b.cache(key, s)
	return s, nil
}

func (b *Builder) cached(key string) (images.Spec, bool) {
	b.inspectMu.Lock()
	defer b.inspectMu.Unlock()
	s, ok := b.inspected[key]
	return s, ok
}

func (b *Builder) cache(key string, s images.Spec) {
	b.inspectMu.Lock()
	defer b.inspectMu.Unlock()
	b.inspected[key] = s
}

// specFromLabels is images.Lookup's check of an image's labels: the
// canonical spec, and its hash matching LabelHash.
func specFromLabels(labels map[string]string) (images.Spec, error) {
	doc, ok := labels[images.LabelSpec]
	if !ok {
		return images.Spec{}, fmt.Errorf("%w: no %s label", images.ErrNoSpec, images.LabelSpec)
	}
	s, err := images.ParseCanonical([]byte(doc))
	if err != nil {
		return images.Spec{}, fmt.Errorf("%w: %v", images.ErrNoSpec, err)
	}
	h, err := s.Hash()
	if err != nil {
		return images.Spec{}, fmt.Errorf("%w: %v", images.ErrNoSpec, err)
	}
	if labels[images.LabelHash] != h {
		return images.Spec{}, fmt.Errorf("%w: %s label does not match the spec", images.ErrNoSpec, images.LabelHash)
	}
	return s, nil
}

// probe runs images.ProbeScript in a throwaway container of ref (no
// network, removed after) and returns what it reports.
func (b *Builder) probe(ctx context.Context, ref string, j *job) (images.Spec, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if j != nil {
		j.logf("probing %s: %s -c images.ProbeScript in a container without network", ref, b.cfg.Python)
	}
	created, err := b.docker.ContainerCreate(ctx, &container.Config{
		Image:           ref,
		Entrypoint:      []string{b.cfg.Python, "-c", images.ProbeScript},
		Labels:          map[string]string{"io.gateway.probe": "1"},
		NetworkDisabled: true,
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return images.Spec{}, fmt.Errorf("probe %s: create a container: %w", ref, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rcancel()
		_ = b.docker.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
	}()
	waitC, errC := b.docker.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := b.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return images.Spec{}, fmt.Errorf("probe %s: start %s: %w", ref, b.cfg.Python, err)
	}
	var code int64
	select {
	case res := <-waitC:
		if res.Error != nil && res.Error.Message != "" {
			return images.Spec{}, fmt.Errorf("probe %s: %s", ref, res.Error.Message)
		}
		code = res.StatusCode
	case err := <-errC:
		return images.Spec{}, fmt.Errorf("probe %s: wait: %w", ref, err)
	}
	rc, err := b.docker.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return images.Spec{}, fmt.Errorf("probe %s: logs: %w", ref, err)
	}
	defer rc.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, rc); err != nil {
		return images.Spec{}, fmt.Errorf("probe %s: logs: %w", ref, err)
	}
	if code != 0 {
		return images.Spec{}, fmt.Errorf("probe %s: %s -c images.ProbeScript exited with status %d: %s", ref, b.cfg.Python, code, tail(stderr.String(), 10))
	}
	p, err := images.ParseProbe(stdout.Bytes())
	if err != nil {
		return images.Spec{}, fmt.Errorf("probe %s: %w", ref, err)
	}
	s := lenient(p.Spec())
	if j != nil {
		j.logf("%s: Python %s (%s), %s, %s", ref, p.Python, p.Executable, s.Platform, plural(len(s.Packages), "package"))
	}
	return s, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pull pulls ref into the engine, with the credentials of its registry.
func (b *Builder) pull(ctx context.Context, ref string, j *job) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if j != nil {
		j.step("pulling %s", ref)
	}
	enc, err := b.pullAuth(ctx, r)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	rc, err := b.docker.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: enc})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer rc.Close()
	return readMessages(rc, func(m message) {
		if j != nil && m.Status != "" && m.Progress == nil {
			j.logf("pull: %s %s", m.ID, m.Status)
		}
	})
}

// PullAuth returns the credentials a Docker engine needs to pull ref (the
// encoded X-Registry-Auth value; "" for none): the builder's, so that an
// engine pulls the environment images the builder pushed.
func (b *Builder) PullAuth(ctx context.Context, ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return b.pullAuth(ctx, r)
}

func (b *Builder) pullAuth(ctx context.Context, r name.Reference) (string, error) {
	ac, err := authn.Authorization(ctx, b.auth.forRegistry(r.Context().Registry))
	if err != nil {
		return "", fmt.Errorf("credentials: %w", err)
	}
	if ac == nil || (ac.Username == "" && ac.IdentityToken == "" && ac.RegistryToken == "") {
		return "", nil
	}
	return registry.EncodeAuthConfig(registry.AuthConfig{
		Username: ac.Username, Password: ac.Password, IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken,
		ServerAddress: r.Context().RegistryStr(),
	})
}

// message is one JSON message of the engine's build and pull streams.
type message struct {
	Stream   string           `json:"stream"`
	Status   string           `json:"status"`
	ID       string           `json:"id"`
	Progress *json.RawMessage `json:"progressDetail"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	ErrorMessage string `json:"error"`
	Aux          *struct {
		ID string `json:"ID"`
	} `json:"aux"`
}

// readMessages decodes an engine stream, calling f for each message; an
// error message ends it with that error.
func readMessages(r io.Reader, f func(message)) error {
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("docker engine stream: %w", err)
		}
		if m.Progress != nil && string(*m.Progress) == "{}" {
			m.Progress = nil
		}
		f(m)
		if m.Error != nil || m.ErrorMessage != "" {
			msg := m.ErrorMessage
			if m.Error != nil && m.Error.Message != "" {
				msg = m.Error.Message
			}
			return errors.New(msg)
		}
	}
}

// reANSI matches the terminal escapes the engine puts around a build's
// standard error.
var reANSI = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// dockerfile returns the Dockerfile that installs pkgs on base.
func dockerfile(base, python, indexURL string, sourceBuilds bool, pkgs []images.Package) string {
	args := []string{python, "-m", "pip", "install", "--no-deps"}
	if !sourceBuilds {
		// A wheel installs without running any of its code; building a
		// source distribution runs its setup.py.
		args = append(args, "--only-binary=:all:")
	}
	if indexURL != "" {
		args = append(args, "--index-url", indexURL)
		if u, err := url.Parse(indexURL); err == nil && u.Scheme == "http" && u.Hostname() != "" {
			args = append(args, "--trusted-host", u.Hostname())
		}
	}
	// After "--", a name that starts with "-" (conda's _openmp_mutex
	// normalises to -openmp-mutex) is a requirement, never an option.
	args = append(args, "--")
	for _, p := range pkgs {
		args = append(args, p.Name+"=="+p.Version)
	}
	run, _ := json.Marshal(args) // strings always encode
	return "FROM " + base + "\n" +
		"ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off PIP_ROOT_USER_ACTION=ignore\n" +
		"RUN " + string(run) + "\n"
}

// dockerBuild installs pkgs on base with the engine's builder (host
// network, so that an index on the loopback works) and tags the result as
// target.
func (b *Builder) dockerBuild(ctx context.Context, j *job, base string, pkgs []images.Package, target string) error {
	bi, ok, err := b.engineImage(ctx, base)
	if err != nil {
		return err
	}
	if !ok {
		if err := b.pull(ctx, base, j); err != nil {
			return fmt.Errorf("base image %s: %w", base, err)
		}
		if bi, _, err = b.engineImage(ctx, base); err != nil {
			return err
		}
	}
	df := dockerfile(base, b.cfg.Python, b.cfg.PipIndexURL, b.cfg.SourceBuilds, pkgs)
	j.logf("docker build (classic builder, network host) of:\n%s", df)
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(df)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := b.docker.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{
		Tags:        []string{target},
		Dockerfile:  "Dockerfile",
		NetworkMode: b.cfg.Network,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{"io.gateway.env.build": j.hash},
	})
	if err != nil {
		return fmt.Errorf("docker build: %w", err)
	}
	defer resp.Body.Close()
	var pipErrors, stepImages, stepContainers []string
	err = readMessages(resp.Body, func(m message) {
		if m.Stream == "" {
			if m.Status != "" {
				j.logf("build: %s %s", m.ID, m.Status)
			}
			return
		}
		sc := bufio.NewScanner(strings.NewReader(m.Stream))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(reANSI.ReplaceAllString(sc.Text(), ""), "\r ")
			if line == "" {
				continue
			}
			j.logf("build: %s", line)
			switch {
			case strings.HasPrefix(line, "Step "):
				j.step("build: %s", line)
			case strings.HasPrefix(line, "Successfully installed "):
				j.step("%s", line)
			case strings.HasPrefix(line, "ERROR: "):
				pipErrors = append(pipErrors, line)
			}
			if m := reStepImage.FindStringSubmatch(line); m != nil && !strings.HasPrefix(strings.TrimPrefix(bi.ID, "sha256:"), m[1]) {
				stepImages = append(stepImages, m[1])
			}
			if m := reStepContainer.FindStringSubmatch(line); m != nil {
				stepContainers = append(stepContainers, m[1])
			}
		}
	})
	if err != nil {
		b.removeStepImages(ctx, j, stepImages, stepContainers)
		msg := fmt.Sprintf("installing %s failed: %v", plural(len(pkgs), "package"), err)
		if len(pipErrors) > 0 {
			msg += "\n" + strings.Join(pipErrors, "\n")
		}
		return errors.New(msg)
	}
	if _, ok, err := b.engineImage(ctx, target); err != nil || !ok {
		return fmt.Errorf("docker build ended without an image %s (%v)", target, err)
	}
	return nil
}

// reStepImage and reStepContainer match the lines of a build step's
// resulting image and of its container.
var (
	reStepImage     = regexp.MustCompile(`^ ---> ([0-9a-f]{12})$`)
	reStepContainer = regexp.MustCompile(`^ ---> Running in ([0-9a-f]{12})$`)
)

// removeStepImages removes what a failed build left (the images of the
// steps before the one that failed), newest first, unless other images or
// containers use them, once the engine has removed the containers of the
// steps (a cancelled build's container goes after the build ends).
func (b *Builder) removeStepImages(ctx context.Context, j *job, ids, containers []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, c := range containers {
		waitC, errC := b.docker.ContainerWait(ctx, c, container.WaitConditionRemoved)
		select {
		case <-waitC:
		case <-errC: // already removed, or the engine cannot say
		}
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if _, err := b.docker.ImageRemove(ctx, ids[i], image.RemoveOptions{}); err == nil {
			j.logf("removed the image of a build step, %s", ids[i])
		}
	}
}

// readImage returns ref for assembly: from the engine when it has it (see
// saveImage; the file goes into dir), else from its registry.
func (b *Builder) readImage(ctx context.Context, ref, platform, dir string) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if b.docker != nil {
		if _, ok, err := b.engineImage(ctx, ref); err != nil {
			return nil, err
		} else if ok {
			return b.saveImage(ctx, ref, dir)
		}
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuth(b.auth.forRegistry(r.Context().Registry)), remote.WithPlatform(*p))
	if err != nil {
		return nil, b.describeRegistryError(r.Context().Registry, err)
	}
	return img, nil
}

// saveImage reads ref from the engine (docker save, into a file in dir,
// which the caller removes), as go-containerregistry's daemon package does,
// but with the Builder's own client and without leaving the file for the
// garbage collector to remove.
func (b *Builder) saveImage(ctx context.Context, ref, dir string) (v1.Image, error) {
	img, err := b.saveTarball(ctx, ref, dir)
	if err != nil {
		return nil, err
	}
	return fromEngine(img, b.repo == nil, b.secret.redact)
}

// saveTarball is ref as docker save writes it (into a file in dir), not
// yet fit for assembly: its layers are uncompressed, and anything that asks
// for its manifest gzips every one of them.
func (b *Builder) saveTarball(ctx context.Context, ref, dir string) (v1.Image, error) {
	f, err := os.CreateTemp(dir, "image-*.tar")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	rc, err := b.docker.ImageSave(ctx, []string{ref})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("docker save %s: %w", ref, err)
	}
	_, err = io.Copy(f, rc)
	rc.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("docker save %s: %w", ref, err)
	}
	img, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(path) }, nil)
	if err != nil {
		return nil, fmt.Errorf("docker save %s: %w", ref, err)
	}
	return img, nil
}

// loadImage writes img into the engine as ref (docker load), or only tags
// it when the engine has an image of that config already.
func (b *Builder) loadImage(ctx context.Context, j *job, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	if _, ok, err := b.engineImage(ctx, id.String()); err != nil {
		return err
	} else if ok {
		if j != nil {
			j.logf("the engine has image %s already: tagging it %s", id, ref)
		}
		return b.docker.ImageTag(ctx, id.String(), ref)
	}
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		_ = pw.CloseWithError(tarball.Write(tag, img, pw))
	}()
	defer func() {
		_ = pr.Close() // a writer still writing stops
		<-written
	}()
	resp, err := b.docker.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(false))
	if err != nil {
		return fmt.Errorf("docker load: %w", err)
	}
	defer resp.Body.Close()
	return readMessages(resp.Body, func(m message) {
		if s := strings.TrimSpace(m.Stream); s != "" && j != nil {
			j.logf("docker load: %s", s)
		}
	})
}

// fromEngine returns an image read from the engine (docker save) with the
// engine's own config (the daemon package rebuilds the config from
// inspect, with the history in the wrong order), its history passed through
// redact (a pip index URL with a password is in the RUN line). With raw,
// its layers are presented uncompressed (digest = diff ID), for writing
// back into the engine: nothing is gzipped, which for a base of gigabytes
// is most of the time of a build. For a registry they keep being
// compressed.
func fromEngine(img v1.Image, raw bool, redact func(string) string) (v1.Image, error) {
	rc, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(rc))
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	for i := range cf.History {
		cf.History[i].CreatedBy = redact(cf.History[i].CreatedBy)
	}
	if !raw {
		return mutate.ConfigFile(img, cf)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: &rawLayer{Layer: l}, MediaType: types.DockerUncompressedLayer}
	}
	out, err := mutate.Append(mutate.MediaType(empty.Image, types.DockerManifestSchema2), adds...)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigFile(out, cf)
}

// rawLayer is an engine layer as its uncompressed tar.
type rawLayer struct {
	v1.Layer

	once sync.Once
	size int64
	err  error
}

func (l *rawLayer) Digest() (v1.Hash, error)            { return l.DiffID() }
func (l *rawLayer) Compressed() (io.ReadCloser, error)  { return l.Uncompressed() }
func (l *rawLayer) MediaType() (types.MediaType, error) { return types.DockerUncompressedLayer, nil }

func (l *rawLayer) Size() (int64, error) {
	l.once.Do(func() {
		rc, err := l.Uncompressed()
		if err != nil {
			l.err = err
			return
		}
		defer rc.Close()
		l.size, l.err = io.Copy(io.Discard, rc)
	})
	return l.size, l.err
}
