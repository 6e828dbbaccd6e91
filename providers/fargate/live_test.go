package fargate

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestLiveContract runs the contract suite against real ECS Fargate. It
// costs money and needs an AWS account, so it runs only when asked for:
//
//	GATEWAY_LIVE_AWS=1 GATEWAY_LIVE_FARGATE_REGION=us-east-1 GATEWAY_LIVE_FARGATE_CLUSTER=gateway \
//	GATEWAY_LIVE_FARGATE_SUBNETS=subnet-... GATEWAY_LIVE_FARGATE_GATEWAY_CIDRS=<this machine's range> \
//	GATEWAY_LIVE_FARGATE_EXECUTION_ROLE_ARN=arn:aws:iam::...:role/... go test -run TestLiveContract -timeout 60m ./providers/fargate/
//
// with credentials in the usual AWS places; this machine must reach the
// subnets' private addresses.
func TestLiveContract(t *testing.T) {
	if os.Getenv("GATEWAY_LIVE_AWS") != "1" {
		t.Skip("live AWS test: set GATEWAY_LIVE_AWS=1 and GATEWAY_LIVE_FARGATE_* (see the comment); it is not part of the default run")
	}
	env := func(k string) string { return os.Getenv("GATEWAY_LIVE_FARGATE_" + k) }
	const gatewayID = "gw-live-test"
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			p, err := New(Config{Region: env("REGION"), Cluster: env("CLUSTER"), Subnets: strings.Split(env("SUBNETS"), ","),
				GatewayCIDRs: strings.Split(env("GATEWAY_CIDRS"), ","), ExecutionRoleArn: env("EXECUTION_ROLE_ARN"), GatewayID: gatewayID})
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
				Scheduler: providers.Machine{VCPUs: 1, MemoryGiB: 2}, Worker: providers.Machine{VCPUs: 1, MemoryGiB: 2}}
		},
		Timeout: 15 * time.Minute,
		Poll:    5 * time.Second,
	})
}
