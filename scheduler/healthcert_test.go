package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/scheduler/health"
	"github.com/gatewayhq/gateway/store"
)

// Network isolation (issue 14): the health poll reads counts.json only
// from a member presenting the cluster's own certificate.
func TestHealthPollVerifiesClusterCert(t *testing.T) {
	certA, certB := testutil.ClusterCert(t, "ca"), testutil.ClusterCert(t, "cb")
	urlA := testutil.CountsMember(t, "ca", certA)
	urlB := testutil.CountsMember(t, "cb", certA) // cb's address, but a member with ca's certificate
	hw := health.New(health.Config{Timeout: time.Second, Beat: time.Second})
	c := &Core{health: hw, now: time.Now, clusters: newClusterTable()}
	if !strings.HasPrefix(urlA, "https://") {
		t.Fatalf("member URL %s", urlA)
	}

	counts, err := c.connectedWorkers(t.Context(), &store.Cluster{Name: "ca", DashboardAddress: urlA, TLSCert: certA.CertPEM})
	if err != nil || counts.Workers != 3 {
		t.Fatalf("own member: %+v, %v; want 3 workers", counts, err)
	}
	for name, cl := range map[string]*store.Cluster{
		"another cluster's certificate": {Name: "cb", DashboardAddress: urlB, TLSCert: certB.CertPEM},
		"no certificate":                {Name: "cn", DashboardAddress: urlA},
	} {
		if _, err := c.connectedWorkers(t.Context(), cl); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: err %v, want a certificate error", name, err)
		}
	}
	// A stopped cluster's pool goes.
	c.forget("ca")
	c.forget("cb")
	c.forget("cn")
	if n := hw.Polling(); n != 0 {
		t.Fatalf("%d pools left after the clusters were forgotten", n)
	}
}
