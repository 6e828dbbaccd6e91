// Package gcerules holds Compute Engine's documented rules for what an
// instance insert may ask for (GPUs attached to N1 machines, machine types
// with built-in GPUs, Spot-only sizes, boot disk types per machine series)
// as data, each with the page of Google's documentation it comes from. The
// gce provider checks a member against them before asking for it, and the
// gcetest fake refuses what breaks them, as Compute Engine does.
//
// Where a figure could not be confirmed from the documentation as stored
// for this project's reference search (only a page's opening is), the
// entry says so; such figures come from the same page as last read, and
// are kept at least as strict as it.
package gcerules

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The documentation pages the rules come from.
const (
	// RefN1GPUs: "GPU machine types", section on N1 general-purpose machines
	// (GPU counts, vCPU and memory ceilings per count and model).
	RefN1GPUs = "https://cloud.google.com/compute/docs/gpus#n1-gpus"
	// RefAccelerator: "Accelerator-optimized machine family": each machine
	// type has a fixed model and number of GPUs; A3 High with 1, 2 or 4 GPUs
	// is sold as Spot or flex-start only.
	RefAccelerator = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
	// RefDiskSupport: the Compute v1 discovery document's
	// AttachedDiskInitializeParams.diskType ("must be compatible with the
	// instance's machine series"), pointing to the Hyperdisk and Persistent
	// Disk machine-series tables.
	RefDiskSupport = "https://cloud.google.com/compute/docs/disks/hyperdisks#machine-type-support"
	// RefPDSupport: "Machine series support for Persistent Disk".
	RefPDSupport = "https://cloud.google.com/compute/docs/disks/persistent-disks#supported_machine_series"
)

// Limit is what an N1 machine may have with a given number of one GPU model.
type Limit struct {
	MaxVCPUs     int
	MaxMemoryGiB float64
}

// N1GPUs are the GPU models that attach to N1 machines (accelerator type
// name -> GPU count -> ceilings), from RefN1GPUs. A count not listed is
// refused. P100 with 4 GPUs takes up to 96 vCPUs and 624 GB in some zones
// and 64 vCPUs and 208 GB in others: the lower ceiling is kept, which is
// true in every zone.
var N1GPUs = map[string]map[int]Limit{
	"nvidia-tesla-t4":   {1: {48, 312}, 2: {48, 312}, 4: {96, 624}},
	"nvidia-tesla-p4":   {1: {24, 156}, 2: {48, 312}, 4: {96, 624}},
	"nvidia-tesla-v100": {1: {12, 78}, 2: {24, 156}, 4: {48, 312}, 8: {96, 624}},
	"nvidia-tesla-p100": {1: {16, 104}, 2: {32, 208}, 4: {64, 208}},
}

// Series is a machine type's series as the rules name it: "n1", "c4",
// and "a3-ultragpu" for A3 Ultra (its own series for disks, though its
// types start with "a3").
func Series(machineType string) string {
	mt := strings.ToLower(machineType)
	if strings.HasPrefix(mt, "a3-ultragpu") {
		return "a3-ultragpu"
	}
	series, _, _ := strings.Cut(mt, "-")
	return series
}

// N1SharedCore are the N1 types that take no GPUs.
var n1SharedCore = map[string]bool{"f1-micro": true, "g1-small": true}

// CheckN1GPUs says why an N1 machine of vcpus and memGiB cannot carry count
// GPUs of accel, or nil when it can.
func CheckN1GPUs(machineType, accel string, count, vcpus int, memGiB float64) error {
	if Series(machineType) != "n1" && !n1SharedCore[machineType] {
		return fmt.Errorf("%s takes no attached GPUs: only N1 machine types do, accelerator-optimized types come with theirs (%s)", machineType, RefN1GPUs)
	}
	if n1SharedCore[machineType] {
		return fmt.Errorf("%s is a shared-core N1 type, which takes no GPUs (%s)", machineType, RefN1GPUs)
	}
	limits, ok := N1GPUs[accel]
	if !ok {
		return fmt.Errorf("%s GPUs do not attach to N1 machines (they take nvidia-tesla-t4, -p4, -v100 or -p100; %s)", accel, RefN1GPUs)
	}
	l, ok := limits[count]
	if !ok {
		return fmt.Errorf("N1 machines take %s GPUs only in counts of %s, not %d (%s)", accel, countsOf(limits), count, RefN1GPUs)
	}
	if vcpus > l.MaxVCPUs || memGiB > l.MaxMemoryGiB {
		return fmt.Errorf("%s (%d vCPUs, %g GiB) is too large for %d %s GPU(s): N1 allows at most %d vCPUs and %g GB with that count (%s)",
			machineType, vcpus, memGiB, count, accel, l.MaxVCPUs, l.MaxMemoryGiB, RefN1GPUs)
	}
	return nil
}

func countsOf(limits map[int]Limit) string {
	var out []string
	for _, n := range []int{1, 2, 4, 8, 16} {
		if _, ok := limits[n]; ok {
			out = append(out, strconv.Itoa(n))
		}
	}
	return strings.Join(out, ", ")
}

// builtIn are the series whose machine types come with GPUs (RefAccelerator).
var builtIn = map[string]bool{"a2": true, "a3": true, "a3-ultragpu": true, "a4": true, "a4x": true, "g2": true, "g4": true}

// g2GPUs and g4GPUs are the L4 and RTX PRO 6000 counts by vCPUs: their
// names give vCPUs, not GPUs (RefAccelerator).
var (
	g2GPUs = map[int]int{4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
	g4GPUs = map[int]int{48: 1, 96: 2, 192: 4, 384: 8}
)

var gSuffix = regexp.MustCompile(`-(\d+)g$`)

// BuiltInGPUs reports whether the machine type comes with GPUs, and how
// many when its name says so (a2-highgpu-1g: 1; g2-standard-24: 2).
func BuiltInGPUs(machineType string) (count int, builtin bool) {
	s := Series(machineType)
	if !builtIn[s] {
		return 0, false
	}
	if m := gSuffix.FindStringSubmatch(machineType); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, true
	}
	if i := strings.LastIndex(machineType, "-"); i > 0 {
		v, _ := strconv.Atoi(machineType[i+1:])
		switch s {
		case "g2":
			return g2GPUs[v], true
		case "g4":
			return g4GPUs[v], true
		}
	}
	return 0, true
}

// CheckBuiltInGPUs says why asking for gpus GPUs on a type with built-in
// GPUs cannot be had: their count is the type's, nothing is attached.
func CheckBuiltInGPUs(machineType string, gpus int) error {
	n, ok := BuiltInGPUs(machineType)
	if !ok || gpus <= 0 || n == 0 || n == gpus {
		return nil
	}
	return fmt.Errorf("%s comes with %d GPU(s), fixed by the type; %d were asked for (choose the type with that many, %s)", machineType, n, gpus, RefAccelerator)
}

// spotOnly are the types sold only as Spot VMs (or flex-start, which the
// gateway does not use): an on-demand insert is refused (RefAccelerator).
var spotOnly = map[string]bool{"a3-highgpu-1g": true, "a3-highgpu-2g": true, "a3-highgpu-4g": true}

// SpotOnly reports a type sold only as Spot (or flex-start).
func SpotOnly(machineType string) bool { return spotOnly[machineType] }

// CheckProvisioning says why the type cannot be had on demand.
func CheckProvisioning(machineType string, spot bool) error {
	if spotOnly[machineType] && !spot {
		return fmt.Errorf("%s is sold only as Spot (or flex-start), not on demand (%s)", machineType, RefAccelerator)
	}
	return nil
}

// hyperdiskOnly are the series that take no Persistent Disk: their boot
// disk must be Hyperdisk (RefPDSupport, RefDiskSupport). Other series may
// be added by Google; a type outside this list keeps the configured type.
var hyperdiskOnly = map[string]bool{
	"c4": true, "c4a": true, "c4d": true, "n4": true, "n4a": true, "n4d": true,
	"h4d": true, "m4": true, "x4": true, "a3-ultragpu": true, "a4": true, "a4x": true, "g4": true,
}

// noHyperdisk are series that take Persistent Disk only (RefDiskSupport).
var noHyperdisk = map[string]bool{"n1": true, "e2": true, "a2": true, "f1": true, "g1": true}

// HyperdiskOnly reports a series that takes no Persistent Disk.
func HyperdiskOnly(machineType string) bool { return hyperdiskOnly[Series(machineType)] }

// BootDiskType is the boot disk type for the machine type: the configured
// one where the series takes it, else hyperdisk-balanced on series that
// take only Hyperdisk and pd-balanced on those that take none.
func BootDiskType(machineType, configured string) string {
	switch {
	case HyperdiskOnly(machineType) && !strings.HasPrefix(configured, "hyperdisk-"):
		return "hyperdisk-balanced"
	case noHyperdisk[Series(machineType)] && strings.HasPrefix(configured, "hyperdisk-"):
		return "pd-balanced"
	}
	return configured
}

// CheckBootDisk says why a disk type (a short name) cannot be a machine
// type's boot disk.
func CheckBootDisk(machineType, diskType string) error {
	switch {
	case HyperdiskOnly(machineType) && !strings.HasPrefix(diskType, "hyperdisk-"):
		return fmt.Errorf("%s series machines take Hyperdisk only, not %s (%s)", strings.ToUpper(Series(machineType)), diskType, RefPDSupport)
	case noHyperdisk[Series(machineType)] && strings.HasPrefix(diskType, "hyperdisk-"):
		return fmt.Errorf("%s series machines take Persistent Disk only, not %s (%s)", strings.ToUpper(Series(machineType)), diskType, RefDiskSupport)
	}
	return nil
}
