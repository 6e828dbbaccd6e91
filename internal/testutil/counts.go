package testutil

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/gatewayhq/gateway/internal/pki"
)

// CountsMember is a member's dashboard over TLS with cert, answering
// counts.json for cluster as a Dask scheduler does.
func CountsMember(t testing.TB, cluster string, cert pki.Pair) string {
	t.Helper()
	return ServeTLS(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
