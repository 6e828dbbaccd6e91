package fargate

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gatewayhq/gateway/providers"
)

// taskSize is a Fargate task size: CPU units (1024 per vCPU) and MiB.
type taskSize struct {
	CPU    int
	Memory int
}

func (s taskSize) String() string {
	return fmt.Sprintf("%s vCPU, %s GiB", strconv.FormatFloat(float64(s.CPU)/1024, 'f', -1, 64),
		strconv.FormatFloat(float64(s.Memory)/1024, 'f', -1, 64))
}

// fargateSizes lists the task sizes Fargate accepts (Linux): for each CPU
// value, the memory choices in MiB, ascending.
func fargateSizes() []taskSize {
	var out []taskSize
	add := func(cpu int, mems ...int) {
		for _, m := range mems {
			out = append(out, taskSize{cpu, m})
		}
	}
	span := func(lo, hi, step int) []int {
		var m []int
		for v := lo; v <= hi; v += step {
			m = append(m, v)
		}
		return m
	}
	add(256, 512, 1024, 2048)
	add(512, span(1024, 4096, 1024)...)
	add(1024, span(2048, 8192, 1024)...)
	add(2048, span(4096, 16384, 1024)...)
	add(4096, span(8192, 30720, 1024)...)
	add(8192, span(16384, 61440, 4096)...)
	add(16384, span(32768, 122880, 8192)...)
	return out
}

// roundSize returns the smallest Fargate size with at least the vCPUs and
// memory asked for: the least CPU that can have that much memory, then the
// least memory of that CPU. Beyond Fargate's largest task (16 vCPU, 120 GiB)
// it refuses, naming the ec2 provider.
func roundSize(what string, vcpus, memGiB float64) (taskSize, error) {
	if math.IsNaN(vcpus) || math.IsNaN(memGiB) || vcpus < 0 || memGiB < 0 || math.IsInf(vcpus, 0) || math.IsInf(memGiB, 0) {
		return taskSize{}, fmt.Errorf("fargate provider: the %s asks for %v vCPU and %v GiB: not a size", what, vcpus, memGiB)
	}
	// Round to a millionth first: 0.1+0.2 vCPU must not become one unit more.
	cpu := int(math.Ceil(math.Round(vcpus*1024*1e6) / 1e6))
	mem := int(math.Ceil(math.Round(memGiB*1024*1e6) / 1e6))
	for _, s := range fargateSizes() {
		if s.CPU >= cpu && s.Memory >= mem {
			return s, nil
		}
	}
	return taskSize{}, fmt.Errorf("fargate provider: the %s needs %s vCPU and %s GiB, more than Fargate's largest task (16 vCPU, 120 GiB); run clusters this large with the ec2 provider (provider: ec2): %w",
		what, strconv.FormatFloat(vcpus, 'f', -1, 64), strconv.FormatFloat(memGiB, 'f', -1, 64), providers.ErrUnsupported)
}

// Defaults when the spec gives no machine: 1 vCPU and 2 GiB per vCPU.
const (
	defaultVCPUs     = 1
	defaultGiBPerCPU = 2
)

// schedulerSize is the scheduler's task size.
func schedulerSize(spec providers.ClusterSpec) (taskSize, error) {
	vcpus, mem := spec.Scheduler.VCPUs, spec.Scheduler.MemoryGiB
	if vcpus == 0 {
		vcpus = defaultVCPUs
	}
	if mem == 0 {
		mem = defaultGiBPerCPU * vcpus
	}
	return roundSize("scheduler", vcpus, mem)
}

// workerSize is each worker's task size: the admitted machine, else one
// vCPU per thread, and at least the Dask memory limit asked for.
func workerSize(spec providers.ClusterSpec) (taskSize, error) {
	vcpus, mem := spec.Worker.VCPUs, spec.Worker.MemoryGiB
	if vcpus == 0 {
		vcpus = defaultVCPUs
		if spec.WorkerThreads > 0 {
			vcpus = float64(spec.WorkerThreads)
		}
	}
	limit := float64(spec.WorkerMemory) / (1 << 30)
	if mem == 0 {
		mem = defaultGiBPerCPU * vcpus
		if spec.WorkerMemory > 0 {
			mem = limit
		}
	}
	mem = max(mem, limit)
	return roundSize("worker", vcpus, mem)
}
