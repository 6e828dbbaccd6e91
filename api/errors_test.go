package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestErrorMapping is the table of which domain error gives which answer:
// each row is a branch of the four mappings the API had (the core's, the
// quota service's, the benchmark store's and the environment service's),
// with the status, code and message each gave, plus the errors the
// environment service returns to the core when it resolves a cluster's
// image (they reach the same mapping through the core).
func TestErrorMapping(t *testing.T) {
	builds := &quota.ExceededError{Limit: "max_builds", Source: "default (built-in)", Msg: "2 builds at once at most; 2 running"}
	vcpus := &quota.ExceededError{Limit: "max_vcpus", Source: "user:ann (api)", Msg: "max_vcpus 4; in use 4, asked 2"}
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		msg        string
		retryAfter string
	}{
		{"cluster not found", fmt.Errorf("%w: c1", scheduler.ErrNotFound), 404, "cluster_not_found", "cluster c1 not found", ""},
		{"core: invalid", fmt.Errorf("%w: workers must be 0 or more", scheduler.ErrInvalid), 422, "invalid_request", "workers must be 0 or more", ""},
		{"quota entries unreadable", fmt.Errorf("%w: group:x", quota.ErrUnreadable), 503, "quota_unavailable",
			"quotas cannot be checked right now: a stored quota entry cannot be read: group:x", ""},
		{"env mismatch", fmt.Errorf("%w: reg/x:1 has dask 2024.1", scheduler.ErrEnvMismatch), 409, "env_mismatch",
			"the image's software differs from the client's: reg/x:1 has dask 2024.1", ""},
		{"core: unavailable", fmt.Errorf("%w: the engine", scheduler.ErrUnavailable), 503, "unavailable", "the engine (try again)", ""},
		{"resolve: unavailable", fmt.Errorf("%w: cannot look into image reg/x:1: 503", envs.ErrUnavailable), 503, "unavailable",
			"cannot look into image reg/x:1: 503 (try again)", ""},
		{"resolve: invalid", fmt.Errorf("%w: no environment %q", envs.ErrInvalid, "nope"), 422, "invalid_request", `no environment "nope"`, ""},
		{"cluster over quota", fmt.Errorf("scheduler: %w", vcpus), 403, "quota_exceeded", "quota exceeded: scheduler: max_vcpus 4; in use 4, asked 2", ""},
		{"builds at once", builds, 429, "quota_exceeded", "quota exceeded: 2 builds at once at most; 2 running", ""},
		{"core: conflict", fmt.Errorf("%w: cluster c1 is stopping", scheduler.ErrConflict), 409, "conflict", "cluster c1 is stopping", ""},
		{"quota: invalid", fmt.Errorf("%w: max_vcpus: want a number", quota.ErrInvalid), 422, "invalid_request", "max_vcpus: want a number", ""},
		{"quota: no entry", fmt.Errorf("%w for user:ann", quota.ErrNoEntry), 404, "not_found", "no stored quota entry for user:ann", ""},
		{"bench run not found", store.ErrNotFound, 404, "bench_run_not_found", "benchmark run r1 not found", ""},
		{"bench run invalid", fmt.Errorf("store: bench test has no name: %w", store.ErrBenchInvalid), 422, "invalid_request", "bench test has no name", ""},
		{"bench run finished", fmt.Errorf("store: bench run r1: %w", store.ErrBenchFinished), 409, "bench_run_finished", "bench run r1", ""},
		{"env not found", fmt.Errorf("%w: abcd", envs.ErrNotFound), 404, "env_not_found", "environment not found: abcd", ""},
		{"code required", fmt.Errorf("%w: user code ab12", envs.ErrCodeRequired), 409, "code_required",
			"the environment's code is needed to build it: user code ab12", ""},
		{"invalid spec", fmt.Errorf("%w: python 2.7", images.ErrInvalidSpec), 422, "invalid_request", "invalid environment spec: python 2.7", ""},
		{"index unreachable", fmt.Errorf("%w: pypi.org", images.ErrUnavailable), 503, "unavailable",
			"a service the environment needs cannot be reached: pypi.org", "30"},
		{"no builder", fmt.Errorf("%w: no engine", envs.ErrNoBuilder), 501, "no_builder", "this gateway builds no environments: no engine", ""},
		{"env: invalid", fmt.Errorf("%w: give an environment or an image", envs.ErrInvalid), 422, "invalid_request", "give an environment or an image", ""},
		{"env: conflict", fmt.Errorf("%w: %q is published already", envs.ErrConflict, "team"), 409, "conflict", `"team" is published already`, ""},
		{"database down", fmt.Errorf("%w: connection refused", store.ErrUnavailable), 503, "database_unavailable", "", "5"},
		{"anything else", errors.New("disk on fire"), 500, "internal", "internal error; the gateway's log has the details", ""},
	}
	s := New(Config{}, nil, nil, nil, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
			r.SetPathValue("name", "c1")
			r.SetPathValue("id", "r1")
			w := httptest.NewRecorder()
			s.fail(w, r, c.err)
			if w.Code != c.status {
				t.Errorf("status %d, want %d (body %s)", w.Code, c.status, w.Body)
			}
			var body apitype.Error
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if body.Code != c.code || body.Error != body.Message || c.msg != "" && body.Error != c.msg {
				t.Errorf("body %+v, want code %q and message %q", body, c.code, c.msg)
			}
			if got := w.Header().Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
		})
	}

	t.Run("client gone", func(t *testing.T) {
		w := httptest.NewRecorder()
		s.fail(w, httptest.NewRequest(http.MethodGet, "/api/v1/x", nil), fmt.Errorf("reading: %w", context.Canceled))
		if w.Body.Len() != 0 {
			t.Errorf("answered a client that went away: %d %s", w.Code, w.Body)
		}
	})
}
