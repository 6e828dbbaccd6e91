package fargate_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/internal/awslive"
)

// TestLiveContract runs the contract suite against real ECS Fargate, or
// against whatever the SDK's standard configuration points at. It costs
// money and needs an AWS account (or an emulator), so it runs only when
// asked for:
//
//	GATEWAY_LIVE_AWS=1 GATEWAY_LIVE_FARGATE_REGION=us-east-1 GATEWAY_LIVE_FARGATE_CLUSTER=gateway \
//	GATEWAY_LIVE_FARGATE_SUBNETS=subnet-... GATEWAY_LIVE_FARGATE_GATEWAY_CIDRS=<this machine's range> \
//	GATEWAY_LIVE_FARGATE_EXECUTION_ROLE_ARN=arn:aws:iam::...:role/... go test -run TestLiveContract -timeout 60m ./providers/fargate/
//
// Credentials, profile, region (when GATEWAY_LIVE_FARGATE_REGION is unset)
// and endpoints come from the SDK's usual places: AWS_ACCESS_KEY_ID and
// friends, AWS_PROFILE and the shared files, AWS_REGION, AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_ECS / _SECRETS_MANAGER / _EC2, endpoint_url in the
// shared config. The test prints each service's endpoint before the first
// call. This machine must reach the subnets' private addresses.
func TestLiveContract(t *testing.T) {
	if os.Getenv("GATEWAY_LIVE_AWS") != "1" {
		t.Skip("live AWS test: set GATEWAY_LIVE_AWS=1 and GATEWAY_LIVE_FARGATE_* (see the comment); it is not part of the default run")
	}
	cfg, err := liveConfig(context.Background(), t, operatorAWS, io.MultiWriter(os.Stderr, awslive.LogWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	newLive := func(t *testing.T, gatewayID string) providers.Provider {
		c := cfg
		c.GatewayID = gatewayID
		p, err := fargate.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var h contract.Harness
	h = contract.Harness{
		New: func(t *testing.T) providers.Provider { return newLive(t, cfg.GatewayID) },
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return providers.ClusterSpec{Name: cluster, Owner: owner, GatewayID: cfg.GatewayID, TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
				DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30,
				Scheduler: providers.Machine{VCPUs: 1, MemoryGiB: 2}, Worker: providers.Machine{VCPUs: 1, MemoryGiB: 2}}
		},
		Capabilities: capabilities(),
		Region:       cfg.Region,
		Timeout:      15 * time.Minute,
		Poll:         5 * time.Second,
	}
	// Another gateway on the same account and ECS cluster.
	h.Isolation = &contract.Isolation{Neighbour: func(t *testing.T, _ providers.Provider) contract.Neighbour {
		return contract.Renamed(t, cfg.GatewayID+"-b", newLive, h.Spec)
	}}
	contract.Run(t, h)
}

// liveConfig is the live test's set-up, the opposite of TestMain's: it
// gives t the operator's AWS environment back (until t ends), reads the
// SDK's standard configuration, writes where each service's requests will
// go to w, and returns the backend's configuration. Configured endpoints
// are passed on explicitly, so what is printed is what is used.
func liveConfig(ctx context.Context, t *testing.T, operator awslive.Env, w io.Writer) (fargate.Config, error) {
	operator.Restore(t)
	env := func(k string) string { return os.Getenv("GATEWAY_LIVE_FARGATE_" + k) }
	awsCfg, eps, err := awslive.Setup(ctx, w, "GATEWAY_LIVE_FARGATE_REGION", "ecs", "secretsmanager", "ec2")
	if err != nil {
		return fargate.Config{}, err
	}
	return fargate.Config{Region: awsCfg.Region, Cluster: env("CLUSTER"), Subnets: strings.Split(env("SUBNETS"), ","),
		GatewayCIDRs: strings.Split(env("GATEWAY_CIDRS"), ","), ExecutionRoleArn: env("EXECUTION_ROLE_ARN"), GatewayID: "gw-live-test",
		Endpoints: fargate.Endpoints{ECS: awslive.Configured(eps, "ecs"), SecretsManager: awslive.Configured(eps, "secretsmanager"),
			EC2: awslive.Configured(eps, "ec2")},
	}, nil
}

// TestLiveSetupHonoursSDKConfiguration: the live test's set-up takes
// credentials, region and endpoints from the SDK's standard places (which
// the hermetic TestMain hides), prints each service's endpoint, and the
// backend's calls go there; when the live test ends the hermetic set-up is
// back.
func TestLiveSetupHonoursSDKConfiguration(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The signature's scope: access key, date and region.
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		scope := strings.SplitN(cred, "/", 4)
		mu.Lock()
		ops = append(ops, r.Header.Get("X-Amz-Target")+" "+strings.Join(scope[:min(3, len(scope))], "/"))
		mu.Unlock()
		http.Error(w, "loopback test server", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "loopback test server", http.StatusBadRequest)
	}))
	t.Cleanup(other.Close)

	cases := []struct {
		name   string
		env    map[string]string
		config string
		want   fargate.Endpoints
		region string
	}{
		{"AWS_ENDPOINT_URL", map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "eu-west-3"}, "",
			fargate.Endpoints{ECS: srv.URL, SecretsManager: srv.URL, EC2: srv.URL}, "eu-west-3"},
		{"AWS_ENDPOINT_URL_ECS and _SECRETS_MANAGER beat AWS_ENDPOINT_URL",
			map[string]string{"AWS_ENDPOINT_URL": other.URL, "AWS_ENDPOINT_URL_ECS": srv.URL, "AWS_ENDPOINT_URL_SECRETS_MANAGER": srv.URL, "AWS_REGION": "eu-west-3"}, "",
			fargate.Endpoints{ECS: srv.URL, SecretsManager: srv.URL, EC2: other.URL}, "eu-west-3"},
		{"profile with endpoint_url and region", map[string]string{"AWS_PROFILE": "emulator"},
			"[profile emulator]\nregion = ap-south-1\nendpoint_url = " + srv.URL + "\n",
			fargate.Endpoints{ECS: srv.URL, SecretsManager: srv.URL, EC2: srv.URL}, "ap-south-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			ops = nil
			mu.Unlock()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			operator := awslive.Env{
				"AWS_ACCESS_KEY_ID": "AKIDLIVESETUP", "AWS_SECRET_ACCESS_KEY": "live-setup-secret",
				"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
				"AWS_EC2_METADATA_DISABLED": "true",
			}
			for k, v := range tc.env {
				operator[k] = v
			}
			for k, v := range map[string]string{"REGION": "", "CLUSTER": "gateway", "SUBNETS": "subnet-0123456789abcdef0",
				"GATEWAY_CIDRS": "10.0.0.0/24", "EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/exec"} {
				t.Setenv("GATEWAY_LIVE_FARGATE_"+k, v)
			}
			var printed bytes.Buffer
			cfg, err := liveConfig(t.Context(), t, operator, &printed)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{"ecs endpoint " + tc.want.ECS + " in " + tc.region, "secretsmanager endpoint " + tc.want.SecretsManager + " in " + tc.region,
				"ec2 endpoint " + tc.want.EC2 + " in " + tc.region} {
				if !strings.Contains(printed.String(), line) {
					t.Errorf("printed %q, want a line with %q", printed.String(), line)
				}
			}
			if cfg.Endpoints != tc.want || cfg.Region != tc.region {
				t.Errorf("config: endpoints %+v in %q, want %+v in %q", cfg.Endpoints, cfg.Region, tc.want, tc.region)
			}
			cfg.Retry.MaxAttempts = 1
			cfg.Sleep = func(context.Context, time.Duration) error { return nil }
			p, err := fargate.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Describe(t.Context(), "c1")
			mu.Lock()
			got := slices.Clone(ops)
			mu.Unlock()
			want := "AmazonEC2ContainerServiceV20141113.ListTasks AKIDLIVESETUP/" + time.Now().UTC().Format("20060102") + "/" + tc.region
			if !slices.Contains(got, want) {
				t.Errorf("requests at the configured endpoint: %q, want %q among them", got, want)
			}
		})
		// The live set-up lasts as long as its test: then the hermetic one
		// is back, and the SDK resolves no configured endpoint.
		awslive.CheckIsolated(t, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ECS", "AWS_PROFILE", "AWS_ACCESS_KEY_ID")
		awsCfg, err := awslive.Load(t.Context(), "eu-west-1")
		if err != nil {
			t.Fatal(err)
		}
		eps, err := awslive.Endpoints(t.Context(), awsCfg, "ecs", "secretsmanager", "ec2")
		if err != nil || awslive.Configured(eps, "ecs")+awslive.Configured(eps, "secretsmanager")+awslive.Configured(eps, "ec2") != "" {
			t.Errorf("hermetic set-up resolves endpoints %+v (%v), want AWS's defaults", eps, err)
		}
	}
}
