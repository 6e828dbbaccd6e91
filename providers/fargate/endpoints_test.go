package fargate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestStandardEndpointSettings checks that every client sends its requests
// where the SDK's standard endpoint settings say when no endpoint key is
// configured, and that a configured key wins over them. The clients dial
// 127.0.0.1 only (loopbackClient), so a request sent anywhere else fails
// at once without leaving the machine.
func TestStandardEndpointSettings(t *testing.T) {
	cases := []struct {
		name string
		// env and config file contents, given the fake.
		setup func(t *testing.T, f *fargatetest.Server, decoy string)
		// keys configured in the provider's own configuration.
		endpoints func(f *fargatetest.Server) fargate.Endpoints
		// credentials from the environment rather than Config.Credentials.
		envCredentials bool
	}{
		{
			name: "per-service environment variables",
			setup: func(t *testing.T, f *fargatetest.Server, _ string) {
				t.Setenv("AWS_ENDPOINT_URL_ECS", f.ECS.URL)
				t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", f.SecretsManager.URL)
				t.Setenv("AWS_ENDPOINT_URL_EC2", f.EC2.URL)
			},
		},
		{
			name: "per-service environment variables, credentials from the environment",
			setup: func(t *testing.T, f *fargatetest.Server, _ string) {
				t.Setenv("AWS_ENDPOINT_URL_ECS", f.ECS.URL)
				t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", f.SecretsManager.URL)
				t.Setenv("AWS_ENDPOINT_URL_EC2", f.EC2.URL)
			},
			envCredentials: true,
		},
		{
			name: "shared config file: services section and endpoint_url",
			setup: func(t *testing.T, f *fargatetest.Server, _ string) {
				file := filepath.Join(t.TempDir(), "config")
				// The profile's endpoint_url covers the service the section names not.
				conf := "[default]\nendpoint_url = " + f.EC2.URL + "\nservices = emulator\n\n[services emulator]\necs =\n  endpoint_url = " + f.ECS.URL +
					"\nsecrets_manager =\n  endpoint_url = " + f.SecretsManager.URL + "\n"
				if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("AWS_CONFIG_FILE", file)
			},
		},
		{
			name: "configured keys win over the environment",
			setup: func(t *testing.T, _ *fargatetest.Server, decoy string) {
				t.Setenv("AWS_ENDPOINT_URL", decoy)
				t.Setenv("AWS_ENDPOINT_URL_ECS", decoy)
				t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", decoy)
				t.Setenv("AWS_ENDPOINT_URL_EC2", decoy)
			},
			endpoints: func(f *fargatetest.Server) fargate.Endpoints {
				return fargate.Endpoints{ECS: f.ECS.URL, SecretsManager: f.SecretsManager.URL, EC2: f.EC2.URL}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fargatetest.New(t)
			// The decoy stands for "somewhere else": it records and refuses.
			var strays atomic.Int64
			decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				strays.Add(1)
				http.Error(w, "decoy endpoint", http.StatusForbidden)
			}))
			defer decoy.Close()
			// No file of the machine running the tests may steer the clients.
			t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
			tc.setup(t, f, decoy.URL)
			p, _ := newProvider(t, f, func(c *fargate.Config) {
				c.Endpoints = fargate.Endpoints{}
				if tc.endpoints != nil {
					c.Endpoints = tc.endpoints(f)
				}
				if tc.envCredentials {
					c.Credentials = nil
					t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFORTESTS")
					t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key")
				}
			})
			ctx := context.Background()
			spec := testSpec("c-endpoints", "alice")
			if err := p.StartScheduler(ctx, spec); err != nil {
				t.Fatalf("StartScheduler: %v", err)
			}
			if err := p.StopCluster(ctx, spec.Name); err != nil {
				t.Fatalf("StopCluster: %v", err)
			}
			for _, action := range []string{"ecs:RunTask", "secretsmanager:CreateSecret", "ec2:CreateSecurityGroup", "ec2:DescribeSubnets"} {
				if f.Calls(action) == 0 {
					t.Errorf("the fake never received %s", action)
				}
			}
			if n := strays.Load(); n > 0 {
				t.Errorf("%d requests went to the endpoint of the environment instead of the configured one", n)
			}
		})
	}
}
