package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/docker/docker/api/types/image"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/baseinfo"
	"github.com/gatewayhq/gateway/images/conda"
	"github.com/gatewayhq/gateway/images/pyindex"
	"github.com/gatewayhq/gateway/images/wheel"
)

// Builder modes (Config.Mode, config key images.builder).
const (
	// ModeDocker installs missing packages with pip in a Docker build.
	ModeDocker = "docker"
	// ModeLayers makes one layer per wheel from the package index and
	// never uses an engine; a package with no fitting wheel is refused.
	ModeLayers = "layers"
	// ModeAuto is ModeLayers, except that packages with no fitting wheel
	// are installed by a Docker build on top of the wheel layers when an
	// engine answers.
	ModeAuto = "auto"
)

// WheelIndex is what the layers builder needs of a package index.
type WheelIndex interface {
	Version(ctx context.Context, project, version string) ([]pyindex.File, error)
	Fetch(ctx context.Context, f pyindex.File) (string, error)
}

// CondaChannels is what the layers builder needs of conda channels.
type CondaChannels interface {
	ResolveAll(ctx context.Context, spec images.Spec, pkgs []images.Package) ([]conda.Artifact, error)
	Fetch(ctx context.Context, a conda.Artifact) (string, error)
}

// ErrNoWheel is wrapped by the error of a build that needs packages the
// index has no fitting wheel for (NoWheelError has the table).
var ErrNoWheel = errors.New("no fitting wheel")

// NoWheel is one row of a NoWheelError's table.
type NoWheel struct {
	Package, Version string
	// Available is what the index has of that version, in short.
	Available string
	// Why says why none of it fits.
	Why string
}

// NoWheelError lists the packages a layers build cannot install.
type NoWheelError struct {
	Target wheel.Target
	Rows   []NoWheel
}

func (e *NoWheelError) Error() string {
	var sb strings.Builder
	has := "has"
	if len(e.Rows) != 1 {
		has = "have"
	}
	fmt.Fprintf(&sb, "%s %s no wheel that fits the base image (Python %s, %s, glibc %s) in the package index (images.pip_index_url):\n",
		plural(len(e.Rows), "package"), has, e.Target.Python, e.Target.Arch, orNone(e.Target.Glibc))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tversion\tthe index has\twhy none fits")
	for _, r := range e.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Package, r.Version, r.Available, r.Why)
	}
	_ = tw.Flush()
	sb.WriteString("publish wheels for them to the index, pin versions that have wheels, or let the gateway build them with a Docker engine (images.builder: auto with an engine, or docker)")
	return sb.String()
}

// Is makes a NoWheelError an invalid environment (422) as well as ErrNoWheel.
func (e *NoWheelError) Is(target error) bool {
	return target == ErrNoWheel || target == images.ErrInvalidSpec
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// layersState is what the layers builder keeps between builds.
type layersState struct {
	cache *layerCache
	mu    sync.Mutex
	infos map[string]baseinfo.Info // by the base's config digest
}

func newLayersState(cfg Config) (*layersState, error) {
	lc, err := newLayerCache(cfg.LayerCacheDir, cfg.LayerCacheBytes)
	if err != nil {
		return nil, err
	}
	return &layersState{cache: lc, infos: map[string]baseinfo.Info{}}, nil
}

// wheelPlan is a package's chosen wheel.
type wheelPlan struct {
	pkg  images.Package
	file pyindex.File
}

// targetOf is what the base image can run.
func targetOf(info baseinfo.Info) wheel.Target {
	return wheel.Target{Python: info.Python, Arch: info.Arch, Glibc: info.Glibc}
}

// layoutOf is where pip would install into the base image.
func layoutOf(info baseinfo.Info) wheel.Layout {
	return wheel.Layout{
		Purelib: info.SitePackages, Platlib: info.SitePackages,
		Scripts: info.Scripts, Data: info.Prefix, Headers: info.Headers,
		Interpreter: info.Interpreter,
	}
}

// indexLookups bounds the index requests of one build at once.
const indexLookups = 8

// planWheels picks a wheel for each package. Packages without a fitting
// wheel are returned as rows; an index that cannot be reached is an error
// (wrapping images.ErrUnavailable).
func (b *Builder) planWheels(ctx context.Context, info baseinfo.Info, pkgs []images.Package) ([]wheelPlan, []NoWheel, error) {
	target := targetOf(info)
	plans := make([]wheelPlan, len(pkgs))
	rows := make([]*NoWheel, len(pkgs))
	errs := parallel(ctx, len(pkgs), indexLookups, func(i int) error {
		p := pkgs[i]
		files, err := b.cfg.Index.Version(ctx, p.Name, p.Version)
		switch {
		case errors.Is(err, pyindex.ErrNotFound):
			rows[i] = &NoWheel{Package: p.Name, Version: p.Version, Available: "nothing (no such project)", Why: "the index does not have it"}
			return nil
		case err != nil:
			return fmt.Errorf("package %s==%s: %w", p.Name, p.Version, err)
		}
		var names []string
		var cands []pyindex.File
		for _, f := range files {
			if f.Yanked {
				continue
			}
			names = append(names, f.Filename)
			cands = append(cands, f)
		}
		if len(names) == 0 {
			rows[i] = &NoWheel{Package: p.Name, Version: p.Version, Available: "no files of this version", Why: "the index does not have this version"}
			return nil
		}
		best, why := wheel.Choose(target, names)
		if best < 0 {
			rows[i] = &NoWheel{Package: p.Name, Version: p.Version, Available: summarizeFiles(names), Why: summarizeWhy(why)}
			return nil
		}
		plans[i] = wheelPlan{pkg: p, file: cands[best]}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			if errors.Is(err, pyindex.ErrUnreachable) {
				return nil, nil, fmt.Errorf("%w: %w", images.ErrUnavailable, err)
			}
			return nil, nil, err
		}
	}
	var out []wheelPlan
	var missing []NoWheel
	for i := range pkgs {
		if rows[i] != nil {
			missing = append(missing, *rows[i])
			continue
		}
		out = append(out, plans[i])
	}
	return out, missing, nil
}

// summarizeFiles says in short what files a version has: up to three
// names, then how many more.
func summarizeFiles(names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	if len(names) > 3 {
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	}
	return strings.Join(names, ", ")
}

// summarizeWhy keeps the distinct reasons, in order.
func summarizeWhy(why []string) string {
	var out []string
	for _, w := range why {
		if w != "" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(out) > 3 {
		out = append(out[:3], "…")
	}
	return strings.Join(out, "; ")
}

// baseInfo reads the base image's Python layout and packages, cached by
// the image's config digest.
func (b *Builder) baseInfo(ctx context.Context, img v1.Image) (baseinfo.Info, error) {
	key, err := img.ConfigName()
	if err != nil {
		return baseinfo.Info{}, err
	}
	ls := b.lstate
	ls.mu.Lock()
	info, ok := ls.infos[key.String()]
	ls.mu.Unlock()
	if ok {
		return info, nil
	}
	info, err = baseinfo.Inspect(ctx, img)
	if err != nil {
		return baseinfo.Info{}, err
	}
	ls.mu.Lock()
	ls.infos[key.String()] = info
	ls.mu.Unlock()
	return info, nil
}

// produceLayers is a build without a Docker build (unless ModeAuto needs
// one for packages with no wheel): the base image, one layer per missing
// package's wheel, the code and labels, stored.
func (b *Builder) produceLayers(ctx context.Context, j *job, base Base, code []images.Layer) (images.Spec, error) {
	spec := j.spec
	j.logf("base: %s", base)
	dir, err := os.MkdirTemp("", "gateway-env-build-")
	if err != nil {
		return images.Spec{}, err
	}
	defer os.RemoveAll(dir)
	j.step("reading base %s", base.Image)
	img, err := b.readImage(ctx, base.Image, spec.Platform, dir)
	if err != nil {
		return images.Spec{}, fmt.Errorf("read base image %s (images.bases): %w", base.Image, err)
	}
	info, err := b.baseInfo(ctx, img)
	if err != nil {
		return images.Spec{}, fmt.Errorf("base image %s (images.bases): %w", base.Image, err)
	}
	if info.Python != spec.Python {
		return images.Spec{}, fmt.Errorf("base image %s has Python %s, but images.bases lists it for Python %s", base.Image, info.Python, spec.Python)
	}
	have := images.Spec{Python: info.Python, Platform: spec.Platform, GPU: spec.GPU}
	for n, v := range info.Packages {
		have.Packages = append(have.Packages, images.Package{Name: n, Version: v})
	}
	have = lenient(have)
	missing := missingPackages(spec, have)
	j.logf("base has Python %s (%s), site-packages %s, glibc %s and %s; the spec has %s, %d of them missing or at another version",
		info.Python, info.Interpreter, info.SitePackages, orNone(info.Glibc), plural(len(have.Packages), "package"), plural(len(spec.Packages), "package"), len(missing))
	j.logMissing(missing, have)
	contents := have
	// On a conda base, the spec's conda packages come from their channels,
	// each a layer below the wheels'.
	var condaMissing []images.Package
	if info.Conda != "" && b.cfg.Conda != nil {
		condaMissing, missing = splitConda(spec, info, missing)
	}
	if len(condaMissing) > 0 {
		var dists []string
		j.step("fetching %s from conda channels", plural(len(condaMissing), "conda package"))
		if img, dists, err = b.addCondaLayers(ctx, j, img, info, condaMissing); err != nil {
			return images.Spec{}, err
		}
		for _, p := range condaMissing {
			contents = withPackage(contents, p)
		}
		// A conda package that installs a Python distribution (conda's
		// msgpack-python installs msgpack) is not installed again from
		// a wheel.
		missing = slices.DeleteFunc(missing, func(p images.Package) bool { return slices.Contains(dists, images.NormalizeName(p.Name)) })
		for _, d := range dists {
			if v, ok := versions(spec)[d]; ok {
				contents = withPackage(contents, images.Package{Name: d, Version: v})
			}
		}
	}
	if len(missing) > 0 {
		if b.cfg.Index == nil {
			return images.Spec{}, errors.New("no package index is configured (images.pip_index_url)")
		}
		j.step("finding wheels for %s", plural(len(missing), "package"))
		plans, unfit, err := b.planWheels(ctx, info, missing)
		if err != nil {
			return images.Spec{}, err
		}
		if len(unfit) > 0 && (b.cfg.Mode != ModeAuto || b.docker == nil) {
			return images.Spec{}, &NoWheelError{Target: targetOf(info), Rows: unfit}
		}
		if img, err = b.addWheelLayers(ctx, j, img, info, plans); err != nil {
			return images.Spec{}, err
		}
		for _, p := range plans {
			contents = withPackage(contents, p.pkg)
		}
		if len(unfit) > 0 {
			rest := make([]images.Package, len(unfit))
			for i, r := range unfit {
				rest[i] = images.Package{Name: r.Package, Version: r.Version}
				j.logf("  %s==%s has no fitting wheel (%s): installed by a Docker build", r.Package, r.Version, r.Why)
			}
			if img, err = b.dockerLayer(ctx, j, img, rest, dir); err != nil {
				return images.Spec{}, err
			}
			for _, p := range rest {
				contents = withPackage(contents, p)
			}
		}
		if ms := verify(spec, contents); len(ms) > 0 {
			return images.Spec{}, fmt.Errorf("the image would not have the spec's packages at their versions (client: the spec, image: what the layers hold):\n%s", images.FormatMismatches(ms))
		}
	} else if len(condaMissing) == 0 {
		j.step("no packages to install: assembling on the base")
	}
	if err := b.assembleAndStore(ctx, j, img, code); err != nil {
		return images.Spec{}, err
	}
	contents.Code = spec.Code
	return contents, nil
}

// withPackage returns s with p at p's version.
func withPackage(s images.Spec, p images.Package) images.Spec {
	n := images.NormalizeName(p.Name)
	s.Packages = slices.DeleteFunc(slices.Clone(s.Packages), func(q images.Package) bool { return images.NormalizeName(q.Name) == n })
	s.Packages = append(s.Packages, images.Package{Name: n, Version: strings.TrimSpace(p.Version)})
	slices.SortFunc(s.Packages, func(a, b images.Package) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// wheelFetches bounds the downloads and layer builds of one build at once.
const wheelFetches = 4

// addWheelLayers fetches each plan's wheel (or takes it from the cache),
// makes its layer (or takes that from the layer cache), and appends the
// layers to img in the plans' order.
func (b *Builder) addWheelLayers(ctx context.Context, j *job, img v1.Image, info baseinfo.Info, plans []wheelPlan) (v1.Image, error) {
	j.step("fetching %s", plural(len(plans), "wheel"))
	layout := layoutOf(info)
	mt := types.DockerLayer
	if m, err := img.MediaType(); err == nil && m == types.OCIManifestSchema1 {
		mt = types.OCILayer
	}
	layers := make([]v1.Layer, len(plans))
	var done sync.Mutex
	made := 0
	errs := parallel(ctx, len(plans), wheelFetches, func(i int) error {
		p := plans[i]
		path, err := b.cfg.Index.Fetch(ctx, p.file)
		if err != nil {
			if errors.Is(err, pyindex.ErrUnreachable) {
				err = fmt.Errorf("%w: %w", images.ErrUnavailable, err)
			}
			return fmt.Errorf("package %s==%s (%s): %w", p.pkg.Name, p.pkg.Version, p.file.Filename, err)
		}
		l, info, err := b.lstate.cache.wheel(path, p.file, layout, mt, b.wheelLimits())
		if err != nil {
			return fmt.Errorf("package %s==%s: %w", p.pkg.Name, p.pkg.Version, err)
		}
		if !sameVersion(info.Name, info.Version, p.pkg) {
			return fmt.Errorf("package %s==%s: the wheel %s holds %s %s", p.pkg.Name, p.pkg.Version, p.file.Filename, info.Name, info.Version)
		}
		layers[i] = l
		done.Lock()
		defer done.Unlock()
		made++
		j.progress(fmt.Sprintf("made %d of %s", made, plural(len(plans), "package layer")), made == len(plans))
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(plans))
	for i, p := range plans {
		adds[i] = mutate.Addendum{Layer: layers[i], MediaType: mt, History: v1.History{CreatedBy: "gateway images: wheel " + p.file.Filename}}
	}
	return mutate.Append(img, adds...)
}

// sameVersion reports whether a wheel's name and version are p's.
func sameVersion(name, version string, p images.Package) bool {
	return images.NormalizeName(name) == images.NormalizeName(p.Name) && pyindex.SameVersion(version, p.Version)
}

func (b *Builder) wheelLimits() wheel.Limits {
	return wheel.Limits{MaxBytes: b.cfg.MaxPackageBytes}
}

// dockerLayer installs pkgs with pip in a Docker build on top of img and
// returns img with the build's new layers appended (and only those: the
// layers below keep their digests, so a registry still has them).
func (b *Builder) dockerLayer(ctx context.Context, j *job, img v1.Image, pkgs []images.Package, dir string) (v1.Image, error) {
	tag := images.TagForHash(j.hash)
	below := buildRepository + ":" + tag + "-wheels"
	buildRef := buildRepository + ":" + tag
	defer b.removeIntermediate(ctx, j, below)
	defer b.removeIntermediate(ctx, j, buildRef)
	j.step("loading the wheel layers into the engine for %s", plural(len(pkgs), "package without a wheel"))
	if err := b.loadImage(ctx, j, below, img); err != nil {
		return nil, err
	}
	j.step("installing %s with pip", plural(len(pkgs), "package"))
	if err := b.dockerBuild(ctx, j, below, pkgs, buildRef); err != nil {
		return nil, err
	}
	j.step("reading the layers the build added")
	built, err := b.saveTarball(ctx, buildRef, dir)
	if err != nil {
		return nil, fmt.Errorf("read the built image: %w", err)
	}
	added, err := layersAbove(built, img)
	if err != nil {
		return nil, err
	}
	out := img
	for _, l := range added {
		if out, err = mutate.Append(out, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "gateway images: pip install of packages without a wheel"}}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// layersAbove returns the layers of built (an engine's docker save) above
// those of below, which it was built on. They are taken by diff ID, which
// the saved config lists: asking built for its layers would compute its
// manifest, gzipping every layer below to digest it (minutes of CPU for a
// base of gigabytes, for the few megabytes pip added).
func layersAbove(built, below v1.Image) ([]v1.Layer, error) {
	bcf, err := built.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("the built image's config: %w", err)
	}
	have, err := below.ConfigFile()
	if err != nil {
		return nil, err
	}
	all, base := bcf.RootFS.DiffIDs, have.RootFS.DiffIDs
	if len(all) < len(base) {
		return nil, fmt.Errorf("the Docker build has %d layers, fewer than the %d it was built on", len(all), len(base))
	}
	for i, id := range base {
		if all[i] != id {
			return nil, fmt.Errorf("the Docker build's layer %d is %s, not the %s it was built on", i+1, all[i], id)
		}
	}
	added := make([]v1.Layer, 0, len(all)-len(base))
	for _, id := range all[len(base):] {
		l, err := built.LayerByDiffID(id)
		if err != nil {
			return nil, fmt.Errorf("the built image's layer %s: %w", id, err)
		}
		added = append(added, l)
	}
	return added, nil
}

// removeIntermediate removes an intermediate image from the engine, even
// when ctx has ended.
func (b *Builder) removeIntermediate(ctx context.Context, j *job, ref string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := b.docker.ImageRemove(rctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !isEngineNotFound(err) {
		j.logf("removing the intermediate image %s: %v", ref, err)
	}
}

// splitConda separates the spec's conda packages that the conda base does
// not have at their version and build from the other missing packages
// (which go through the wheel path).
func splitConda(spec images.Spec, info baseinfo.Info, missing []images.Package) (condaMissing, rest []images.Package) {
	isConda := map[string]bool{}
	for _, p := range spec.Packages {
		if !p.Conda() {
			continue
		}
		isConda[images.NormalizeName(p.Name)] = true
		if have, ok := info.CondaPackages[p.Name]; !ok || have.Version != p.Version || have.Build != p.Build {
			condaMissing = append(condaMissing, p)
		}
	}
	for _, p := range missing {
		if !isConda[images.NormalizeName(p.Name)] {
			rest = append(rest, p)
		}
	}
	return condaMissing, rest
}

// condaLayout is where conda packages are installed, for the layer cache's
// key.
type condaLayout struct {
	Prefix, Python string
}

// addCondaLayers resolves pkgs in their channels, fetches them (or takes
// them from the cache), extracts each into a layer of its own (or takes it
// from the layer cache), and appends the layers to img. dists are the
// Python distributions the packages install.
func (b *Builder) addCondaLayers(ctx context.Context, j *job, img v1.Image, info baseinfo.Info, pkgs []images.Package) (v1.Image, []string, error) {
	arts, err := b.cfg.Conda.ResolveAll(ctx, j.spec, pkgs)
	if err != nil {
		if errors.Is(err, conda.ErrUnreachable) {
			err = fmt.Errorf("%w: %w", images.ErrUnavailable, err)
		}
		return nil, nil, err
	}
	mt := types.DockerLayer
	if m, err := img.MediaType(); err == nil && m == types.OCIManifestSchema1 {
		mt = types.OCILayer
	}
	where := condaLayout{Prefix: info.Conda, Python: info.Python}
	lim := conda.Limits{MaxUnpackedBytes: b.cfg.MaxPackageBytes}
	layers := make([]v1.Layer, len(arts))
	infos := make([]conda.Info, len(arts))
	errs := parallel(ctx, len(arts), wheelFetches, func(i int) error {
		a := arts[i]
		path, err := b.cfg.Conda.Fetch(ctx, a)
		if err != nil {
			if errors.Is(err, conda.ErrUnreachable) {
				err = fmt.Errorf("%w: %w", images.ErrUnavailable, err)
			}
			return err
		}
		l, raw, err := b.lstate.cache.layer(layerKey(a.SHA256, where), mt, func(w io.Writer) (any, error) {
			return conda.WriteLayer(path, a, where.Prefix, where.Python, lim, w)
		})
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &infos[i]); err != nil {
			return fmt.Errorf("layer cache: %w", err)
		}
		layers[i] = l
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var dists []string
	adds := make([]mutate.Addendum, len(arts))
	for i, a := range arts {
		adds[i] = mutate.Addendum{Layer: layers[i], MediaType: mt, History: v1.History{CreatedBy: "gateway images: conda " + a.Channel + "::" + a.Filename}}
		dists = append(dists, infos[i].Dists...)
	}
	out, err := mutate.Append(img, adds...)
	return out, dists, err
}

// parallel runs f(0), …, f(n-1) with at most limit running at once and
// returns their errors by index (ctx's error for those that had not
// started when ctx ended).
func parallel(ctx context.Context, n, limit int, f func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	return errs
}
