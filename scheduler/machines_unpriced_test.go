package scheduler_test

import (
	"context"
	"testing"

	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
)

// unpricedProvider lists two priced types and, like EC2's listing of a
// type the table does not know, two unpriced ones that would be the
// cheapest fit if "unpriced" meant "free".
type unpricedProvider struct{ *fakeProvider }

func (unpricedProvider) InstanceTypes(context.Context) ([]catalog.InstanceType, error) {
	return []catalog.InstanceType{
		{Name: "new1.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
		{Name: "m6i.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, PriceHour: 0.192},
		{Name: "aaa.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
		{Name: "m6i.large", Cloud: catalog.CloudAWS, VCPUs: 2, MemoryGiB: 8, PriceHour: 0.096},
	}, nil
}

// TestUnpricedTypesLast: the listing shows unpriced types after every
// priced one and keeps them unpriced (not $0), and the cheapest fit is a
// priced type.
func TestUnpricedTypesLast(t *testing.T) {
	h := newQuotaHarness(t, `{}`, quota.Refuse)
	p := &unpricedProvider{h.fp}
	h.core = scheduler.New(h.cfg, h.st, p, h.rt, h.log)

	types, err := h.core.InstanceTypes(h.ctx, who("alice"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range types {
		names = append(names, it.Name)
	}
	want := []string{"m6i.large", "m6i.xlarge", "aaa.xlarge", "new1.xlarge"}
	if len(names) != len(want) {
		t.Fatalf("listed %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("listed %q, want %q (unpriced last)", names, want)
		}
	}
	for _, it := range types[2:] {
		if !it.Unpriced {
			t.Errorf("%s listed with a price of %v, want unpriced", it.Name, it.PriceHour)
		}
	}

	cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"worker_cpus": 4, "worker_memory": 16}))
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitLaunched(cl.Name)
	p.mu.Lock()
	spec := p.lastSpec[cl.Name]
	p.mu.Unlock()
	if spec.Worker.InstanceType != "m6i.xlarge" {
		t.Errorf("worker on %s, want the priced m6i.xlarge over unpriced types", spec.Worker.InstanceType)
	}
}

// amdProvider lists EC2's AMD GPU type as the EC2 backend does: no GPUs
// counted (only NVIDIA's are), unpriced.
type amdProvider struct{ *fakeProvider }

func (amdProvider) InstanceTypes(context.Context) ([]catalog.InstanceType, error) {
	return []catalog.InstanceType{
		{Name: "g4ad.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, Unpriced: true},
		{Name: "m6i.xlarge", Cloud: catalog.CloudAWS, VCPUs: 4, MemoryGiB: 16, PriceHour: 0.192},
	}, nil
}

// TestDeclaredGPUs: a type the operator declares GPUs for
// (pricing.instance_types gpus/gpu_type) is listed with them and is not a
// CPU machine any more; without the declaration it has none.
func TestDeclaredGPUs(t *testing.T) {
	for _, declared := range []bool{false, true} {
		h := newQuotaHarness(t, `{}`, quota.Refuse)
		cfg := h.cfg
		if declared {
			cfg.InstanceGPUs = map[string]catalog.GPUs{"g4ad.xlarge": {Count: 1, Type: "radeon-pro-v520"}}
		}
		h.core = scheduler.New(cfg, h.st, &amdProvider{h.fp}, h.rt, h.log)
		types, err := h.core.InstanceTypes(h.ctx, who("alice"))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name != "g4ad.xlarge" {
				continue
			}
			if want := map[bool]int{false: 0, true: 1}[declared]; it.GPUs != want {
				t.Errorf("declared %v: g4ad.xlarge listed with %d GPUs (%q), want %d", declared, it.GPUs, it.GPUType, want)
			}
			if declared && it.GPUType != "radeon-pro-v520" {
				t.Errorf("declared GPU type %q, want radeon-pro-v520", it.GPUType)
			}
		}
	}
}
