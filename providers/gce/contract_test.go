package gce

import (
	"context"
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
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			srv := gcetest.New(t, gcetest.Options{PageSize: 3})
			p, err := New(context.Background(), testConfig(srv, &sleeps{}))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background(), true) })
			return p
		},
		Spec:         func(t *testing.T, cluster, owner string) providers.ClusterSpec { return testSpec(t, cluster, owner) },
		Capabilities: capabilities(),
		Region:       "us-central1", // of testConfig's zones
		Timeout:      20 * time.Second,
		Poll:         5 * time.Millisecond,
	})
}
