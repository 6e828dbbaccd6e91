package gcerules

import (
	"strings"
	"testing"
)

func TestBuiltInGPUs(t *testing.T) {
	for mt, want := range map[string]int{
		"a2-highgpu-1g": 1, "a2-megagpu-16g": 16, "a3-highgpu-8g": 8, "a3-ultragpu-8g": 8, "a4x-highgpu-4g": 4,
		"g2-standard-4": 1, "g2-standard-24": 2, "g2-standard-96": 8, "g4-standard-192": 4,
		"n1-standard-8": -1, "c4-standard-4": -1,
	} {
		n, builtin := BuiltInGPUs(mt)
		if (want < 0) == builtin || (want >= 0 && n != want) {
			t.Errorf("BuiltInGPUs(%s) = %d, %v; want %d", mt, n, builtin, want)
		}
	}
}

func TestBootDiskType(t *testing.T) {
	for _, tt := range []struct{ mt, configured, want string }{
		{"c4-standard-4", "pd-balanced", "hyperdisk-balanced"},
		{"a3-ultragpu-8g", "pd-ssd", "hyperdisk-balanced"},
		{"a3-highgpu-8g", "pd-balanced", "pd-balanced"},
		{"n1-standard-4", "hyperdisk-balanced", "pd-balanced"},
		{"n2-standard-4", "pd-ssd", "pd-ssd"},
		{"c4-standard-4", "hyperdisk-extreme", "hyperdisk-extreme"},
	} {
		if got := BootDiskType(tt.mt, tt.configured); got != tt.want {
			t.Errorf("BootDiskType(%s, %s) = %s; want %s", tt.mt, tt.configured, got, tt.want)
		}
		if err := CheckBootDisk(tt.mt, BootDiskType(tt.mt, tt.configured)); err != nil {
			t.Errorf("the chosen disk is refused: %v", err)
		}
	}
}

func TestCheckN1GPUs(t *testing.T) {
	for _, tt := range []struct {
		mt, accel string
		count     int
		vcpus     int
		mem       float64
		want      string // "" for allowed
	}{
		{"n1-standard-8", "nvidia-tesla-t4", 3, 8, 30, "not 3"},
		{"n1-standard-96", "nvidia-tesla-t4", 1, 96, 360, "at most 48 vCPUs"},
		{"n1-highmem-32", "nvidia-tesla-v100", 4, 32, 208, ""},
		{"n1-highmem-16", "nvidia-tesla-v100", 1, 16, 104, "at most 12 vCPUs"},
		{"n1-standard-96", "nvidia-tesla-t4", 4, 96, 360, ""},
		{"g1-small", "nvidia-tesla-t4", 1, 1, 1.7, "shared-core"},
		{"n2-standard-4", "nvidia-tesla-t4", 1, 4, 16, "takes no attached GPUs"},
		{"n1-standard-4", "nvidia-l4", 1, 4, 15, "do not attach"},
	} {
		err := CheckN1GPUs(tt.mt, tt.accel, tt.count, tt.vcpus, tt.mem)
		if (tt.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), RefN1GPUs))) {
			t.Errorf("CheckN1GPUs(%s, %s, %d): %v; want %q", tt.mt, tt.accel, tt.count, err, tt.want)
		}
	}
}
