package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/quota"
)

// clusterPricer is the part of the core that prices a cluster without
// creating it (*scheduler.Core has it).
type clusterPricer interface {
	Price(ctx context.Context, who quota.Who, raw map[string]json.RawMessage) (quota.Shape, int, error)
}

// benchPrice answers POST /api/v1/bench/price {"cluster_options": {...}}:
// the options are checked as new-cluster checks them (a bad option is
// 422, a type the caller may not use 403), and nothing is created.
func (s *Server) benchPrice(w http.ResponseWriter, r *http.Request) {
	p, ok := s.core.(clusterPricer)
	if !ok {
		WriteError(w, http.StatusNotFound, "not_found", "this gateway does not price clusters")
		return
	}
	var req apitype.CreateClusterRequest
	if !decode(w, r, &req) {
		return
	}
	shape, workers, err := p.Price(r.Context(), whoOf(r), req.ClusterOptions)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.BenchPriceJSON{Provider: shape.Provider, Region: shape.Region, Workers: workers,
		Worker: shape.Worker, Scheduler: shape.Scheduler,
		PriceHour: shape.PriceHour(workers)})
}
