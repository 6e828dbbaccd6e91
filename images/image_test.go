package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// newRegistry starts an in-memory registry on 127.0.0.1 and returns its
// host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("registry is on %s, want 127.0.0.1", u.Host)
	}
	return u.Host
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var codeZip = []byte("user code zip")

func sampleLayers(t *testing.T) []Layer {
	t.Helper()
	code, err := CodeLayer(sampleSpec(), CodeFromBytes(map[string][]byte{"mylib": codeZip}))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := Layer{Name: "packages", Files: map[string]File{
		"/opt/env/lib/python3.12/site-packages/dask/__init__.py": {Data: []byte("__version__ = '2024.8.0'\n")},
		"opt/env/bin/dask": {Data: []byte("#!/opt/env/bin/python\n"), Mode: 0o755},
	}}
	return []Layer{pkgs, code}
}

// layerFiles reads a layer's tar: every entry's header and content by name.
func layerFiles(t *testing.T, l v1.Layer) (names []string, hdrs map[string]*tar.Header, data map[string]string) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hdrs, data = map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		hdrs[h.Name], data[h.Name] = h, string(b)
	}
	return names, hdrs, data
}

func TestAssemblePushPull(t *testing.T) {
	ctx := testContext(t)
	host := newRegistry(t)
	spec := sampleSpec()
	img, err := Assemble(nil, spec, sampleLayers(t))
	if err != nil {
		t.Fatal(err)
	}
	tag, err := spec.Tag()
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/gateway/envs:" + tag
	if err := Push(ctx, img, ref, nil); err != nil {
		t.Fatal(err)
	}

	pulled, err := remote.Image(mustName(t, ref), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := img.Digest()
	if got, _ := pulled.Digest(); got != wantDigest {
		t.Errorf("pulled digest %s, pushed %s", got, wantDigest)
	}
	if mt, _ := pulled.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s, want OCI", mt)
	}
	layers, err := pulled.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Fatalf("%d layers, want 2", len(layers))
	}
	names, hdrs, data := layerFiles(t, layers[0])
	wantNames := []string{"opt/", "opt/env/", "opt/env/bin/", "opt/env/bin/dask", "opt/env/lib/", "opt/env/lib/python3.12/",
		"opt/env/lib/python3.12/site-packages/", "opt/env/lib/python3.12/site-packages/dask/", "opt/env/lib/python3.12/site-packages/dask/__init__.py"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("layer 0 entries:\n%q\nwant\n%q", names, wantNames)
	}
	for n, h := range hdrs {
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d uname %q gname %q, want zeroes", n, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	if h := hdrs["opt/env/bin/dask"]; h.Mode != 0o755 || data["opt/env/bin/dask"] != "#!/opt/env/bin/python\n" {
		t.Errorf("opt/env/bin/dask: mode %o content %q", h.Mode, data["opt/env/bin/dask"])
	}
	if h := hdrs["opt/env/lib/python3.12/site-packages/dask/__init__.py"]; h.Mode != 0o644 {
		t.Errorf("default mode %o, want 644", h.Mode)
	}
	if h := hdrs["opt/"]; h.Typeflag != tar.TypeDir || h.Mode != 0o755 {
		t.Errorf("opt/: type %c mode %o", h.Typeflag, h.Mode)
	}
	_, _, data = layerFiles(t, layers[1])
	if got := data["opt/gateway/code/mylib.zip"]; got != string(codeZip) {
		t.Errorf("code layer: mylib.zip = %q", got)
	}

	cf, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := spec.Canonical()
	hash, _ := spec.Hash()
	if cf.Config.Labels[LabelSpec] != string(doc) || cf.Config.Labels[LabelHash] != hash {
		t.Errorf("labels %v, want spec %s hash %s", cf.Config.Labels, doc, hash)
	}
	if !slices.Contains(cf.Config.Env, "PYTHONPATH=/opt/gateway/code:/opt/gateway/code/mylib.zip") {
		t.Errorf("env %q has no PYTHONPATH with the code", cf.Config.Env)
	}
	if !reflect.DeepEqual(cf.Config.Entrypoint, Entrypoint) || cf.Config.Cmd != nil {
		t.Errorf("entrypoint %q cmd %q", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if len(cf.History) != 2 || !strings.Contains(cf.History[1].CreatedBy, "code") {
		t.Errorf("history %+v", cf.History)
	}

	got, err := Lookup(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := spec.Normalize()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup() = %+v, want %+v", got, want)
	}
}

func TestAssembleDeterministic(t *testing.T) {
	digest := func(spec Spec, layers []Layer) v1.Hash {
		t.Helper()
		img, err := Assemble(nil, spec, layers)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := digest(sampleSpec(), sampleLayers(t))
	// The same spec, spelt differently, and the same layers, rebuilt (map
	// iteration order differs from run to run), give the same image.
	s := sampleSpec()
	slices.Reverse(s.Packages)
	s.Python = "3.12.9"
	if b := digest(s, sampleLayers(t)); a != b {
		t.Errorf("same inputs, digests %s and %s", a, b)
	}
	for range 5 {
		if b := digest(sampleSpec(), sampleLayers(t)); a != b {
			t.Fatalf("same inputs, digests %s and %s", a, b)
		}
	}
	other := sampleSpec()
	other.Packages[0].Version = "2.2.3"
	if b := digest(other, sampleLayers(t)); a == b {
		t.Error("another spec gives the same digest")
	}
}

func TestAssembleOnBase(t *testing.T) {
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS: "linux", Architecture: "amd64",
		Config: v1.Config{
			Env:    []string{"PATH=/usr/bin", "PYTHONPATH=/base/lib"},
			Cmd:    []string{"python3"},
			Labels: map[string]string{"org.example": "base"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := Assemble(base, sampleSpec(), sampleLayers(t))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := []string{"PATH=/usr/bin", "PYTHONPATH=/opt/gateway/code:/opt/gateway/code/mylib.zip:/base/lib"}
	if !reflect.DeepEqual(cf.Config.Env, wantEnv) {
		t.Errorf("env %q, want %q", cf.Config.Env, wantEnv)
	}
	if cf.Config.Labels["org.example"] != "base" || cf.Config.Labels[LabelHash] == "" || cf.Config.Cmd != nil {
		t.Errorf("labels %v cmd %q", cf.Config.Labels, cf.Config.Cmd)
	}
	if mt, _ := img.MediaType(); mt != types.DockerManifestSchema2 {
		t.Errorf("media type %s, want the base's", mt)
	}
	if ls, _ := img.Layers(); len(ls) != 2 {
		t.Errorf("%d layers", len(ls))
	} else if mt, _ := ls[0].MediaType(); mt != types.DockerLayer {
		t.Errorf("layer media type %s, want Docker's on a Docker base", mt)
	}
	// The original config is not modified.
	if bcf, _ := base.ConfigFile(); len(bcf.Config.Labels) != 1 {
		t.Errorf("base labels changed: %v", bcf.Config.Labels)
	}

	arm := sampleSpec()
	arm.Platform = "linux/arm64"
	if _, err := Assemble(base, arm, nil); err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("Assemble of an arm64 spec on an amd64 base: %v", err)
	}
}

func TestAssembleErrors(t *testing.T) {
	bad := sampleSpec()
	bad.Python = "three"
	tests := []struct {
		name   string
		spec   Spec
		layers []Layer
		want   string
	}{
		{"invalid spec", bad, nil, "python version"},
		{"escaping path", sampleSpec(), []Layer{{Name: "x", Files: map[string]File{"../etc/passwd": {}}}}, "leaves the root"},
		{"root path", sampleSpec(), []Layer{{Name: "x", Files: map[string]File{"/": {}}}}, "the root"},
		{"file and directory", sampleSpec(), []Layer{{Name: "x", Files: map[string]File{"a": {}, "a/b": {}}}}, "both a file and a directory"},
		{"same path twice", sampleSpec(), []Layer{{Name: "x", Files: map[string]File{"/a": {}, "a": {}}}}, "given twice"},
		{"bad mode", sampleSpec(), []Layer{{Name: "x", Files: map[string]File{"a": {Mode: 0o100644}}}}, "permission bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Assemble(nil, tt.spec, tt.layers)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Assemble() error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestCodeLayerErrors(t *testing.T) {
	tests := []struct {
		name  string
		parts map[string][]byte
		want  string
	}{
		{"missing", map[string][]byte{}, `"mylib": no content`},
		{"wrong bytes", map[string][]byte{"mylib": []byte("other")}, "spec says"},
		{"extra", map[string][]byte{"mylib": codeZip, "x": nil}, `"x" is not in the spec`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := CodeLayer(sampleSpec(), CodeFromBytes(tt.parts)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CodeLayer() error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLayerTarDeterministic(t *testing.T) {
	files := map[string]File{}
	for _, n := range []string{"z", "a/b/c", "a-b", "a/a", "m/n"} {
		files[n] = File{Data: []byte(n)}
	}
	first, err := Layer{Files: files}.Tar()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Layer{Files: files}.Tar()
		if err != nil || !bytes.Equal(again, first) {
			t.Fatalf("tar differs between runs (%v)", err)
		}
	}
}

func TestLookupErrors(t *testing.T) {
	ctx := testContext(t)
	host := newRegistry(t)

	// No repository at all, then a repository without this tag.
	for _, ref := range []string{host + "/gateway/envs:env-0123456789abcdef", host + "/gateway/envs:env-fedcba9876543210"} {
		_, err := Lookup(ctx, ref)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup(%s) = %v, want ErrNotFound", ref, err)
		}
		img, _ := Assemble(nil, sampleSpec(), nil)
		if err := Push(ctx, img, host+"/gateway/envs:other", nil); err != nil {
			t.Fatal(err)
		}
	}

	// An image without the labels.
	plain := host + "/gateway/envs:plain"
	if err := remote.Write(mustName(t, plain), empty.Image, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(ctx, plain); !errors.Is(err, ErrNoSpec) {
		t.Errorf("Lookup of an unlabelled image = %v, want ErrNoSpec", err)
	}

	// A label whose hash does not match its spec.
	img, _ := Assemble(nil, sampleSpec(), nil)
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.Labels[LabelHash] = strings.Repeat("0", 64)
	forged, _ := mutate.ConfigFile(img, cf)
	if err := Push(ctx, forged, host+"/gateway/envs:forged", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(ctx, host+"/gateway/envs:forged"); !errors.Is(err, ErrNoSpec) {
		t.Errorf("Lookup of a forged label = %v, want ErrNoSpec", err)
	}

	if _, err := Lookup(ctx, "not a reference"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup of a bad reference = %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Lookup(cancelled, host+"/gateway/envs:other"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup with a cancelled context = %v", err)
	}
}

func mustName(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
