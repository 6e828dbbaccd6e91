package fargate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

func TestConfigValidation(t *testing.T) {
	f := fargatetest.New(t)
	valid := func() fargate.Config { return baseConfig(f, &sleeps{}) }
	if _, err := fargate.New(valid()); err != nil {
		t.Fatalf("valid configuration refused: %v", err)
	}
	tests := []struct {
		name string
		edit func(*fargate.Config)
		want string
	}{
		// The tests' environment gives the SDK no region (helpers_test.go).
		{"no region", func(c *fargate.Config) { c.Region = "" }, "providers.fargate.region is not set and the AWS SDK's settings give none"},
		{"bad region", func(c *fargate.Config) { c.Region = "moon-1" }, `region "moon-1"`},
		{"no cluster", func(c *fargate.Config) { c.Cluster = " " }, "cluster: name the ECS cluster"},
		{"no subnets", func(c *fargate.Config) { c.Subnets = nil }, "at least one subnet"},
		{"bad subnet", func(c *fargate.Config) { c.Subnets = []string{"10.0.0.0/24"} }, `"10.0.0.0/24" is not a subnet id`},
		{"subnet twice", func(c *fargate.Config) { c.Subnets = []string{fargatetest.SubnetA, fargatetest.SubnetA} }, "listed twice"},
		{"no gateway source", func(c *fargate.Config) { c.GatewayCIDRs = nil }, "gateway_security_group: name the security group of the gateway's tasks"},
		{"group and CIDRs", func(c *fargate.Config) { c.GatewaySecurityGroup = "sg-0123456789abcdef0" }, "both set; set only gateway_security_group"},
		{"bad group", func(c *fargate.Config) { c.GatewayCIDRs, c.GatewaySecurityGroup = nil, "gw" }, `gateway_security_group: "gw" is not a security group id`},
		{"the internet", func(c *fargate.Config) { c.GatewayCIDRs = []string{"0.0.0.0/0"} }, "0.0.0.0/0 would open the schedulers to much of the internet"},
		{"the internet in halves", func(c *fargate.Config) { c.GatewayCIDRs = []string{"0.0.0.0/1", "128.0.0.0/1"} }, "128.0.0.0/1 would open the schedulers to much of the internet"},
		{"the IPv6 internet", func(c *fargate.Config) { c.GatewayCIDRs = []string{"::/0"} }, "::/0 would open"},
		{"bad CIDR", func(c *fargate.Config) { c.GatewayCIDRs = []string{"10.0.0.1"} }, `"10.0.0.1" is not a CIDR block`},
		{"host bits", func(c *fargate.Config) { c.GatewayCIDRs = []string{"10.0.0.1/16"} }, "did you mean 10.0.0.0/16"},
		{"no execution role", func(c *fargate.Config) { c.ExecutionRoleArn = "" }, "execution_role_arn"},
		{"task role is the execution role", func(c *fargate.Config) { c.TaskRoleArn = c.ExecutionRoleArn }, "task_role_arn must not be the execution role"},
		{"bad task role", func(c *fargate.Config) { c.TaskRoleArn = "dask" }, `task_role_arn: "dask"`},
		{"bad image", func(c *fargate.Config) { c.Image = "a b" }, "image"},
		{"blank python", func(c *fargate.Config) { c.Python = "  " }, "python: \"  \" is not"},
		{"python with arguments", func(c *fargate.Config) { c.Python = "python -u" }, "python: \"python -u\" is not"},
		{"bad architecture", func(c *fargate.Config) { c.CPUArchitecture = "RISCV" }, "Config.CPUArchitecture"},
		{"bad log group", func(c *fargate.Config) { c.LogGroup = "a group" }, "log_group"},
		{"no gateway id", func(c *fargate.Config) { c.GatewayID = "" }, "gateway id: empty"},
		{"bad endpoint", func(c *fargate.Config) { c.Endpoints.ECS = "127.0.0.1:1" }, "ecs_endpoint"},
		{"negative retry", func(c *fargate.Config) { c.Retry.MaxAttempts = -1 }, "retry: attempts and delays cannot be negative"},
		{"max below base", func(c *fargate.Config) { c.Retry.BaseDelay, c.Retry.MaxDelay = time.Second, time.Millisecond }, "below the base delay"},
		{"negative stop timeout", func(c *fargate.Config) { c.StopTimeout = -time.Second }, "Config.StopTimeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			_, err := fargate.New(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v; want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		c := valid()
		for _, tc := range tests[:len(tests)-1] {
			if tc.name != "max below base" && tc.name != "no region" {
				tc.edit(&c)
			}
		}
		_, err := fargate.New(c)
		if err == nil {
			t.Fatal("New accepted")
		}
		for _, want := range []string{"moon-1", "cluster:", "listed twice", "host bits", "gateway_cidrs", "execution_role_arn", "task_role_arn", "image", "python", "CPUArchitecture", "log_group", "gateway id", "ecs_endpoint", "retry"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("combined error lacks %q:\n%v", want, err)
			}
		}
		var joined interface{ Unwrap() []error }
		if !errors.As(err, &joined) || len(joined.Unwrap()) < 12 {
			t.Errorf("the problems are not kept one by one: %v", err)
		}
	})
}

// TestCancelledContext: every method gives up at once on a dead context.
func TestCancelledContext(t *testing.T) {
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec := testSpec(cl, "ann")
	for name, err := range map[string]error{
		"StartScheduler": p.StartScheduler(ctx, spec),
		"StartWorker":    p.StartWorker(ctx, spec, "worker-0", "10.1.0.2:8786"),
		"StopWorker":     p.StopWorker(ctx, cl, "worker-0"),
		"StopCluster":    p.StopCluster(ctx, cl),
		"Describe":       func() error { _, err := p.Describe(ctx, cl); return err }(),
		"List":           func() error { _, err := p.List(ctx); return err }(),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s = %v; want context.Canceled", name, err)
		}
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("%d requests sent on a cancelled context", n)
	}
}
