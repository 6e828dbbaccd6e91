package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

// BenchLeases is what the lease route needs of the store (a *store.DB).
type BenchLeases interface {
	RenewBenchRun(ctx context.Context, id string, until time.Time, clusters []string) error
}

// DefaultBenchRunLease is how long a run is held without news from its
// client (bench.run_lease).
const DefaultBenchRunLease = 3 * time.Minute

// SetBenchLeases turns on POST /api/v1/bench/runs/{id}/lease: a run is
// held for lease after each renewal (0: DefaultBenchRunLease).
func (s *Server) SetBenchLeases(l BenchLeases, lease time.Duration) {
	if lease <= 0 {
		lease = DefaultBenchRunLease
	}
	s.benchLeases, s.benchLease = l, lease
	s.mux.HandleFunc("POST /api/v1/bench/runs/{id}/lease", s.authed(s.benchEnabled(s.renewBenchRun)))
}

func (s *Server) renewBenchRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.visibleRun(w, r, false)
	if !ok {
		return
	}
	var req apitype.BenchLeaseRequest
	if !decodeLimit(w, r, &req, 64<<10, "request body over 64 KiB: name at most 32 clusters") {
		return
	}
	until := time.Now().Add(s.benchLease)
	if err := s.benchLeases.RenewBenchRun(r.Context(), run.ID, until, req.Clusters); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.BenchLeaseJSON{Expires: until.UTC(), LeaseSeconds: s.benchLease.Seconds()})
}
