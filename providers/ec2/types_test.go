package ec2

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/providers/catalog"
)

func TestInstanceTypes(t *testing.T) {
	e := newEnv(t)
	e.ec2.SetPageSize(3) // several pages
	c := ctx(t)
	got, err := e.p.InstanceTypes(c)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]catalog.InstanceType{}
	for _, it := range got {
		byName[it.Name] = it
	}
	if len(got) != 9 {
		t.Errorf("%d types, want the 9 current-generation ones: %v", len(got), got)
	}
	if _, ok := byName["m4.xlarge"]; ok {
		t.Error("a previous-generation type is listed")
	}
	builtin := map[string]float64{}
	for _, b := range catalog.Builtin() {
		if b.Cloud == catalog.CloudAWS {
			builtin[b.Name] = b.PriceHour
		}
	}
	for name, want := range map[string]catalog.InstanceType{
		"m6i.xlarge":     {Name: "m6i.xlarge", Cloud: "aws", VCPUs: 4, MemoryGiB: 16, PriceHour: builtin["m6i.xlarge"]},
		"g5.xlarge":      {Name: "g5.xlarge", Cloud: "aws", VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "a10g", PriceHour: builtin["g5.xlarge"]},
		"p4de.24xlarge":  {Name: "p4de.24xlarge", Cloud: "aws", VCPUs: 96, MemoryGiB: 1152, GPUs: 8, GPUType: "a100-80gb", Unpriced: true}, // not in the built-in table
		"brandnew.large": {Name: "brandnew.large", Cloud: "aws", VCPUs: 2, MemoryGiB: 4, Unpriced: true},                                   // unknown to the catalog: no price
	} {
		if byName[name] != want {
			t.Errorf("%s = %+v, want %+v", name, byName[name], want)
		}
	}
	if builtin["m6i.xlarge"] == 0 {
		t.Error("the test expects the built-in catalog to price m6i.xlarge")
	}
	// The listing is valid catalog input.
	if _, err := catalog.New(got, nil); err != nil {
		t.Errorf("catalog.New(listing): %v", err)
	}
	calls := len(e.ec2.Requests("DescribeInstanceTypes"))
	if calls < 3 {
		t.Errorf("%d DescribeInstanceTypes calls for 9 types on pages of 3", calls)
	}
	// Cached.
	if _, err := e.p.InstanceTypes(c); err != nil {
		t.Fatal(err)
	}
	if n := len(e.ec2.Requests("DescribeInstanceTypes")); n != calls {
		t.Errorf("a second InstanceTypes called DescribeInstanceTypes again (%d calls)", n-calls)
	}
	// Once loaded, the listing decides architectures and GPUs.
	if e.p.architecture("m6g.xlarge") != "arm64" || e.p.architecture("m6i.xlarge") != "x86_64" || !e.p.hasGPUs("g5.xlarge") || e.p.hasGPUs("m6i.xlarge") {
		t.Error("architecture or GPUs wrong from the listing")
	}
}

func TestInstanceTypesFallback(t *testing.T) {
	e := newEnv(t)
	e.ec2.Fail(faultAlways("DescribeInstanceTypes", "UnauthorizedOperation"))
	got, err := e.p.InstanceTypes(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for _, b := range catalog.Builtin() {
		if b.Cloud == catalog.CloudAWS {
			want++
		}
	}
	if len(got) != want || want == 0 {
		t.Errorf("%d types, want the built-in table's %d AWS types", len(got), want)
	}
	for _, it := range got {
		if it.Cloud != catalog.CloudAWS {
			t.Errorf("fallback lists %+v", it)
		}
	}
	if !strings.Contains(e.logs.String(), "using the built-in table") {
		t.Errorf("the fallback was not logged:\n%s", e.logs)
	}
	// The fallback is kept briefly, then the listing is tried again.
	calls := len(e.ec2.Requests("DescribeInstanceTypes"))
	_, _ = e.p.InstanceTypes(ctx(t))
	if n := len(e.ec2.Requests("DescribeInstanceTypes")); n != calls {
		t.Error("the fallback was not cached")
	}
	e.p.mu.Lock()
	e.p.types.expires = time.Now().Add(-time.Second)
	e.p.mu.Unlock()
	_, _ = e.p.InstanceTypes(ctx(t))
	if n := len(e.ec2.Requests("DescribeInstanceTypes")); n == calls {
		t.Error("the listing was not tried again after the fallback expired")
	}
}

func TestTypeHeuristics(t *testing.T) {
	p := &Provider{}
	for it, arch := range map[string]string{
		"m6g.xlarge": "arm64", "c7gn.large": "arm64", "t4g.small": "arm64", "x2gd.xlarge": "arm64", "im4gn.large": "arm64",
		"a1.large": "arm64", "g5g.xlarge": "arm64", "r8g.large": "arm64",
		"m6i.xlarge": "x86_64", "g4dn.xlarge": "x86_64", "c5n.large": "x86_64", "m7i-flex.large": "x86_64", "p4d.24xlarge": "x86_64", "m6idn.large": "x86_64",
	} {
		if got := p.architecture(it); got != arch {
			t.Errorf("architecture(%s) = %s, want %s", it, got, arch)
		}
	}
	for it, gpu := range map[string]bool{"g4ad.xlarge": false, "dl1.24xlarge": false, "inf2.xlarge": false, "trn1.2xlarge": false, "g5.xlarge": true, "g4dn.xlarge": true, "p5.48xlarge": true, "gr6.4xlarge": true, "m6i.large": false, "c6gn.large": false} {
		if got := p.hasGPUs(it); got != gpu {
			t.Errorf("hasGPUs(%s) = %v", it, got)
		}
	}
	for name, want := range map[string]string{"T4": "t4", "A10G": "a10g", "Radeon Pro V520": "radeon-pro-v520", "L40S": "l40s"} {
		if got := gpuShortName(name, 16384); got != want {
			t.Errorf("gpuShortName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestFromAWSCountsOnlyNVIDIA: only NVIDIA GPUs are GPUs a worker can use
// (CUDA images); AMD, Habana and accelerators of no stated make are not,
// and Inferentia/Trainium come as NeuronInfo, not GpuInfo. A type absent
// from the price table is unpriced, not free.
func TestFromAWSCountsOnlyNVIDIA(t *testing.T) {
	gpu := func(name, maker string, n int32) *types.GpuInfo {
		d := types.GpuDeviceInfo{Count: aws.Int32(n), MemoryInfo: &types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(16384)}}
		if name != "" {
			d.Name = aws.String(name)
		}
		if maker != "" {
			d.Manufacturer = aws.String(maker)
		}
		return &types.GpuInfo{Gpus: []types.GpuDeviceInfo{d}}
	}
	neuron := &types.NeuronInfo{NeuronDevices: []types.NeuronDeviceInfo{{Count: aws.Int32(1), Name: aws.String("Inferentia2")}}}
	prices := map[string]float64{"g4dn.xlarge": 0.526}
	for _, c := range []struct {
		it       types.InstanceTypeInfo
		gpus     int
		gpuType  string
		unpriced bool
	}{
		{types.InstanceTypeInfo{InstanceType: "g4dn.xlarge", GpuInfo: gpu("T4", "NVIDIA", 1)}, 1, "t4", false},
		{types.InstanceTypeInfo{InstanceType: "g4ad.xlarge", GpuInfo: gpu("Radeon Pro V520", "AMD", 1)}, 0, "", true},
		{types.InstanceTypeInfo{InstanceType: "dl1.24xlarge", GpuInfo: gpu("Gaudi HL-205", "Habana", 8)}, 0, "", true},
		{types.InstanceTypeInfo{InstanceType: "x9.large", GpuInfo: gpu("", "", 1)}, 0, "", true},
		{types.InstanceTypeInfo{InstanceType: "inf2.xlarge", NeuronInfo: neuron}, 0, "", true},
		{types.InstanceTypeInfo{InstanceType: "trn1.2xlarge", NeuronInfo: neuron}, 0, "", true},
	} {
		c.it.VCpuInfo = &types.VCpuInfo{DefaultVCpus: aws.Int32(4)}
		c.it.MemoryInfo = &types.MemoryInfo{SizeInMiB: aws.Int64(16384)}
		got, ok := fromAWS(c.it, prices)
		if !ok {
			t.Errorf("%s left out", c.it.InstanceType)
			continue
		}
		if got.GPUs != c.gpus || got.GPUType != c.gpuType || got.Unpriced != c.unpriced {
			t.Errorf("%s: %d GPUs %q, unpriced %v; want %d %q, unpriced %v", c.it.InstanceType, got.GPUs, got.GPUType, got.Unpriced, c.gpus, c.gpuType, c.unpriced)
		}
	}
}
