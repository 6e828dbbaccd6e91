package catalog

import "slices"

// Cloud names used in InstanceType.Cloud and Requirements.Cloud.
const (
	CloudAWS = "aws"
	CloudGCE = "gce"
)

// GPU type names used in InstanceType.GPUType. They are short and lower-case
// so that configuration and quota rules can name an accelerator the same way
// on every cloud ("a100" rather than "NVIDIA A100-SXM4-40GB").
const (
	GPUT4      = "t4"
	GPUA10G    = "a10g"
	GPUL4      = "l4"
	GPUV100    = "v100"
	GPUA100    = "a100"      // A100 40 GB
	GPUA10080G = "a100-80gb" // A100 80 GB
	GPUH100    = "h100"
)

// GPUTypes returns the GPU type names the built-in table uses, so that
// callers validating configuration can list them in an error message.
func GPUTypes() []string {
	return []string{GPUT4, GPUA10G, GPUL4, GPUV100, GPUA100, GPUA10080G, GPUH100}
}

// Builtin returns a fresh copy of the instance types the gateway knows,
// sorted by cloud then name; the caller may modify it freely.
//
// The shapes (vCPUs, memory, GPU count and model) are those the clouds
// publish and are exact. The prices are approximate on-demand list prices
// for Linux in us-east-1 (AWS) and us-central1 (Compute Engine) at the time
// of writing (P4d and P5 after AWS's June 2025 reduction). They are for
// estimates only (usage accounting, choosing between shapes) and are not a
// bill: they go stale, and discounts, other regions and committed use change
// them. Operators override them with the gateway's pricing configuration,
// which is passed to New as its prices map.
func Builtin() []InstanceType {
	t := builtinTable()
	slices.SortFunc(t, compareCloudName)
	return t
}

// builtinTable builds the table on every call, so there is no package-level
// state for a caller to corrupt.
func builtinTable() []InstanceType {
	aws := func(name string, vcpus int, mem float64, price float64) InstanceType {
		return InstanceType{Name: name, Cloud: CloudAWS, VCPUs: vcpus, MemoryGiB: mem, PriceHour: price}
	}
	awsGPU := func(name string, vcpus int, mem float64, gpus int, gpu string, price float64) InstanceType {
		return InstanceType{Name: name, Cloud: CloudAWS, VCPUs: vcpus, MemoryGiB: mem, GPUs: gpus, GPUType: gpu, PriceHour: price}
	}
	gce := func(name string, vcpus int, mem float64, price float64) InstanceType {
		return InstanceType{Name: name, Cloud: CloudGCE, VCPUs: vcpus, MemoryGiB: mem, PriceHour: price}
	}
	gceGPU := func(name string, vcpus int, mem float64, gpus int, gpu string, price float64) InstanceType {
		return InstanceType{Name: name, Cloud: CloudGCE, VCPUs: vcpus, MemoryGiB: mem, GPUs: gpus, GPUType: gpu, PriceHour: price}
	}
	return []InstanceType{
		// AWS burstable general purpose.
		aws("t3.medium", 2, 4, 0.0416),
		aws("t3.large", 2, 8, 0.0832),
		aws("t3.xlarge", 4, 16, 0.1664),

		// AWS general purpose.
		aws("m5.large", 2, 8, 0.096),
		aws("m5.xlarge", 4, 16, 0.192),
		aws("m5.2xlarge", 8, 32, 0.384),
		aws("m5.4xlarge", 16, 64, 0.768),
		aws("m6i.large", 2, 8, 0.096),
		aws("m6i.xlarge", 4, 16, 0.192),
		aws("m6i.2xlarge", 8, 32, 0.384),
		aws("m6i.4xlarge", 16, 64, 0.768),

		// AWS compute optimized.
		aws("c5.large", 2, 4, 0.085),
		aws("c5.xlarge", 4, 8, 0.17),
		aws("c5.2xlarge", 8, 16, 0.34),
		aws("c6i.large", 2, 4, 0.085),
		aws("c6i.xlarge", 4, 8, 0.17),
		aws("c6i.2xlarge", 8, 16, 0.34),

		// AWS memory optimized.
		aws("r5.large", 2, 16, 0.126),
		aws("r5.xlarge", 4, 32, 0.252),
		aws("r5.2xlarge", 8, 64, 0.504),
		aws("r6i.large", 2, 16, 0.126),
		aws("r6i.xlarge", 4, 32, 0.252),
		aws("r6i.2xlarge", 8, 64, 0.504),

		// AWS accelerated computing.
		awsGPU("g4dn.xlarge", 4, 16, 1, GPUT4, 0.526),
		awsGPU("g4dn.2xlarge", 8, 32, 1, GPUT4, 0.752),
		awsGPU("g4dn.12xlarge", 48, 192, 4, GPUT4, 3.912),
		awsGPU("g5.xlarge", 4, 16, 1, GPUA10G, 1.006),
		awsGPU("g5.2xlarge", 8, 32, 1, GPUA10G, 1.212),
		awsGPU("g5.12xlarge", 48, 192, 4, GPUA10G, 5.672),
		awsGPU("p3.2xlarge", 8, 61, 1, GPUV100, 3.06),
		awsGPU("p3.8xlarge", 32, 244, 4, GPUV100, 12.24),
		awsGPU("p4d.24xlarge", 96, 1152, 8, GPUA100, 21.96),
		awsGPU("p5.48xlarge", 192, 2048, 8, GPUH100, 55.04),

		// Compute Engine cost-optimized and general purpose. GCE documents
		// memory in "GB" but means GiB.
		gce("e2-standard-2", 2, 8, 0.067006),
		gce("e2-standard-4", 4, 16, 0.134012),
		gce("e2-standard-8", 8, 32, 0.268024),
		gce("n2-standard-2", 2, 8, 0.097118),
		gce("n2-standard-4", 4, 16, 0.194236),
		gce("n2-standard-8", 8, 32, 0.388472),
		gce("n2-standard-16", 16, 64, 0.776944),
		gce("n2-highmem-4", 4, 32, 0.262028),
		gce("n2-highmem-8", 8, 64, 0.524056),
		gce("c2-standard-4", 4, 16, 0.2088),
		gce("c2-standard-8", 8, 32, 0.4176),
		// N1 is where GCE attaches T4 and V100 accelerators, but they are
		// separate resources, not part of the machine type, so the shapes
		// here carry no GPUs.
		gce("n1-standard-4", 4, 15, 0.189999),
		gce("n1-standard-8", 8, 30, 0.379998),

		// Compute Engine accelerator-optimized (GPUs are part of the type).
		gceGPU("g2-standard-4", 4, 16, 1, GPUL4, 0.706832),
		gceGPU("g2-standard-8", 8, 32, 1, GPUL4, 0.853624),
		gceGPU("a2-highgpu-1g", 12, 85, 1, GPUA100, 3.673385),
		gceGPU("a2-highgpu-2g", 24, 170, 2, GPUA100, 7.34677),
		gceGPU("a2-highgpu-4g", 48, 340, 4, GPUA100, 14.69354),
		gceGPU("a2-highgpu-8g", 96, 680, 8, GPUA100, 29.38708),
		gceGPU("a2-ultragpu-1g", 12, 170, 1, GPUA10080G, 5.068798),
		gceGPU("a3-highgpu-8g", 208, 1872, 8, GPUH100, 88.253),
	}
}
