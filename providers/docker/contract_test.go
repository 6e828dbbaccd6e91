package docker

import (
	"context"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestContract runs the provider contract against real Dask containers.
func TestContract(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			cfg := e.config()
			cfg.Logger = testLogger(t)
			p, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background(), false) })
			return p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			return testSpec(t, cluster, owner, e.gatewayID)
		},
		// No Regional: members run on the configured Docker engine
		// (docs/operating.md, Quotas).
		Capabilities: []contract.Capability{contract.Immediate, contract.StopTimes, contract.LogReader,
			contract.MemberLister, contract.Closer},
		Timeout: 45 * time.Second,
		Poll:    pollInterval,
		// Another gateway on the same Docker engine: the labels, exactly
		// checked, keep them apart (the engine's label filter is the
		// provider's only listing, so there is no looser one to run).
		Isolation: &contract.Isolation{Neighbour: func(t *testing.T, _ providers.Provider) contract.Neighbour {
			cfg := e.config()
			cfg.GatewayID = e.gatewayID + "-other"
			cfg.Logger = testLogger(t)
			other, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close(context.Background(), false) })
			return contract.Neighbour{P: other, Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
				return testSpec(t, cluster, owner, cfg.GatewayID)
			}}
		}},
	})
}
