package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// imageCore is a backend that runs images (the docker provider's options).
// It keeps the options of the clusters it is asked for, then refuses them
// as core does.
type imageCore struct {
	*core
	mu    sync.Mutex
	asked []map[string]json.RawMessage
}

func (c *imageCore) Create(ctx context.Context, who quota.Who, opts map[string]json.RawMessage) (*store.Cluster, error) {
	c.mu.Lock()
	c.asked = append(c.asked, opts)
	c.mu.Unlock()
	return c.core.Create(ctx, who, opts)
}

func (*imageCore) Limits() scheduler.Limits {
	return scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8, Provider: "docker", Images: true}
}

// fakeEnvs is a gateway that knows one published environment and no builds.
type fakeEnvs struct{}

func (fakeEnvs) Admit(context.Context, quota.Who) (func(), error) { return func() {}, nil }
func (fakeEnvs) Ensure(context.Context, quota.Who, images.Spec, images.Code) (apitype.EnvStatus, error) {
	return apitype.EnvStatus{}, fmt.Errorf("%w: it has no Docker engine", envs.ErrNoBuilder)
}
func (fakeEnvs) Status(_ context.Context, _ quota.Who, hash string) (apitype.EnvStatus, error) {
	return apitype.EnvStatus{}, fmt.Errorf("%w: %s", envs.ErrNotFound, hash)
}
func (fakeEnvs) Logs(_ context.Context, _ quota.Who, hash string) ([]byte, error) {
	return nil, fmt.Errorf("%w: no build log of %s for you", envs.ErrNotFound, hash)
}
func (fakeEnvs) Published(context.Context) ([]apitype.PublishedEnv, error) {
	return []apitype.PublishedEnv{{Name: "team", Image: "reg/team:1", Description: "the team's", Versions: map[string]string{"python": "3.11", "dask": "2024.8.0"}}}, nil
}
func (fakeEnvs) MaxCodeBytes() int64 { return 1 << 20 }

func newImageGateway(t *testing.T) *testGateway {
	t.Helper()
	g, _ := newImageGatewayCore(t)
	return g
}

func newImageGatewayCore(t *testing.T) (*testGateway, *imageCore) {
	t.Helper()
	local := newTestGateway(t)
	c := &imageCore{core: &core{rec: local.rec}}
	s := api.New(api.Config{Version: "test"}, c, tokens{"ann": {ID: "id-ann", Name: "ann"}}, nil, nil)
	s.SetEnvs(fakeEnvs{})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL, rec: local.rec, now: local.now}, c
}

// pythonDir returns a directory holding a python3 that runs the system's
// Python with script's flags: "-S" hides its site-packages (a Python with
// no Dask), "" is the system's Python as it is.
func pythonDir(t *testing.T, flags string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec /usr/bin/python3 %s \"$@\"\n", flags)
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDefaultImageFallback: asked for nothing in particular, new-cluster
// runs the backend's default image when it cannot capture or build the
// user's environment, and says so; asked for --env auto, it refuses.
func TestDefaultImageFallback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatalf("these tests need Debian's python3 with python3-distributed (.ci/run installs it): %v", err)
	}
	empty := t.TempDir()
	noDask := pythonDir(t, "-S")
	withDask := pythonDir(t, "")
	cases := []struct {
		name     string
		path     string
		args     []string
		fallback string // the notice; empty: new-cluster must fail with want
		want     string
	}{
		{"no Python on PATH", empty, nil, "neither python3 nor python is on PATH", ""},
		{"a Python without Dask", noDask, nil, "has no Dask distributed installed", ""},
		{"no builder", withDask, []string{"--no-code"}, "it has no Docker engine", ""},
		{"--env auto, no Python", empty, []string{"--env", "auto"}, "", "neither python3 nor python is on PATH"},
		{"--env auto, no builder", withDask, []string{"--env", "auto", "--no-code"}, "", "it has no Docker engine"},
		{"--python without Dask", empty, []string{"--python", filepath.Join(noDask, "python3")}, "", "has no Dask distributed installed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, core := newImageGatewayCore(t)
			t.Setenv("PATH", c.path)
			args := append([]string{"new-cluster", "--workers", "1"}, c.args...)
			out, stderr, err := g.runStderr(t, "ann", args...)
			if c.fallback == "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("gateway %s: %v\n%s%s\nwant an error with %q", strings.Join(args, " "), err, out, stderr, c.want)
				}
				if len(core.asked) != 0 {
					t.Errorf("a cluster was asked for: %v", core.asked)
				}
				return
			}
			// The core refuses every cluster (a quota): reaching it is the point.
			if err == nil || !strings.Contains(err.Error(), "max_clusters") {
				t.Fatalf("gateway %s: %v\n%s%s\nwant the core's refusal", strings.Join(args, " "), err, out, stderr)
			}
			if want := "Running the gateway's default image, unchecked: "; !strings.Contains(stderr, want) || !strings.Contains(stderr, c.fallback) {
				t.Errorf("stderr lacks %q with %q:\n%s", want, c.fallback, stderr)
			}
			if len(core.asked) != 1 {
				t.Fatalf("%d clusters asked for, want 1", len(core.asked))
			}
			for _, k := range []string{"image", "env", "spec", "client_env"} {
				if v, ok := core.asked[0][k]; ok {
					t.Errorf("option %s = %s: the default image takes none", k, v)
				}
			}
		})
	}
}

func TestSoftwareFlagErrors(t *testing.T) {
	local := newTestGateway(t)
	images := newImageGateway(t)
	dir := t.TempDir()
	notPython := filepath.Join(dir, "not-python")
	if err := os.WriteFile(notPython, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		gw   *testGateway
		args []string
		want string
	}{
		{"an image on the local provider", local, []string{"new-cluster", "--image", "reg/x:1"}, "this gateway's provider runs no container images: --env, --image and --env-file need the docker, ec2, fargate or gce provider"},
		{"an env file on the local provider", local, []string{"new-cluster", "--env-file", "requirements.txt"}, "runs no container images"},
		{"environments on the local provider", local, []string{"env", "list"}, "environments need the docker, ec2, fargate or gce provider"},
		{"an image and an env", images, []string{"new-cluster", "--image", "reg/x:1", "--env", "team"}, "--image runs an existing image: leave out --env and --env-file"},
		{"a Python that is not one", images, []string{"new-cluster", "--image", "reg/x:1", "--python", notPython}, notPython},
		{"a missing env file", images, []string{"env", "build", "--env-file", filepath.Join(dir, "nope.txt")}, "nope.txt"},
		{"no builder", images, []string{"env", "build", "--env-file", writeReqs(t, dir)}, "it has no Docker engine"},
		{"an unknown build's log", images, []string{"env", "logs", strings.Repeat("ab", 32)}, "no build log of abab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.gw.run(t, "ann", c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("gateway %s: %v\n%s\nwant an error with %q", strings.Join(c.args, " "), err, out, c.want)
			}
		})
	}
}

func writeReqs(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "requirements.txt")
	if err := os.WriteFile(p, []byte("dask==2024.8.0\ndistributed==2024.8.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvList(t *testing.T) {
	out := newImageGateway(t).mustRun(t, "ann", "env", "list")
	for _, want := range []string{"NAME", "team", "3.11", "2024.8.0", "reg/team:1", "the team's"} {
		if !strings.Contains(out, want) {
			t.Errorf("env list lacks %q:\n%s", want, out)
		}
	}
}
