package fargate_test

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// capabilities are the optional interfaces of providers/provider.go the
// Fargate provider implements, which the suite exercises.
func capabilities() []contract.Capability {
	return []contract.Capability{contract.Spot, contract.Regional, contract.StopTimes,
		contract.MemberLister, contract.LeftoverLister, contract.StartPacer}
}

// TestContract runs the behaviour every provider owes the core against
// the Fargate provider on the wire-level fake.
func TestContract(t *testing.T) {
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			p, _ := newProvider(t, fargatetest.New(t))
			return p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			return testSpec(cluster, owner)
		},
		Capabilities: capabilities(),
		Region:       fargatetest.DefaultRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}
