package ec2

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// capabilities are the optional interfaces of providers/provider.go the
// EC2 provider implements, which the suite exercises.
func capabilities() []contract.Capability {
	return []contract.Capability{contract.InstanceTypes, contract.Regional, contract.StopTimes,
		contract.MemberLister, contract.LeftoverLister, contract.StartPacer}
}

// TestContract runs the providers' shared suite against the EC2 provider
// on the wire-level fakes, with instances pending for two describes and
// terminating over two more, as EC2 makes them.
func TestContract(t *testing.T) {
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			e := newEnv(t)
			e.ec2.SetPendingDescribes(2)
			e.ec2.SetTerminateDescribes(2)
			return e.p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			s := spec(cluster)
			s.Owner = owner
			return s
		},
		Capabilities: capabilities(),
		Region:       testRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}

// TestContractEventuallyConsistent runs the suite again with new instances
// missing from DescribeInstances for a few calls, as EC2 can leave them.
func TestContractEventuallyConsistent(t *testing.T) {
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			e := newEnv(t)
			e.ec2.SetPendingDescribes(1)
			e.ec2.SetVisibilityDelay(3)
			return e.p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			s := spec(cluster)
			s.Owner = owner
			return s
		},
		Capabilities: capabilities(),
		Region:       testRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}
