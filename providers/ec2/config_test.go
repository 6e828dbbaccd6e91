package ec2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

func validConfig() Config {
	return Config{
		Region:          "us-east-1",
		Subnets:         []string{"subnet-0123456789abcdef0"},
		GatewayCIDRs:    []string{"10.1.0.0/16"},
		InstanceProfile: "dask-member",
		GatewayID:       "prod",
		Credentials:     credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		EC2Endpoint:     "http://127.0.0.1:9",
		SSMEndpoint:     "http://127.0.0.1:9",
	}
}

func TestNewValidConfigAndDefaults(t *testing.T) {
	p, err := New(context.Background(), validConfig())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := p.cfg
	if c.VolumeGiB != 40 || c.Image != DefaultImage || c.AMIParameter != DefaultAMIParameter ||
		c.AMIParameterARM64 != DefaultAMIParameterARM64 || c.AMIParameterGPU != DefaultAMIParameterGPU ||
		c.MaxAttempts != DefaultMaxAttempts || c.CacheTTL != DefaultCacheTTL || c.Sleep == nil || c.ProbeScheduler == nil {
		t.Errorf("defaults not applied: %+v", c)
	}
	if p.Name() != "ec2" {
		t.Errorf("Name() = %q", p.Name())
	}
	// An explicit AMI leaves the parameters empty.
	cfg := validConfig()
	cfg.AMI = "ami-0123456789abcdef0"
	cfg.InstanceProfile = "arn:aws:iam::123456789012:instance-profile/dask"
	cfg.GatewayCIDRs = []string{"10.1.2.3/32", "2001:db8::/48"}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Errorf("explicit AMI, profile ARN and IPv6 range: %v", err)
	}
	cfg.GatewayCIDRs, cfg.GatewaySecurityGroup = nil, "sg-0123456789abcdef0"
	if _, err := New(context.Background(), cfg); err != nil {
		t.Errorf("gateway security group: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want []string // every one must appear
	}{
		// The tests' environment gives the SDK no region (helpers_test.go).
		{"no region", func(c *Config) { c.Region = "" }, []string{"providers.ec2.region is not set", "AWS_REGION"}},
		{"bad region", func(c *Config) { c.Region = "Virginia" }, []string{`region "Virginia"`}},
		{"no subnets", func(c *Config) { c.Subnets = nil }, []string{"subnets is empty"}},
		{"bad subnet", func(c *Config) { c.Subnets = []string{"sn-1"} }, []string{`"sn-1" is not a subnet id`}},
		{"duplicate subnet", func(c *Config) { c.Subnets = []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef0"} }, []string{"listed twice"}},
		{"no gateway source", func(c *Config) { c.GatewayCIDRs = nil }, []string{"gateway_security_group is empty"}},
		{"group and CIDRs", func(c *Config) { c.GatewaySecurityGroup = "sg-0123456789abcdef0" }, []string{"both set", "only gateway_security_group"}},
		{"bad group", func(c *Config) { c.GatewayCIDRs, c.GatewaySecurityGroup = nil, "gateway" }, []string{`"gateway" is not a security group id`}},
		{"open to the world", func(c *Config) { c.GatewayCIDRs = []string{"0.0.0.0/0"} }, []string{"much of the internet"}},
		{"open to the IPv6 world", func(c *Config) { c.GatewayCIDRs = []string{"::/0"} }, []string{"much of the internet"}},
		{"the internet in halves", func(c *Config) { c.GatewayCIDRs = []string{"0.0.0.0/1", "128.0.0.0/1"} }, []string{`"0.0.0.0/1" would open`, `"128.0.0.0/1" would open`}},
		{"not a CIDR", func(c *Config) { c.GatewayCIDRs = []string{"10.0.0.1"} }, []string{"not a CIDR block", "10.0.1.5/32"}},
		{"host bits", func(c *Config) { c.GatewayCIDRs = []string{"10.0.0.1/24"} }, []string{"host bits", "use 10.0.0.0/24"}},
		{"bad AMI", func(c *Config) { c.AMI = "ubuntu" }, []string{`ami "ubuntu"`}},
		{"AMI and parameter", func(c *Config) { c.AMI = "ami-0123456789abcdef0"; c.AMIParameter = "/x" }, []string{"set only one"}},
		{"bad parameter", func(c *Config) { c.AMIParameterGPU = "a b" }, []string{"Config.AMIParameterGPU"}},
		{"no profile", func(c *Config) { c.InstanceProfile = "" }, []string{"instance_profile is empty", "ssm:GetParameter on /gateway/prod/*", "kms:Decrypt"}},
		{"bad profile ARN", func(c *Config) { c.InstanceProfile = "arn:aws:iam::1:role/x" }, []string{"not an instance profile ARN"}},
		{"bad profile name", func(c *Config) { c.InstanceProfile = "my profile" }, []string{"not an instance profile name"}},
		{"small volume", func(c *Config) { c.VolumeGiB = 4 }, []string{"volume_gib is 4"}},
		{"bad image", func(c *Config) { c.Image = "ghcr.io/x y" }, []string{"not a container image"}},
		{"bad default type", func(c *Config) { c.DefaultWorkerType = "big" }, []string{"default_worker_type"}},
		{"no gateway id", func(c *Config) { c.GatewayID = "" }, []string{"gateway id is empty"}},
		{"bad gateway id", func(c *Config) { c.GatewayID = "a/b" }, []string{`gateway id "a/b"`}},
		{"aws tag", func(c *Config) { c.ExtraTags = map[string]string{"aws:x": "1"} }, []string{"reserved prefix aws:"}},
		{"gateway tag", func(c *Config) { c.ExtraTags = map[string]string{"gateway-id": "other"} }, []string{"set by the gateway itself"}},
		{"long tag value", func(c *Config) { c.ExtraTags = map[string]string{"k": strings.Repeat("v", 300)} }, []string{"longer than 256"}},
		{"bad endpoint", func(c *Config) { c.EC2Endpoint = "localhost:4566" }, []string{"ec2_endpoint"}},
		{"bad attempts", func(c *Config) { c.MaxAttempts = -1 }, []string{"MaxAttempts is -1"}},
		{"bad delays", func(c *Config) { c.BaseDelay, c.MaxDelay = time.Second, time.Millisecond }, []string{"BaseDelay"}},
		{"negative TTL", func(c *Config) { c.CacheTTL = -time.Second }, []string{"cache_ttl"}},
		{"everything at once", func(c *Config) { *c = Config{VolumeGiB: 1} }, []string{
			"problems", "(1) ", "providers.ec2.region is not set", "gateway id is empty", "subnets is empty", "gateway_security_group is empty", "instance_profile is empty", "volume_gib is 1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.edit(&cfg)
			_, err := New(context.Background(), cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
