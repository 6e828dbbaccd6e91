package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"google.golang.org/api/option"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/ec2"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/providers/gce"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// loopbackDoer sends the AWS SDK's requests to 127.0.0.1 only: the fakes.
type loopbackDoer struct{}

func (loopbackDoer) Do(r *http.Request) (*http.Response, error) {
	if h := r.URL.Hostname(); h != "127.0.0.1" {
		return nil, fmt.Errorf("test request to %s refused: tests talk to 127.0.0.1 only", r.URL.Host)
	}
	return http.DefaultClient.Do(r)
}

// isolateAWS keeps the AWS settings of the machine running the tests
// (profiles, endpoints, instance metadata) away from the SDK.
func isolateAWS(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
		}
	}
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// setAWS sets AWS SDK settings after isolateAWS: environment variables
// ("K=V"), and the shared config file's text when config is set.
func setAWS(t *testing.T, config string, env ...string) {
	if config != "" {
		file := filepath.Join(t.TempDir(), "aws-config")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CONFIG_FILE", file)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// The real cloud backends on their wire-level fakes, each in its own
// region, and the local backend, which has none.
func newEC2(t *testing.T, region string) providers.Provider {
	isolateAWS(t)
	return ec2In(t, region, region)
}

// newEC2FromEnv leaves providers.ec2.region unset: the region is the one
// AWS_REGION gives.
func newEC2FromEnv(t *testing.T, region string) providers.Provider {
	isolateAWS(t)
	setAWS(t, "", "AWS_REGION="+region)
	return ec2In(t, region, "")
}

// ec2In is the EC2 backend on fakes in region, configured with the region
// configured.
func ec2In(t *testing.T, region, configured string) providers.Provider {
	f, s := ec2test.NewEC2(t, region), ec2test.NewSSM(t, region)
	p, err := ec2.New(t.Context(), ec2.Config{
		Region: configured, Subnets: []string{"subnet-0a000000000000001"}, GatewayCIDRs: []string{"10.9.0.0/24"},
		InstanceProfile: "dask-member", GatewayID: testGatewayID, EC2Endpoint: f.URL, SSMEndpoint: s.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), HTTPClient: loopbackDoer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newFargate(t *testing.T, _ string) providers.Provider {
	isolateAWS(t)
	return fargateIn(t, fargatetest.DefaultRegion)
}

// newFargateFromProfile leaves providers.fargate.region unset: the region
// is the one of the AWS profile in the shared config file.
func newFargateFromProfile(t *testing.T, _ string) providers.Provider {
	isolateAWS(t)
	setAWS(t, "[profile dask]\nregion = "+fargatetest.DefaultRegion+"\n", "AWS_PROFILE=dask")
	return fargateIn(t, "")
}

// fargateIn is the Fargate backend on its fakes, configured with the
// region configured.
func fargateIn(t *testing.T, configured string) providers.Provider {
	f := fargatetest.New(t)
	p, err := fargate.New(fargate.Config{
		Region: configured, Cluster: fargatetest.DefaultCluster, Subnets: []string{fargatetest.SubnetA},
		GatewayCIDRs: []string{"10.9.0.0/24"}, ExecutionRoleArn: "arn:aws:iam::123456789012:role/gateway-ecs-execution",
		LogGroup: "/gateway/dask", GatewayID: testGatewayID,
		Endpoints:   fargate.Endpoints{ECS: f.ECS.URL, SecretsManager: f.SecretsManager.URL, EC2: f.EC2.URL, Logs: f.Logs.URL},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), HTTPClient: loopbackDoer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newGCE(t *testing.T, _ string) providers.Provider {
	srv := gcetest.New(t, gcetest.Options{})
	p, err := gce.New(t.Context(), gce.Config{
		Project: srv.Project, Zones: []string{"us-central1-a"}, GatewayCIDRs: []string{"10.9.0.0/24"},
		ServiceAccount: "dask-workers@test-project.iam.gserviceaccount.com", GatewayID: testGatewayID,
		Endpoint: srv.URL, ClientOptions: []option.ClientOption{option.WithoutAuthentication()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background(), true) })
	return p
}

func newLocal(t *testing.T, _ string) providers.Provider {
	p, err := local.New(local.Config{Dir: t.TempDir(), GatewayID: testGatewayID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background(), false) })
	return p
}

// newRegionCore is a core (not running: admission happens in Create) on
// backend p with the default quota entry limits (JSON).
func newRegionCore(t *testing.T, p providers.Provider, limits string) *scheduler.Core {
	t.Helper()
	st, err := store.Open(t.Context(), "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := quota.ParseLimits([]byte(limits))
	if err != nil {
		t.Fatal(err)
	}
	q, err := quota.NewService(st, []quota.ConfigEntry{{Subject: quota.DefaultSubject, Limits: l}}, quota.Refuse)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Quotas = q
	return scheduler.New(cfg, st, p, newFakeRouter(), slog.New(slog.NewTextHandler(t.Output(), nil)))
}

// TestAllowedRegionsEveryBackend: a quota's allowed_regions refuses a
// cluster on a backend whose region it does not list, naming the region
// and the allowed ones, and admits it when it lists it; on EC2 and
// Fargate as on Compute Engine, whether their region is configured or
// left to the AWS SDK's settings. The local backend has no region: the
// allow-list has nothing to refuse there (docs/operating.md, Quotas).
func TestAllowedRegionsEveryBackend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		new    func(*testing.T, string) providers.Provider
		region string // what the backend runs in; "" for none
	}{
		{"ec2", newEC2, "eu-central-1"},
		{"ec2, region from AWS_REGION", newEC2FromEnv, "eu-west-3"},
		{"fargate", newFargate, fargatetest.DefaultRegion},
		{"fargate, region from the AWS profile", newFargateFromProfile, fargatetest.DefaultRegion},
		{"gce", newGCE, "us-central1"},
		{"local", newLocal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.new(t, tc.region)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			core := newRegionCore(t, p, `{"allowed_regions": ["sa-east-1", "ap-south-1"]}`)
			cl, err := core.Create(ctx, who("alice"), nil)
			if tc.region == "" {
				if err != nil {
					t.Fatalf("Create on a backend without regions: %v; want it admitted", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Create in %s admitted cluster %s; want a refusal by allowed_regions [sa-east-1, ap-south-1]", tc.region, cl.Name)
			}
			wantQuotaErr(t, err, "allowed_regions", "region "+tc.region+" is not allowed", "allowed: ap-south-1, sa-east-1", "default (config)")

			core = newRegionCore(t, p, fmt.Sprintf(`{"allowed_regions": ["sa-east-1", %q]}`, tc.region))
			if _, err := core.Create(ctx, who("alice"), nil); err != nil {
				t.Fatalf("Create in %s with %s allowed: %v", tc.region, tc.region, err)
			}
		})
	}
}
