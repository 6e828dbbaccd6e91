package gcetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// call sends a raw request to the fake and decodes the JSON answer.
func call(t *testing.T, s *Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return resp.StatusCode, out
}

const base = "/compute/v1/projects/test-project/"

func instanceJSON(name, machineType, extra string) string {
	return `{"name":"` + name + `","machineType":"zones/us-central1-a/machineTypes/` + machineType + `",` +
		`"disks":[{"boot":true,"autoDelete":true,"initializeParams":{"sourceImage":"projects/cos-cloud/global/images/family/cos-stable","diskSizeGb":"10"}}],` +
		`"networkInterfaces":[{"network":"global/networks/default"}],"labels":{"gateway-id":"g"}` + extra + `}`
}

func errReason(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	items, _ := e["errors"].([]any)
	if len(items) == 0 {
		s, _ := e["status"].(string)
		return s
	}
	r, _ := items[0].(map[string]any)["reason"].(string)
	return r
}

// TestWire checks the answers the fake promises: operations that finish on
// the next request, the API's refusals, request-ID idempotency, filters,
// paging and Secret Manager checksums.
func TestWire(t *testing.T) {
	s := New(t, Options{PageSize: 1})

	code, op := call(t, s, "POST", base+"zones/us-central1-a/instances?requestId=6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c", instanceJSON("vm-1", "e2-standard-2", ""))
	if code != 200 || op["status"] != "RUNNING" || op["operationType"] != "insert" {
		t.Fatalf("insert: %d %v", code, op)
	}
	code, again := call(t, s, "POST", base+"zones/us-central1-a/instances?requestId=6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c", instanceJSON("vm-1", "e2-standard-2", ""))
	if code != 200 || again["name"] != op["name"] {
		t.Errorf("repeated request ID: %d %v; want the first operation", code, again)
	}
	_, done := call(t, s, "POST", base+"zones/us-central1-a/operations/"+op["name"].(string)+"/wait", "")
	if done["status"] != "DONE" || done["targetId"] == "" {
		t.Errorf("wait: %v", done)
	}
	if code, out := call(t, s, "POST", base+"zones/us-central1-a/instances", instanceJSON("vm-1", "e2-standard-2", "")); code != 409 || errReason(out) != "alreadyExists" {
		t.Errorf("duplicate insert: %d %v", code, out)
	}
	_, in := call(t, s, "GET", base+"zones/us-central1-a/instances/vm-1", "")
	if in["status"] != "RUNNING" || in["id"] == nil {
		t.Errorf("instance after two requests: %v", in)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"bad name", instanceJSON("VM_1", "e2-standard-2", ""), "Must be a match of regex"},
		{"unknown machine type", instanceJSON("vm-2", "z9-huge-1", ""), "does not exist in zone"},
		{"gpu that migrates", instanceJSON("vm-3", "a2-highgpu-1g", `,"scheduling":{"onHostMaintenance":"MIGRATE"}`), "do not support live migration"},
		{"unknown accelerator", instanceJSON("vm-4", "n1-standard-4", `,"guestAccelerators":[{"acceleratorType":"zones/us-central1-a/acceleratorTypes/nvidia-x","acceleratorCount":1}],"scheduling":{"onHostMaintenance":"TERMINATE"}`), "does not exist in zone"},
		{"spot that restarts", instanceJSON("vm-5", "e2-standard-2", `,"scheduling":{"provisioningModel":"SPOT","onHostMaintenance":"TERMINATE","automaticRestart":true}`), "automaticRestart must be false"},
		{"bad tag", instanceJSON("vm-6", "e2-standard-2", `,"tags":{"items":["Bad Tag"]}`), "tags.items"},
	} {
		code, out := call(t, s, "POST", base+"zones/us-central1-a/instances", tc.body)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %q; want 400 with %q", tc.name, code, msg, tc.want)
		}
	}

	if code, _ := call(t, s, "GET", base+"aggregated/instances?filter="+urlq(`labels.gateway-id = "g" OR name = "x"`), ""); code != 400 {
		t.Errorf("a filter the fake does not understand: %d; want 400", code)
	}
	call(t, s, "POST", base+"zones/us-central1-a/instances", instanceJSON("vm-7", "e2-standard-2", ""))
	_, page1 := call(t, s, "GET", base+"aggregated/instances?filter="+urlq(`(labels.gateway-id = "g") AND (name != "vm-x")`), "")
	if page1["nextPageToken"] != "1" {
		t.Errorf("page size 1 with two matches: %v", page1)
	}
	_, page2 := call(t, s, "GET", base+"aggregated/instances?pageToken=1&filter="+urlq(`labels.gateway-id = g`), "")
	zone := page2["items"].(map[string]any)["zones/us-central1-a"].(map[string]any)
	if list, _ := zone["instances"].([]any); len(list) != 1 || page2["nextPageToken"] != nil {
		t.Errorf("second page: %v", page2)
	}
	if _, empty := call(t, s, "GET", base+"aggregated/instances?filter="+urlq(`labels.gateway-id = "none"`), ""); empty["items"].(map[string]any)["zones/us-central1-b"].(map[string]any)["warning"] == nil {
		t.Errorf("an empty zone carries no warning: %v", empty)
	}

	if code, out := call(t, s, "POST", "/v1/projects/test-project/secrets?secretId=s1", `{"replication":{"automatic":{}}}`); code != 200 || out["name"] != "projects/test-project/secrets/s1" {
		t.Errorf("create secret: %d %v", code, out)
	}
	if code, out := call(t, s, "POST", "/v1/projects/test-project/secrets/s1:addVersion", `{"payload":{"data":"aGVsbG8=","dataCrc32c":"1"}}`); code != 400 || errReason(out) != "INVALID_ARGUMENT" {
		t.Errorf("bad checksum: %d %v", code, out)
	}
	if code, out := call(t, s, "GET", "/v1/projects/test-project/secrets/s1/versions/latest:access", ""); code != 404 || errReason(out) != "NOT_FOUND" {
		t.Errorf("access without versions: %d %v", code, out)
	}
	if code, _ := call(t, s, "POST", "/v1/projects/test-project/secrets/s1:addVersion", `{"payload":{"data":"aGVsbG8="}}`); code != 200 {
		t.Errorf("add version: %d", code)
	}
	if _, out := call(t, s, "GET", "/v1/projects/test-project/secrets/s1/versions/latest:access", ""); out["payload"].(map[string]any)["data"] != "aGVsbG8=" {
		t.Errorf("access: %v", out)
	}
	if code, _ := call(t, s, "POST", "/v1/projects/test-project/secrets?secretId=s1", `{"replication":{"automatic":{}}}`); code != 409 {
		t.Errorf("duplicate secret: %d", code)
	}
	if code, _ := call(t, s, "POST", base+"global/firewalls", `{"name":"open","network":"global/networks/default","allowed":[{"IPProtocol":"tcp"}]}`); code != 400 {
		t.Errorf("an ingress rule without sources (0.0.0.0/0): %d; want 400", code)
	}
}

func urlq(s string) string {
	r := strings.NewReplacer(" ", "%20", `"`, "%22", "(", "%28", ")", "%29", "=", "%3D", "!", "%21")
	return r.Replace(s)
}

// TestFirewallServiceAccounts: service accounts in a rule are accepted
// alone, and refused mixed with network tags in either role, as Google
// documents.
func TestFirewallServiceAccounts(t *testing.T) {
	s := New(t, Options{})
	rule := func(name, extra string) string {
		return `{"name":"` + name + `","network":"global/networks/default","direction":"INGRESS","allowed":[{"IPProtocol":"tcp","ports":["8786-8787"]}]` + extra + `}`
	}
	for _, tc := range []struct {
		name, extra string
		status      int
	}{
		{"by-accounts", `,"sourceServiceAccounts":["gw@p.iam.gserviceaccount.com"],"targetServiceAccounts":["m@p.iam.gserviceaccount.com"]`, 200},
		{"by-tags", `,"sourceTags":["a"],"targetTags":["a"]`, 200},
		{"source-account-target-tag", `,"sourceServiceAccounts":["gw@p.iam.gserviceaccount.com"],"targetTags":["a"]`, 400},
		{"source-tag-target-account", `,"sourceTags":["a"],"targetServiceAccounts":["m@p.iam.gserviceaccount.com"]`, 400},
		{"both-sources", `,"sourceTags":["a"],"sourceServiceAccounts":["gw@p.iam.gserviceaccount.com"]`, 400},
		{"bad-account", `,"sourceServiceAccounts":["gateway"]`, 400},
		{"no-source", ``, 400},
	} {
		code, out := call(t, s, "POST", base+"global/firewalls", rule(tc.name, tc.extra))
		if code != tc.status {
			t.Errorf("%s: HTTP %d %v; want %d", tc.name, code, out, tc.status)
		}
		if tc.status == 400 && errReason(out) != "invalid" {
			t.Errorf("%s: reason %q", tc.name, errReason(out))
		}
	}
}
