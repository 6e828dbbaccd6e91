package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
)

// maxAlternatives bounds the fallback types recorded per member: enough
// to ride out one type's shortage, few enough to try quickly.
const maxAlternatives = 3

// machines chooses what the scheduler and the workers run on. Backends
// with instance types get the cheapest allowed type that fits (or the one
// named); others are sized by the options themselves.
func (c *Core) machines(ctx context.Context, o Options, eff quota.Effective) (sched, worker providers.Machine, err error) {
	worker = providers.Machine{VCPUs: float64(max(o.WorkerCPUs, o.WorkerThreads)), MemoryGiB: o.WorkerMemory, GPUs: o.WorkerGPUs, GPUType: o.GPUType}
	it, ok := c.provider.(providers.InstanceTypes)
	if !ok {
		return sched, worker, nil
	}
	types, err := it.InstanceTypes(ctx)
	if err != nil {
		return sched, worker, fmt.Errorf("scheduler: instance types of %s: %w", c.provider.Name(), err)
	}
	types = catalog.ApplyGPUs(types, c.cfg.InstanceGPUs)
	// A type without a known price (new in the cloud's listing, absent
	// from the table) is chosen only when no priced type fits: the
	// catalog sorts it last.
	cat, err := catalog.New(types, nil)
	if err != nil {
		return sched, worker, fmt.Errorf("scheduler: instance types of %s: %w", c.provider.Name(), err)
	}
	allowed := eff.Limits.AllowedInstanceTypes
	if slices.Contains(allowed, "*") {
		allowed = nil
	}
	req := catalog.Requirements{MinVCPUs: max(o.WorkerCPUs, o.WorkerThreads), MinMemoryGiB: o.WorkerMemory,
		GPUs: o.WorkerGPUs, GPUType: o.GPUType, Allowed: allowed}
	if worker, err = c.choose(cat, "worker", o.WorkerVMType, req); err != nil {
		return sched, worker, err
	}
	// A named type the user may not use is a quota refusal, said before
	// anything else is chosen around it.
	if err := eff.CheckShape(quota.Shape{Worker: sizeOf(worker)}, 0, -1); err != nil {
		return sched, worker, err
	}
	sreq := catalog.Requirements{MinVCPUs: 2, MinMemoryGiB: 4, Allowed: allowed}
	if worker.GPUs > 0 && c.cfg.SchedulerGPU {
		// Dask deserialises graphs on the scheduler (since 2023.4): GPU
		// objects need a GPU there too; a small one of the same model.
		sreq.GPUs, sreq.GPUType = 1, worker.GPUType
	}
	sched, err = c.choose(cat, "scheduler", o.SchedulerVMType, sreq)
	return sched, worker, err
}

// choose returns the named type, or the cheapest that fits req with the
// next fitting types of the same vCPUs and GPUs as alternatives; role is
// "worker" or "scheduler".
func (c *Core) choose(cat *catalog.Catalog, role, name string, req catalog.Requirements) (providers.Machine, error) {
	if name != "" {
		t, ok := cat.Lookup(name)
		if !ok {
			return providers.Machine{}, fmt.Errorf("%w: %s_vm_type %q is not offered by the %s provider (gateway instance-types lists what is)", ErrInvalid, role, name, c.provider.Name())
		}
		return machineOf(t), nil
	}
	fits, err := cat.Fitting(req, 0)
	if err == nil && len(fits) == 0 {
		_, err = cat.Cheapest(req) // says what was asked and what came closest
	}
	if err != nil {
		if errors.Is(err, catalog.ErrNoFit) || errors.Is(err, catalog.ErrInvalidRequirements) {
			return providers.Machine{}, fmt.Errorf("%w: no %s instance type fits the %s (name one with %s_vm_type, or ask for less): %v", ErrInvalid, c.provider.Name(), role, role, err)
		}
		return providers.Machine{}, err
	}
	m := machineOf(fits[0])
	for _, t := range fits[1:] {
		if len(m.Alternatives) == maxAlternatives {
			break
		}
		if float64(t.VCPUs) == m.VCPUs && t.GPUs == m.GPUs && t.GPUType == m.GPUType {
			m.Alternatives = append(m.Alternatives, t.Name)
		}
	}
	return m, nil
}

func machineOf(t catalog.InstanceType) providers.Machine {
	return providers.Machine{InstanceType: t.Name, VCPUs: float64(t.VCPUs), MemoryGiB: t.MemoryGiB, GPUs: t.GPUs, GPUType: t.GPUType}
}

func sizeOf(m providers.Machine) quota.Size {
	return quota.Size{VCPUs: m.VCPUs, MemoryGiB: m.MemoryGiB, GPUs: m.GPUs, GPUType: m.GPUType, InstanceType: m.InstanceType, Alternatives: m.Alternatives}
}

func machineFrom(s quota.Size) providers.Machine {
	return providers.Machine{InstanceType: s.InstanceType, VCPUs: s.VCPUs, MemoryGiB: s.MemoryGiB, GPUs: s.GPUs, GPUType: s.GPUType, Alternatives: s.Alternatives}
}

// InstanceTypes lists the types the backend offers that the user may use,
// cheapest first.
func (c *Core) InstanceTypes(ctx context.Context, who Who) ([]catalog.InstanceType, error) {
	it, ok := c.provider.(providers.InstanceTypes)
	if !ok {
		return nil, fmt.Errorf("%w: the %s provider has no instance types: clusters are sized by worker_threads and worker_memory", ErrInvalid, c.provider.Name())
	}
	eff, err := c.effective(ctx, who)
	if err != nil {
		return nil, err
	}
	types, err := it.InstanceTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduler: instance types of %s: %w", c.provider.Name(), err)
	}
	types = catalog.ApplyGPUs(types, c.cfg.InstanceGPUs)
	// Priced before sorting, so that the operator's prices order the list
	// and unpriced types come last.
	cat, err := c.priced(types)
	if err != nil {
		return nil, fmt.Errorf("scheduler: instance types of %s: %w", c.provider.Name(), err)
	}
	var out []catalog.InstanceType
	for _, t := range cat.Types("") {
		if eff.CheckShape(quota.Shape{Worker: quota.Size{InstanceType: t.Name}}, 0, -1) == nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// priced is the backend's listing with the gateway's prices (the table
// with the operator's overrides) applied to the types it prices, where
// they give one above zero: for a type the table does not know, Price
// falls back to the per-vCPU and per-GiB rates, 0 by default, which must
// neither erase a backend's own estimate (Compute Engine's) nor make an
// unpriced type look free.
func (c *Core) priced(types []catalog.InstanceType) (*catalog.Catalog, error) {
	if c.cfg.Price != nil {
		types = slices.Clone(types)
		for i, t := range types {
			p := c.cfg.Price(quota.Size{InstanceType: t.Name, VCPUs: float64(t.VCPUs), MemoryGiB: t.MemoryGiB, GPUs: t.GPUs, GPUType: t.GPUType})
			if !t.Unpriced && p > 0 {
				types[i].PriceHour = p
			}
		}
	}
	return catalog.New(types, nil)
}
