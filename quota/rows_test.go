package quota

import (
	"reflect"
	"testing"
	"time"
)

func TestEffectiveRows(t *testing.T) {
	two, unl := Amount(2), Unlimited
	idle := Duration(90 * time.Minute)
	eff := Effective{
		Limits: Limits{MaxClusters: &two, MonthlyVCPUHours: &unl, MaxIdleTimeout: &idle, AllowedRegions: []string{"eu-west-1", "us-east-1"},
			MaxGPUsByType: map[string]Amount{"t4": 1, "a100": 0}},
		Sources: map[string]string{"max_clusters": BuiltinSource, "monthly_vcpu_hours": "group:ml (api)", "max_idle_timeout": "default (config)",
			"allowed_regions": "user:ann (config)", "max_gpus_by_type.t4": "group:ml (config)", "max_gpus_by_type.a100": "default (api)"},
	}
	got := map[string]Row{}
	var order []string
	for _, r := range eff.Rows() {
		got[r.Name] = r
		order = append(order, r.Name)
	}
	for _, want := range []Row{
		{"max_clusters", "2", BuiltinSource},
		{"monthly_vcpu_hours", "unlimited", "group:ml (api)"},
		{"max_idle_timeout", "1h30m0s", "default (config)"},
		{"allowed_regions", "eu-west-1,us-east-1", "user:ann (config)"},
		{"max_gpus_by_type.a100", "0", "default (api)"},
		{"max_gpus_by_type.t4", "1", "group:ml (config)"},
		{"max_vcpus", "unlimited", ""},
		{"allowed_providers", "any", ""},
	} {
		if got[want.Name] != want {
			t.Errorf("%s: %+v, want %+v", want.Name, got[want.Name], want)
		}
	}
	if _, ok := got["max_gpus_by_type"]; ok {
		t.Error("a row for the GPU map beside its types")
	}
	// Every limit shows, in the one order.
	if len(order) != len(FieldNames())+1 || order[0] != FieldNames()[0] {
		t.Errorf("rows %v", order)
	}
	if rows := (Effective{}).Rows(); len(rows) != len(FieldNames()) || rows[0] != (Row{Name: FieldNames()[0], Value: KindOf(FieldNames()[0]).UnsetValue()}) {
		t.Errorf("nothing set: %+v", rows)
	}
}

func TestInUseOf(t *testing.T) {
	u := InUse{Clusters: 2, VCPUs: 4.5, MemoryGiB: 8, GPUs: 1, GPUsByType: map[string]int{"t4": 1}}
	got := map[string]string{}
	for _, name := range []string{"max_clusters", "max_vcpus", "max_memory_gib", "max_gpus", "max_gpus_by_type.t4", "max_gpus_by_type.a100", "monthly_vcpu_hours"} {
		if v, ok := u.Of(name); ok {
			got[name] = v
		}
	}
	want := map[string]string{"max_clusters": "2", "max_vcpus": "4.5", "max_memory_gib": "8", "max_gpus": "1", "max_gpus_by_type.t4": "1", "max_gpus_by_type.a100": "0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
