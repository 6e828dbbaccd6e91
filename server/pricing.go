package server

import (
	"fmt"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
)

// pricing builds the usage ledger's price estimate: an instance type's
// price from the built-in table (with the operator's overrides), else a
// price per vCPU-hour and GiB-hour for members without one. It also
// returns the GPUs that entries declare for their types (gpus, gpu_type),
// over what the backend's listing counts.
func pricing(cfg *config.Config) (func(quota.Size) float64, map[string]catalog.GPUs, error) {
	const shape = "{name: <instance type>, price_hour: <USD per hour>, gpus: <count>, gpu_type: <short name>} with name and price_hour or gpus"
	overrides := map[string]float64{}
	gpus := map[string]catalog.GPUs{}
	for i, e := range cfg.Pricing.InstanceTypes {
		name, _ := e["name"].(string)
		for k := range e {
			switch k {
			case "name", "price_hour", "gpus", "gpu_type":
			default:
				return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d has the unknown key %q; want %s", i+1, k, shape)
			}
		}
		_, hasPrice := e["price_hour"]
		_, hasGPUs := e["gpus"]
		if name == "" || !hasPrice && !hasGPUs {
			return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d must be %s", i+1, shape)
		}
		if hasPrice {
			p, ok := toFloat(e["price_hour"])
			if !ok {
				return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d (%s): price_hour must be a number of USD per hour", i+1, name)
			}
			overrides[name] = p
		}
		if _, ok := e["gpu_type"]; ok && !hasGPUs {
			return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d (%s): gpu_type needs gpus, the number of accelerators", i+1, name)
		}
		if hasGPUs {
			n, ok := toFloat(e["gpus"])
			typ, okType := e["gpu_type"].(string)
			if _, set := e["gpu_type"]; set && !okType {
				return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d (%s): gpu_type must be a string", i+1, name)
			}
			g := catalog.GPUs{Count: int(n), Type: typ}
			if !ok || float64(g.Count) != n {
				return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d (%s): gpus must be a whole number", i+1, name)
			}
			if err := catalog.CheckGPUs(g); err != nil {
				return nil, nil, fmt.Errorf("gateway: pricing.instance_types entry %d (%s): %w", i+1, name, err)
			}
			gpus[name] = g
		}
	}
	cat, err := catalog.New(catalog.Builtin(), overrides)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: pricing.instance_types: %w", err)
	}
	vcpu, mem := cfg.Pricing.VCPUHour, cfg.Pricing.MemoryGiBHour
	return func(s quota.Size) float64 {
		if t, ok := cat.Lookup(s.InstanceType); ok && s.InstanceType != "" {
			return t.PriceHour
		}
		return s.VCPUs*vcpu + s.MemoryGiB*mem
	}, gpus, nil
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
