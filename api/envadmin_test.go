package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// publishingEnvs is fakeEnvs with publishing: the routes' status codes
// and admin check are tested here, the service's rules in package envs.
type publishingEnvs struct {
	fakeEnvs
	published map[string]apitype.PublishedEnv
	by        []store.Actor
}

func (p *publishingEnvs) Publish(_ context.Context, by store.Actor, name string, req apitype.PublishEnvRequest) (apitype.PublishedEnv, error) {
	switch {
	case name == "config":
		return apitype.PublishedEnv{}, fmt.Errorf("%w: %q is published in the config (images.environments)", envs.ErrConflict, name)
	case req.Image == "" && req.Env == "":
		return apitype.PublishedEnv{}, fmt.Errorf("%w: give an environment (--env HASH) or an image (--image REF), not both", envs.ErrInvalid)
	case req.Env == "unknown":
		return apitype.PublishedEnv{}, fmt.Errorf("%w: no build of environment unknown is known", envs.ErrNotFound)
	}
	p.by = append(p.by, by)
	e := apitype.PublishedEnv{Name: name, Image: req.Image, Description: req.Description}
	p.published[name] = e
	return e, nil
}

func (p *publishingEnvs) Unpublish(_ context.Context, by store.Actor, name string) error {
	if _, ok := p.published[name]; !ok {
		return fmt.Errorf("%w: no environment %q is published", envs.ErrNotFound, name)
	}
	delete(p.published, name)
	return nil
}

func envAdminServer(t *testing.T, envs Envs) *httptest.Server {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q, err := quota.NewService(st, nil, quota.Clamp)
	if err != nil {
		t.Fatal(err)
	}
	a := auth.NewStaticTokens(map[string]auth.User{
		"root-token-0000000": {Name: "root", Admin: true},
		"alice-token-000000": {Name: "alice"},
		"root-readonly-0000": {Name: "root", Admin: true, ReadOnly: true},
	})
	s := New(Config{Version: "test"}, &fakeCore{scaled: map[string]int{}}, a, nil, nil)
	s.SetAdmin(q, st)
	if envs != nil {
		s.SetEnvs(envs)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// TestAdminPublishEnvRoutes: only admins publish and unpublish, and the
// service's refusals map to 404, 409 and 422.
func TestAdminPublishEnvRoutes(t *testing.T) {
	pe := &publishingEnvs{fakeEnvs: fakeEnvs{builds: map[string]string{}}, published: map[string]apitype.PublishedEnv{}}
	srv := envAdminServer(t, pe)
	const root, alice = "root-token-0000000", "alice-token-000000"
	tests := []struct {
		name, method, path, token, body string
		code                            int
		want                            string
	}{
		{"a user publishes", "PUT", "/api/v1/admin/envs/team", alice, `{"image":"reg/team:1"}`, 403, "admin only"},
		{"a read-only admin publishes", "PUT", "/api/v1/admin/envs/team", "root-readonly-0000", `{"image":"reg/team:1"}`, 403, "read-only"},
		{"publish", "PUT", "/api/v1/admin/envs/team", root, `{"image":"reg/team:1","description":"ours"}`, 200, `"image":"reg/team:1"`},
		{"neither", "PUT", "/api/v1/admin/envs/team2", root, `{}`, 422, "not both"},
		{"unknown key", "PUT", "/api/v1/admin/envs/team2", root, `{"imag":"x"}`, 422, "not both"},
		{"not JSON", "PUT", "/api/v1/admin/envs/team2", root, `image=x`, 400, "JSON"},
		{"the config's", "PUT", "/api/v1/admin/envs/config", root, `{"image":"reg/x:1"}`, 409, "images.environments"},
		{"unknown env", "PUT", "/api/v1/admin/envs/team2", root, `{"env":"unknown"}`, 404, "no build"},
		{"a user unpublishes", "DELETE", "/api/v1/admin/envs/team", alice, "", 403, "admin only"},
		{"unpublish", "DELETE", "/api/v1/admin/envs/team", root, "", 204, ""},
		{"unpublish again", "DELETE", "/api/v1/admin/envs/team", root, "", 404, "no environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, srv, tt.method, tt.path, tt.token, tt.body)
			if code != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("%s %s = %d %s; want %d containing %q", tt.method, tt.path, code, body, tt.code, tt.want)
			}
		})
	}
	if len(pe.by) != 1 || pe.by[0].Name != "root" {
		t.Errorf("published by %+v, want root once", pe.by)
	}

	// A gateway whose provider runs no images publishes nothing.
	none := envAdminServer(t, nil)
	if code, _, body := do(t, none, http.MethodPut, "/api/v1/admin/envs/team", root, `{"image":"reg/team:1"}`); code != http.StatusNotImplemented {
		t.Errorf("no environment service: %d %s", code, body)
	}
}
