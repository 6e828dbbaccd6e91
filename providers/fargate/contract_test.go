package fargate_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/fargate"
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
	var mu sync.Mutex
	fakes := map[providers.Provider]*fargatetest.Server{}
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			f := fargatetest.New(t)
			p, _ := newProvider(t, f)
			mu.Lock()
			fakes[p] = f
			mu.Unlock()
			return p
		},
		// Another gateway in the same ECS cluster, account and VPC. ECS
		// cannot filter tasks by tag, and the groups, secrets and task
		// definition families are found by names that hold the gateway's
		// key: the tags, checked by the provider, are what keeps them
		// apart, so there is no server-side filter to loosen.
		Isolation: &contract.Isolation{Neighbour: func(t *testing.T, p providers.Provider) contract.Neighbour {
			mu.Lock()
			f := fakes[p]
			mu.Unlock()
			other, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayID = "gw-other" })
			return contract.Neighbour{P: other, Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
				s := testSpec(cluster, owner)
				s.GatewayID = "gw-other"
				return s
			}}
		}},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			return testSpec(cluster, owner)
		},
		Capabilities: capabilities(),
		Region:       fargatetest.DefaultRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}
