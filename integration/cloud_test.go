package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
)

// TestDevWithEC2 runs `gateway dev --provider ec2` against the wire-level
// EC2 and SSM fakes: the real binary, the real AWS SDK, EC2's own protocol.
// The fake's subnet is a loopback range, so that the gateway's probes of
// the "instances" stay on this machine (nothing answers there: schedulers
// stay starting, which is what an image pull looks like).
func TestDevWithEC2(t *testing.T) {
	t.Parallel()
	const region = "us-east-1"
	fake := ec2test.NewEC2(t, region)
	ssm := ec2test.NewSSM(t, region)
	fake.AddSubnet(ec2test.Subnet{ID: "subnet-0d000000000000004", VPC: "vpc-0c000000000000001", Zone: region + "a", CIDR: "127.0.3.0/24"})
	e := newEnv(t,
		"GATEWAY_PROVIDER=ec2",
		"GATEWAY_PROVIDERS_EC2_REGION="+region,
		"GATEWAY_PROVIDERS_EC2_SUBNETS=subnet-0d000000000000004",
		"GATEWAY_PROVIDERS_EC2_GATEWAY_CIDRS=192.0.2.0/24",
		"GATEWAY_PROVIDERS_EC2_AMI="+ec2test.DefaultImages()[0].ID,
		"GATEWAY_PROVIDERS_EC2_INSTANCE_PROFILE=gateway-members",
		"GATEWAY_PROVIDERS_EC2_EC2_ENDPOINT="+fake.URL,
		"GATEWAY_PROVIDERS_EC2_SSM_ENDPOINT="+ssm.URL,
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLETEST", "AWS_SECRET_ACCESS_KEY=secret-for-the-fake",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"GATEWAY_CLUSTER_POLL_INTERVAL=300ms",
	)
	e.startGateway()
	// The banner names where clusters run: not "this machine". It comes
	// right after the CLI's sign-in, which startGateway waits for.
	for deadline := time.Now().Add(testutil.HangBound); !strings.Contains(e.gwLog.String(), "gateway dev: FOR DEVELOPMENT ONLY") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if banner := e.gwLog.String(); !strings.Contains(banner, "Dask on EC2 instances in "+region) || strings.Contains(banner, "Dask on this machine") {
		t.Errorf("gateway dev --provider ec2 banner:\n%s\nwant it to say Dask on EC2 instances in %s", lastLines(banner, 15), region)
	}
	cat, err := catalog.New(catalog.Builtin(), nil)
	if err != nil {
		t.Fatal(err)
	}

	out := e.gwOK("instance-types", "--gpu")
	if !strings.Contains(out, "g5.xlarge") || strings.Contains(out, "m6i.large") {
		t.Errorf("instance-types --gpu:\n%s", out)
	}
	var c struct{ Name string }
	e.gwJSON(&c, "new-cluster", "--no-wait", "--workers", "1", "--worker-cpus", "4", "--worker-memory", "16GiB", "--spot")
	// The scheduler's instance is launched with the chosen type, IMDSv2,
	// the cluster's tags and its own security group; its TLS key is in SSM,
	// not in the user data.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if in, ok := fake.Instance(c.Name, "scheduler"); ok {
			if in.Type == "" || in.Tags["gateway-cluster"] != c.Name || in.Tags["gateway-owner"] == "" || in.HTTPTokens != "required" ||
				strings.Contains(in.UserData, "-----BEGIN") || in.Spot {
				t.Errorf("scheduler instance: type %q, tags %v, IMDS tokens %q, spot %v; want a type, the cluster's tags, IMDSv2, on-demand, no key in user data",
					in.Type, in.Tags, in.HTTPTokens, in.Spot)
			}
			// The cheapest type with a known price wins over types the
			// price table does not know.
			if _, known := cat.Lookup(in.Type); !known {
				t.Errorf("scheduler on %s, a type without a known price", in.Type)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduler instance launched after 30s\n%s", lastLines(e.gwLog.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var d struct {
		Cluster struct{ State, Phase string }
	}
	e.gwJSON(&d, "show", c.Name)
	if d.Cluster.State != "STARTING" && d.Cluster.State != "PENDING" {
		t.Errorf("cluster %s is %s (%s); want it starting while its machine boots", c.Name, d.Cluster.State, d.Cluster.Phase)
	}
	for _, r := range fake.Requests("RunInstances") {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "-----BEGIN") {
			t.Errorf("a RunInstances request carries the TLS key")
		}
	}
	if len(fake.SecurityGroups()) == 0 {
		t.Errorf("no security group made for the cluster")
	}

	e.gwOK("stop", c.Name)
	deadline = time.Now().Add(60 * time.Second)
	for {
		live := 0
		for _, in := range fake.Instances() {
			if in.Tags["gateway-cluster"] == c.Name && in.State != "terminated" {
				live++
			}
		}
		if live == 0 && len(fake.SecurityGroups()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after stop: %d instances left, %d security groups\n%s", live, len(fake.SecurityGroups()), lastLines(e.gwLog.String(), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
