package build

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/internal/testpypi"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// engineSpec is an environment the test image already has (Debian's dask
// and distributed, at the versions the probe reports), with one code part.
func engineSpec(t *testing.T, base images.Spec) (images.Spec, []byte, string) {
	t.Helper()
	value := nonce(t)
	zip, part := codeZip(t, "usercode", value)
	return images.Spec{
		Python:   base.Python,
		Platform: images.PlatformAMD64,
		Packages: pick(t, base, "dask", "distributed", "msgpack", "cloudpickle"),
		Code:     []images.CodePart{part},
	}, zip, value
}

// TestEngineAssembleOnly: the spec's packages are all in the base, so the
// image is the base plus the code layer, assembled without a Docker build,
// and loaded into the engine; it runs, and the user's code imports from the
// code zip. Ensure then finds it: a cache hit, in this Builder and in a new
// one.
func TestEngineAssembleOnly(t *testing.T) {
	cli := dockerClient(t)
	baseRef := testdocker.DaskImage(t)
	base := probeBase(t, cli, baseRef)
	if base.Python == "" || base.Platform != images.PlatformAMD64 || len(base.Packages) < 10 {
		t.Fatalf("probe of %s: %+v", baseRef, base)
	}
	spec, zip, value := engineSpec(t, base)
	ctx := testContext(t)
	cfg := Config{Docker: cli, Bases: []Base{{Python: base.Python, Image: baseRef}}}
	b := newBuilder(t, cfg)

	st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"usercode": zip}))
	if err != nil {
		t.Fatal(err)
	}
	removeImageAtEnd(t, cli, st.Ref)
	if st.State != StateBuilding || st.Ref != "gateway-env:"+images.TagForHash(mustHash(t, spec)) {
		t.Fatalf("Ensure = %+v", st)
	}
	st, err = b.Wait(ctx, st.Hash)
	if err != nil {
		t.Fatalf("%v\nsteps %q", err, st.Steps)
	}
	if st.State != StateReady || !st.Built {
		t.Fatalf("Wait = %+v", st)
	}
	if !hasStep(st, "probing base "+baseRef) || !hasStep(st, "no packages to install") || hasStep(st, "installing") || hasStep(st, "build: ") ||
		!hasStep(st, "loading the image into the engine as "+st.Ref) {
		t.Errorf("steps %q: want assembly only", st.Steps)
	}
	logs, err := b.Logs(st.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logs), "docker build") {
		t.Errorf("the log shows a Docker build:\n%s", logs)
	}
	if !reflect.DeepEqual(st.Contents.Packages, base.Packages) {
		t.Errorf("contents %v, want the base's packages", st.Contents.Packages)
	}

	out, code := runPython(t, cli, st.Ref, "import gwusercode, dask, os; print(gwusercode.VALUE); print(os.environ['PYTHONPATH'])")
	if code != 0 || !strings.HasPrefix(out, value+"\n") || !strings.Contains(out, images.CodePath("usercode")) {
		t.Errorf("running the image: status %d, output %q", code, out)
	}
	ii, err := cli.ImageInspect(ctx, st.Ref)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := spec.Canonical()
	if ii.Config.Labels[images.LabelSpec] != string(doc) || !slices.Equal(ii.Config.Entrypoint, images.Entrypoint) {
		t.Errorf("labels %v entrypoint %q", ii.Config.Labels, ii.Config.Entrypoint)
	}
	if got, err := b.Inspect(ctx, st.Ref); err != nil || len(got.Code) != 1 {
		t.Errorf("Inspect of the env image = %+v, %v", got, err)
	}

	for _, bb := range []*Builder{b, newBuilder(t, cfg)} {
		// A hit is an answer without a build (counted below), not a
		// quick one: speed is the benchmark's.
		testutil.Returns(t, "Ensure of a built image", func() {
			hit, err := bb.Ensure(ctx, spec, nil)
			if err != nil || hit.State != StateReady || hit.Built || hit.Ref != st.Ref {
				t.Errorf("Ensure of the built image = %+v, %v", hit, err)
			}
		})
	}
	if b.started.Load() != 1 {
		t.Errorf("%d builds started, want 1", b.started.Load())
	}
}

// TestEngineBuild: one package is missing from the base and installed from
// a PEP 503 index on 127.0.0.1, by one build however many Ensure calls ask
// for it at once; the image has it, and its labels record the spec. A
// package the index does not have fails the build with pip's error and a
// log.
func TestEngineBuild(t *testing.T) {
	cli := dockerClient(t)
	baseRef := testdocker.DaskImage(t)
	base := probeBase(t, cli, baseRef)
	whl, data := testpypi.Wheel{Name: "gwdemo", Version: "1.0"}.Build()
	ix := testpypi.NewIndex(t, map[string][]byte{whl: data})
	ctx := testContext(t)
	// The index URL has credentials (the index ignores them), which no log,
	// step, error or image history may show.
	const indexPassword = "index-s3cret-pw"
	indexURL := strings.Replace(ix.URL, "http://", "http://gw:"+indexPassword+"@", 1)
	b := newBuilder(t, Config{Docker: cli, Bases: []Base{{Python: base.Python, Image: baseRef}}, PipIndexURL: indexURL, MaxConcurrentBuilds: 1})
	noSecret := func(t *testing.T, st Status) {
		t.Helper()
		logs, err := b.Logs(st.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(logs)+st.Error+strings.Join(st.Steps, "\n"), indexPassword) {
			t.Error("the index password is in the log, the steps or the error")
		}
		if !strings.Contains(string(logs), "http://****@127.0.0.1:") {
			t.Error("the log does not show the index URL, masked")
		}
	}

	t.Run("installs", func(t *testing.T) {
		spec, zip, value := engineSpec(t, base)
		spec.Packages = append(spec.Packages, images.Package{Name: "GWDemo", Version: "1.0"})
		code := images.CodeFromBytes(map[string][]byte{"usercode": zip})

		var wg sync.WaitGroup
		sts := make([]Status, 3)
		errs := make([]error, 3)
		for i := range sts {
			wg.Go(func() { sts[i], errs[i] = b.Ensure(ctx, spec, code) })
		}
		wg.Wait()
		for i := range sts {
			if errs[i] != nil || sts[i].State != StateBuilding || sts[i].Hash != sts[0].Hash {
				t.Fatalf("Ensure %d = %+v, %v", i, sts[i], errs[i])
			}
		}
		removeImageAtEnd(t, cli, sts[0].Ref)
		if n := b.started.Load(); n != 1 {
			t.Errorf("%d builds started for one hash, want 1", n)
		}
		st, err := b.Wait(ctx, sts[0].Hash)
		if err != nil {
			t.Fatalf("%v\nsteps %q", err, st.Steps)
		}
		if !hasStep(st, "installing 1 package") || !hasStep(st, "build: Step 3/4 : RUN") || !hasStep(st, "Successfully installed gwdemo-1.0") ||
			!hasStep(st, "verifying packages") || hasStep(st, "no packages to install") {
			t.Errorf("steps %q", st.Steps)
		}
		if !slices.Contains(st.Contents.Packages, images.Package{Name: "gwdemo", Version: "1.0"}) {
			t.Errorf("contents %v have no gwdemo 1.0", st.Contents.Packages)
		}
		if !slices.Contains(ix.Requests(), "/simple/gwdemo/") {
			t.Errorf("the index was asked for %q", ix.Requests())
		}
		logs, err := b.Logs(st.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if c := strings.Count(string(logs), "build of "+st.Ref+" started"); c != 1 {
			t.Errorf("the log shows %d builds:\n%s", c, logs)
		}

		out, status := runPython(t, cli, st.Ref, "import gwdemo, gwusercode, importlib.metadata as md; print(gwdemo.__version__, md.version('gwdemo'), gwusercode.VALUE)")
		if want := "1.0 1.0 " + value + "\n"; status != 0 || out != want {
			t.Errorf("running the image: status %d, output %q, want %q", status, out, want)
		}
		ii, err := cli.ImageInspect(ctx, st.Ref)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := spec.Canonical()
		if ii.Config.Labels[images.LabelSpec] != string(doc) || ii.Config.Labels[images.LabelHash] != st.Hash {
			t.Errorf("labels %v, want the spec %s", ii.Config.Labels, doc)
		}
		if _, err := cli.ImageInspect(ctx, buildRepository+":"+images.TagForHash(st.Hash)); err == nil {
			t.Error("the intermediate build image is left")
		}
		if hit, err := b.Ensure(ctx, spec, nil); err != nil || hit.State != StateReady || hit.Built || hit.Ref != st.Ref {
			t.Errorf("Ensure after the build = %+v, %v", hit, err)
		}
		noSecret(t, st)
		history, err := cli.ImageHistory(ctx, st.Ref)
		if err != nil {
			t.Fatal(err)
		}
		masked := false
		for _, h := range history {
			if strings.Contains(h.CreatedBy, indexPassword) {
				t.Errorf("the image history has the index password: %s", h.CreatedBy)
			}
			masked = masked || strings.Contains(h.CreatedBy, "pip") && strings.Contains(h.CreatedBy, "://****@")
		}
		if !masked {
			t.Errorf("the image history has no pip step with the masked index URL: %+v", history)
		}
	})

	t.Run("fails", func(t *testing.T) {
		spec, zip, _ := engineSpec(t, base)
		spec.Packages = append(spec.Packages, images.Package{Name: "gwmissing", Version: "2.0"})
		st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"usercode": zip}))
		if err != nil {
			t.Fatal(err)
		}
		removeImageAtEnd(t, cli, st.Ref)
		st, err = b.Wait(ctx, st.Hash)
		if !errors.Is(err, ErrBuildFailed) || st.State != StateFailed {
			t.Fatalf("Wait = %+v, %v", st, err)
		}
		for _, s := range []string{"installing 1 package failed", "gwmissing==2.0", "ERROR: ", "see `gateway env logs " + st.Hash + "`"} {
			if !strings.Contains(st.Error, s) {
				t.Errorf("the error has no %q:\n%s", s, st.Error)
			}
		}
		logs, err := b.Logs(st.Hash)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"docker build", "build: Step 3/4 : RUN", "No matching distribution found for gwmissing==2.0", "build failed: "} {
			if !strings.Contains(string(logs), s) {
				t.Errorf("the log has no %q:\n%s", s, logs)
			}
		}
		if _, err := cli.ImageInspect(ctx, st.Ref); err == nil {
			t.Error("a failed build left an image")
		}
		noSecret(t, st)
	})
}

// TestEngineClose: Close stops a running build (pip waiting on an index
// that does not answer) and one waiting for a build slot; both fail as
// cancelled.
func TestEngineClose(t *testing.T) {
	cli := dockerClient(t)
	baseRef := testdocker.DaskImage(t)
	base := probeBase(t, cli, baseRef)
	asked := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ctx := testContext(t)
	b, err := New(Config{Docker: cli, Bases: []Base{{Python: base.Python, Image: baseRef}}, PipIndexURL: srv.URL + "/simple/",
		MaxConcurrentBuilds: 1, LogDir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}

	var hashes []string
	for _, pkg := range []string{"gwslow", "gwslow2"} {
		spec, zip, _ := engineSpec(t, base)
		spec.Packages = append(spec.Packages, images.Package{Name: pkg, Version: "1.0"})
		st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"usercode": zip}))
		if err != nil {
			t.Fatal(err)
		}
		removeImageAtEnd(t, cli, st.Ref)
		hashes = append(hashes, st.Hash)
		if pkg == "gwslow" {
			select {
			case <-asked:
			case <-ctx.Done():
				t.Fatal("pip never asked the index")
			}
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		st, ok := b.Status(h)
		if !ok || st.State != StateFailed || !strings.Contains(st.Error, "cancelled") {
			t.Errorf("after Close: %+v", st)
		}
		if _, err := cli.ImageInspect(ctx, buildRepository+":"+images.TagForHash(h)); err == nil {
			t.Errorf("an intermediate image of %s is left", h)
		}
	}
}

// TestEngineToRegistry: a base in the engine, the image pushed to a
// registry (the production path: read with the daemon package, written
// with remote). The base is small and its labels record its environment,
// so nothing probes it.
func TestEngineToRegistry(t *testing.T) {
	cli := dockerClient(t)
	ctx := testContext(t)
	host, _ := newRegistry(t, "gw", "registry-pw")
	baseRef := "gateway-test/tiny-base:" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(nonce(t)))
	b := newBuilder(t, Config{Docker: cli, Repository: host + "/envs", Auth: Auth{Username: "gw", Password: "registry-pw"},
		Bases: []Base{{Python: "3.11", Platform: "linux/x86_64", Image: baseRef}}})

	img, err := images.Assemble(nil, registryBase, []images.Layer{{Name: "python", Files: map[string]images.File{
		"usr/bin/python3": {Data: []byte("#!/bin/false\n"), Mode: 0o755},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.loadImage(ctx, nil, baseRef, img); err != nil {
		t.Fatal(err)
	}
	removeImageAtEnd(t, cli, baseRef)

	zip, part := codeZip(t, "usercode", nonce(t))
	spec := registryBase
	spec.Code = []images.CodePart{part}
	st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"usercode": zip}))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("%v\nsteps %q", err, st.Steps)
	}
	if !hasStep(st, "no packages to install") || !hasStep(st, "pushed ") {
		t.Errorf("steps %q", st.Steps)
	}
	auth := &authn.Basic{Username: "gw", Password: "registry-pw"}
	checkEnvImage(t, registryImage(t, ctx, st.Ref, auth), spec, 2, zip)
	if got, err := b.Inspect(ctx, st.Ref); err != nil || len(got.Code) != 1 {
		t.Errorf("Inspect of the pushed image = %+v, %v", got, err)
	}
	if _, err := cli.ImageInspect(ctx, st.Ref); err == nil {
		t.Errorf("the pushed image %s is in the engine too", st.Ref)
	}
}
