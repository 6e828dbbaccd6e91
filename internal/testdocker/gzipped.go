package testdocker

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/daemon"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// gzipped is the Dask image with its layers gzipped, made once per test
// binary: gzipping them under the race detector takes 100 s of CPU on a
// quiet 2-core machine and minutes on a loaded one. An image read from the
// engine pays it twice per push (once for the layer's digest, once for its
// upload), and every test that pushed the base paid it again.
var gzipped struct {
	once sync.Once
	img  v1.Image
	err  error
}

// GzippedDaskImage is DaskImage read from the engine with each layer
// gzipped once, into memory (about 100 MB), ready to push to a registry
// as an operator puts a base image into ECR. The image is read-only:
// tests may push it to registries of their own, side by side.
func GzippedDaskImage(t testing.TB) v1.Image {
	t.Helper()
	ref := DaskImage(t)
	gzipped.once.Do(func() { gzipped.img, gzipped.err = gzipEngineImage(ref) })
	if gzipped.err != nil {
		t.Fatal(gzipped.err)
	}
	return gzipped.img
}

// gzipEngineImage reads ref from the engine and returns it with each
// layer gzipped once, into memory.
func gzipEngineImage(ref string) (v1.Image, error) {
	src, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	img, err := daemon.Image(src)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		gz, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("gzip layer %d of %s: %w", i+1, ref, err)
		}
		cl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil })
		if err != nil {
			return nil, err
		}
		adds[i] = mutate.Addendum{Layer: cl, MediaType: types.DockerLayer}
	}
	out, err := mutate.Append(mutate.MediaType(empty.Image, types.DockerManifestSchema2), adds...)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigFile(out, cf.DeepCopy())
}
