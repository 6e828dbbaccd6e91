package build

import (
	"archive/tar"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/conda"
	"github.com/gatewayhq/gateway/images/pkgcache"
	"github.com/gatewayhq/gateway/images/pyindex"
	"github.com/gatewayhq/gateway/internal/testconda"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/internal/testpypi"
)

// regLog is go-containerregistry's in-memory registry on 127.0.0.1 that
// records the uploads it completes: blob uploads (the PUT that ends one,
// naming the digest) and manifests.
type regLog struct {
	Host string

	mu        sync.Mutex
	blobs     []string // digests uploaded
	manifests []string // references written
}

func newRegLog(t *testing.T) *regLog {
	t.Helper()
	rl := &regLog{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: 200}
		inner.ServeHTTP(rec, r)
		if r.Method != http.MethodPut || rec.code >= 300 {
			return
		}
		rl.mu.Lock()
		defer rl.mu.Unlock()
		switch {
		case strings.Contains(r.URL.Path, "/blobs/uploads/"):
			rl.blobs = append(rl.blobs, r.URL.Query().Get("digest"))
		case strings.Contains(r.URL.Path, "/manifests/"):
			rl.manifests = append(rl.manifests, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		}
	}))
	t.Cleanup(srv.Close)
	rl.Host = strings.TrimPrefix(srv.URL, "http://")
	return rl
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

// reset forgets what was recorded, and returns it.
func (rl *regLog) reset() (blobs, manifests []string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	blobs, manifests = rl.blobs, rl.manifests
	rl.blobs, rl.manifests = nil, nil
	return blobs, manifests
}

// pushDaskBase copies the Dask test image from the engine into the registry,
// as an operator puts a base image into ECR, and returns its reference.
func pushDaskBase(t *testing.T, host string) string {
	t.Helper()
	dockerClient(t) // the engine's rules: skip or fail without one
	img := testdocker.GzippedDaskImage(t)
	ref := host + "/bases/dask:3.11"
	dst, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img, remote.WithContext(testContext(t))); err != nil {
		t.Fatal(err)
	}
	return ref
}

// layersEnv is a layers builder with no Docker engine (DOCKER_HOST points
// at a closed port), a loopback index and a loopback registry holding the
// base.
type layersEnv struct {
	reg      *regLog
	ix       *testpypi.Index
	base     string
	wheels   *pkgcache.Cache
	layerDir string
}

func newLayersEnv(t *testing.T) *layersEnv {
	t.Helper()
	reg := newRegLog(t)
	base := pushDaskBase(t, reg.Host)
	reg.reset()
	cache, err := pkgcache.New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return &layersEnv{reg: reg, ix: testpypi.NewIndex(t, nil), base: base, wheels: cache, layerDir: t.TempDir()}
}

func (e *layersEnv) builder(t *testing.T, mode string) *Builder {
	t.Helper()
	ix, err := pyindex.New(pyindex.Config{URL: e.ix.URL, Cache: e.wheels, MaxFileBytes: 64 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return newBuilder(t, Config{
		Mode: mode, Index: ix, Repository: e.reg.Host + "/envs", LayerCacheDir: e.layerDir,
		Bases: []Base{{Python: "3.11", Image: e.base}}, MaxPackageBytes: 64 << 20,
	})
}

func (e *layersEnv) add(w testpypi.Wheel) images.Package {
	fn, data := w.Build()
	e.ix.Add(fn, data)
	return images.Package{Name: w.Name, Version: w.Version}
}

// testWheels are the wheels of the layers tests: pure Python, a console
// script, .data scripts and data, a namespace package over two wheels, a
// .pth file, and a package with manylinux wheels for two glibc levels.
func testWheels() []testpypi.Wheel {
	return []testpypi.Wheel{
		{Name: "gwpure", Version: "1.0", Files: map[string]string{"gwpure/__init__.py": "def triple(x):\n    return 3 * x\n"}},
		{Name: "gwtool", Version: "2.0", Files: map[string]string{"gwtool/__init__.py": "", "gwtool/cli.py": "def main():\n    print('gwtool says hello')\n    return 0\n"},
			ConsoleScripts: map[string]string{"gwtool": "gwtool.cli:main"}},
		{Name: "gwdata", Version: "0.3", Files: map[string]string{"gwdata/__init__.py": ""},
			Data: map[string]string{"scripts/gwdata-run": "#!python\nimport sys\nprint('gwdata-run on', sys.version_info[:2])\n", "data/share/gwdata/hello.txt": "hello data\n"}},
		{Name: "gwns-a", Version: "1.0", Files: map[string]string{"gwns/a/__init__.py": "NAME = 'a'\n"}},
		{Name: "gwns-b", Version: "1.0", Files: map[string]string{"gwns/b/__init__.py": "NAME = 'b'\n"}},
		{Name: "gwpth", Version: "1.0", Files: map[string]string{"gwpth.pth": "/usr/local/gwpth-extra\n", "gwpth_mod.py": "X = 1\n"},
			Data: map[string]string{"data/gwpth-extra/gwpth_extra.py": "WHERE = 'from the .pth directory'\n"}},
		{Name: "gwnative", Version: "1.0", Tag: "cp311-cp311-manylinux_2_17_x86_64", Platlib: true, Files: map[string]string{"gwnative/__init__.py": "GLIBC = '2.17'\n"}},
		{Name: "gwnative", Version: "1.0", Tag: "cp311-cp311-manylinux_2_39_x86_64", Platlib: true, Files: map[string]string{"gwnative/__init__.py": "GLIBC = '2.39'\n"}},
	}
}

// specOf is a spec of Python 3.11 with pkgs.
func specOf(pkgs ...images.Package) images.Spec {
	return images.Spec{Python: "3.11", Platform: images.PlatformAMD64, Packages: pkgs}
}

// TestLayersBuild builds an environment with no Docker engine into a
// registry, one layer per wheel, then runs the image on the engine: the
// packages import, the console script and the .data script run, and pip
// agrees with the spec. A second environment that differs by one package
// uploads that package's layer, the config and the manifest, nothing else.
func TestLayersBuild(t *testing.T) {
	e := newLayersEnv(t)
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1") // no engine for the builder
	var pkgs []images.Package
	for _, w := range testWheels() {
		p := e.add(w)
		if !slices.Contains(pkgs, p) {
			pkgs = append(pkgs, p)
		}
	}
	b := e.builder(t, ModeLayers)
	ctx := testContext(t)
	spec := specOf(pkgs...)
	st, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("%v\nsteps %q", err, st.Steps)
	}
	blobs, manifests := e.reg.reset()
	// 7 package layers (gwnative once), the config; the base's layers were
	// in the registry already.
	if len(blobs) != 8 || len(manifests) != 1 {
		t.Errorf("the first build uploaded %d blobs and %d manifests, want 8 and 1", len(blobs), len(manifests))
	}
	if !hasStep(st, "8 layers of the image: 1 reused") || !slices.ContainsFunc(st.Steps, func(s string) bool { return strings.Contains(s, "7 uploaded") }) {
		t.Errorf("steps %q do not count the uploaded layers", st.Steps)
	}
	if st.Digest == "" {
		t.Error("no digest in the status")
	}
	t.Setenv("DOCKER_HOST", "")
	os.Unsetenv("DOCKER_HOST")
	cli := dockerClient(t)
	removeImageAtEnd(t, cli, st.Ref)
	pullImage(t, cli, st.Ref)
	out, code := runPython(t, cli, st.Ref, `
import subprocess, json, gwpure, gwns.a, gwns.b, gwnative, gwpth_mod, sys
print("triple", gwpure.triple(14))
print("ns", gwns.a.NAME, gwns.b.NAME)
print("glibc", gwnative.GLIBC)
import gwpth_extra
print("pth", gwpth_extra.WHERE)
print(subprocess.run(["gwtool"], capture_output=True, text=True, check=True).stdout.strip())
print(subprocess.run(["gwdata-run"], capture_output=True, text=True, check=True).stdout.strip())
print("data", open("/usr/local/share/gwdata/hello.txt").read().strip())
have = {p["name"].lower(): p["version"] for p in json.loads(subprocess.run([sys.executable, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True).stdout)}
print("pip", " ".join(f"{n}={have.get(n)}" for n in ["gwpure", "gwtool", "gwdata", "gwns-a", "gwns-b", "gwpth", "gwnative"]))
`)
	for _, want := range []string{"triple 42", "ns a b", "glibc 2.17", "pth from the .pth directory", "gwtool says hello", "gwdata-run on (3, 11)", "data hello data",
		"pip gwpure=1.0 gwtool=2.0 gwdata=0.3 gwns-a=1.0 gwns-b=1.0 gwpth=1.0 gwnative=1.0"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("running the image: status %d, output lacks %q:\n%s", code, want, out)
		}
	}

	// One package changes: one new layer, the config, the manifest.
	next := slices.Clone(pkgs)
	next[0] = e.add(testpypi.Wheel{Name: "gwpure", Version: "1.1", Files: map[string]string{"gwpure/__init__.py": "def triple(x):\n    return x + x + x\n"}})
	st2, err := b.Ensure(ctx, specOf(next...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st2, err = b.Wait(ctx, st2.Hash); err != nil {
		t.Fatalf("%v\nsteps %q", err, st2.Steps)
	}
	blobs, manifests = e.reg.reset()
	if len(blobs) != 2 || len(manifests) != 1 {
		t.Errorf("a one-package change uploaded %d blobs and %d manifests, want 2 (the layer and the config) and 1", len(blobs), len(manifests))
	}
	if !slices.ContainsFunc(st2.Steps, func(s string) bool { return strings.Contains(s, "1 uploaded") }) {
		t.Errorf("steps %q", st2.Steps)
	}
}

// TestLayersBadInput: hostile or broken wheels fail the build with an
// error naming the package; nothing is pushed and nothing is cached as
// good, and a later good build is not affected.
func TestLayersBadInput(t *testing.T) {
	e := newLayersEnv(t)
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	b := e.builder(t, ModeLayers)
	ctx := testContext(t)

	good := e.add(testpypi.Wheel{Name: "gwgood", Version: "1.0"})
	cases := []struct {
		name string
		pkg  func() images.Package
		want []string
	}{
		{"hash mismatch", func() images.Package {
			p := e.add(testpypi.Wheel{Name: "gwtampered", Version: "1.0"})
			fn, _ := testpypi.Wheel{Name: "gwtampered", Version: "1.0"}.Build()
			e.ix.Tamper(fn, []byte("not the wheel the index hashed"))
			return p
		}, []string{"gwtampered", "sha256"}},
		{"RECORD outside the root", func() images.Package {
			return e.add(testpypi.Wheel{Name: "gwescape", Version: "1.0", Files: map[string]string{"../../../../etc/gw-escaped": "x\n"}})
		}, []string{"gwescape"}},
		{"data outside the prefix", func() images.Package {
			return e.add(testpypi.Wheel{Name: "gwdataescape", Version: "1.0", Data: map[string]string{"data/../../../etc/gw-escaped": "x\n"}})
		}, []string{"gwdataescape"}},
		{"symlink", func() images.Package {
			return e.add(testpypi.Wheel{Name: "gwlink", Version: "1.0", Symlinks: map[string]string{"gwlink/passwd": "/etc/passwd"}})
		}, []string{"gwlink", "symbolic link"}},
		{"too large", func() images.Package {
			return e.add(testpypi.Wheel{Name: "gwhuge", Version: "1.0", Files: map[string]string{"gwhuge/zeros.bin": strings.Repeat("\x00", 65<<20)}})
		}, []string{"gwhuge"}},
		{"not a zip", func() images.Package {
			e.ix.Add("gwbroken-1.0-py3-none-any.whl", []byte("PK\x03\x04 this is not a zip"))
			return images.Package{Name: "gwbroken", Version: "1.0"}
		}, []string{"gwbroken"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.pkg()
			st, err := b.Ensure(ctx, specOf(good, p), nil)
			if err != nil {
				t.Fatal(err)
			}
			st, err = b.Wait(ctx, st.Hash)
			if !errors.Is(err, ErrBuildFailed) {
				t.Fatalf("the build did not fail: %v, %+v", err, st)
			}
			for _, w := range c.want {
				if !strings.Contains(st.Error, w) {
					t.Errorf("the error lacks %q:\n%s", w, st.Error)
				}
			}
			if blobs, manifests := e.reg.reset(); len(manifests) != 0 {
				t.Errorf("a failed build pushed %d manifests (%d blobs)", len(manifests), len(blobs))
			}
			if _, err := os.Stat("/etc/gw-escaped"); err == nil {
				t.Fatal("a wheel wrote outside its root on the host")
			}
		})
	}
	// Nothing of the refused wheels is in the layer cache: only the good
	// wheel's layer, once.
	ents, err := filepath.Glob(filepath.Join(e.layerDir, "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("the layer cache holds %d layers, want 1 (the good wheel's)", len(ents))
	}
}

// TestLayersNoWheel: a package with no fitting wheel is refused in layers
// mode with a table (package, version, what the index has, why none
// fits); an unreachable index is ErrUnavailable, and the build can be
// retried once it is back.
func TestLayersNoWheel(t *testing.T) {
	e := newLayersEnv(t)
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	b := e.builder(t, ModeLayers)
	ctx := testContext(t)
	good := e.add(testpypi.Wheel{Name: "gwgood", Version: "1.0"})
	newer := e.add(testpypi.Wheel{Name: "gwnewglibc", Version: "2.0", Tag: "cp311-cp311-manylinux_2_39_x86_64", Platlib: true})
	arm := e.add(testpypi.Wheel{Name: "gwarm", Version: "1.0", Tag: "cp311-cp311-manylinux_2_17_aarch64", Platlib: true})
	absent := images.Package{Name: "gwabsent", Version: "9.9"}

	st, err := b.Ensure(ctx, specOf(good, newer, arm, absent), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = b.Wait(ctx, st.Hash)
	if !errors.Is(err, ErrBuildFailed) {
		t.Fatalf("built: %v %+v", err, st)
	}
	for _, want := range []string{"3 packages have no wheel", "package", "version", "the index has", "why none fits",
		"gwnewglibc", "manylinux_2_39", "glibc 2.39", "gwarm", "aarch64", "gwabsent", "9.9"} {
		if !strings.Contains(st.Error, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, st.Error)
		}
	}
	t.Logf("the refusal:\n%s", st.Error)
	if strings.Contains(st.Error, "gwgood") {
		t.Errorf("the table lists a package that has a wheel:\n%s", st.Error)
	}

	e.ix.SetDown(true)
	other := e.add(testpypi.Wheel{Name: "gwother", Version: "1.0"})
	st, err = b.Ensure(ctx, specOf(good, other), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = b.Wait(ctx, st.Hash)
	if !errors.Is(err, ErrBuildFailed) || !strings.Contains(st.Error, "127.0.0.1") {
		t.Fatalf("a build with the index down: %v\n%s", err, st.Error)
	}
	e.ix.SetDown(false)
	st, err = b.Ensure(ctx, specOf(good, other), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("the retry failed: %v\n%s", err, st.Error)
	}
}

// pullImage pulls ref into the engine (a registry on 127.0.0.1 needs no
// TLS for Docker).
func pullImage(t *testing.T, cli *client.Client, ref string) {
	t.Helper()
	rc, err := cli.ImagePull(testContext(t), ref, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
}

// TestLayersAutoDocker: in auto mode with an engine, a package with no
// fitting wheel (here a wheel tagged linux_x86_64, which pip installs but
// the layers builder does not trust to run on the base) is installed by a
// Docker build in a layer of its own above the wheel layers, whose
// digests stay the ones the registry has.
func TestLayersAutoDocker(t *testing.T) {
	e := newLayersEnv(t)
	cli := dockerClient(t)
	pure := e.add(testpypi.Wheel{Name: "gwautopure", Version: "1.0"})
	native := e.add(testpypi.Wheel{Name: "gwautonative", Version: "1.0", Tag: "cp311-cp311-linux_x86_64", Platlib: true,
		Files: map[string]string{"gwautonative/__init__.py": "HOW = 'pip in a Docker build'\n"}})
	ix, err := pyindex.New(pyindex.Config{URL: e.ix.URL, Cache: e.wheels, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, Config{
		Mode: ModeAuto, Docker: cli, Index: ix, PipIndexURL: e.ix.URL, Repository: e.reg.Host + "/envs", LayerCacheDir: e.layerDir,
		Bases: []Base{{Python: "3.11", Image: e.base}},
	})
	ctx := testContext(t)
	st, err := b.Ensure(ctx, specOf(pure, native), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("%v\nsteps %q", err, st.Steps)
	}
	if !hasStep(st, "installing 1 package with pip") {
		t.Errorf("steps %q", st.Steps)
	}
	blobs, _ := e.reg.reset()
	if len(blobs) != 3 { // the wheel's layer, the pip layer, the config
		t.Errorf("uploaded %d blobs, want 3", len(blobs))
	}
	removeImageAtEnd(t, cli, st.Ref)
	pullImage(t, cli, st.Ref)
	out, code := runPython(t, cli, st.Ref, "import gwautopure, gwautonative; print(gwautopure.__version__, gwautonative.HOW)")
	if code != 0 || out != "1.0 pip in a Docker build\n" {
		t.Errorf("running the image: status %d, output %q", code, out)
	}
}

// TestRegistryUnreachable: a repository whose registry cannot be reached
// is ErrUnavailable (503) at once, before anything is built.
func TestRegistryUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // a port nothing listens on now
	b := newBuilder(t, Config{Mode: ModeLayers, Repository: host + "/envs", LayerCacheDir: t.TempDir(), Bases: []Base{{Python: "3.11", Image: host + "/bases:3.11"}}})
	_, err := b.Ensure(testContext(t), specOf(images.Package{Name: "gwx", Version: "1.0"}), nil)
	if !errors.Is(err, images.ErrUnavailable) || !strings.Contains(err.Error(), host) {
		t.Fatalf("Ensure with the registry down: %v, want ErrUnavailable naming %s", err, host)
	}
	if n := b.started.Load(); n != 0 {
		t.Errorf("%d builds started", n)
	}
}

// condaBase is a conda environment's image, made here (no conda image can
// be pulled): /opt/conda with its interpreter, standard library landmarks
// and conda-meta, first on PATH.
func condaBase(t *testing.T, host string) string {
	t.Helper()
	files := map[string]images.File{
		"opt/conda/bin/python3.11":                     {Data: []byte("\x7fELF not run by this test"), Mode: 0o755},
		"opt/conda/lib/python3.11/os.py":               {Data: []byte("")},
		"opt/conda/lib/python3.11/sysconfig.py":        {Data: []byte("_INSTALL_SCHEMES = {\n    'posix_prefix': {\n        'purelib': '{base}/lib/python{py_version_short}/site-packages',\n    },\n}\n")},
		"opt/conda/lib/python3.11/site-packages/.keep": {Data: []byte("")},
		"opt/conda/conda-meta/history":                 {Data: []byte("")},
		"opt/conda/conda-meta/python-3.11.0-h0_0.json": {Data: []byte("{}")},
	}
	img, err := images.Assemble(nil, images.Spec{Python: "3.11", Platform: images.PlatformAMD64}, []images.Layer{{Name: "conda", Files: files}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = append(cf.Config.Env, "PATH=/opt/conda/bin:/usr/bin:/bin")
	cf.Config.Labels = nil // a plain base, not an environment image
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := host + "/bases/conda:3.11"
	if err := images.Push(testContext(t), img, ref, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestLayersConda: on a conda base, the spec's conda packages come from a
// conda channel (the exact build), each a layer of its own extracted into
// the prefix with the placeholder prefix rewritten and its conda-meta
// record written; pip packages come from wheels into the prefix's
// site-packages above them.
func TestLayersConda(t *testing.T) {
	reg := newRegLog(t)
	base := condaBase(t, reg.Host)
	ch := testconda.NewChannel(t)
	noarch := testconda.Package{Name: "gwcondamod", Version: "1.0", Build: "pyh0_0", Subdir: "noarch", Noarch: "python",
		Files: map[string]string{"site-packages/gwcondamod/__init__.py": "WHERE = 'conda'\n"}}
	text := testconda.Package{Name: "gwcondatext", Version: "2.1", Build: "h1_0", Subdir: "linux-64",
		Files: map[string]string{"etc/gwcondatext.conf": "prefix=" + testconda.Placeholder + "\n"}, Prefixed: []string{"etc/gwcondatext.conf"}}
	ch.Add(noarch)
	ch.Add(text)
	// Another build of the same version, which the spec does not name.
	other := text
	other.Build = "h2_0"
	ch.Add(other)

	cache, err := pkgcache.New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	chans, err := conda.New(conda.Config{Channels: map[string]string{"gwtest": ch.URL}, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	fn, data := testpypi.Wheel{Name: "gwpure", Version: "1.0"}.Build()
	ixs := testpypi.NewIndex(t, map[string][]byte{fn: data})
	ix, err := pyindex.New(pyindex.Config{URL: ixs.URL, Cache: cache, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, Config{Mode: ModeLayers, Index: ix, Conda: chans, Repository: reg.Host + "/envs", LayerCacheDir: t.TempDir(),
		Bases: []Base{{Python: "3.11", Image: base}}})
	spec := specOf(
		images.Package{Name: "gwcondamod", Version: "1.0", Build: "pyh0_0", Channel: "gwtest", Subdir: "noarch"},
		images.Package{Name: "gwcondatext", Version: "2.1", Build: "h1_0", Channel: "gwtest", Subdir: "linux-64"},
		images.Package{Name: "gwpure", Version: "1.0"},
	)
	ctx := testContext(t)
	st, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("%v\nsteps %q", err, st.Steps)
	}
	if !hasStep(st, "fetching 2 conda packages from conda channels") {
		t.Errorf("steps %q", st.Steps)
	}
	r, err := name.ParseReference(st.Ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	files := flatten(t, img)
	for path, want := range map[string]string{
		"opt/conda/lib/python3.11/site-packages/gwcondamod/__init__.py": "WHERE = 'conda'\n",
		"opt/conda/etc/gwcondatext.conf":                                "prefix=/opt/conda\n",
	} {
		if got, ok := files[path]; !ok || got != want {
			t.Errorf("%s = %q (present %t), want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"opt/conda/conda-meta/gwcondatext-2.1-h1_0.json", "opt/conda/conda-meta/gwcondamod-1.0-pyh0_0.json", "opt/conda/lib/python3.11/site-packages/gwpure/__init__.py"} {
		if _, ok := files[path]; !ok {
			t.Errorf("the image has no %s", path)
		}
	}
	if !slices.Contains(ch.Requests(), "linux-64/gwcondatext-2.1-h1_0.conda") || slices.Contains(ch.Requests(), "linux-64/gwcondatext-2.1-h2_0.conda") {
		t.Errorf("the channel was asked for %q, want the spec's build only", ch.Requests())
	}

	// A build the channel does not have: the build fails naming it.
	missing := specOf(images.Package{Name: "gwcondatext", Version: "2.1", Build: "h9_0", Channel: "gwtest", Subdir: "linux-64"})
	st, err = b.Ensure(ctx, missing, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = b.Wait(ctx, st.Hash)
	if !errors.Is(err, ErrBuildFailed) || !strings.Contains(st.Error, "h9_0") {
		t.Errorf("a missing build: %v\n%s", err, st.Error)
	}
}

// flatten returns the regular files of img's file system, by path.
func flatten(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[strings.TrimPrefix(h.Name, "/")] = string(b)
		}
	}
}
