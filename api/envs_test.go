package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
)

// fakeEnvs stands in for the environment service: this tests the routes'
// status codes and tenancy, not the builder, which has its own tests.
type fakeEnvs struct {
	mu     sync.Mutex
	builds map[string]string // hash -> owner
	fail   error
	// maxCode is MaxCodeBytes (0: 1 MiB).
	maxCode int64
	// got, when set, is given what Ensure is given, before it answers.
	got func(spec images.Spec, code images.Code) error
}

func (f *fakeEnvs) Admit(context.Context, quota.Who) (func(), error) { return func() {}, nil }

func (f *fakeEnvs) Ensure(_ context.Context, who quota.Who, spec images.Spec, code images.Code) (apitype.EnvStatus, error) {
	if f.fail != nil {
		return apitype.EnvStatus{}, f.fail
	}
	if f.got != nil {
		if err := f.got(spec, code); err != nil {
			return apitype.EnvStatus{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	hash, err := spec.Hash()
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	if len(spec.Code) > 0 && len(code) == 0 {
		return apitype.EnvStatus{}, fmt.Errorf("hash %s: %w", hash, envs.ErrCodeRequired)
	}
	f.builds[hash] = who.ID
	return apitype.EnvStatus{Hash: hash, State: "building", Built: true}, nil
}

func (f *fakeEnvs) Status(_ context.Context, who quota.Who, hash string) (apitype.EnvStatus, error) {
	if f.builds[hash] != who.ID {
		return apitype.EnvStatus{}, envs.ErrNotFound
	}
	return apitype.EnvStatus{Hash: hash, State: "ready", Image: "reg/env:" + hash[:8]}, nil
}

func (f *fakeEnvs) Logs(_ context.Context, who quota.Who, hash string) ([]byte, error) {
	if f.builds[hash] != who.ID {
		return nil, envs.ErrNotFound
	}
	return []byte("step 1/2\n"), nil
}

func (f *fakeEnvs) Published(context.Context) ([]apitype.PublishedEnv, error) {
	return []apitype.PublishedEnv{{Name: "team", Image: "reg/team:1", Versions: map[string]string{"python": "3.11"}}}, nil
}

func (f *fakeEnvs) MaxCodeBytes() int64 {
	if f.maxCode > 0 {
		return f.maxCode
	}
	return 1 << 20
}

func envServer(t *testing.T, envs Envs) *httptest.Server {
	t.Helper()
	core := &fakeCore{clusters: nil, scaled: map[string]int{}}
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}})
	sessions, err := auth.NewSessions(make([]byte, 32), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Version: "test"}, core, a, sessions, nil)
	if envs != nil {
		s.SetEnvs(envs)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func specBody(t *testing.T, spec images.Spec, code map[string][]byte) string {
	t.Helper()
	b, err := json.Marshal(apitype.EnvRequest{Spec: spec, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEnvRoutes(t *testing.T) {
	fe := &fakeEnvs{builds: map[string]string{}}
	srv := envServer(t, fe)
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	withCode := images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{{Name: "proj", Digest: images.DigestOf([]byte("zip"))}}}
	hash, err := spec.Hash()
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, method, path, token, body string
		status                          int
		contains                        string
	}{
		{"needs auth", "GET", "/api/v1/envs", "", "", 401, "authentication required"},
		{"published list", "GET", "/api/v1/envs", "alice-token-000000", "", 200, `"team"`},
		{"build starts", "POST", "/api/v1/envs", "alice-token-000000", specBody(t, spec, nil), 202, hash},
		{"code must come along", "POST", "/api/v1/envs", "alice-token-000000", specBody(t, withCode, nil), 409, "code_required"},
		{"an invalid spec says what is wrong", "POST", "/api/v1/envs", "alice-token-000000", specBody(t, images.Spec{Python: "three"}, nil), 422, "invalid_request"},
		{"not JSON", "POST", "/api/v1/envs", "alice-token-000000", "spec=1", 400, "not valid JSON"},
		{"code over the limit", "POST", "/api/v1/envs", "alice-token-000000", specBody(t, withCode, map[string][]byte{"proj": make([]byte, 8<<20)}), 413, "limit of 1 MiB"},
		{"own build status", "GET", "/api/v1/envs/" + hash, "alice-token-000000", "", 200, `"ready"`},
		{"own build log", "GET", "/api/v1/envs/" + hash + "/logs", "alice-token-000000", "", 200, "step 1/2"},
		{"another user's build is not found", "GET", "/api/v1/envs/" + hash, "bob-token-00000000", "", 404, "env_not_found"},
		{"another user's build log is not found", "GET", "/api/v1/envs/" + hash + "/logs", "bob-token-00000000", "", 404, "env_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := do(t, srv, c.method, c.path, c.token, c.body)
			if code != c.status || !strings.Contains(string(body), c.contains) {
				t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, code, body, c.status, c.contains)
			}
		})
	}
}

func TestEnvRouteErrors(t *testing.T) {
	spec := specBody(t, images.Spec{Python: "3.11", Platform: "linux/amd64"}, nil)
	cases := []struct {
		name     string
		envs     Envs
		status   int
		contains string
	}{
		{"a provider without images", nil, 501, "environments need the docker, ec2, fargate or gce provider"},
		{"no builder", &fakeEnvs{fail: fmt.Errorf("wrapped: %w", envs.ErrNoBuilder)}, 501, "no_builder"},
		// Issue 16: an index or registry that cannot be reached is 503,
		// and the same request may be retried.
		{"the index cannot be reached", &fakeEnvs{fail: fmt.Errorf("%w: package index 127.0.0.1:9 could not be reached", images.ErrUnavailable)}, 503, "127.0.0.1:9 could not be reached"},
		{"a package without a wheel", &fakeEnvs{fail: fmt.Errorf("wrapped: %w", images.ErrInvalidSpec)}, 422, "invalid_request"},
		{"an internal failure hides its details", &fakeEnvs{fail: fmt.Errorf("dial unix /var/run/docker.sock: secret detail")}, 500, "the gateway's log has the details"},
		// Issue 14, finding 4: over max_builds is a quota refusal that
		// passes once a build ends.
		{"over the build cap", &fakeEnvs{fail: &quota.ExceededError{Limit: "max_builds", Source: quota.BuiltinSource, Msg: "2 environment builds of yours are queued or running (max_builds, from built-in default)"}}, 429, `"quota_exceeded"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := envServer(t, c.envs)
			code, _, body := do(t, srv, "POST", "/api/v1/envs", "alice-token-000000", spec)
			if code != c.status || !strings.Contains(string(body), c.contains) || strings.Contains(string(body), "secret detail") {
				t.Errorf("%d %s, want %d with %q", code, body, c.status, c.contains)
			}
		})
	}
	if code, _, _ := do(t, envServer(t, nil), "GET", "/api/v1/envs", "alice-token-000000", ""); code != http.StatusNotImplemented {
		t.Errorf("listing without environments: %d, want 501", code)
	}
}
