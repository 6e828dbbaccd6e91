package gcetest

import (
	"strconv"
	"strings"
	"testing"
)

// TestDocumentedShapeRules: the fake refuses, as Compute Engine does, the
// inserts that break the documented rules in gcerules (a kinder fake, one
// that took any count of any GPU on any type, any disk type and any
// provisioning model, fails each refusal case), and takes the shapes the
// rules allow.
func TestDocumentedShapeRules(t *testing.T) {
	gpus := func(accel string, n int) string {
		return `,"guestAccelerators":[{"acceleratorType":"zones/us-central1-a/acceleratorTypes/` + accel + `","acceleratorCount":` + itoa(n) + `}]`
	}
	const terminate = `,"scheduling":{"onHostMaintenance":"TERMINATE","automaticRestart":false}`
	const spot = `,"scheduling":{"provisioningModel":"SPOT","onHostMaintenance":"TERMINATE","automaticRestart":false,"instanceTerminationAction":"DELETE"}`
	disk := func(machineType, dt string) string {
		return `{"name":"vm","machineType":"zones/us-central1-a/machineTypes/` + machineType + `",` +
			`"disks":[{"boot":true,"autoDelete":true,"initializeParams":{"sourceImage":"projects/cos-cloud/global/images/family/cos-stable","diskType":"zones/us-central1-a/diskTypes/` + dt + `"}}],` +
			`"networkInterfaces":[{"network":"global/networks/default"}]}`
	}
	tests := []struct {
		name string
		body string
		want string // substring of the refusal; "" for accepted
	}{
		{"three T4s on N1", instanceJSON("vm", "n1-standard-8", gpus("nvidia-tesla-t4", 3)+terminate), "counts of 1, 2, 4, not 3"},
		{"one T4 on 96 vCPUs", instanceJSON("vm", "n1-standard-96", gpus("nvidia-tesla-t4", 1)+terminate), "at most 48 vCPUs"},
		{"eight T4s", instanceJSON("vm", "n1-standard-8", gpus("nvidia-tesla-t4", 8)+terminate), "not 8"},
		{"one V100 on 96 vCPUs", instanceJSON("vm", "n1-standard-96", gpus("nvidia-tesla-v100", 1)+terminate), "at most 12 vCPUs"},
		{"L4 attached to N1", instanceJSON("vm", "n1-standard-8", gpus("nvidia-l4", 1)+terminate), "do not attach to N1"},
		{"GPU attached to N2", instanceJSON("vm", "n2-standard-4", gpus("nvidia-tesla-t4", 1)+terminate), "takes no attached GPUs"},
		{"GPU attached to A2", instanceJSON("vm", "a2-highgpu-1g", gpus("nvidia-tesla-a100", 4)+terminate), "comes with its GPUs"},
		{"a3-highgpu-1g on demand", instanceJSON("vm", "a3-highgpu-1g", terminate), "sold only as Spot"},
		{"pd-balanced on C4", disk("c4-standard-4", "pd-balanced"), "take Hyperdisk only"},
		{"pd-ssd on N4", disk("n4-standard-4", "pd-ssd"), "take Hyperdisk only"},
		{"hyperdisk on N1", disk("n1-standard-4", "hyperdisk-balanced"), "Persistent Disk only"},

		{"two T4s on N1", instanceJSON("vm", "n1-standard-8", gpus("nvidia-tesla-t4", 2)+terminate), ""},
		{"four T4s on 96 vCPUs", instanceJSON("vm", "n1-standard-96", gpus("nvidia-tesla-t4", 4)+terminate), ""},
		{"a3-highgpu-1g as Spot", instanceJSON("vm", "a3-highgpu-1g", spot), ""},
		{"a2 with its own GPU", instanceJSON("vm", "a2-highgpu-1g", terminate), ""},
		{"hyperdisk on C4", disk("c4-standard-4", "hyperdisk-balanced"), ""},
		{"pd-balanced on N2", disk("n2-standard-4", "pd-balanced"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, Options{})
			code, out := call(t, s, "POST", base+"zones/us-central1-a/instances", tt.body)
			if tt.want == "" {
				if code != 200 {
					t.Fatalf("refused a documented shape: %d %v", code, out)
				}
				return
			}
			e, _ := out["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if code != 400 || !strings.Contains(msg, tt.want) {
				t.Fatalf("got %d %q; want 400 with %q", code, msg, tt.want)
			}
			if !strings.Contains(msg, "https://cloud.google.com/compute/docs/") {
				t.Errorf("the refusal names no documentation page: %q", msg)
			}
			if n := len(s.Instances()); n != 0 {
				t.Errorf("a refused insert left %d instances", n)
			}
		})
	}
}

// TestUnreachableZone: a zone made unreachable is left out of
// aggregatedList, said so in unreachables or in its scope's UNREACHABLE
// warning, and its own methods answer 503 until it is reachable again.
func TestUnreachableZone(t *testing.T) {
	for _, warning := range []bool{false, true} {
		s := New(t, Options{})
		if code, out := call(t, s, "POST", base+"zones/us-central1-b/instances", strings.ReplaceAll(instanceJSON("vm-b", "e2-standard-2", ""), "us-central1-a", "us-central1-b")); code != 200 {
			t.Fatalf("insert: %d %v", code, out)
		}
		s.Unreachable("us-central1-b", warning)
		code, out := call(t, s, "GET", base+"aggregated/instances", "")
		if code != 200 {
			t.Fatalf("aggregatedList: %d %v", code, out)
		}
		items, _ := out["items"].(map[string]any)
		scope, _ := items["zones/us-central1-b"].(map[string]any)
		if _, listed := scope["instances"]; listed {
			t.Errorf("warning=%v: the unreachable zone's instances were listed", warning)
		}
		unreachables, _ := out["unreachables"].([]any)
		w, _ := scope["warning"].(map[string]any)
		switch {
		case warning && w["code"] != "UNREACHABLE":
			t.Errorf("scope warning %v; want UNREACHABLE", w)
		case !warning && (len(unreachables) != 1 || unreachables[0] != "zones/us-central1-b" || scope != nil):
			t.Errorf("unreachables %v, scope %v; want zones/us-central1-b named and its scope absent", unreachables, scope)
		}
		if code, _ := call(t, s, "GET", base+"zones/us-central1-b/instances/vm-b", ""); code != 503 {
			t.Errorf("a get in the unreachable zone answered %d; want 503", code)
		}
		s.Reachable("us-central1-b")
		_, out = call(t, s, "GET", base+"aggregated/instances", "")
		items, _ = out["items"].(map[string]any)
		scope, _ = items["zones/us-central1-b"].(map[string]any)
		if _, listed := scope["instances"]; !listed || out["unreachables"] != nil {
			t.Errorf("reachable again: %v", out)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
