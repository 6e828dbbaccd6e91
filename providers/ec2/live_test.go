package ec2

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

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/internal/awslive"
)

// TestLiveContract runs the contract suite against real EC2, or against
// whatever the SDK's standard configuration points at. It costs money and
// needs an AWS account (or an emulator), so it runs only when asked for:
//
//	GATEWAY_LIVE_AWS=1 GATEWAY_LIVE_EC2_REGION=us-east-1 \
//	GATEWAY_LIVE_EC2_SUBNETS=subnet-...,subnet-... GATEWAY_LIVE_EC2_GATEWAY_CIDRS=<this machine's range> \
//	GATEWAY_LIVE_EC2_INSTANCE_PROFILE=gateway-members go test -run TestLiveContract -timeout 60m ./providers/ec2/
//
// Credentials, profile, region (when GATEWAY_LIVE_EC2_REGION is unset) and
// endpoints come from the SDK's usual places: AWS_ACCESS_KEY_ID and
// friends, AWS_PROFILE and the shared files, AWS_REGION, AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_EC2 / AWS_ENDPOINT_URL_SSM, endpoint_url in the shared
// config. The test prints each service's endpoint before the first call.
// GATEWAY_LIVE_EC2_AMI names the AMI every member boots, for an emulator
// (or a region) without the ECS-optimised AMI's public SSM parameter;
// unset, the parameter is read as in production.
// This machine must reach the subnets' private addresses (a VPN, or run
// it inside the VPC).
func TestLiveContract(t *testing.T) {
	if os.Getenv("GATEWAY_LIVE_AWS") != "1" {
		t.Skip("live AWS test: set GATEWAY_LIVE_AWS=1 and GATEWAY_LIVE_EC2_* (see the comment); it is not part of the default run")
	}
	cfg, err := liveConfig(context.Background(), t, operatorAWS, io.MultiWriter(os.Stderr, awslive.LogWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	newLive := func(t *testing.T, gatewayID string) providers.Provider {
		c := cfg
		c.GatewayID = gatewayID
		p, err := New(context.Background(), c)
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
				Scheduler: providers.Machine{InstanceType: "t3.medium", VCPUs: 2, MemoryGiB: 4},
				Worker:    providers.Machine{InstanceType: "t3.medium", VCPUs: 2, MemoryGiB: 4}}
		},
		Capabilities: capabilities(),
		Region:       cfg.Region,
		Timeout:      15 * time.Minute,
		Poll:         5 * time.Second,
	}
	// Another gateway on the same account.
	h.Isolation = &contract.Isolation{Neighbour: func(t *testing.T, _ providers.Provider) contract.Neighbour {
		return contract.Renamed(t, cfg.GatewayID+"-b", newLive, h.Spec)
	}}
	contract.Run(t, h)
}

// liveConfig is the live test's set-up, the opposite of TestMain's: it
// gives t the operator's AWS environment back (until t ends), reads the
// SDK's standard configuration, writes where each service's requests will
// go to w, and returns the provider's configuration. A configured endpoint
// is passed on explicitly, so what is printed is what is used.
func liveConfig(ctx context.Context, t *testing.T, operator awslive.Env, w io.Writer) (Config, error) {
	operator.Restore(t)
	env := func(k string) string { return os.Getenv("GATEWAY_LIVE_EC2_" + k) }
	awsCfg, eps, err := awslive.Setup(ctx, w, "GATEWAY_LIVE_EC2_REGION", "ec2", "ssm")
	if err != nil {
		return Config{}, err
	}
	return Config{
		Region: awsCfg.Region, Subnets: strings.Split(env("SUBNETS"), ","), GatewayCIDRs: strings.Split(env("GATEWAY_CIDRS"), ","),
		InstanceProfile: env("INSTANCE_PROFILE"), GatewayID: "gw-live-test", AMI: env("AMI"),
		EC2Endpoint: awslive.Configured(eps, "ec2"), SSMEndpoint: awslive.Configured(eps, "ssm"),
	}, nil
}

// TestLiveSetupHonoursSDKConfiguration: the live test's set-up takes
// credentials, region and endpoints from the SDK's standard places (which
// the hermetic TestMain hides), prints each service's endpoint, and the
// provider's calls go there; when the live test ends the hermetic set-up
// is back.
func TestLiveSetupHonoursSDKConfiguration(t *testing.T) {
	type server struct {
		url string
		ops func() []string
	}
	serve := func(t *testing.T) server {
		var mu sync.Mutex
		var ops []string
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			op := r.Header.Get("X-Amz-Target") // SSM's JSON protocol
			if op == "" {
				_ = r.ParseForm() // EC2's query protocol
				op = r.PostForm.Get("Action")
			}
			// The signature's scope: access key, date and region.
			_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
			scope := strings.SplitN(cred, "/", 4)
			mu.Lock()
			ops = append(ops, op+" "+strings.Join(scope[:min(3, len(scope))], "/"))
			mu.Unlock()
			http.Error(w, "loopback test server", http.StatusBadRequest)
		}))
		t.Cleanup(s.Close)
		return server{url: s.URL, ops: func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(ops) }}
	}
	cases := []struct {
		name     string
		env      func(a, b string) map[string]string
		config   func(a, b string) string // the shared config file
		ec2, ssm func(a, b string) string
		region   string
	}{
		{"AWS_ENDPOINT_URL",
			func(a, b string) map[string]string {
				return map[string]string{"AWS_ENDPOINT_URL": a, "AWS_REGION": "eu-west-3"}
			},
			func(a, b string) string { return "" },
			func(a, b string) string { return a }, func(a, b string) string { return a }, "eu-west-3"},
		{"AWS_ENDPOINT_URL_SSM beats AWS_ENDPOINT_URL",
			func(a, b string) map[string]string {
				return map[string]string{"AWS_ENDPOINT_URL": a, "AWS_ENDPOINT_URL_SSM": b, "AWS_REGION": "eu-west-3"}
			},
			func(a, b string) string { return "" },
			func(a, b string) string { return a }, func(a, b string) string { return b }, "eu-west-3"},
		{"profile with endpoint_url and region",
			func(a, b string) map[string]string { return map[string]string{"AWS_PROFILE": "emulator"} },
			func(a, b string) string {
				return "[profile emulator]\nregion = ap-south-1\nendpoint_url = " + a + "\nservices = emu\n\n[services emu]\nssm =\n  endpoint_url = " + b + "\n"
			},
			func(a, b string) string { return a }, func(a, b string) string { return b }, "ap-south-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := serve(t), serve(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config"), []byte(tc.config(a.url, b.url)), 0o600); err != nil {
				t.Fatal(err)
			}
			operator := awslive.Env{
				"AWS_ACCESS_KEY_ID": "AKIDLIVESETUP", "AWS_SECRET_ACCESS_KEY": "live-setup-secret",
				"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
				"AWS_EC2_METADATA_DISABLED": "true",
			}
			for k, v := range tc.env(a.url, b.url) {
				operator[k] = v
			}
			for k, v := range map[string]string{"REGION": "", "SUBNETS": "subnet-0123456789abcdef0", "GATEWAY_CIDRS": "10.0.0.0/24", "INSTANCE_PROFILE": "members"} {
				t.Setenv("GATEWAY_LIVE_EC2_"+k, v)
			}
			var printed bytes.Buffer
			cfg, err := liveConfig(t.Context(), t, operator, &printed)
			if err != nil {
				t.Fatal(err)
			}
			wantEC2, wantSSM := tc.ec2(a.url, b.url), tc.ssm(a.url, b.url)
			for _, line := range []string{"ec2 endpoint " + wantEC2 + " in " + tc.region, "ssm endpoint " + wantSSM + " in " + tc.region} {
				if !strings.Contains(printed.String(), line) {
					t.Errorf("printed %q, want a line with %q", printed.String(), line)
				}
			}
			if cfg.Region != tc.region {
				t.Errorf("region %q, want %q", cfg.Region, tc.region)
			}
			p, err := New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.ec2.DescribeSubnets(t.Context(), &awsec2.DescribeSubnetsInput{})
			_, _ = p.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/p")})
			got := map[string][]string{a.url: a.ops(), b.url: b.ops()}
			want := map[string][]string{a.url: nil, b.url: nil}
			cred := "AKIDLIVESETUP/" + time.Now().UTC().Format("20060102") + "/" + tc.region
			want[wantEC2] = append(want[wantEC2], "DescribeSubnets "+cred)
			want[wantSSM] = append(want[wantSSM], "AmazonSSM.GetParameter "+cred)
			for u := range want {
				slices.Sort(got[u])
				slices.Sort(want[u])
				if !slices.Equal(got[u], want[u]) {
					t.Errorf("requests at %s: %q, want %q", u, got[u], want[u])
				}
			}
		})
		// The live set-up lasts as long as its test: then the hermetic one
		// is back, and the SDK resolves no configured endpoint.
		awslive.CheckIsolated(t, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SSM", "AWS_PROFILE", "AWS_ACCESS_KEY_ID")
		awsCfg, err := awslive.Load(t.Context(), testRegion)
		if err != nil {
			t.Fatal(err)
		}
		if eps, err := awslive.Endpoints(t.Context(), awsCfg, "ec2", "ssm"); err != nil || awslive.Configured(eps, "ec2")+awslive.Configured(eps, "ssm") != "" {
			t.Errorf("hermetic set-up resolves endpoints %+v (%v), want AWS's defaults", eps, err)
		}
	}
}

// TestLiveConfigAMI: GATEWAY_LIVE_EC2_AMI is the members' AMI, so that
// the live test runs against an emulator without the ECS-optimised AMI's
// SSM parameter; unset, the provider reads the parameter.
func TestLiveConfigAMI(t *testing.T) {
	for _, ami := range []string{"", "ami-0123456789abcdef0"} {
		t.Run("AMI="+ami, func(t *testing.T) {
			operator := awslive.Env{"AWS_ACCESS_KEY_ID": "AKIDLIVESETUP", "AWS_SECRET_ACCESS_KEY": "live-setup-secret",
				"AWS_REGION": "eu-west-3", "AWS_EC2_METADATA_DISABLED": "true",
				"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}
			for k, v := range map[string]string{"REGION": "", "SUBNETS": "subnet-0123456789abcdef0", "GATEWAY_CIDRS": "10.0.0.0/24", "INSTANCE_PROFILE": "members", "AMI": ami} {
				t.Setenv("GATEWAY_LIVE_EC2_"+k, v)
			}
			cfg, err := liveConfig(t.Context(), t, operator, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AMI != ami {
				t.Errorf("AMI %q, want %q from GATEWAY_LIVE_EC2_AMI", cfg.AMI, ami)
			}
		})
	}
}
