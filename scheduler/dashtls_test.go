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
		if r.URL.Path == "/clusters/"+cluster+"/gateway-health/watch" {
			w.Header().Set("Content-Type", "application/x-ndjson")
			fmt.Fprintln(w, `{"workers": 3, "desired_workers": 3, "processing": 1, "waiting": 0, "clients": 1}`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
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
	c := &Core{dash: newCountsPool(), health: newWatchPool(time.Second, nil, nil), now: time.Now, active: map[string]time.Time{}}
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

// The health watch, like the poll, streams only from a member presenting
// the cluster's own certificate; one that does not is left to the poll
// (which refuses it too).
func TestHealthWatchVerifiesClusterCert(t *testing.T) {
	certA, certB := testutil.ClusterCert(t, "ca"), testutil.ClusterCert(t, "cb")
	urlA := countsMember(t, "ca", certA)
	urlB := countsMember(t, "cb", certA) // cb's address, but a member with ca's certificate
	got := make(chan string, 10)
	p := newWatchPool(time.Second, func(cluster string, c *schedulerCounts) {
		if c != nil {
			got <- fmt.Sprintf("%s %d busy=%v", cluster, c.Workers, c.busy())
		}
	}, func(cluster string, err error) { got <- cluster + " ended: " + err.Error() })
	p.run(t.Context())
	t.Cleanup(p.wg.Wait)
	a := p.ensure(&store.Cluster{Name: "ca", DashboardAddress: urlA, TLSCert: certA.CertPEM})
	select {
	case line := <-got:
		if line != "ca 3 busy=true" {
			t.Fatalf("own member: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no counts from the cluster's own member")
	}
	if a.State() != watchLive || a.workers.Load() != 3 || !a.busy.Load() {
		t.Errorf("own member: state %d, workers %d, busy %v", a.State(), a.workers.Load(), a.busy.Load())
	}
	// A server that answers 200 to any path, with a body that ends.
	anyPath := testutil.ServeTLS(t, certA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"workers": 3, "desired_workers": 3, "processing": 0, "waiting": 0, "clients": 1}`)
	}))
	for name, cl := range map[string]*store.Cluster{
		"another cluster's certificate": {Name: "cb", DashboardAddress: urlB, TLSCert: certB.CertPEM},
		"no certificate":                {Name: "cn", DashboardAddress: urlA},
		"not a stream":                  {Name: "ca2", DashboardAddress: anyPath.URL, TLSCert: certA.CertPEM},
	} {
		w := p.ensure(cl)
		deadline := time.Now().Add(10 * time.Second)
		for w.State() == watchDialing && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if w.State() != watchUnsupported {
			t.Errorf("%s: state %d, want it left to the poll", name, w.State())
		}
	}
	select {
	case line := <-got:
		t.Errorf("a watch that never streamed told: %q", line)
	default:
	}
	p.drop("ca")
	if a.State() != watchLive {
		t.Errorf("a dropped watch changed state to %d", a.State())
	}
}
