package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/daemon"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/images/pkgcache"
	"github.com/gatewayhq/gateway/images/pyindex"
	"github.com/gatewayhq/gateway/internal/testpypi"
)

// envWheels is how many packages the environment figures install.
const envWheels = 30

// benchEnvBuild measures environment builds: 30 wheels from a warm wheel
// cache to a pushed image with the layers builder, against the Docker
// builder on the same environment in the same run, and then a one-package
// change. Everything is on loopback: an index served here, go-
// containerregistry's registry, and the local engine for the Docker
// builder (and to read the base image once).
func benchEnvBuild(ctx context.Context, o Options) ([]Result, error) {
	baseImage := os.Getenv("GATEWAY_TEST_DASK_IMAGE")
	if baseImage == "" {
		baseImage = "gateway-test/dask:bookworm-1"
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("the environment figures need a Docker engine (scripts/docker.sh) and the test image (scripts/testimage.sh): %w", err)
	}

	uploads := &blobCounter{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(uploads.wrap(inner))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	o.Log.Info("envbuild: copying the base image into the registry", "image", baseImage)
	src, err := name.ParseReference(baseImage)
	if err != nil {
		return nil, err
	}
	img, err := daemon.Image(src, daemon.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s from the engine (scripts/testimage.sh builds it): %w", baseImage, err)
	}
	baseRef := host + "/bases/dask:3.11"
	dst, _ := name.ParseReference(baseRef)
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return nil, err
	}

	wheels, pkgs := benchWheels(envWheels, "1.0")
	ix, stop := testpypi.Serve(wheels)
	defer stop()
	spec := images.Spec{Python: "3.11", Platform: images.PlatformAMD64, Packages: pkgs}

	wheelCache, err := pkgcache.New(filepath.Join(o.Dir, "wheels"), 4<<30)
	if err != nil {
		return nil, err
	}
	index, err := pyindex.New(pyindex.Config{URL: ix.URL, Cache: wheelCache, MaxFileBytes: 512 << 20, Logger: o.Log})
	if err != nil {
		return nil, err
	}
	newLayers := func(repo string) (*build.Builder, error) {
		return build.New(build.Config{
			Mode: build.ModeLayers, Index: index, Repository: host + "/" + repo,
			LayerCacheDir: filepath.Join(o.Dir, "layers-"+repo), LogDir: filepath.Join(o.Dir, "logs-"+repo),
			Bases: []build.Base{{Python: "3.11", Image: baseRef}}, Logger: o.Log,
		})
	}
	// Warm the wheel cache: every wheel downloaded once.
	warm, err := newLayers("warm")
	if err != nil {
		return nil, err
	}
	if _, err := buildOnce(ctx, warm, spec); err != nil {
		warm.Close()
		return nil, err
	}
	warm.Close()

	// Two at least, even in a quick run: -compare needs repetitions.
	reps := 3
	if o.Quick {
		reps = 2
	}
	var layerTimes, changeTimes []float64
	var changeUploads int
	for i := range reps {
		// A fresh layer cache and repository each time: only the wheels
		// are cached, as the figure says.
		b, err := newLayers(fmt.Sprintf("layers%d", i))
		if err != nil {
			return nil, err
		}
		d, err := buildOnce(ctx, b, spec)
		if err != nil {
			b.Close()
			return nil, err
		}
		layerTimes = append(layerTimes, d.Seconds())

		// One package changes.
		w, p := benchWheel(0, fmt.Sprintf("1.%d", i+1))
		for fn, data := range w {
			ix.Add(fn, data)
		}
		changed := spec
		changed.Packages = append([]images.Package{p}, spec.Packages[1:]...)
		uploads.reset()
		d, err = buildOnce(ctx, b, changed)
		b.Close()
		if err != nil {
			return nil, err
		}
		changeTimes = append(changeTimes, d.Seconds())
		changeUploads = max(changeUploads, uploads.layers()-1) // less the config
	}

	// The Docker builder on the same environment, pushing to the same
	// registry.
	var dockerTimes []float64
	dreps := 2
	for i := range dreps {
		b, err := build.New(build.Config{
			Mode: build.ModeDocker, Docker: cli, PipIndexURL: ix.URL, Repository: fmt.Sprintf("%s/docker%d", host, i),
			LogDir: filepath.Join(o.Dir, fmt.Sprintf("logs-docker%d", i)), Bases: []build.Base{{Python: "3.11", Image: baseImage}}, Logger: o.Log,
		})
		if err != nil {
			return nil, err
		}
		d, err := buildOnce(ctx, b, spec)
		b.Close()
		if err != nil {
			return nil, fmt.Errorf("docker builder: %w", err)
		}
		dockerTimes = append(dockerTimes, d.Seconds())
	}

	l, dk, c := median(layerTimes), median(dockerTimes), median(changeTimes)
	return []Result{
		{Figure: "9 environment build", Case: fmt.Sprintf("%d wheels, warm wheel cache, to a pushed image", envWheels), Unit: "s", Value: l,
			Target: "< 5 s", Met: l < 5, Note: fmt.Sprintf("median of %d; fresh layer cache and repository each time", reps), Samples: layerTimes},
		{Figure: "9 environment build", Case: "layers builder against the Docker builder, same environment", Unit: "s", Value: l, Baseline: dk, Ratio: dk / l,
			Target: "Docker builder takes >= 5x", Met: dk/l >= 5, Note: fmt.Sprintf("medians of %d and %d", reps, dreps),
			// The builds do not alternate: no per-repetition ratio.
			Samples: layerTimes, BaselineSamples: dockerTimes, Unpaired: true},
		{Figure: "9 environment build", Case: "one package changed", Unit: "s", Value: c,
			Target: "< 1 s, one layer uploaded", Met: c < 1 && changeUploads == 1, Note: fmt.Sprintf("%d package layer(s) uploaded at most; median of %d", changeUploads, reps),
			Samples: changeTimes},
	}, nil
}

// buildOnce builds spec and waits for it.
func buildOnce(ctx context.Context, b *build.Builder, spec images.Spec) (time.Duration, error) {
	start := time.Now()
	st, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		return 0, err
	}
	if st.State == build.StateReady && !st.Built {
		return 0, errors.New("the image existed already")
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		return 0, fmt.Errorf("%w\n%s", err, strings.Join(st.Steps, "\n"))
	}
	return time.Since(start), nil
}

// benchWheels makes n pure-Python wheels of a few sizes (from 20 KiB to
// 2 MiB of source), the shape of a data-science environment's small
// packages; compressed sizes are realistic since the source is varied.
func benchWheels(n int, version string) (map[string][]byte, []images.Package) {
	out := map[string][]byte{}
	var pkgs []images.Package
	for i := range n {
		w, p := benchWheel(i, version)
		for fn, d := range w {
			out[fn] = d
		}
		pkgs = append(pkgs, p)
	}
	return out, pkgs
}

func benchWheel(i int, version string) (map[string][]byte, images.Package) {
	name := fmt.Sprintf("gwbench%02d", i)
	sizes := []int{20 << 10, 100 << 10, 400 << 10, 2 << 20}
	size := sizes[i%len(sizes)]
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	files := map[string]string{name + "/__init__.py": fmt.Sprintf("__version__ = %q\n", version)}
	var sb strings.Builder
	mod := 0
	for sb.Len() < size {
		fmt.Fprintf(&sb, "def f%d(x):\n    return x * %d + %d  # %x\n", rng.IntN(1<<20), rng.IntN(1000), rng.IntN(1000), rng.Uint64())
		if sb.Len() > 64<<10 {
			files[fmt.Sprintf("%s/m%03d.py", name, mod)] = sb.String()
			size -= sb.Len()
			sb.Reset()
			mod++
		}
	}
	files[fmt.Sprintf("%s/m%03d.py", name, mod)] = sb.String()
	fn, data := testpypi.Wheel{Name: name, Version: version, Files: files}.Build()
	return map[string][]byte{fn: data}, images.Package{Name: name, Version: version}
}

// blobCounter counts the blob uploads a registry completes.
type blobCounter struct {
	mu sync.Mutex
	n  int
}

func (c *blobCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") && r.URL.Query().Get("digest") != "" {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
	})
}

func (c *blobCounter) reset() {
	c.mu.Lock()
	c.n = 0
	c.mu.Unlock()
}

func (c *blobCounter) layers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
