package gce

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// capabilities are the optional interfaces of providers/provider.go the
// Compute Engine provider implements, which the suite exercises.
func capabilities() []contract.Capability {
	return []contract.Capability{contract.InstanceTypes, contract.Regional, contract.StopTimes,
		contract.MemberLister, contract.LeftoverLister, contract.StartPacer, contract.Closer}
}

// TestContract runs the providers' contract suite against the provider on
// the wire-level fake.
func TestContract(t *testing.T) {
	var mu sync.Mutex
	servers := map[providers.Provider]*gcetest.Server{}
	newProvider := func(t *testing.T, srv *gcetest.Server, gatewayID string) providers.Provider {
		cfg := testConfig(srv, &sleeps{})
		cfg.GatewayID = gatewayID
		p, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background(), true) })
		return p
	}
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			srv := gcetest.New(t, gcetest.Options{PageSize: 3})
			p := newProvider(t, srv, testGatewayID)
			mu.Lock()
			servers[p] = srv
			mu.Unlock()
			return p
		},
		// Another gateway in the same project, on the same fake.
		Isolation: &contract.Isolation{Neighbour: func(t *testing.T, p providers.Provider) contract.Neighbour {
			mu.Lock()
			srv := servers[p]
			mu.Unlock()
			const other = "gw-other"
			return contract.Neighbour{P: newProvider(t, srv, other), Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
				s := testSpec(t, cluster, owner)
				s.GatewayID = other
				return s
			}}
		}},
		Spec:         func(t *testing.T, cluster, owner string) providers.ClusterSpec { return testSpec(t, cluster, owner) },
		Capabilities: capabilities(),
		Region:       "us-central1", // of testConfig's zones
		Timeout:      20 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}
