package server

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// providerKeys are the backends' keys and defaults as internal/config
// declared them before the backends registered their own sections: the
// names operators and the Terraform modules use, which must not change.
func providerKeys() map[string]any {
	return map[string]any{
		"providers.local.python":                    "/usr/bin/python3",
		"providers.local.command":                   "",
		"providers.local.host":                      "127.0.0.1",
		"providers.local.nanny":                     false,
		"providers.local.stop_grace":                "10s",
		"providers.local.scheduler_memory":          2.0,
		"providers.docker.endpoint":                 "",
		"providers.docker.tls_ca_cert":              "",
		"providers.docker.tls_cert":                 "",
		"providers.docker.tls_key":                  "",
		"providers.docker.image":                    "",
		"providers.docker.python":                   "python3",
		"providers.docker.host":                     "127.0.0.1",
		"providers.docker.stop_grace":               "10s",
		"providers.docker.network":                  "cluster",
		"providers.docker.egress":                   false,
		"providers.docker.scheduler_memory":         2.0,
		"providers.ec2.region":                      "",
		"providers.ec2.subnets":                     []string{},
		"providers.ec2.gateway_cidrs":               []string{},
		"providers.ec2.gateway_security_group":      "",
		"providers.ec2.ami":                         "",
		"providers.ec2.instance_profile":            "",
		"providers.ec2.volume_gib":                  40,
		"providers.ec2.image":                       "",
		"providers.ec2.python":                      "python3",
		"providers.ec2.ec2_endpoint":                "",
		"providers.ec2.ssm_endpoint":                "",
		"providers.fargate.region":                  "",
		"providers.fargate.cluster":                 "",
		"providers.fargate.subnets":                 []string{},
		"providers.fargate.gateway_cidrs":           []string{},
		"providers.fargate.gateway_security_group":  "",
		"providers.fargate.execution_role_arn":      "",
		"providers.fargate.task_role_arn":           "",
		"providers.fargate.assign_public_ip":        false,
		"providers.fargate.image":                   "",
		"providers.fargate.python":                  "python3",
		"providers.fargate.log_group":               "",
		"providers.fargate.ecs_endpoint":            "",
		"providers.fargate.secretsmanager_endpoint": "",
		"providers.fargate.ec2_endpoint":            "",
		"providers.fargate.logs_endpoint":           "",
		"providers.gce.project":                     "",
		"providers.gce.zones":                       []string{},
		"providers.gce.network":                     "",
		"providers.gce.subnetwork":                  "",
		"providers.gce.gateway_cidrs":               []string{},
		"providers.gce.gateway_service_account":     "",
		"providers.gce.service_account":             "",
		"providers.gce.image":                       "",
		"providers.gce.gpu_image":                   "",
		"providers.gce.disk_gib":                    0,
		"providers.gce.container_image":             "",
		"providers.gce.python":                      "python3",
		"providers.gce.endpoint":                    "",
		"providers.gce.secretmanager_endpoint":      "",
		"providers.local.trust_users":               false,
	}
}

// TestProviderKeysUnchanged: every backend key of before the registrations
// is still known, with its default, and is set from the file and from the
// environment (GATEWAY_PROVIDERS_<NAME>_<KEY>), as `gateway config print`
// shows; and there are no others.
func TestProviderKeysUnchanged(t *testing.T) {
	want := providerKeys()
	schema := ConfigSchema()
	var got, pinned []string
	for _, k := range schema.Keys() {
		if strings.HasPrefix(k, "providers.") {
			got = append(got, k)
		}
	}
	for k := range want {
		pinned = append(pinned, k)
	}
	sort.Strings(pinned)
	if !slices.Equal(got, pinned) {
		t.Fatalf("backend keys changed:\ngot  %v\nwant %v", got, pinned)
	}
	// value is what a key is set to, and how the configuration prints it.
	value := func(key string, def any) (file, env string, printed any) {
		leaf := key[strings.LastIndex(key, ".")+1:]
		switch d := def.(type) {
		case bool:
			return "true", "true", true
		case int:
			return "7", "7", 7
		case float64:
			return "7.5", "7.5", 7.5
		case []string:
			return "[a-" + leaf + ", b-" + leaf + "]", "a-" + leaf + ",b-" + leaf, []string{"a-" + leaf, "b-" + leaf}
		case string:
			if d == "10s" { // a duration
				return "7s", "7s", "7s"
			}
			return "v-" + leaf, "v-" + leaf, "v-" + leaf
		}
		t.Fatalf("%s: default %T: teach this test its kind", key, def)
		return
	}
	base := map[string]string{"GATEWAY_AUTH_OIDC_ISSUER": "https://idp.example", "GATEWAY_DATA_DIR": t.TempDir()}
	for _, source := range []string{"defaults", "file", "environment"} {
		t.Run(source, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			var yaml strings.Builder
			wantPrinted := map[string]any{}
			section := ""
			for _, key := range pinned {
				file, env, printed := value(key, want[key])
				name, leaf, _ := strings.Cut(strings.TrimPrefix(key, "providers."), ".")
				if name != section {
					fmt.Fprintf(&yaml, "  %s:\n", name)
					section = name
				}
				fmt.Fprintf(&yaml, "    %s: %s\n", leaf, file)
				switch source {
				case "defaults":
					printed = want[key]
					if key == "providers.local.trust_users" {
						t.Setenv("GATEWAY_PROVIDERS_LOCAL_TRUST_USERS", "true")
						printed = true
					}
				case "environment":
					t.Setenv("GATEWAY_"+strings.ToUpper(strings.ReplaceAll(key, ".", "_")), env)
				}
				wantPrinted[key] = printed
			}
			path := ""
			if source == "file" {
				path = filepath.Join(t.TempDir(), "gateway.yaml")
				if err := os.WriteFile(path, []byte("providers:\n"+yaml.String()), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := schema.Load(schema.New(), path)
			if err != nil {
				t.Fatal(err)
			}
			printed := cfg.Redacted()["providers"].(map[string]any)
			for _, key := range pinned {
				name, leaf, _ := strings.Cut(strings.TrimPrefix(key, "providers."), ".")
				got := printed[name].(map[string]any)[leaf]
				if !reflect.DeepEqual(got, wantPrinted[key]) {
					t.Errorf("%s from %s: %#v, want %#v", key, source, got, wantPrinted[key])
				}
			}
		})
	}
}

// TestBackendProblems: a backend's checks of its section run when it is
// the configured provider, with the messages of before the registrations;
// an unknown provider is refused naming the registered ones.
func TestBackendProblems(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"docker without an image", map[string]string{"GATEWAY_PROVIDER": "docker"}, "providers.docker.image must name the image"},
		{"docker half TLS", map[string]string{"GATEWAY_PROVIDER": "docker", "GATEWAY_PROVIDERS_DOCKER_IMAGE": "x", "GATEWAY_PROVIDERS_DOCKER_TLS_CERT": "/c"},
			"providers.docker.tls_cert and providers.docker.tls_key must be set together"},
		{"docker network unknown", map[string]string{"GATEWAY_PROVIDER": "docker", "GATEWAY_PROVIDERS_DOCKER_IMAGE": "x", "GATEWAY_PROVIDERS_DOCKER_NETWORK": "bridge"},
			`providers.docker.network "bridge" must be cluster (a network per cluster) or host`},
		{"docker negative grace", map[string]string{"GATEWAY_PROVIDER": "docker", "GATEWAY_PROVIDERS_DOCKER_IMAGE": "x", "GATEWAY_PROVIDERS_DOCKER_STOP_GRACE": "-1s"},
			"providers.docker.stop_grace must not be negative"},
		{"docker scheduler memory too small", map[string]string{"GATEWAY_PROVIDER": "docker", "GATEWAY_PROVIDERS_DOCKER_IMAGE": "x", "GATEWAY_PROVIDERS_DOCKER_SCHEDULER_MEMORY": "0.1"},
			"providers.docker.scheduler_memory 0.1 must be 0 (unbounded) or at least 0.25 (GiB)"},
		{"local scheduler memory negative", map[string]string{"GATEWAY_PROVIDERS_LOCAL_SCHEDULER_MEMORY": "-1", "GATEWAY_PROVIDERS_LOCAL_TRUST_USERS": "true"},
			"providers.local.scheduler_memory -1 must be 0 (unbounded) or at least 0.25 (GiB)"},
		{"local provider for untrusted users", nil, "set providers.local.trust_users: true only if every user may act as the gateway"},
		{"unknown provider", map[string]string{"GATEWAY_PROVIDER": "ec3"}, `provider "ec3" is not available in this version (available: local, docker, ec2, fargate, gce)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			schema := ConfigSchema()
			if _, err := schema.Load(schema.New(), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Only the configured backend's section is checked, and dev trusts
	// the local provider.
	t.Setenv("GATEWAY_AUTH_OIDC_ISSUER", "https://idp.example")
	t.Setenv("GATEWAY_DEV", "true")
	t.Setenv("GATEWAY_PROVIDERS_DOCKER_NETWORK", "bridge")
	schema := ConfigSchema()
	if _, err := schema.Load(schema.New(), ""); err != nil {
		t.Errorf("dev with the local provider: %v", err)
	}
}
