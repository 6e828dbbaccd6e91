package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
	t.Setenv("GATEWAY_AUTH_ADMIN_GROUPS", "ops,platform")
	t.Setenv("GATEWAY_PROVIDERS_TOY_TRUST_USERS", "true")
	file := writeFile(t, "listen: 127.0.0.1:7000\ncluster:\n  max_workers: 7\n  start_timeout: 2m\nlog:\n  level: warn\n")
	t.Setenv("GATEWAY_CLUSTER_MAX_WORKERS", "9")
	t.Setenv("GATEWAY_LISTEN", "127.0.0.1:7100")
	v := schema().New()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("listen", "", "")
	if err := v.BindPFlag("listen", fs.Lookup("listen")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--listen", "127.0.0.1:7200"}); err != nil {
		t.Fatal(err)
	}
	c, err := schema().Load(v, file)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"flag beats env and file", c.Listen, "127.0.0.1:7200"},
		{"env beats file", c.Cluster.MaxWorkers, 9},
		{"file beats default", c.Cluster.StartTimeout, 2 * time.Minute},
		{"file beats default", c.Log.Level, "warn"},
		{"default", c.Cluster.PollInterval, 5 * time.Second},
		{"list from env", c.Auth.AdminGroups, []string{"ops", "platform"}},
		{"list default", c.Auth.OIDC.UsernameClaims, []string{"preferred_username", "email", "sub"}},
		{"derived public URL is https outside dev", c.PublicURL, "https://127.0.0.1:7200"},
		{"derived database in data_dir", c.Database.URL, "sqlite://" + filepath.Join(c.DataDir, "gateway.db")},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestDevDefaults(t *testing.T) {
	v := schema().New()
	v.SetDefault("dev", true)
	v.Set("data_dir", t.TempDir())
	c, err := schema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	if !c.TLS.AllowPlainHTTP || c.PublicURL != "http://127.0.0.1:8000" {
		t.Errorf("dev: plain=%v public=%s", c.TLS.AllowPlainHTTP, c.PublicURL)
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		name string
		file string
		env  map[string]string
		want string
	}{
		{"unknown key", "listn: x\n", nil, "unknown key(s) listn"},
		{"bad listen", "listen: nowhere\n", nil, `listen "nowhere" must be host:port`},
		{"bad provider", "provider: ec3\n", nil, `provider "ec3" is not available in this version (available: toy, other)`},
		{"half TLS", "tls:\n  cert_file: /x\n", nil, "must be set together"},
		{"half TLS as text", "", map[string]string{"GATEWAY_TLS_CERT_PEM": "-----BEGIN CERTIFICATE-----"}, "tls.cert_pem and tls.key_pem must be set together"},
		{"TLS twice", "tls:\n  cert_file: /c\n  key_file: /k\n  cert_pem: x\n  key_pem: y\n", nil, "set the gateway's certificate once"},
		{"database password for SQLite", "", map[string]string{"GATEWAY_DATABASE_PASSWORD": "pw"}, "database.password is for PostgreSQL"},
		{"database password without a user", "", map[string]string{"GATEWAY_DATABASE_PASSWORD": "pw", "GATEWAY_DATABASE_URL": "postgres://db.example/gw"}, "needs the user name in database.url"},
		{"bad on_shutdown", "", map[string]string{"GATEWAY_CLUSTER_ON_SHUTDOWN": "explode"}, "cluster.on_shutdown"},
		{"bad level", "log:\n  level: loud\n", nil, "log.level"},
		{"bad duration", "cluster:\n  start_timeout: soon\n", nil, "start_timeout"},
		{"zero workers", "cluster:\n  max_workers: 0\n", nil, "max_workers must be at least 1"},
		{"tiny memory limit", "cluster:\n  max_worker_memory: 0.1\n", nil, "max_worker_memory must be at least 0.25"},
		{"no threads", "cluster:\n  max_worker_threads: 0\n", nil, "max_worker_threads must be at least 1"},
		{"no handshake timeout", "proxy:\n  handshake_timeout: 0s\n", nil, "proxy.handshake_timeout and proxy.idle_timeout must be positive"},
		{"negative idle timeout", "proxy:\n  idle_timeout: -1h\n", nil, "proxy.handshake_timeout and proxy.idle_timeout must be positive"},
		{"negative connection cap", "proxy:\n  max_connections_per_source: -1\n", nil, "max_connections_per_source must not be negative"},
		{"negative HTTP connection cap", "proxy:\n  max_http_connections_per_source: -1\n", nil, "proxy.max_http_connections and max_http_connections_per_source must not be negative"},
		{"no HTTP header timeout", "proxy:\n  http_header_timeout: 0s\n", nil, "proxy.http_header_timeout, http_unauthenticated_body_timeout and http_body_timeout must be positive"},
		{"negative unauthenticated body timeout", "", map[string]string{"GATEWAY_PROXY_HTTP_UNAUTHENTICATED_BODY_TIMEOUT": "-1s"}, "http_unauthenticated_body_timeout and http_body_timeout must be positive"},
		{"heartbeat interval too short", "cluster:\n  heartbeat_interval: 500ms\n", nil, "cluster.heartbeat_interval must be between 1s and 1h"},
		{"heartbeat interval too long", "", map[string]string{"GATEWAY_CLUSTER_HEARTBEAT_INTERVAL": "2h"}, "cluster.heartbeat_interval must be between 1s and 1h"},
		{"bad public url", "public_url: ftp://x\n", nil, "public_url"},
		{"not yaml", "listen: [\n", nil, "read"},
		{"no issuer outside dev", "listen: 127.0.0.1:1\n", nil, "auth.oidc.issuer must name"},
		{"images.auth unknown", "images:\n  auth: kerberos\n", nil, `images.auth "kerberos" must be auto, none, basic, ecr or google`},
		{"images.max_code_mib zero", "images:\n  max_code_mib: 0\n", nil, "images.max_code_mib must be between 1 and 1024"},
		{"user body budget below one upload", "images:\n  max_code_mib: 300\n", nil, "api.max_user_body_mib (128) must be at least 404: one environment upload of images.max_code_mib (300)"},
		{"bench run lease too short", "bench:\n  run_lease: 1s\n", nil, "bench.run_lease must be at least 3s"},
		{"dev token lifetime too short", "", map[string]string{"GATEWAY_AUTH_DEV_TOKEN_LIFETIME": "1s"}, "auth.dev_token_lifetime must be at least 10s"},
		{"a section's problem", "auth:\n  oidc:\n    issuer: https://idp.example\n", nil, "set providers.toy.trust_users: true"},
		{"a section's unknown key", "providers:\n  toy:\n    hots: x\n", nil, "unknown key(s) providers.toy.hots"},
		{"a section's bad value", "", map[string]string{"GATEWAY_PROVIDERS_TOY_GRACE": "soon"}, "providers.toy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file)
			}
			_, err := schema().Load(schema().New(), file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := schema().Load(schema().New(), writeFile(t, "provider: nope\n"))
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("validation errors must wrap ErrInvalid: %v", err)
	}
}

// TestJupyterHubKeys: a hub stands in for the OIDC provider or beside it;
// the browsers' sign-in follows what is there unless auth.browser_login
// says; the service's token is a secret; and each mistake is named.
func TestJupyterHubKeys(t *testing.T) {
	hub := map[string]string{"GATEWAY_AUTH_JUPYTERHUB_API_URL": "http://hub:8081/hub/api", "GATEWAY_AUTH_JUPYTERHUB_API_TOKEN": "hub-service-secret"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{"GATEWAY_PROVIDERS_TOY_TRUST_USERS": "true"}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	oidc := map[string]string{"GATEWAY_AUTH_OIDC_ISSUER": "https://idp.example"}
	cases := []struct {
		name    string
		env     map[string]string
		login   string // the browsers' sign-in, when valid
		problem string // else what the error says
	}{
		{"a hub alone", with(hub), "", ""},
		{"a hub as the OAuth client", with(hub, "GATEWAY_AUTH_JUPYTERHUB_OAUTH_CLIENT_ID", "service-gateway"), BrowserLoginJupyterHub, ""},
		{"a hub beside OIDC", with(hub, "GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example"), BrowserLoginOIDC, ""},
		{"both, OIDC's sign-in chosen", with(hub, "GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example", "GATEWAY_AUTH_JUPYTERHUB_OAUTH_CLIENT_ID", "service-gateway", "GATEWAY_AUTH_BROWSER_LOGIN", "oidc"), BrowserLoginOIDC, ""},
		{"neither", with(nil), "", "auth.oidc.issuer must name your OpenID Connect provider, or auth.jupyterhub.api_url"},
		{"no service token", with(hub, "GATEWAY_AUTH_JUPYTERHUB_API_TOKEN", ""), "", "auth.jupyterhub.api_token must be the api_token"},
		{"a token without a hub", with(oidc, "GATEWAY_AUTH_JUPYTERHUB_API_TOKEN", "x"), "", "auth.jupyterhub.api_url must name the hub's API"},
		{"not a URL", with(hub, "GATEWAY_AUTH_JUPYTERHUB_API_URL", "hub:8081"), "", `auth.jupyterhub.api_url "hub:8081" must be`},
		{"a client id JupyterHub refuses", with(hub, "GATEWAY_AUTH_JUPYTERHUB_OAUTH_CLIENT_ID", "gateway"), "", "must start with service-"},
		{"a redirect elsewhere", with(hub, "GATEWAY_AUTH_JUPYTERHUB_OAUTH_REDIRECT_URI", "https://gw.example/callback"), "", "ending in /auth/jupyterhub/callback"},
		{"a bad authorization URL", with(hub, "GATEWAY_AUTH_JUPYTERHUB_OAUTH_AUTHORIZE_URL", "/hub/api/oauth2/authorize"), "", "auth.jupyterhub.oauth_authorize_url"},
		{"no cache", with(hub, "GATEWAY_AUTH_JUPYTERHUB_CACHE_TTL", "0s"), "", "auth.jupyterhub.cache_ttl must be positive and at most 5m"},
		{"a long cache", with(hub, "GATEWAY_AUTH_JUPYTERHUB_CACHE_TTL", "1h"), "", "auth.jupyterhub.cache_ttl must be positive and at most 5m"},
		{"an unknown identity", with(hub, "GATEWAY_AUTH_JUPYTERHUB_IDENTITY", "email"), "", `auth.jupyterhub.identity "email"`},
		{"the hub's sign-in without a client", with(hub, "GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example", "GATEWAY_AUTH_BROWSER_LOGIN", "jupyterhub"), "", "auth.browser_login jupyterhub needs auth.jupyterhub.oauth_client_id"},
		{"OIDC's sign-in without OIDC", with(hub, "GATEWAY_AUTH_BROWSER_LOGIN", "oidc"), "", "auth.browser_login oidc needs auth.oidc.issuer"},
		{"an unknown sign-in", with(hub, "GATEWAY_AUTH_BROWSER_LOGIN", "saml"), "", `auth.browser_login "saml" must be oidc or jupyterhub`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := schema().Load(schema().New(), "")
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("got %v, want an error saying %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Auth.BrowserLogin != tc.login {
				t.Errorf("browser sign-in %q, want %q", c.Auth.BrowserLogin, tc.login)
			}
			if c.Auth.JupyterHub.CacheTTL != 30*time.Second || c.Auth.JupyterHub.Identity != "jupyterhub" {
				t.Errorf("defaults: cache_ttl %s, identity %q", c.Auth.JupyterHub.CacheTTL, c.Auth.JupyterHub.Identity)
			}
			flat := strings.Join(flatten("", c.Redacted()), "\n")
			if strings.Contains(flat, "hub-service-secret") || !strings.Contains(flat, "auth.jupyterhub.api_token=REDACTED") {
				t.Errorf("the hub service's token is not redacted:\n%s", flat)
			}
		})
	}
}

// TestDatabasePassword: a password from a secret store completes the URL,
// URL-escaped, and is redacted like one written in it.
func TestDatabasePassword(t *testing.T) {
	t.Setenv("GATEWAY_DATABASE_URL", "postgres://gw:old@db.example:5432/gw?sslmode=require")
	t.Setenv("GATEWAY_DATABASE_PASSWORD", "p@ss/w:rd")
	v := schema().New()
	v.Set("auth.oidc.issuer", "https://idp.example")
	v.Set("providers.toy.trust_users", true)
	c, err := schema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://gw:p%40ss%2Fw%3Ard@db.example:5432/gw?sslmode=require"; c.Database.URL != want {
		t.Errorf("database.url = %s, want %s", c.Database.URL, want)
	}
	flat := strings.Join(flatten("", c.Redacted()), "\n")
	if strings.Contains(flat, "p%40ss") || strings.Contains(flat, "p@ss") {
		t.Errorf("the redacted config shows the password:\n%s", flat)
	}
}

func TestRedacted(t *testing.T) {
	t.Setenv("GATEWAY_AUTH_OIDC_CLIENT_SECRET", "supersecret-token-value")
	t.Setenv("GATEWAY_DATABASE_URL", "postgres://gw:hunter2@db.example:5432/gw")
	t.Setenv("GATEWAY_IMAGES_PASSWORD", "registry-token-value")
	v := schema().New()
	v.Set("provider", "toy")
	v.Set("auth.oidc.issuer", "https://idp.example")
	v.Set("providers.toy.trust_users", true)
	c, err := schema().Load(v, "")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Redacted()
	flat := strings.Join(flatten("", m), "\n")
	for _, secret := range []string{"supersecret-token-value", "hunter2", "registry-token-value"} {
		if strings.Contains(flat, secret) {
			t.Errorf("redacted config shows %q:\n%s", secret, flat)
		}
	}
	for _, want := range []string{"auth.oidc.client_secret=REDACTED", "database.url=postgres://db.example:5432/REDACTED", "cluster.start_timeout=0s"} {
		if !strings.Contains(flat, want) {
			t.Errorf("redacted config lacks %q:\n%s", want, flat)
		}
	}
}

func flatten(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out = append(out, flatten(prefix+k+".", sub)...)
			continue
		}
		out = append(out, prefix+k+"="+fmt.Sprint(v))
	}
	return out
}

// TestKeysMatchStruct: every key has a default (so the environment layer
// knows it), a field, and a description.
func TestKeysMatchStruct(t *testing.T) {
	docs := schema().Docs()
	var fromStruct []string
	for k, d := range docs {
		fromStruct = append(fromStruct, k)
		if d == "" {
			t.Errorf("key %s has no doc tag", k)
		}
	}
	sort.Strings(fromStruct)
	if !reflect.DeepEqual(fromStruct, schema().Keys()) {
		t.Errorf("struct keys and defaults differ:\nstruct:   %v\ndefaults: %v", fromStruct, schema().Keys())
	}
	if EnvName("cluster.max_workers") != "GATEWAY_CLUSTER_MAX_WORKERS" {
		t.Error(EnvName("cluster.max_workers"))
	}
}

// TestListsOfMapsFromEnvironment: images.bases (and the other lists of
// maps) can be given in the environment as JSON, the way the Terraform
// modules configure the gateway; malformed JSON is refused naming the key.
func TestListsOfMapsFromEnvironment(t *testing.T) {
	cases := []struct {
		name, env string
		want      []map[string]any
		err       string
	}{
		{"two bases", `[{"python":"3.11","image":"r.example/bases:3.11"},{"python":"3.12","image":"r.example/bases:3.12-gpu","gpu":true,"platform":"linux/amd64"}]`,
			[]map[string]any{{"python": "3.11", "image": "r.example/bases:3.11"}, {"python": "3.12", "image": "r.example/bases:3.12-gpu", "gpu": true, "platform": "linux/amd64"}}, ""},
		{"empty", ``, []map[string]any{}, ""},
		{"empty list", `[]`, []map[string]any{}, ""},
		{"not JSON", `python=3.11,image=x`, nil, "images.bases"},
		{"an object, not a list", `{"python":"3.11"}`, nil, "want a JSON list of objects"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GATEWAY_PROVIDERS_TOY_TRUST_USERS", "true")
			t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
			t.Setenv("GATEWAY_IMAGES_BASES", tc.env)
			c, err := schema().Load(schema().New(), "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Images.Bases, tc.want) {
				t.Errorf("images.bases = %#v, want %#v", c.Images.Bases, tc.want)
			}
		})
	}
}
