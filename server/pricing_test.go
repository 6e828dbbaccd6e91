package server

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
)

// TestPricingEntries: pricing.instance_types entries set prices and
// declare GPUs; each bad entry is refused with what to fix.
func TestPricingEntries(t *testing.T) {
	cases := []struct {
		name    string
		entries []map[string]any
		gpus    map[string]catalog.GPUs
		price   map[string]float64
		errHas  string
	}{
		{name: "price", entries: []map[string]any{{"name": "m5.large", "price_hour": 0.05}}, price: map[string]float64{"m5.large": 0.05}},
		{name: "AMD GPUs declared", entries: []map[string]any{{"name": "g4ad.xlarge", "gpus": 1, "gpu_type": "radeon-pro-v520"}},
			gpus: map[string]catalog.GPUs{"g4ad.xlarge": {Count: 1, Type: "radeon-pro-v520"}}},
		{name: "price and GPUs", entries: []map[string]any{{"name": "g4dn.xlarge", "price_hour": 0.4, "gpus": 0}},
			gpus: map[string]catalog.GPUs{"g4dn.xlarge": {}}, price: map[string]float64{"g4dn.xlarge": 0.4}},
		{name: "neither", entries: []map[string]any{{"name": "m5.large"}}, errHas: "entry 1 must be {name: <instance type>, price_hour:"},
		{name: "unknown key", entries: []map[string]any{{"name": "m5.large", "price": 1.0}}, errHas: `unknown key "price"`},
		{name: "gpu_type alone", entries: []map[string]any{{"name": "dl1.24xlarge", "price_hour": 13.1, "gpu_type": "gaudi"}}, errHas: "gpu_type needs gpus"},
		{name: "GPUs without a type", entries: []map[string]any{{"name": "dl1.24xlarge", "gpus": 8}}, errHas: "gpu_type"},
		{name: "bad GPU type", entries: []map[string]any{{"name": "dl1.24xlarge", "gpus": 8, "gpu_type": "Gaudi HL-205"}}, errHas: "not a short lower-case name"},
		{name: "fractional GPUs", entries: []map[string]any{{"name": "x.large", "gpus": 0.5, "gpu_type": "t4"}}, errHas: "gpus must be a whole number"},
		{name: "negative GPUs", entries: []map[string]any{{"name": "x.large", "gpus": -1}}, errHas: "gpus is -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.Config
			cfg.Pricing.InstanceTypes = tc.entries
			price, gpus, err := pricing(&cfg)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("pricing = %v; want an error saying %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != len(tc.gpus) {
				t.Errorf("GPUs %v, want %v", gpus, tc.gpus)
			}
			for n, g := range tc.gpus {
				if gpus[n] != g {
					t.Errorf("GPUs of %s = %+v, want %+v", n, gpus[n], g)
				}
			}
			for n, p := range tc.price {
				if got := price(quota.Size{InstanceType: n}); got != p {
					t.Errorf("price of %s = %v, want %v", n, got, p)
				}
			}
		})
	}
}
