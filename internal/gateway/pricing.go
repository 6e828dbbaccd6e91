package gateway

import (
	"fmt"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
)

// pricing builds the usage ledger's price estimate: an instance type's
// price from the built-in table (with the operator's overrides), else a
// price per vCPU-hour and GiB-hour for members without one.
func pricing(cfg *config.Config) (func(quota.Size) float64, error) {
	overrides := map[string]float64{}
	for i, e := range cfg.Pricing.InstanceTypes {
		name, _ := e["name"].(string)
		p, ok := toFloat(e["price_hour"])
		if name == "" || !ok || len(e) != 2 {
			return nil, fmt.Errorf("gateway: pricing.instance_types entry %d must be {name: <instance type>, price_hour: <USD per hour>}", i+1)
		}
		overrides[name] = p
	}
	cat, err := catalog.New(catalog.Builtin(), overrides)
	if err != nil {
		return nil, fmt.Errorf("gateway: pricing.instance_types: %w", err)
	}
	vcpu, mem := cfg.Pricing.VCPUHour, cfg.Pricing.MemoryGiBHour
	return func(s quota.Size) float64 {
		if t, ok := cat.Lookup(s.InstanceType); ok && s.InstanceType != "" {
			return t.PriceHour
		}
		return s.VCPUs*vcpu + s.MemoryGiB*mem
	}, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}
