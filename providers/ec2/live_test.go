package ec2

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestLiveContract runs the contract suite against real EC2. It costs
// money and needs an AWS account, so it runs only when asked for:
//
//	GATEWAY_LIVE_AWS=1 GATEWAY_LIVE_EC2_REGION=us-east-1 \
//	GATEWAY_LIVE_EC2_SUBNETS=subnet-...,subnet-... GATEWAY_LIVE_EC2_GATEWAY_CIDRS=<this machine's range> \
//	GATEWAY_LIVE_EC2_INSTANCE_PROFILE=gateway-members go test -run TestLiveContract -timeout 60m ./providers/ec2/
//
// with credentials in the usual AWS places. This machine must reach the
// subnets' private addresses (a VPN, or run it inside the VPC).
func TestLiveContract(t *testing.T) {
	if os.Getenv("GATEWAY_LIVE_AWS") != "1" {
		t.Skip("live AWS test: set GATEWAY_LIVE_AWS=1 and GATEWAY_LIVE_EC2_* (see the comment); it is not part of the default run")
	}
	env := func(k string) string { return os.Getenv("GATEWAY_LIVE_EC2_" + k) }
	const gatewayID = "gw-live-test"
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			p, err := New(context.Background(), Config{
				Region: env("REGION"), Subnets: strings.Split(env("SUBNETS"), ","), GatewayCIDRs: strings.Split(env("GATEWAY_CIDRS"), ","),
				InstanceProfile: env("INSTANCE_PROFILE"), GatewayID: gatewayID,
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return providers.ClusterSpec{Name: cluster, Owner: owner, GatewayID: gatewayID, TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
				DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30,
				Scheduler: providers.Machine{InstanceType: "t3.medium", VCPUs: 2, MemoryGiB: 4},
				Worker:    providers.Machine{InstanceType: "t3.medium", VCPUs: 2, MemoryGiB: 4}}
		},
		Timeout: 15 * time.Minute,
		Poll:    5 * time.Second,
	})
}
