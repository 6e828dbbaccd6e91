package gce

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/providers/gce/gcerules"
)

// typeCache holds the last listing of machine types.
type typeCache struct {
	types []catalog.InstanceType
	until time.Time
}

// failedListingTTL is how long the built-in fallback is served after a
// failed listing before the API is asked again.
const failedListingTTL = time.Minute

// InstanceTypes implements providers.InstanceTypes: the machine types of
// every configured zone (machineTypes.list), with GPU counts and models
// from their accelerators (named with acceleratorTypes.list), plus N1
// machines with the GPUs some zone attaches to them (named like
// "n1-standard-8+2xt4", see n1Combinations), priced from
// the built-in catalog (estimated from the same series or GPU when the
// catalog lacks the type; types that cannot be priced are left out, as a
// zero price would make them everyone's cheapest choice). Shared-core and
// deprecated types are left out, and so are types sold only as Spot
// (gcerules.SpotOnly). The answer is cached for
// InstanceTypesTTL; when the listing fails the built-in Compute Engine
// types are returned instead.
func (p *Provider) InstanceTypes(ctx context.Context) ([]catalog.InstanceType, error) {
	p.mu.Lock()
	if time.Now().Before(p.types.until) {
		out := slices.Clone(p.types.types)
		p.mu.Unlock()
		return out, nil
	}
	p.mu.Unlock()
	types, err := p.listTypes(ctx)
	ttl := p.cfg.InstanceTypesTTL
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gce provider: instance types: %w", ctx.Err())
		}
		p.log.Warn("cannot list machine types; using the built-in table", "zones", p.cfg.Zones, "err", err)
		types, ttl = p.builtinTypes(), failedListingTTL
	}
	p.mu.Lock()
	p.types = typeCache{types: types, until: time.Now().Add(ttl)}
	p.mu.Unlock()
	return slices.Clone(types), nil
}

func (p *Provider) listTypes(ctx context.Context) ([]catalog.InstanceType, error) {
	// Every configured zone's types: a member may start in any of them,
	// and not every zone offers every type or GPU.
	var machines []*computepb.MachineType
	seen := map[string]bool{}
	for _, zone := range p.cfg.Zones {
		var listed []*computepb.MachineType
		err := p.call(ctx, "list machine types", func(ctx context.Context) error {
			listed = listed[:0]
			it := p.machineTypes.List(ctx, &computepb.ListMachineTypesRequest{Project: p.cfg.Project, Zone: zone})
			for m, err := range it.All() {
				if err != nil {
					return err
				}
				listed = append(listed, m)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list machine types in %s: %w", zone, err)
		}
		for _, m := range listed {
			if !seen[m.GetName()] {
				seen[m.GetName()] = true
				machines = append(machines, m)
			}
		}
	}
	// The zones' accelerator types say which GPUs attach to N1 machines
	// (in at least one zone: launch moves on from a zone without them), and
	// name models the short-name table does not know yet ("NVIDIA B200").
	// Without them the machine types still serve, with no N1 GPU
	// combinations.
	descriptions := map[string]string{}
	maxCards := map[string]int{}
	for _, zone := range p.cfg.Zones {
		err := p.call(ctx, "list accelerator types", func(ctx context.Context) error {
			it := p.accelTypes.List(ctx, &computepb.ListAcceleratorTypesRequest{Project: p.cfg.Project, Zone: zone})
			for a, err := range it.All() {
				if err != nil {
					return err
				}
				descriptions[a.GetName()] = a.GetDescription()
				maxCards[a.GetName()] = max(maxCards[a.GetName()], int(a.GetMaximumCardsPerInstance()))
			}
			return nil
		})
		if err != nil {
			p.log.Warn("cannot list accelerator types; GPU models are named from the built-in table only, and N1 machines are offered without GPUs", "zone", zone, "err", err)
			clear(maxCards)
			break
		}
	}
	known := p.catalog.Types(catalog.CloudGCE)
	var out []catalog.InstanceType
	var unpriced []string
	for _, m := range machines {
		if m.GetIsSharedCpu() || (m.GetDeprecated().GetState() != "" && m.GetDeprecated().GetState() != "ACTIVE") {
			continue
		}
		if gcerules.SpotOnly(m.GetName()) {
			// Not sold on demand: a price here would offer it as such.
			continue
		}
		t := catalog.InstanceType{
			Name: m.GetName(), Cloud: catalog.CloudGCE, VCPUs: int(m.GetGuestCpus()),
			MemoryGiB: math.Round(float64(m.GetMemoryMb())/1024*100) / 100,
		}
		if accels := m.GetAccelerators(); len(accels) > 0 {
			// Only NVIDIA's (nvidia-*) are GPUs the CUDA images can use;
			// a machine type built around another accelerator (TPU) is
			// not offered rather than offered as a GPU or a CPU machine.
			if !strings.HasPrefix(accels[0].GetGuestAcceleratorType(), "nvidia-") {
				continue
			}
			t.GPUs = int(accels[0].GetGuestAcceleratorCount())
			t.GPUType = gpuShortName(accels[0].GetGuestAcceleratorType(), descriptions)
		}
		if t.VCPUs <= 0 || t.MemoryGiB <= 0 || (t.GPUs > 0 && t.GPUType == "") {
			continue
		}
		price, ok := estimatePrice(t, known)
		if !ok {
			unpriced = append(unpriced, t.Name)
			continue
		}
		t.PriceHour = price
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no usable machine types listed in %s", strings.Join(p.cfg.Zones, ", "))
	}
	out = append(out, n1Combinations(out, maxCards)...)
	if len(unpriced) > 0 {
		p.log.Debug("left out machine types without a known or estimated price", "types", unpriced)
	}
	// The catalog validates what it is given; one bad entry would make it
	// refuse them all.
	if _, err := catalog.New(out, nil); err != nil {
		return nil, fmt.Errorf("listed machine types: %w", err)
	}
	slices.SortFunc(out, func(a, b catalog.InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// builtinTypes is the fallback: the catalog's Compute Engine types, with
// the N1 combinations of the GPUs it names for N1 (T4, V100).
func (p *Provider) builtinTypes() []catalog.InstanceType {
	types := slices.DeleteFunc(p.catalog.Types(catalog.CloudGCE), func(t catalog.InstanceType) bool { return gcerules.SpotOnly(t.Name) })
	return append(types, n1Combinations(types, map[string]int{"nvidia-tesla-t4": 4, "nvidia-tesla-v100": 8})...)
}

// n1GPU is a GPU model Compute Engine attaches to N1 machines; the counts
// and ceilings are gcerules.N1GPUs.
type n1GPU struct {
	accelerator string
	// price is the approximate on-demand USD per GPU-hour in us-central1,
	// an estimate like the catalog's prices.
	price float64
}

// n1GPUs are the attachable GPUs, by the catalog's short names.
var n1GPUs = map[string]n1GPU{
	catalog.GPUT4:   {"nvidia-tesla-t4", 0.35},
	catalog.GPUV100: {"nvidia-tesla-v100", 2.48},
	"p100":          {"nvidia-tesla-p100", 1.46},
	"p4":            {"nvidia-tesla-p4", 0.60},
}

// comboName names an N1 machine with attached GPUs for the catalog, which
// lists types by name: "n1-standard-8+2xt4". No machine type has a "+".
func comboName(machine string, gpus int, gpu string) string {
	return fmt.Sprintf("%s+%dx%s", machine, gpus, gpu)
}

// parseCombo splits a combination name; ok is false for a plain type.
func parseCombo(name string) (machine string, gpus int, gpu string, ok bool) {
	machine, rest, found := strings.Cut(name, "+")
	if !found {
		return name, 0, "", false
	}
	n, g, found := strings.Cut(rest, "x")
	count, err := strconv.Atoi(n)
	if !found || err != nil || count <= 0 || g == "" {
		return name, 0, "", false
	}
	return machine, count, g, true
}

// n1Combinations offers each N1 type listed with each GPU model the zone
// attaches (maxCards: accelerator type -> most per instance) in the counts
// Compute Engine allows for its vCPUs and memory (gcerules), priced as the machine plus the GPUs.
// They are how the gateway's cheapest-fit choice reaches T4 and V100
// GPUs, which no machine type includes.
func n1Combinations(types []catalog.InstanceType, maxCards map[string]int) []catalog.InstanceType {
	var out []catalog.InstanceType
	for _, t := range types {
		switch typeClass(t.Name) {
		case "n1-standard", "n1-highmem", "n1-highcpu":
		default:
			continue
		}
		for _, short := range slices.Sorted(maps.Keys(n1GPUs)) {
			g := n1GPUs[short]
			most, ok := maxCards[g.accelerator]
			if !ok {
				continue
			}
			for _, n := range slices.Sorted(maps.Keys(gcerules.N1GPUs[g.accelerator])) {
				if n > most || gcerules.CheckN1GPUs(t.Name, g.accelerator, n, t.VCPUs, t.MemoryGiB) != nil {
					continue
				}
				out = append(out, catalog.InstanceType{
					Name: comboName(t.Name, n, short), Cloud: catalog.CloudGCE, VCPUs: t.VCPUs, MemoryGiB: t.MemoryGiB,
					GPUs: n, GPUType: short, PriceHour: math.Round((t.PriceHour+float64(n)*g.price)*1e6) / 1e6,
				})
			}
		}
	}
	return out
}

// gpuNames maps Compute Engine accelerator types to the catalog's short
// GPU names.
var gpuNames = map[string]string{
	"nvidia-tesla-t4":       catalog.GPUT4,
	"nvidia-tesla-v100":     catalog.GPUV100,
	"nvidia-tesla-p100":     "p100",
	"nvidia-tesla-p4":       "p4",
	"nvidia-l4":             catalog.GPUL4,
	"nvidia-tesla-a100":     catalog.GPUA100,
	"nvidia-a100-80gb":      catalog.GPUA10080G,
	"nvidia-h100-80gb":      catalog.GPUH100,
	"nvidia-h100-mega-80gb": catalog.GPUH100,
}

// gpuShortName names an accelerator type the catalog's way: from the table,
// else from its description ("NVIDIA B200" -> "b200"), else from its name.
func gpuShortName(accel string, descriptions map[string]string) string {
	if s, ok := gpuNames[accel]; ok {
		return s
	}
	s := strings.ToLower(descriptions[accel])
	s = strings.TrimPrefix(s, "nvidia ")
	if s == "" {
		s = strings.TrimPrefix(strings.TrimPrefix(accel, "nvidia-tesla-"), "nvidia-")
	}
	s = strings.Join(strings.Fields(s), "-")
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return ""
		}
	}
	return s
}

// estimatePrice prices a listed type: the catalog's price when it has the
// type; for GPU types the per-GPU price of the cheapest known type with the
// same GPU model; for others the per-vCPU price of a known type of the
// same series and class ("n2-standard"). Compute Engine prices are linear
// within those, so the estimate is close; it is only used to rank types
// and estimate usage.
func estimatePrice(t catalog.InstanceType, known []catalog.InstanceType) (float64, bool) {
	for _, k := range known {
		if k.Name == t.Name {
			return k.PriceHour, true
		}
	}
	best := math.Inf(1)
	if t.GPUs > 0 {
		for _, k := range known {
			if k.GPUs > 0 && k.GPUType == t.GPUType {
				best = min(best, k.PriceHour/float64(k.GPUs)*float64(t.GPUs))
			}
		}
	} else {
		class := typeClass(t.Name)
		for _, k := range known {
			if k.GPUs == 0 && typeClass(k.Name) == class {
				best = min(best, k.PriceHour/float64(k.VCPUs)*float64(t.VCPUs))
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0, false
	}
	return math.Round(best*1e6) / 1e6, true
}

// typeClass is a machine type without its size: "n2-standard-8" ->
// "n2-standard".
func typeClass(name string) string {
	if i := strings.LastIndex(name, "-"); i > 0 {
		return name[:i]
	}
	return name
}
