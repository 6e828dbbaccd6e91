package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gatewayhq/gateway/quota"
)

// clusterPricer is the part of the core that prices a cluster without
// creating it (*scheduler.Core has it).
type clusterPricer interface {
	Price(ctx context.Context, who quota.Who, raw map[string]json.RawMessage) (quota.Shape, int, error)
}

// BenchPriceJSON is what a cluster with the given options would cost:
// the machines the gateway would choose for the caller and the usage
// ledger's price of each. PriceHour is zero when the gateway has no
// price for them (pricing.* unset).
type BenchPriceJSON struct {
	Provider  string     `json:"provider"`
	Region    string     `json:"region,omitempty"`
	Workers   int        `json:"workers"`
	Worker    quota.Size `json:"worker"`
	Scheduler quota.Size `json:"scheduler"`
	// PriceHour is the whole cluster's: the scheduler and every worker.
	PriceHour float64 `json:"price_hour"`
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
	var req createRequest
	if !decode(w, r, &req) {
		return
	}
	shape, workers, err := p.Price(r.Context(), whoOf(r), req.ClusterOptions)
	if err != nil {
		s.coreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, BenchPriceJSON{Provider: shape.Provider, Region: shape.Region, Workers: workers,
		Worker: shape.Worker, Scheduler: shape.Scheduler,
		PriceHour: shape.Scheduler.PriceHour + float64(workers)*shape.Worker.PriceHour})
}
