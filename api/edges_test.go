package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// oidcUser stands in for the OIDC verifier (which has its own tests): only
// a login may create API tokens, so the tokens route needs one.
type oidcUser struct{}

func (oidcUser) Authenticate(_ context.Context, tok string) (*auth.User, error) {
	if tok != "alice-login-000000" {
		return nil, auth.ErrNoCredentials
	}
	return &auth.User{Name: "alice", Via: "oidc"}, nil
}

// TestWrongTypeIs422 sends every route that decodes a JSON body a value of
// the wrong type. dask-gateway's client turns 422 into a ValueError and
// anything else into an HTTP error, so each must be 422 invalid_request,
// with a message naming the field and the type it wants; JSON that does
// not parse at all stays 400 malformed_json.
func TestWrongTypeIs422(t *testing.T) {
	srv, _, _ := newTestServer(t)
	adminSrv, _ := newAdminServer(t)
	envSrv := envServer(t, &fakeEnvs{})

	db, err := store.Open(context.Background(), "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokAPI := New(Config{Version: "test"}, &fakeCore{scaled: map[string]int{}}, auth.Chain{oidcUser{}}, nil, nil)
	tokAPI.SetTokenStore(db)
	tokSrv := httptest.NewServer(tokAPI)
	t.Cleanup(tokSrv.Close)

	const alice, root, login = "alice-token-000000", "root-token-0000000", "alice-login-000000"
	cases := []struct {
		name        string
		srv         *httptest.Server
		method      string
		path, token string
		body        string
		status      int
		want        []string // all in the message
	}{
		{"scale count as string", srv, "POST", "/api/v1/clusters/run1/scale", alice, `{"count":"2"}`, 422, []string{"count", "whole number", "string"}},
		{"scale count as bool", srv, "POST", "/api/v1/clusters/run1/scale", alice, `{"count":true}`, 422, []string{"count", "whole number"}},
		{"adapt minimum as string", srv, "POST", "/api/v1/clusters/run1/adapt", alice, `{"minimum":"1"}`, 422, []string{"minimum", "whole number", "string"}},
		{"adapt maximum as string", srv, "POST", "/api/v1/clusters/run1/adapt", alice, `{"maximum":"4"}`, 422, []string{"maximum", "whole number"}},
		{"adapt active as string", srv, "POST", "/api/v1/clusters/run1/adapt", alice, `{"active":"yes"}`, 422, []string{"active", "true or false"}},
		{"create options worker count as string", srv, "POST", "/api/v1/clusters/", alice, `{"cluster_options":{"workers":"1"}}`, 422, []string{"workers"}},
		{"create options not an object", srv, "POST", "/api/v1/clusters/", alice, `{"cluster_options":5}`, 422, []string{"cluster_options", "JSON object"}},
		{"create body an array", srv, "POST", "/api/v1/clusters/", alice, `[]`, 422, []string{"request body must be a JSON object"}},
		{"token name as number", tokSrv, "POST", "/api/v1/tokens", login, `{"name":5}`, 422, []string{"name", "string", "number"}},
		// The token's name and expiry are checked by auth.NewAPIToken, as the console's form is;
		// the API's mapping answers its refusals.
		{"token name empty", tokSrv, "POST", "/api/v1/tokens", login, `{"name":"  "}`, 422, []string{"invalid_request", `name the token (1 to 64 characters), e.g. "ci"`}},
		{"token name too long", tokSrv, "POST", "/api/v1/tokens", login, `{"name":"` + strings.Repeat("n", 65) + `"}`, 422, []string{"1 to 64 characters"}},
		{"token expiry unreadable", tokSrv, "POST", "/api/v1/tokens", login, `{"name":"ci","expires_in":"soon"}`, 422, []string{`expiry "soon": use a positive number of days`}},
		{"token expiry too long", tokSrv, "POST", "/api/v1/tokens", login, `{"name":"ci","expires_in":"367d"}`, 422, []string{"tokens may last at most 366d"}},
		{"token read_only as string", tokSrv, "POST", "/api/v1/tokens", login, `{"name":"ci","read_only":"true"}`, 422, []string{"read_only", "true or false"}},
		// Quota amounts take strings on purpose ("unlimited", "2"): a bool is the wrong type.
		{"quota limit as bool", adminSrv, "PATCH", "/api/v1/admin/quotas/user:alice", root, `{"max_clusters":true}`, 422, []string{"max_clusters", "want a number"}},
		{"quota body an array", adminSrv, "PATCH", "/api/v1/admin/quotas/user:alice", root, `[1]`, 422, []string{"JSON object"}},
		{"env spec python as number", envSrv, "POST", "/api/v1/envs", alice, `{"spec":{"python":3.12}}`, 422, []string{"spec.python", "string"}},
		{"env code not base64", envSrv, "POST", "/api/v1/envs", alice, `{"spec":{"python":"3.12"},"code":{"a.zip":"%%%"}}`, 422, []string{"base64"}},
		// Not JSON at all: the body cannot be read, which is no bad value.
		{"scale not JSON", srv, "POST", "/api/v1/clusters/run1/scale", alice, `{"count":`, 400, []string{"malformed_json"}},
		{"adapt not JSON", srv, "POST", "/api/v1/clusters/run1/adapt", alice, `minimum=1`, 400, []string{"malformed_json"}},
		{"env not JSON", envSrv, "POST", "/api/v1/envs", alice, `spec=1`, 400, []string{"malformed_json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := do(t, tc.srv, tc.method, tc.path, tc.token, tc.body)
			var e apitype.Error
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("%d %s: not an error answer: %v", code, body, err)
			}
			if code != tc.status {
				t.Fatalf("got %d %s, want %d", code, body, tc.status)
			}
			if tc.status == 422 && e.Code != "invalid_request" {
				t.Errorf("code %q, want invalid_request", e.Code)
			}
			for _, w := range tc.want {
				if !strings.Contains(e.Error+" "+e.Code, w) {
					t.Errorf("answer %s does not say %q", body, w)
				}
			}
		})
	}
}

// TestTokenSchemes: dask_gateway.auth.JupyterHubAuth sends "jupyterhub
// <token>"; dask-gateway's own form is "token <token>"; both authenticate
// like Bearer. An unknown scheme is still refused, saying which to use.
func TestTokenSchemes(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct {
		header string
		status int
	}{
		{"Bearer alice-token-000000", 200},
		{"token alice-token-000000", 200},
		{"jupyterhub alice-token-000000", 200},
		{"jupyterhub wrong-token", 401},
		{"Digest alice-token-000000", 401},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", tc.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Name string }
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.status == 200 && v.Name != "alice") {
			t.Errorf("%q: %d %q, want %d", tc.header, resp.StatusCode, v.Name, tc.status)
		}
	}
}

// TestDashboardProblemInDetail: the CLI may run on another machine than the
// gateway, so the gateway's dashboard check reaches it in the detail view,
// for clusters of the provider it concerns only, and never in the
// dask-gateway view (whose client rejects unknown fields).
func TestDashboardProblemInDetail(t *testing.T) {
	core := &fakeCore{clusters: map[string]*store.Cluster{
		"loc1": {Name: "loc1", Owner: "alice", Provider: "local", Status: store.Running, Options: `{}`, DashboardAddress: "http://127.0.0.1:1"},
		"dock": {Name: "dock", Owner: "alice", Provider: "docker", Status: store.Running, Options: `{}`, DashboardAddress: "http://127.0.0.1:1"},
	}, scaled: map[string]int{}}
	const line = "cluster dashboards will not work: install bokeh"
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}})
	srv := httptest.NewServer(New(Config{Version: "test", PublicURL: "http://127.0.0.1:8000", DashboardProblem: func(p string) string {
		if p == "local" {
			return line
		}
		return ""
	}}, core, a, nil, nil))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/clusters/loc1?view=detail", line},
		{"/api/v1/clusters/dock?view=detail", ""},
		{"/api/v1/clusters/loc1", ""},
	} {
		code, _, body := do(t, srv, "GET", tc.path, "alice-token-000000", "")
		var v map[string]any
		if code != 200 || json.Unmarshal(body, &v) != nil {
			t.Fatalf("%s: %d %s", tc.path, code, body)
		}
		got, has := v["dashboard_problem"]
		if (tc.want == "") == has || (has && got != tc.want) {
			t.Errorf("%s: dashboard_problem %v (present %v), want %q", tc.path, got, has, tc.want)
		}
	}
}
