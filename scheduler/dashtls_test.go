package scheduler

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/store"
)

// countsMember is a member's dashboard over TLS with cert, answering
// counts.json for cluster as a Dask scheduler does.
func countsMember(t *testing.T, cluster string, cert pki.Pair) string {
	t.Helper()
	return testutil.ServeTLS(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/clusters/"+cluster+"/json/counts.json" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"workers": 3, "desired_workers": 3, "processing": 0, "waiting": 0, "clients": 1}`)
	})).URL
}

// Network isolation (issue 14): the health poll reads counts.json only
// from a member presenting the cluster's own certificate.
func TestHealthPollVerifiesClusterCert(t *testing.T) {
	certA, certB := testutil.ClusterCert(t, "ca"), testutil.ClusterCert(t, "cb")
	urlA := countsMember(t, "ca", certA)
	urlB := countsMember(t, "cb", certA) // cb's address, but a member with ca's certificate
	c := &Core{dash: newCountsPool(), now: time.Now, active: map[string]time.Time{}}
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
	if n := c.dash.Len(); n != 0 {
		t.Fatalf("%d pools left after the clusters were forgotten", n)
	}
}
