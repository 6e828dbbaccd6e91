package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
)

// imageCore is a backend that runs images (the docker provider's options).
type imageCore struct{ *core }

func (imageCore) Limits() scheduler.Limits {
	return scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8, Provider: "docker", Images: true}
}

// envs is a gateway that knows one published environment and no builds.
type envs struct{}

func (envs) Ensure(context.Context, quota.Who, images.Spec, map[string][]byte) (api.EnvStatus, error) {
	return api.EnvStatus{}, fmt.Errorf("%w: it has no Docker engine", api.ErrNoBuilder)
}
func (envs) Status(_ context.Context, _ quota.Who, hash string) (api.EnvStatus, error) {
	return api.EnvStatus{}, fmt.Errorf("%w: %s", api.ErrEnvNotFound, hash)
}
func (envs) Logs(_ context.Context, _ quota.Who, hash string) ([]byte, error) {
	return nil, fmt.Errorf("%w: no build log of %s for you", api.ErrEnvNotFound, hash)
}
func (envs) Published(context.Context) ([]api.PublishedEnv, error) {
	return []api.PublishedEnv{{Name: "team", Image: "reg/team:1", Description: "the team's", Versions: map[string]string{"python": "3.11", "dask": "2024.8.0"}}}, nil
}
func (envs) MaxCodeBytes() int64 { return 1 << 20 }

func newImageGateway(t *testing.T) *testGateway {
	t.Helper()
	local := newTestGateway(t)
	s := api.New(api.Config{Version: "test"}, imageCore{&core{rec: local.rec}}, tokens{"ann": {ID: "id-ann", Name: "ann"}}, nil, nil)
	s.SetEnvs(envs{})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL, rec: local.rec, now: local.now}
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
