package apitype

import "time"

// BenchLeaseRequest is the body of POST /api/v1/bench/runs/{id}/lease:
// the run's client is alive and holds these clusters (added to those it
// named before). A run whose client stops renewing is failed by the
// gateway, which stops its clusters.
type BenchLeaseRequest struct {
	Clusters []string `json:"clusters,omitempty"`
}

// BenchLeaseJSON is the answer: until when the run is held, and the
// lease's length (the client renews well within it).
type BenchLeaseJSON struct {
	Expires      time.Time `json:"expires"`
	LeaseSeconds float64   `json:"lease_seconds"`
}
