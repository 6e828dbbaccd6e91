package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gatewayhq/gateway/images/wheel"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/internal/testpypi"
)

// TestLayersEnvironmentCluster is the deployed gateway's way of shipping
// software, on the local engine: the gateway builds the user's
// environment with the layers builder (images.builder: layers) from a
// package index into a registry, both on loopback, and a real Dask cluster
// on the docker provider runs on that image. A function that only a test
// wheel defines is called on the workers.
func TestLayersEnvironmentCluster(t *testing.T) {
	t.Parallel()
	pool := testdocker.Pool(t)
	image := testdocker.DaskImage(t)
	rootfs := testdocker.Rootfs(t)

	host, base := layersRegistry(t)
	remoteWheel := testpypi.Wheel{Name: "gwremote", Version: "1.0", Files: map[string]string{
		"gwremote/__init__.py": "def answer():\n    return 'computed by a function from a wheel'\n",
	}}
	fn, data := remoteWheel.Build()
	ix := testpypi.NewIndex(t, map[string][]byte{fn: data})

	// The user's environment: the image's own Python, plus gwremote
	// installed into a directory on its PYTHONPATH (inside the root file
	// system the client's Python runs in).
	userPython, site := wheelPython(t, rootfs, fn, data)

	id := fmt.Sprintf("gw-test-%d", time.Now().UnixNano()%1_000_000_000)
	cfg := layersConfig(t, id, image, host, ix.URL, base)
	e := newEnv(t, "GATEWAY_CONFIG="+cfg, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms")
	t.Cleanup(func() { removeContainers(t, pool, id) })
	e.startGateway()

	// It builds the image first: gwOK's 3 minutes are a bound for a
	// command, not for a build on a loaded machine (CI dry runs beside
	// other test runs were killed at it).
	out, err := e.gwLong(10*time.Minute, "new-cluster", "--workers", "2", "--python", userPython, "--no-wait")
	if err != nil {
		t.Fatalf("new-cluster: %v\n%s\n--- gateway log:\n%s", err, out, e.gwLog.String())
	}
	for _, want := range []string{"finding wheels for 1 package", "made 1 of 1 package layer", "2 layers of the image: 1 reused", "1 uploaded", "built"} {
		if !strings.Contains(out, want) {
			t.Errorf("new-cluster does not show %q:\n%s", want, out)
		}
	}
	name := strings.TrimSpace(lastLines(out, 1))
	waitRunning(t, e, name, 2)
	for _, c := range containersOf(t, pool, id) {
		if !strings.HasPrefix(c.Image, host+"/envs:env-") {
			t.Errorf("member %s runs %s, not the built environment", c.Names, c.Image)
		}
	}
	py := pythonFromShow(t, e, name)
	res, err := e.runPython(py + `
print("remote", client.submit(lambda: __import__("gwremote").answer(), pure=False).result())
print("workers", len(client.scheduler_info()["workers"]))
client.close()
`)
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, res)
	}
	for _, want := range []string{"remote computed by a function from a wheel", "workers 2"} {
		if !strings.Contains(res, want) {
			t.Errorf("client output lacks %q:\n%s", want, res)
		}
	}

	// A package the index has no wheel for: refused before anything
	// starts, with the table.
	noWheel := filepath.Join(site, "gwnowheel-3.0.dist-info")
	if err := os.MkdirAll(noWheel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noWheel, "METADATA"), []byte("Metadata-Version: 2.1\nName: gwnowheel\nVersion: 3.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := len(containersOf(t, pool, id))
	out, err = e.gw("new-cluster", "--workers", "1", "--python", userPython, "--no-wait")
	if err == nil {
		t.Fatalf("new-cluster with a package that has no wheel was accepted:\n%s", out)
	}
	for _, want := range []string{"1 package has no wheel", "package", "version", "the index has", "why none fits", "gwnowheel", "3.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "requested") || len(containersOf(t, pool, id)) != before {
		t.Errorf("a cluster was started for an environment that cannot be built:\n%s", out)
	}
	e.gwOK("stop", name)
}

// layersRegistry starts a registry on loopback (stopped when the test
// ends) holding the test image as a base for Python 3.11, and returns
// the registry's host and the base's reference.
func layersRegistry(t *testing.T) (host, base string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	base = host + "/bases/dask:3.11"
	copyToRegistry(t, base)
	return host, base
}

// wheelPython writes an interpreter for --python: the test image's own
// Python under chroot, with a wheel installed into a directory of the
// root file system on its PYTHONPATH (site: more packages may go there;
// removed when the test ends).
func wheelPython(t *testing.T, rootfs, fn string, data []byte) (python, site string) {
	t.Helper()
	siteName := fmt.Sprintf("gwtest-site-%d", time.Now().UnixNano())
	site = filepath.Join(rootfs, siteName)
	t.Cleanup(func() { _ = os.RemoveAll(site) })
	unpackWheel(t, fn, data, site)
	python = filepath.Join(t.TempDir(), "python3")
	script := fmt.Sprintf("#!/bin/sh\nexec chroot %s /usr/bin/env PYTHONPATH=/%s /usr/bin/python3 \"$@\"\n", rootfs, siteName)
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return python, site
}

// layersConfig writes the config of a gateway on the docker provider
// that builds environments with the layers builder, from the index into
// the registry at host, on base, and returns its path.
func layersConfig(t *testing.T, id, image, host, indexURL, base string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	doc := fmt.Sprintf(`provider: docker
gateway_id: %s
providers:
  docker:
    image: %s
images:
  builder: layers
  repository: %s/envs
  pip_index_url: %s
  bases:
    - python: "3.11"
      image: %s
`, id, image, host, indexURL, base)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// copyToRegistry copies the engine's Dask image to a registry, as an
// operator puts a base image into ECR. Its layers are gzipped once per
// test binary (testdocker.GzippedDaskImage), not once per test: each
// test still has a registry of its own.
func copyToRegistry(t *testing.T, dst string) {
	t.Helper()
	img := testdocker.GzippedDaskImage(t)
	d, err := name.ParseReference(dst)
	if err != nil {
		t.Fatal(err)
	}
	// A hang bound only: the push reads 100 MB from memory, but on a
	// loaded machine under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := remote.Write(d, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
}

// unpackWheel installs a wheel into dir (as its site-packages) with the
// gateway's own installer.
func unpackWheel(t *testing.T, fn string, data []byte, dir string) {
	t.Helper()
	var buf bytes.Buffer
	layout := wheel.Layout{Purelib: "/site", Platlib: "/site", Scripts: "/bin", Data: "/data", Headers: "/include", Interpreter: "/usr/bin/python3"}
	if _, err := wheel.WriteLayer(bytes.NewReader(data), int64(len(data)), fn, layout, wheel.Limits{}, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(h.Name, "site/")
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
