package catalog

import (
	"errors"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustBuiltin(t *testing.T) *Catalog {
	t.Helper()
	c, err := New(Builtin(), nil)
	if err != nil {
		t.Fatalf("New(Builtin(), nil): %v", err)
	}
	return c
}

func TestBuiltinEntriesValidate(t *testing.T) {
	for _, it := range Builtin() {
		t.Run(it.Name, func(t *testing.T) {
			if _, err := New([]InstanceType{it}, nil); err != nil {
				t.Errorf("built-in entry does not validate: %v", err)
			}
		})
	}
	mustBuiltin(t)
}

func TestBuiltinTable(t *testing.T) {
	types := Builtin()
	if n := len(types); n < 40 || n > 60 {
		t.Errorf("Builtin has %d types; want 40-60", n)
	}
	if !slices.IsSortedFunc(types, compareCloudName) {
		t.Errorf("Builtin is not sorted by cloud then name")
	}
	seen := map[string]bool{}
	perCloud := map[string]int{}
	for _, it := range types {
		if seen[it.Name] {
			t.Errorf("duplicate name %q", it.Name)
		}
		seen[it.Name] = true
		perCloud[it.Cloud]++
		if it.GPUs > 0 && !slices.Contains(GPUTypes(), it.GPUType) {
			t.Errorf("%s: GPU type %q not in documented set %q", it.Name, it.GPUType, GPUTypes())
		}
		if it.PriceHour <= 0 {
			t.Errorf("%s: built-in price %v should be a positive list price", it.Name, it.PriceHour)
		}
		// GCE attaches T4/V100 to N1 as separate accelerators, so no
		// synthetic N1 GPU types may appear.
		if strings.HasPrefix(it.Name, "n1-") && it.GPUs != 0 {
			t.Errorf("%s: n1 types must not carry GPUs", it.Name)
		}
	}
	for _, cloud := range []string{CloudAWS, CloudGCE} {
		if perCloud[cloud] < 15 {
			t.Errorf("only %d %s types", perCloud[cloud], cloud)
		}
	}
}

func TestBuiltinShapes(t *testing.T) {
	c := mustBuiltin(t)
	tests := []struct {
		name    string
		cloud   string
		vcpus   int
		mem     float64
		gpus    int
		gpuType string
	}{
		{"m5.xlarge", CloudAWS, 4, 16, 0, ""},
		{"t3.medium", CloudAWS, 2, 4, 0, ""},
		{"c5.large", CloudAWS, 2, 4, 0, ""},
		{"r5.large", CloudAWS, 2, 16, 0, ""},
		{"g4dn.12xlarge", CloudAWS, 48, 192, 4, "t4"},
		{"g5.xlarge", CloudAWS, 4, 16, 1, "a10g"},
		{"p3.2xlarge", CloudAWS, 8, 61, 1, "v100"},
		{"p4d.24xlarge", CloudAWS, 96, 1152, 8, "a100"},
		{"p5.48xlarge", CloudAWS, 192, 2048, 8, "h100"},
		{"n2-standard-8", CloudGCE, 8, 32, 0, ""},
		{"n2-highmem-4", CloudGCE, 4, 32, 0, ""},
		{"n1-standard-4", CloudGCE, 4, 15, 0, ""},
		{"g2-standard-4", CloudGCE, 4, 16, 1, "l4"},
		{"a2-highgpu-1g", CloudGCE, 12, 85, 1, "a100"},
		{"a2-highgpu-8g", CloudGCE, 96, 680, 8, "a100"},
		{"a2-ultragpu-1g", CloudGCE, 12, 170, 1, "a100-80gb"},
		{"a3-highgpu-8g", CloudGCE, 208, 1872, 8, "h100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it, ok := c.Lookup(tt.name)
			if !ok {
				t.Fatalf("Lookup(%q) not found", tt.name)
			}
			if it.Cloud != tt.cloud || it.VCPUs != tt.vcpus || it.MemoryGiB != tt.mem || it.GPUs != tt.gpus || it.GPUType != tt.gpuType {
				t.Errorf("got %s/%d vCPU/%g GiB/%d %q; want %s/%d/%g/%d %q",
					it.Cloud, it.VCPUs, it.MemoryGiB, it.GPUs, it.GPUType,
					tt.cloud, tt.vcpus, tt.mem, tt.gpus, tt.gpuType)
			}
		})
	}
}

func TestLookupIsCaseSensitive(t *testing.T) {
	c := mustBuiltin(t)
	if _, ok := c.Lookup("M5.xlarge"); ok {
		t.Errorf(`Lookup("M5.xlarge") found a type; names are case-sensitive`)
	}
	if _, ok := c.Lookup("m5.xlarge"); !ok {
		t.Errorf(`Lookup("m5.xlarge") not found`)
	}
}

func TestNewRejects(t *testing.T) {
	good := InstanceType{Name: "x.large", Cloud: CloudAWS, VCPUs: 2, MemoryGiB: 8, PriceHour: 0.1}
	with := func(f func(*InstanceType)) []InstanceType {
		it := good
		f(&it)
		return []InstanceType{it}
	}
	tests := []struct {
		name   string
		types  []InstanceType
		prices map[string]float64
		want   []string // substrings of the message
	}{
		{"empty name", with(func(it *InstanceType) { it.Name = "" }), nil, []string{"entry 0", "name is empty"}},
		{"spaces in name", with(func(it *InstanceType) { it.Name = " x.large" }), nil, []string{`" x.large"`, "spaces"}},
		{"duplicate name", []InstanceType{good, good}, nil, []string{`entry 1 "x.large"`, "duplicate of entry 0"}},
		{"unknown cloud", with(func(it *InstanceType) { it.Cloud = "azure" }), nil, []string{`"x.large"`, `cloud "azure"`, `"aws" or "gce"`}},
		{"empty cloud", with(func(it *InstanceType) { it.Cloud = "" }), nil, []string{`"x.large"`, "cloud is empty"}},
		{"zero vcpus", with(func(it *InstanceType) { it.VCPUs = 0 }), nil, []string{`"x.large"`, "vcpus is 0"}},
		{"zero memory", with(func(it *InstanceType) { it.MemoryGiB = 0 }), nil, []string{`"x.large"`, "memory_gib is 0"}},
		{"NaN memory", with(func(it *InstanceType) { it.MemoryGiB = math.NaN() }), nil, []string{`"x.large"`, "memory_gib is NaN"}},
		{"negative gpus", with(func(it *InstanceType) { it.GPUs = -1 }), nil, []string{`"x.large"`, "gpus is -1"}},
		{"gpus without type", with(func(it *InstanceType) { it.GPUs = 1 }), nil, []string{`"x.large"`, "gpu_type is empty"}},
		{"gpu type without gpus", with(func(it *InstanceType) { it.GPUType = "t4" }), nil, []string{`"x.large"`, "gpus is 0"}},
		{"gpu type not short", with(func(it *InstanceType) { it.GPUs, it.GPUType = 1, "NVIDIA A100" }), nil, []string{`"x.large"`, "lower-case"}},
		{"negative price", with(func(it *InstanceType) { it.PriceHour = -1 }), nil, []string{`"x.large"`, "price_hour is -1"}},
		{"infinite price", with(func(it *InstanceType) { it.PriceHour = math.Inf(1) }), nil, []string{`"x.large"`, "price_hour is +Inf"}},
		{"override unknown type", []InstanceType{good}, map[string]float64{"X.large": 1}, []string{`"X.large"`, "no instance type", `did you mean "x.large"`}},
		{"override negative", []InstanceType{good}, map[string]float64{"x.large": -0.5}, []string{`"x.large"`, "-0.5"}},
		{"override NaN", []InstanceType{good}, map[string]float64{"x.large": math.NaN()}, []string{`"x.large"`, "NaN"}},
		{"override Inf", []InstanceType{good}, map[string]float64{"x.large": math.Inf(1)}, []string{`"x.large"`, "+Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.types, tt.prices)
			if err == nil {
				t.Fatalf("New succeeded (%d types); want an error", len(c.Types("")))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestNewReportsAllProblems(t *testing.T) {
	bad := []InstanceType{
		{Name: "a", Cloud: CloudAWS, VCPUs: 0, MemoryGiB: 1},
		{Name: "b", Cloud: CloudAWS, VCPUs: 1, MemoryGiB: -1},
	}
	_, err := New(bad, nil)
	if err == nil {
		t.Fatal("New succeeded; want an error")
	}
	for _, w := range []string{"2 problems", `entry 0 "a"`, `entry 1 "b"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestPriceOverrides(t *testing.T) {
	c, err := New(Builtin(), map[string]float64{"m5.xlarge": 0.1, "n2-standard-4": 0})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"m5.xlarge": 0.1, "n2-standard-4": 0} {
		if it, _ := c.Lookup(name); it.PriceHour != want {
			t.Errorf("%s price = %v; want override %v", name, it.PriceHour, want)
		}
	}
	// Other prices are untouched.
	orig, _ := mustBuiltin(t).Lookup("m5.2xlarge")
	if it, _ := c.Lookup("m5.2xlarge"); it.PriceHour != orig.PriceHour {
		t.Errorf("m5.2xlarge price = %v; want unchanged %v", it.PriceHour, orig.PriceHour)
	}
	// The override changes the price order: m5.xlarge (0.1) now beats
	// every other 4-vCPU/16-GiB AWS type.
	got, err := c.Cheapest(Requirements{Cloud: CloudAWS, MinVCPUs: 4, MinMemoryGiB: 16})
	if err != nil || got.Name != "m5.xlarge" {
		t.Errorf("Cheapest after override = %v, %v; want m5.xlarge", got.Name, err)
	}
}

func TestInputsAreCopied(t *testing.T) {
	types := Builtin()
	prices := map[string]float64{"m5.large": 0.05}
	c, err := New(types, prices)
	if err != nil {
		t.Fatal(err)
	}
	for i := range types {
		types[i].VCPUs = 999
		types[i].PriceHour = 999
	}
	prices["m5.large"] = 999
	if it, _ := c.Lookup("m5.xlarge"); it.VCPUs != 4 {
		t.Errorf("mutating the slice given to New changed the catalog: m5.xlarge has %d vCPUs", it.VCPUs)
	}
	if it, _ := c.Lookup("m5.large"); it.PriceHour != 0.05 {
		t.Errorf("mutating the prices given to New changed the catalog: %v", it.PriceHour)
	}
	if b := Builtin(); b[0].VCPUs == 999 {
		t.Errorf("mutating Builtin's result changed the next Builtin()")
	}
	// Types returns a copy too.
	ts := c.Types("")
	ts[0].Name = "changed"
	if c.Types("")[0].Name == "changed" {
		t.Errorf("mutating Types' result changed the catalog")
	}
}

func TestTypes(t *testing.T) {
	c := mustBuiltin(t)
	all := c.Types("")
	if len(all) != len(Builtin()) {
		t.Errorf("Types(\"\") has %d types; want %d", len(all), len(Builtin()))
	}
	if !slices.IsSortedFunc(all, comparePriceName) {
		t.Errorf("Types is not sorted by price then name")
	}
	aws, gce := c.Types(CloudAWS), c.Types(CloudGCE)
	if len(aws)+len(gce) != len(all) || len(aws) == 0 || len(gce) == 0 {
		t.Errorf("Types split: aws %d + gce %d != all %d", len(aws), len(gce), len(all))
	}
	for _, it := range aws {
		if it.Cloud != CloudAWS {
			t.Errorf("Types(aws) returned %s on %s", it.Name, it.Cloud)
		}
	}
	if got := c.Types("azure"); len(got) != 0 {
		t.Errorf("Types(azure) = %d types; want none", len(got))
	}
}

func TestCheapest(t *testing.T) {
	c := mustBuiltin(t)
	tests := []struct {
		name string
		r    Requirements
		want string
	}{
		{"smallest anywhere", Requirements{}, "t3.medium"},
		{"4 vCPU 16 GiB aws", Requirements{Cloud: CloudAWS, MinVCPUs: 4, MinMemoryGiB: 16}, "t3.xlarge"},
		{"4 vCPU 16 GiB gce", Requirements{Cloud: CloudGCE, MinVCPUs: 4, MinMemoryGiB: 16}, "e2-standard-4"},
		{"memory heavy aws", Requirements{Cloud: CloudAWS, MinVCPUs: 2, MinMemoryGiB: 16}, "r5.large"},
		{"cpu heavy no burstable", Requirements{Cloud: CloudAWS, MinVCPUs: 8, Allowed: []string{"c*", "m*"}}, "c5.2xlarge"},
		{"exact name allowed", Requirements{Allowed: []string{"m6i.2xlarge"}}, "m6i.2xlarge"},
		{"glob allowed", Requirements{Cloud: CloudAWS, MinVCPUs: 4, Allowed: []string{"m5.*"}}, "m5.xlarge"},
		{"any gpu", Requirements{GPUs: 1}, "g4dn.xlarge"},
		{"any gpu on gce", Requirements{Cloud: CloudGCE, GPUs: 1}, "g2-standard-4"},
		{"a10g", Requirements{GPUs: 1, GPUType: GPUA10G}, "g5.xlarge"},
		{"4 a10g", Requirements{GPUs: 4, GPUType: GPUA10G}, "g5.12xlarge"},
		{"a100 on aws", Requirements{Cloud: CloudAWS, GPUs: 1, GPUType: GPUA100}, "p4d.24xlarge"},
		{"a100 on gce", Requirements{Cloud: CloudGCE, GPUs: 2, GPUType: GPUA100}, "a2-highgpu-2g"},
		{"a100 80gb", Requirements{GPUs: 1, GPUType: GPUA10080G}, "a2-ultragpu-1g"},
		{"h100 on gce", Requirements{Cloud: CloudGCE, GPUs: 8, GPUType: GPUH100}, "a3-highgpu-8g"},
		{"gpu with big memory", Requirements{Cloud: CloudAWS, GPUs: 1, MinMemoryGiB: 100}, "g4dn.12xlarge"},
		{"cpu only excludes gpu types", Requirements{Cloud: CloudAWS, MinVCPUs: 16}, "m5.4xlarge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Cheapest(tt.r)
			if err != nil {
				t.Fatalf("Cheapest(%+v): %v", tt.r, err)
			}
			if got.Name != tt.want {
				t.Errorf("Cheapest(%+v) = %s; want %s", tt.r, got, tt.want)
			}
			// Whatever was picked, nothing that fits is cheaper.
			for _, it := range c.Types(tt.r.Cloud) {
				if reasons, _ := shortfalls(it, tt.r); len(reasons) == 0 && it.PriceHour < got.PriceHour {
					t.Errorf("%s fits and is cheaper than %s", it, got)
				}
			}
		})
	}
}

// TestCheapestAgainstBruteForce checks the choice on a grid of requirements
// against an independent scan of the whole table.
func TestCheapestAgainstBruteForce(t *testing.T) {
	c := mustBuiltin(t)
	for _, cloud := range []string{"", CloudAWS, CloudGCE} {
		for _, vcpus := range []int{0, 2, 4, 8, 16, 48, 96} {
			for _, mem := range []float64{0, 8, 16, 32, 64, 200} {
				for _, gpus := range []int{0, 1, 4, 8} {
					r := Requirements{Cloud: cloud, MinVCPUs: vcpus, MinMemoryGiB: mem, GPUs: gpus}
					var want *InstanceType
					for _, it := range Builtin() {
						fits := (cloud == "" || it.Cloud == cloud) && it.VCPUs >= vcpus && it.MemoryGiB >= mem &&
							(gpus == 0 && it.GPUs == 0 || gpus > 0 && it.GPUs >= gpus)
						if fits && (want == nil || it.PriceHour < want.PriceHour ||
							it.PriceHour == want.PriceHour && it.Name < want.Name) {
							want = &it
						}
					}
					got, err := c.Cheapest(r)
					switch {
					case want == nil && !errors.Is(err, ErrNoFit):
						t.Errorf("Cheapest(%+v) = %v, %v; want ErrNoFit", r, got, err)
					case want != nil && (err != nil || got != *want):
						t.Errorf("Cheapest(%+v) = %v, %v; want %v", r, got, err, *want)
					}
				}
			}
		}
	}
}

func TestCheapestNoFit(t *testing.T) {
	c := mustBuiltin(t)
	tests := []struct {
		name string
		r    Requirements
		want []string
	}{
		{
			"too many vcpus for cpu-only aws",
			Requirements{Cloud: CloudAWS, MinVCPUs: 64},
			[]string{"an instance type on aws", ">= 64 vCPUs", "no GPUs", "closest:", "m5.4xlarge (aws: 16 vCPUs, 64 GiB", "16 vCPUs < 64"},
		},
		{
			"gpu type not on cloud",
			Requirements{Cloud: CloudAWS, GPUs: 1, GPUType: GPUL4},
			[]string{"1 l4 GPUs", "GPU type t4, not l4"},
		},
		{
			"allowed excludes everything that fits",
			Requirements{Cloud: CloudAWS, MinVCPUs: 8, Allowed: []string{"t3.*"}},
			[]string{`allowed ["t3.*"]`, "t3.xlarge", "4 vCPUs < 8"},
		},
		{
			"misspelt allowed pattern",
			Requirements{Allowed: []string{"m5.xlarg"}},
			[]string{`allowed pattern "m5.xlarg" matches no known type`, "not in Allowed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Cheapest(tt.r)
			if err == nil {
				t.Fatalf("Cheapest(%+v) = %s; want an error", tt.r, got)
			}
			if !errors.Is(err, ErrNoFit) {
				t.Errorf("error %q does not wrap ErrNoFit", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheapestEmptyCatalog(t *testing.T) {
	c, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cheapest(Requirements{}); !errors.Is(err, ErrNoFit) {
		t.Errorf("Cheapest on an empty catalog: %v; want ErrNoFit", err)
	}
}

func TestCheapestInvalidRequirements(t *testing.T) {
	c := mustBuiltin(t)
	tests := []struct {
		name string
		r    Requirements
		want string
	}{
		{"unknown cloud", Requirements{Cloud: "azure"}, `cloud "azure"`},
		{"negative vcpus", Requirements{MinVCPUs: -1}, "MinVCPUs is -1"},
		{"NaN memory", Requirements{MinMemoryGiB: math.NaN()}, "MinMemoryGiB is NaN"},
		{"negative gpus", Requirements{GPUs: -1}, "GPUs is -1"},
		{"gpu type without gpus", Requirements{GPUType: GPUT4}, "GPUs is 0"},
		{"unknown gpu type", Requirements{GPUs: 1, GPUType: "A100"}, `known types: ["a100" "a100-80gb" "a10g" "h100" "l4" "t4" "v100"]`},
		{"bad glob", Requirements{Allowed: []string{"m5.*", "m5.[x"}}, `allowed pattern "m5.[x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Cheapest(tt.r)
			if err == nil {
				t.Fatalf("Cheapest(%+v) = %s; want an error", tt.r, got)
			}
			if !errors.Is(err, ErrInvalidRequirements) {
				t.Errorf("error %q does not wrap ErrInvalidRequirements", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, err := c.Cheapest(Requirements{Allowed: []string{"["}}); !errors.Is(err, path.ErrBadPattern) {
		t.Errorf("bad glob error %v does not wrap path.ErrBadPattern", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := mustBuiltin(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Lookup("m5.xlarge")
				c.Types(CloudGCE)
				if _, err := c.Cheapest(Requirements{MinVCPUs: 4, GPUs: 1}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestFitting(t *testing.T) {
	c, err := New(Builtin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := Requirements{Cloud: CloudAWS, MinVCPUs: 4, MinMemoryGiB: 16}
	got, err := c.Fitting(r, 3)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Cheapest(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != first {
		t.Fatalf("Fitting = %v; want 3 types starting with Cheapest's %s", got, first.Name)
	}
	for i, typ := range got {
		if typ.VCPUs < 4 || typ.MemoryGiB < 16 || typ.GPUs != 0 || typ.Cloud != CloudAWS {
			t.Errorf("%s does not fit %s", typ, r)
		}
		if i > 0 && typ.PriceHour < got[i-1].PriceHour {
			t.Errorf("not cheapest first: %v", got)
		}
	}
	all, _ := c.Fitting(r, 0)
	if len(all) <= 3 {
		t.Errorf("Fitting(r, 0) = %d types; want every fitting one", len(all))
	}
	if _, err := c.Fitting(Requirements{GPUType: "a100"}, 1); !errors.Is(err, ErrInvalidRequirements) {
		t.Errorf("invalid requirements: %v", err)
	}
}
