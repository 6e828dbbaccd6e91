package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testdocker"
)

// dockerEnv is a gateway running clusters as containers on the local
// Docker engine, with the test image as the default image and as the base
// that environments are built on. It returns the gateway's ownership id,
// which labels every container it starts.
func dockerEnv(t *testing.T, pool *dockertest.Pool, image string) (*env, string) {
	t.Helper()
	id := fmt.Sprintf("gw-test-%d", time.Now().UnixNano()%1_000_000_000)
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	doc := fmt.Sprintf("provider: docker\ngateway_id: %s\nproviders:\n  docker:\n    image: %s\nimages:\n  allowed_registries: [\"gateway-test/*\"]\n  environments:\n    - name: debian-dask\n      image: %s\n      description: Debian bookworm's Dask\n", id, image, image)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "GATEWAY_CONFIG="+cfg, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms")
	t.Cleanup(func() { removeContainers(t, pool, id) })
	return e, id
}

// containersOf lists the containers labelled with the gateway's id.
func containersOf(t *testing.T, pool *dockertest.Pool, gatewayID string) []dc.APIContainers {
	t.Helper()
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {"io.gateway.id=" + gatewayID}}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func removeContainers(t *testing.T, pool *dockertest.Pool, gatewayID string) {
	for _, c := range containersOf(t, pool, gatewayID) {
		_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
	}
	// The clusters' networks, once nothing is attached to them.
	nets, _ := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {"io.gateway.id=" + gatewayID: true}})
	for _, n := range nets {
		_ = pool.Client.RemoveNetwork(n.ID)
	}
}

// hasOnly reports whether a container is on the network name alone.
func hasOnly(nets map[string]dc.ContainerNetwork, name string) bool {
	_, ok := nets[name]
	return ok && len(nets) == 1
}

// TestDockerEnvironments is the container path end to end, as a user with a
// local Python environment meets it: new-cluster captures the environment
// (a Debian Python with Dask, and a local module), the gateway makes its
// image without a Dockerfile, the scheduler and workers run in containers,
// and a Dask client computes through the gateway with the user's module on
// the workers. A second cluster with the same environment reuses the image;
// an image whose software differs from the client's is refused with a
// table, and one that lies about its software fails when its members start.
func TestDockerEnvironments(t *testing.T) {
	t.Parallel()
	pool := testdocker.Pool(t)
	image := testdocker.DaskImage(t)
	rootfs := testdocker.Rootfs(t)
	e, gwID := dockerEnv(t, pool, image)
	e.startGateway()

	// The user's environment: the image's own Python (so that every package
	// can be had without a package index), and a module in their folder.
	work := t.TempDir()
	userPython := testdocker.ChrootPython(t, rootfs, work)
	code := filepath.Join(work, "project")
	if err := os.MkdirAll(code, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "userfuncs.py"), []byte("def answer():\n    return 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out := e.gwOK("new-cluster", "--workers", "2", "--python", userPython, "--code-dir", code, "--no-wait")
	if !strings.Contains(out, "Environment ") || !strings.Contains(out, "built") {
		t.Errorf("new-cluster does not report the environment's image:\n%s", out)
	}
	first := strings.TrimSpace(lastLines(out, 1))
	waitRunning(t, e, first, 2)
	t.Logf("first cluster (image assembled): running with 2 workers in %s", time.Since(start).Round(time.Millisecond))

	// Scheduler and workers are containers with the cluster's labels, on
	// the environment's image, and none holds the TLS key in its config.
	cs := containersOf(t, pool, gwID)
	if len(cs) != 3 {
		t.Fatalf("%d containers for scheduler + 2 workers, want 3: %+v", len(cs), cs)
	}
	var envImage string
	for _, ci := range cs {
		if ci.Labels["io.gateway.cluster"] != first || ci.Labels["io.gateway.owner"] == "" {
			t.Errorf("container %s labels %v", ci.Names, ci.Labels)
		}
		in, err := pool.Client.InspectContainer(ci.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(in.Config)
		if strings.Contains(string(raw), "PRIVATE KEY") {
			t.Errorf("container %s carries the TLS key in its config", ci.Names)
		}
		// Each cluster on a network of its own (providers.docker.network:
		// cluster, the default), named after the gateway and the cluster.
		if want := "gateway-" + gwID + "-" + first; in.HostConfig.NetworkMode != want || !hasOnly(in.NetworkSettings.Networks, want) {
			t.Errorf("container %s network %q (%d networks), want %s alone", ci.Names, in.HostConfig.NetworkMode, len(in.NetworkSettings.Networks), want)
		}
		envImage = in.Config.Image
	}
	if !strings.Contains(envImage, "env-") {
		t.Errorf("members run %q, not the environment's image", envImage)
	}

	// Issue 14, finding 1: the environment's image named by a prefix of
	// its ID (or sha256:<id>) is refused before anything starts, even
	// with an allow-list, as an ID that matches nothing is.
	if ii, err := pool.Client.InspectImage(envImage); err != nil {
		t.Error(err)
	} else {
		id := strings.TrimPrefix(ii.ID, "sha256:")
		for _, img := range []string{id[:4], ii.ID, "0000"} {
			out, err := e.gw("new-cluster", "--image", img, "--no-wait")
			if err == nil || !strings.Contains(out, "image ID") {
				t.Errorf("new-cluster --image %s: accepted or not refused as an image ID:\n%s", img, out)
			}
		}
	}

	// A Dask client, through the gateway, runs the user's code on workers.
	py := pythonFromShow(t, e, first)
	res, err := e.runPython(py + `
print("sum", client.submit(sum, range(100)).result())
print("answer", client.submit(lambda: __import__("userfuncs").answer()).result())
print("workers", len(client.scheduler_info()["workers"]))
client.close()
`)
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, res)
	}
	for _, want := range []string{"sum 4950", "answer 42", "workers 2"} {
		if !strings.Contains(res, want) {
			t.Errorf("client output lacks %q:\n%s", want, res)
		}
	}
	logs := e.gwOK("logs", first, "--tail", "200")
	if !strings.Contains(logs, "gateway-env: python=3.11 dask=") {
		t.Errorf("members do not report their versions at start:\n%s", lastLines(logs, 20))
	}

	// The same environment again: no build, the same image.
	start = time.Now()
	out = e.gwOK("new-cluster", "--workers", "1", "--python", userPython, "--code-dir", code, "--no-wait")
	if !strings.Contains(out, "(already built)") {
		t.Errorf("the second cluster with the same environment built again:\n%s", out)
	}
	second := strings.TrimSpace(lastLines(out, 1))
	waitRunning(t, e, second, 1)
	t.Logf("second cluster (cached image): running with 1 worker in %s", time.Since(start).Round(time.Millisecond))
	e.gwOK("stop", second)

	// Published environments are listed with their software.
	list := e.gwOK("env", "list")
	if !strings.Contains(list, "debian-dask") || !strings.Contains(list, "3.11") {
		t.Errorf("env list:\n%s", list)
	}

	// A client whose numpy differs from the image's is refused before
	// anything starts, with the table.
	other := mismatchedPython(t, work)
	out, err = e.gw("new-cluster", "--image", image, "--python", other, "--no-wait")
	if err == nil {
		t.Fatalf("new-cluster with a mismatched image was accepted:\n%s", out)
	}
	for _, want := range []string{"numpy", "1.99.0", "(missing)", "package", "client", "image", "--allow-mismatch"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}

	// An image that claims the client's software but holds other: its
	// scheduler finds out at start, and the cluster fails with the table.
	liar := lyingImage(t, pool, image, "numpy", "1.99.0")
	out, err = e.gw("new-cluster", "--image", liar, "--python", other, "--workers", "1")
	if err == nil {
		t.Fatalf("a cluster on an image with other software than it claims started:\n%s", out)
	}
	if !strings.Contains(out, "other software than the client") || !strings.Contains(out, "1.99.0") {
		t.Errorf("the failure does not show the table:\n%s", out)
	}

	e.gwOK("stop", first)
	deadline := time.Now().Add(60 * time.Second)
	for len(containersOf(t, pool, gwID)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := containersOf(t, pool, gwID); len(left) != 0 {
		t.Errorf("containers left after every cluster stopped: %d", len(left))
	}
	for time.Now().Before(deadline) {
		if nets, err := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {"io.gateway.id=" + gwID: true}}); err == nil && len(nets) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Error("cluster networks left after every cluster stopped")
}

// waitRunning waits until the cluster runs with the wanted workers.
func waitRunning(t *testing.T, e *env, name string, workers int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var s struct {
			Cluster apitype.ClusterDetail `json:"cluster"`
		}
		e.gwJSON(&s, "show", name)
		d := s.Cluster
		if d.State == "RUNNING" && d.Workers.Ready >= workers {
			return
		}
		if d.State == "FAILED" || d.State == "STOPPED" || time.Now().After(deadline) {
			t.Fatalf("cluster %s: %s with %d workers (%s)\n--- logs:\n%s", name, d.State, d.Workers.Ready, d.Reason, e.gwOK("logs", name, "--tail", "30"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mismatchedPython is Debian's Python with Dask, seeing a numpy 1.99.0 that
// the image does not have.
func mismatchedPython(t *testing.T, dir string) string {
	t.Helper()
	site := filepath.Join(dir, "fake-site")
	info := filepath.Join(site, "numpy-1.99.0.dist-info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(info, "METADATA"), []byte("Metadata-Version: 2.1\nName: numpy\nVersion: 1.99.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "python-other")
	script := fmt.Sprintf("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n", site, python)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// lyingImage makes, in the engine, base with labels that record pkg at
// version, which it does not have. Only the labels change, so the engine
// builds it in moments (a copy written through the engine's image load
// would move the whole image).
func lyingImage(t *testing.T, pool *dockertest.Pool, base, pkg, version string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", images.ProbeScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	probe, err := images.ParseProbe(out)
	if err != nil {
		t.Fatal(err)
	}
	spec := probe.Spec()
	for i, p := range spec.Packages {
		if images.NormalizeName(p.Name) == pkg {
			spec.Packages[i].Version = version
		}
	}
	labelled, err := images.Assemble(empty.Image, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := labelled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	df := "FROM " + base + "\n"
	for k, v := range cf.Config.Labels {
		df += "LABEL " + k + "=" + strconv.Quote(v) + "\n"
	}
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(df)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tag := "gateway-test/liar:" + pkg + "-" + version
	var log bytes.Buffer
	if err := pool.Client.BuildImage(dc.BuildImageOptions{Context: ctx, Name: tag, InputStream: &ctxTar, OutputStream: &log, NetworkMode: "none", RmTmpContainer: true}); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, log.String())
	}
	t.Cleanup(func() { _ = pool.Client.RemoveImage(tag) })
	return tag
}
