package local_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/local"
)

// TestContract runs the provider contract against real Dask processes.
func TestContract(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import distributed").CombinedOutput(); err != nil {
		t.Fatalf("the contract suite runs real Dask at %s (on Debian: apt-get install python3-distributed; scripts/test.sh installs it): %v\n%s", python, err, out)
	}
	const gatewayID = "gw-contract-local"
	newProvider := func(t *testing.T, id string) providers.Provider {
		p, err := local.New(local.Config{Dir: t.TempDir(), Python: python, GatewayID: id, StopGrace: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background(), false) })
		return p
	}
	spec := func(id string) func(t *testing.T, cluster, owner string) providers.ClusterSpec {
		return func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return providers.ClusterSpec{
				Name: cluster, Owner: owner, GatewayID: id, TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
				DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30,
			}
		}
	}
	contract.Run(t, contract.Harness{
		New:  func(t *testing.T) providers.Provider { return newProvider(t, gatewayID) },
		Spec: spec(gatewayID),
		// Another gateway on the same host, with its own state directory.
		Isolation: &contract.Isolation{Neighbour: func(t *testing.T, _ providers.Provider) contract.Neighbour {
			return contract.Neighbour{P: newProvider(t, gatewayID+"-other"), Spec: spec(gatewayID + "-other")}
		}},
		// No Regional: members run on the gateway's host (docs/operating.md, Quotas).
		Capabilities: []contract.Capability{contract.Immediate, contract.StopTimes, contract.LogReader,
			contract.MemberLister, contract.Closer},
		Timeout: 45 * time.Second,
	})
}
