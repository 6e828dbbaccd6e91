package ec2

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/providers/catalog"
)

// typeInfo is what the provider knows of one instance type.
type typeInfo struct {
	catalog.InstanceType
	archs []string // "x86_64", "arm64"
}

// fallbackTTL is how long the built-in table stands in for a listing that
// failed before the listing is tried again.
const fallbackTTL = 5 * time.Minute

// InstanceTypes implements providers.InstanceTypes: the region's current
// generation instance types with their shapes, priced from the built-in
// catalog where it knows the type (0 otherwise). The listing is cached for
// CacheTTL; when it cannot be had, the built-in AWS table is returned (and
// the failure logged), so that the gateway can still admit clusters.
func (p *Provider) InstanceTypes(ctx context.Context) ([]catalog.InstanceType, error) {
	m, err := p.typeTable(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]catalog.InstanceType, 0, len(m))
	for _, t := range m {
		out = append(out, t.InstanceType)
	}
	slices.SortFunc(out, func(a, b catalog.InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// typeTable returns the cached table, listing the types when it has
// expired. Only a canceled context is an error.
func (p *Provider) typeTable(ctx context.Context) (map[string]typeInfo, error) {
	p.mu.Lock()
	c := p.types
	p.mu.Unlock()
	if c != nil && time.Now().Before(c.expires) {
		return c.v, nil
	}
	m, err := p.listTypes(ctx)
	ttl := p.cfg.CacheTTL
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.log.Warn("cannot list EC2 instance types; using the built-in table", "region", p.cfg.Region, "err", err)
		m, ttl = builtinTypes(), min(ttl, fallbackTTL)
	}
	p.mu.Lock()
	p.types = &cached[map[string]typeInfo]{v: m, expires: time.Now().Add(ttl)}
	p.mu.Unlock()
	return m, nil
}

// cachedTypes is the table if one has been loaded, without any call: the
// launch path uses it to refine guesses, never to wait for a listing.
func (p *Provider) cachedTypes() map[string]typeInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.types == nil {
		return nil
	}
	return p.types.v
}

func (p *Provider) listTypes(ctx context.Context) (map[string]typeInfo, error) {
	prices := map[string]float64{}
	for _, t := range catalog.Builtin() {
		if t.Cloud == catalog.CloudAWS {
			prices[t.Name] = t.PriceHour
		}
	}
	m := map[string]typeInfo{}
	var token *string
	for {
		out, err := call(ctx, p, "DescribeInstanceTypes", func(ctx context.Context) (*awsec2.DescribeInstanceTypesOutput, error) {
			return p.ec2.DescribeInstanceTypes(ctx, &awsec2.DescribeInstanceTypesInput{
				// Previous generations are dearer for what they give, and
				// some need images the defaults are not.
				Filters:    []types.Filter{filter("current-generation", "true")},
				MaxResults: aws.Int32(100),
				NextToken:  token,
			})
		})
		if err != nil {
			return nil, p.apiError("DescribeInstanceTypes", err)
		}
		for _, it := range out.InstanceTypes {
			if t, ok := fromAWS(it, prices); ok {
				m[t.Name] = t
			}
		}
		if token = out.NextToken; aws.ToString(token) == "" {
			break
		}
	}
	return m, nil
}

// fromAWS maps one DescribeInstanceTypes entry; types the catalog could not
// hold (no vCPUs or memory reported) are left out. A type absent from
// prices is unpriced, never "free".
func fromAWS(it types.InstanceTypeInfo, prices map[string]float64) (typeInfo, bool) {
	price, priced := prices[string(it.InstanceType)]
	t := typeInfo{InstanceType: catalog.InstanceType{Name: string(it.InstanceType), Cloud: catalog.CloudAWS, PriceHour: price, Unpriced: !priced}}
	if it.VCpuInfo != nil {
		t.VCPUs = int(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
	}
	if it.MemoryInfo != nil {
		t.MemoryGiB = float64(aws.ToInt64(it.MemoryInfo.SizeInMiB)) / 1024
	}
	if it.ProcessorInfo != nil {
		for _, a := range it.ProcessorInfo.SupportedArchitectures {
			t.archs = append(t.archs, string(a))
		}
	}
	if it.GpuInfo != nil {
		for _, g := range it.GpuInfo.Gpus {
			// Only NVIDIA's count: the images, drivers and dask-cuda the
			// workers run are CUDA, so an AMD Radeon (g4ad), a Habana
			// Gaudi (dl1) or an accelerator of no stated make is not a GPU
			// a worker can use. Inferentia and Trainium come in NeuronInfo,
			// not here.
			if !strings.EqualFold(aws.ToString(g.Manufacturer), "NVIDIA") {
				continue
			}
			t.GPUs += int(aws.ToInt32(g.Count))
			if t.GPUType == "" {
				var mem int32
				if g.MemoryInfo != nil {
					mem = aws.ToInt32(g.MemoryInfo.SizeInMiB)
				}
				t.GPUType = gpuShortName(aws.ToString(g.Name), mem)
			}
		}
		if t.GPUs > 0 && t.GPUType == "" {
			t.GPUType = "gpu"
		}
		if t.GPUs == 0 {
			t.GPUType = ""
		}
	}
	return t, t.Name != "" && t.VCPUs > 0 && t.MemoryGiB > 0
}

var nonShort = regexp.MustCompile(`[^a-z0-9]+`)

// gpuShortName turns EC2's GPU name ("A100", "Radeon Pro V520") into the
// catalog's short lower-case form ("a100", "radeon-pro-v520"); the 80 GB
// A100 is "a100-80gb", as in the built-in table.
func gpuShortName(name string, memMiB int32) string {
	s := strings.Trim(nonShort.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if s == "a100" && memMiB >= 80*1024 {
		s = "a100-80gb"
	}
	return s
}

func builtinTypes() map[string]typeInfo {
	m := map[string]typeInfo{}
	for _, t := range catalog.Builtin() {
		if t.Cloud == catalog.CloudAWS {
			m[t.Name] = typeInfo{InstanceType: t}
		}
	}
	return m
}

// family is the part of an instance type before the size ("m6g" of
// "m6g.xlarge").
func family(instanceType string) string {
	f, _, _ := strings.Cut(instanceType, ".")
	return f
}

// graviton matches the families of AWS's Arm processors: a "g" among the
// letters after the generation (m6g, c7gn, x2gd, t4g, im4gn, r8g), and a1.
var graviton = regexp.MustCompile(`^([a-z]+[0-9]+[a-z]*g[a-z]*|a1)$`)

// architecture is "arm64" or "x86_64" for an instance type: from the
// listing when it has been loaded, else from the family name.
func (p *Provider) architecture(instanceType string) string {
	if t, ok := p.cachedTypes()[instanceType]; ok && len(t.archs) > 0 {
		if slices.Contains(t.archs, "x86_64") {
			return "x86_64"
		}
		return t.archs[0]
	}
	if graviton.MatchString(family(instanceType)) {
		return "arm64"
	}
	return "x86_64"
}

// gpuFamily matches the NVIDIA GPU families (g4dn, g5, g6e, p4d, p5...);
// notNVIDIA the G families whose GPUs are AMD's (g4ad).
var (
	gpuFamily = regexp.MustCompile(`^(g|p|gr)[0-9]`)
	notNVIDIA = regexp.MustCompile(`^g[0-9]+ad$`)
)

// hasGPUs reports whether an instance type has GPUs: from the listing when
// loaded, else from the family name.
func (p *Provider) hasGPUs(instanceType string) bool {
	if t, ok := p.cachedTypes()[instanceType]; ok {
		return t.GPUs > 0
	}
	f := family(instanceType)
	return gpuFamily.MatchString(f) && !notNVIDIA.MatchString(f)
}

// quota names the Service Quotas limit a VcpuLimitExceeded error is about:
// EC2 counts the running vCPUs of groups of families, per account and
// region, separately for on-demand and spot.
type quota struct{ name, code string }

func vcpuQuota(instanceType string, spot bool) quota {
	f := family(instanceType)
	group := "standard"
	switch {
	case strings.HasPrefix(f, "inf"):
		group = "inf"
	case strings.HasPrefix(f, "trn"):
		group = "trn"
	case strings.HasPrefix(f, "dl"):
		group = "dl"
	case strings.HasPrefix(f, "hpc"):
		group = "hpc"
	case strings.HasPrefix(f, "u-") || strings.HasPrefix(f, "u7"):
		group = "highmem"
	case strings.HasPrefix(f, "vt"), strings.HasPrefix(f, "g"):
		group = "g"
	case strings.HasPrefix(f, "p"):
		group = "p"
	case strings.HasPrefix(f, "f"):
		group = "f"
	case strings.HasPrefix(f, "x"):
		group = "x"
	}
	if spot {
		switch group {
		case "standard":
			return quota{"All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", "L-34B43A08"}
		case "g":
			return quota{"All G and VT Spot Instance Requests", "L-3819A6DF"}
		case "p":
			return quota{"All P Spot Instance Requests", "L-7212CCBC"}
		}
		return quota{name: "the spot instance requests quota of the " + f + " family"}
	}
	switch group {
	case "standard":
		return quota{"Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A"}
	case "g":
		return quota{"Running On-Demand G and VT instances", "L-DB2E81BA"}
	case "p":
		return quota{"Running On-Demand P instances", "L-417A185B"}
	case "f":
		return quota{"Running On-Demand F instances", "L-74FC7D96"}
	case "x":
		return quota{"Running On-Demand X instances", "L-7295265B"}
	case "inf":
		return quota{"Running On-Demand Inf instances", "L-1945791B"}
	case "trn":
		return quota{name: "Running On-Demand Trn instances"}
	case "dl":
		return quota{name: "Running On-Demand DL instances"}
	case "hpc":
		return quota{name: "Running On-Demand HPC instances"}
	}
	return quota{name: "Running On-Demand High Memory instances"}
}

func (q quota) String() string {
	if q.code == "" {
		return q.name
	}
	return q.name + " (quota code " + q.code + ")"
}
