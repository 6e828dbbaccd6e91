package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
)

// typedProvider is the fake provider with EC2's instance types.
type typedProvider struct{ *fakeProvider }

func (typedProvider) InstanceTypes(context.Context) ([]catalog.InstanceType, error) {
	var out []catalog.InstanceType
	for _, t := range catalog.Builtin() {
		if t.Cloud == catalog.CloudAWS {
			out = append(out, t)
		}
	}
	return out, nil
}

func newTypedHarness(t *testing.T, defaults string) (*harness, *typedProvider) {
	t.Helper()
	h := newQuotaHarness(t, defaults, quota.Refuse)
	tp := &typedProvider{h.fp}
	cfg := h.cfg
	cfg.SchedulerGPU = true
	h.core = scheduler.New(cfg, h.st, tp, h.rt, h.log)
	return h, tp
}

func TestMachineChoice(t *testing.T) {
	cat, err := catalog.New(catalog.Builtin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cheapest := func(r catalog.Requirements) string {
		r.Cloud = catalog.CloudAWS
		c, err := cat.Cheapest(r)
		if err != nil {
			t.Fatal(err)
		}
		return c.Name
	}
	tests := []struct {
		name             string
		quota            string
		opts             map[string]any
		worker, sched    string
		workerGPUs       int
		wantErr          error
		errHas           string
		wantAlternatives bool
	}{
		{name: "by resources", quota: `{}`, opts: map[string]any{"worker_cpus": 4, "worker_memory": 16},
			worker: cheapest(catalog.Requirements{MinVCPUs: 4, MinMemoryGiB: 16}), sched: cheapest(catalog.Requirements{MinVCPUs: 2, MinMemoryGiB: 4}), wantAlternatives: true},
		{name: "a GPU model gives the scheduler one too", quota: `{}`, opts: map[string]any{"gpu_type": "a10g", "worker_memory": 8},
			worker: "g5.xlarge", sched: "g5.xlarge", workerGPUs: 1},
		{name: "by name", quota: `{}`, opts: map[string]any{"worker_vm_type": "m5.2xlarge", "scheduler_vm_type": "m5.large"},
			worker: "m5.2xlarge", sched: "m5.large"},
		{name: "allowed types narrow the choice", quota: `{"allowed_instance_types": ["m6i.*"]}`, opts: map[string]any{"worker_cpus": 4},
			worker: "m6i.xlarge", sched: "m6i.large"},
		{name: "unknown type", quota: `{}`, opts: map[string]any{"worker_vm_type": "z9.huge"}, wantErr: scheduler.ErrInvalid, errHas: `worker_vm_type "z9.huge" is not offered by the fake provider`},
		{name: "named type not allowed", quota: `{"allowed_instance_types": ["m6i.*"]}`, opts: map[string]any{"worker_vm_type": "g5.xlarge"},
			wantErr: scheduler.ErrQuota, errHas: "instance type g5.xlarge is not allowed for you; allowed: m6i.*"},
		{name: "nothing fits", quota: `{}`, opts: map[string]any{"worker_gpus": 16, "gpu_type": "t4"}, wantErr: scheduler.ErrInvalid, errHas: "no fake instance type fits the worker (name one with worker_vm_type, or ask for less)"},
		{name: "GPU quota", quota: `{"max_gpus": 2}`, opts: map[string]any{"workers": 2, "gpu_type": "t4"},
			wantErr: scheduler.ErrQuota, errHas: "would use 3 GPUs of your 2"},
		{name: "GPU type quota", quota: `{"max_gpus_by_type": {"t4": 0}}`, opts: map[string]any{"gpu_type": "t4"},
			wantErr: scheduler.ErrQuota, errHas: "t4 GPUs of your 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tp := newTypedHarness(t, tt.quota)
			cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, tt.opts))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Create = %v; want %v saying %q", err, tt.wantErr, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h.start()
			h.waitLaunched(cl.Name)
			tp.mu.Lock()
			spec := tp.lastSpec[cl.Name]
			tp.mu.Unlock()
			if spec.Worker.InstanceType != tt.worker || spec.Scheduler.InstanceType != tt.sched || spec.Worker.GPUs != tt.workerGPUs {
				t.Errorf("worker %+v, scheduler %+v; want %s (%d GPUs) and %s", spec.Worker, spec.Scheduler, tt.worker, tt.workerGPUs, tt.sched)
			}
			if tt.wantAlternatives && len(spec.Worker.Alternatives) == 0 {
				t.Errorf("no alternatives for %s", spec.Worker.InstanceType)
			}
			for _, a := range spec.Worker.Alternatives {
				alt, _ := cat.Lookup(a)
				if float64(alt.VCPUs) != spec.Worker.VCPUs || alt.GPUs != spec.Worker.GPUs {
					t.Errorf("alternative %s is not the size of %s", a, spec.Worker.InstanceType)
				}
			}
			if got := h.cluster(cl.Name); !strings.Contains(got.Shape, `"instance_type":"`+tt.worker+`"`) {
				t.Errorf("stored shape %s lacks the worker's type", got.Shape)
			}
		})
	}
}

// TestMachineOptionsOnlyWithInstanceTypes: a backend without instance
// types does not offer the machine options.
func TestMachineOptionsOnlyWithInstanceTypes(t *testing.T) {
	h := newHarness(t)
	_, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"worker_gpus": 1}))
	if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "the fake provider has no instance types or GPUs: machines by type and GPU clusters need the ec2 or gce provider") {
		t.Errorf("Create with worker_gpus on a backend without instance types = %v", err)
	}
	var _ providers.InstanceTypes = typedProvider{}
}
