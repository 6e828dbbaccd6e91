package gce

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestLiveContract runs the contract suite against real Compute Engine.
// It costs money and needs a project, so it runs only when asked for:
//
//	GATEWAY_LIVE_GCP=1 GATEWAY_LIVE_GCE_PROJECT=my-project GATEWAY_LIVE_GCE_ZONES=us-central1-a,us-central1-b \
//	GATEWAY_LIVE_GCE_GATEWAY_CIDRS=<this machine's range> GATEWAY_LIVE_GCE_SERVICE_ACCOUNT=gateway-members@... \
//	go test -run TestLiveContract -timeout 60m ./providers/gce/
//
// with Application Default Credentials; this machine must reach the
// network's private addresses. GATEWAY_LIVE_GCE_ENDPOINT and
// GATEWAY_LIVE_GCE_SECRETMANAGER_ENDPOINT point it at an emulator (the
// Google client libraries read no endpoint from the environment); the test
// prints the endpoints before the first call.
func TestLiveContract(t *testing.T) {
	if os.Getenv("GATEWAY_LIVE_GCP") != "1" {
		t.Skip("live GCP test: set GATEWAY_LIVE_GCP=1 and GATEWAY_LIVE_GCE_* (see the comment); it is not part of the default run")
	}
	env := func(k string) string { return os.Getenv("GATEWAY_LIVE_GCE_" + k) }
	const gatewayID = "gw-live-test"
	// Before any call: where the requests go.
	compute, secrets := env("ENDPOINT"), env("SECRETMANAGER_ENDPOINT")
	if secrets == "" {
		secrets = compute
	}
	if compute == "" {
		compute = "the client library's default (compute.googleapis.com)"
	}
	if secrets == "" {
		secrets = "the client library's default (secretmanager.googleapis.com)"
	}
	line := fmt.Sprintf("live GCP test: compute endpoint %s, secretmanager endpoint %s, project %s", compute, secrets, env("PROJECT"))
	fmt.Fprintln(os.Stderr, line)
	t.Log(line)
	newLive := func(t *testing.T, gatewayID string) providers.Provider {
		p, err := New(context.Background(), Config{Project: env("PROJECT"), Zones: strings.Split(env("ZONES"), ","),
			GatewayCIDRs: strings.Split(env("GATEWAY_CIDRS"), ","), ServiceAccount: env("SERVICE_ACCOUNT"), GatewayID: gatewayID,
			Endpoint: env("ENDPOINT"), SecretManagerEndpoint: env("SECRETMANAGER_ENDPOINT")})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var h contract.Harness
	h = contract.Harness{
		New: func(t *testing.T) providers.Provider { return newLive(t, gatewayID) },
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return providers.ClusterSpec{Name: cluster, Owner: owner, GatewayID: gatewayID, TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
				DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30,
				Scheduler: providers.Machine{InstanceType: "e2-standard-2", VCPUs: 2, MemoryGiB: 8},
				Worker:    providers.Machine{InstanceType: "e2-standard-2", VCPUs: 2, MemoryGiB: 8}}
		},
		Capabilities: capabilities(),
		Region:       regionOf(strings.Split(env("ZONES"), ",")[0]),
		Timeout:      15 * time.Minute,
		Poll:         5 * time.Second,
	}
	// Another gateway in the same project.
	h.Isolation = &contract.Isolation{Neighbour: func(t *testing.T, _ providers.Provider) contract.Neighbour {
		return contract.Renamed(t, gatewayID+"-b", newLive, h.Spec)
	}}
	contract.Run(t, h)
}
