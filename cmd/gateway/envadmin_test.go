package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api"
	envsvc "github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// startingBuilder starts every build and never ends one; its images are
// those of images.
type startingBuilder struct{ images map[string]images.Spec }

func (startingBuilder) EnsureFor(_ context.Context, _ build.Owner, spec images.Spec, _ images.Code) (build.Status, error) {
	h, err := spec.Hash()
	return build.Status{Hash: h, Ref: "reg/envs:" + images.TagForHash(h), State: build.StateBuilding, Built: true, Steps: []string{"probing base"}}, err
}
func (startingBuilder) Used(string)                 {}
func (startingBuilder) Active(string) []string      { return nil }
func (startingBuilder) Logs(string) ([]byte, error) { return nil, os.ErrNotExist }
func (startingBuilder) Ref(hash string) string      { return "reg/envs:" + images.TagForHash(hash) }
func (b startingBuilder) Inspect(_ context.Context, ref string) (images.Spec, error) {
	if s, ok := b.images[ref]; ok {
		return s, nil
	}
	return images.Spec{}, images.ErrNotFound
}

// TestAdminEnvPublish: gateway admin env publish and unpublish, through
// the real API, environment service and store; gateway env list shows
// what is published, and gateway env status a build one asked for.
func TestAdminEnvPublish(t *testing.T) {
	ctx := context.Background()
	local := newTestGateway(t)
	db, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := envsvc.New(ctx, envsvc.Config{Store: db, ReplicaID: "r-1", MaxCodeBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Builder: startingBuilder{images: map[string]images.Spec{"reg/team:1": {Python: "3.11", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	qs, err := quota.NewService(local.rec, nil, quota.Clamp)
	if err != nil {
		t.Fatal(err)
	}
	s := api.New(api.Config{Version: "test"}, &imageCore{core: &core{rec: local.rec}}, tokens{"root": {ID: "id-root", Name: "root", Admin: true}, "ann": {ID: "id-ann", Name: "ann"}}, nil, nil)
	s.SetAdmin(qs, local.rec)
	s.SetEnvs(svc)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	tg := &testGateway{url: srv.URL, rec: local.rec, now: local.now}

	if out := tg.mustRun(t, "ann", "env", "list"); !strings.Contains(out, "gateway admin env publish") {
		t.Errorf("an empty list does not say how to publish:\n%s", out)
	}
	if _, err := tg.run(t, "ann", "admin", "env", "publish", "team", "--image", "reg/team:1"); err == nil || !strings.Contains(err.Error(), "admin only") {
		t.Errorf("a user publishes: %v", err)
	}
	if _, err := tg.run(t, "root", "admin", "env", "publish", "team"); err == nil || !strings.Contains(err.Error(), "--env HASH") {
		t.Errorf("publish without --env or --image: %v", err)
	}
	out := tg.mustRun(t, "root", "admin", "env", "publish", "team", "--image", "reg/team:1", "--description", "the team's")
	if !strings.Contains(out, "Published team: reg/team:1") {
		t.Errorf("publish said:\n%s", out)
	}
	out = tg.mustRun(t, "ann", "env", "list")
	for _, want := range []string{"team", "3.11", "2024.8.0", "reg/team:1", "the team's"} {
		if !strings.Contains(out, want) {
			t.Errorf("env list lacks %q:\n%s", want, out)
		}
	}
	if _, err := tg.run(t, "root", "admin", "env", "publish", "team", "--image", "reg/other:1"); err == nil || !strings.Contains(err.Error(), "unpublish it first") {
		t.Errorf("publish a taken name: %v", err)
	}
	st, err := svc.Ensure(ctx, quota.Who{ID: "id-ann", Name: "ann"}, images.Spec{Python: "3.11", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.run(t, "root", "admin", "env", "publish", "mine", "--env", st.Hash[:12]); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("publish a build that is not ready: %v", err)
	}
	if out := tg.mustRun(t, "ann", "env", "status", st.Hash[:16]); !strings.Contains(out, "building") || !strings.Contains(out, "probing base") {
		t.Errorf("env status:\n%s", out)
	}
	if _, err := tg.run(t, "root", "env", "status", st.Hash[:16]); err == nil || !strings.Contains(err.Error(), "only those who asked") {
		t.Errorf("env status of another's build: %v", err)
	}
	if out := tg.mustRun(t, "root", "admin", "env", "unpublish", "team"); !strings.Contains(out, "Unpublished team") {
		t.Errorf("unpublish said:\n%s", out)
	}
	if _, err := tg.run(t, "root", "admin", "env", "unpublish", "team"); err == nil || !strings.Contains(err.Error(), "no environment") {
		t.Errorf("unpublish again: %v", err)
	}
	if out := tg.mustRun(t, "ann", "env", "list"); strings.Contains(out, "reg/team:1") {
		t.Errorf("listed after unpublish:\n%s", out)
	}
}
