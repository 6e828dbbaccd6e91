package gcetest

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequestIDs: a request ID must be a UUID (not the zero one); a
// repeated one returns the first request's operation and acts once, for
// firewalls and deletes as for inserts.
func TestRequestIDs(t *testing.T) {
	s := New(t, Options{})
	for _, rid := range []string{"r1", "00000000-0000-0000-0000-000000000000"} {
		if code, out := call(t, s, "POST", base+"zones/us-central1-a/instances?requestId="+rid, instanceJSON("vm-1", "e2-standard-2", "")); code != 400 || errReason(out) != "invalid" {
			t.Errorf("requestId %q: %d %v", rid, code, out)
		}
	}
	const rule = `{"name":"r","network":"global/networks/default","sourceRanges":["10.0.0.0/8"],"allowed":[{"IPProtocol":"tcp","ports":["8786"]}]}`
	const rid = "9b2f7c1e-4a5d-4e6f-8a7b-1c2d3e4f5a6b"
	_, first := call(t, s, "POST", base+"global/firewalls?requestId="+rid, rule)
	code, again := call(t, s, "POST", base+"global/firewalls?requestId="+rid, rule)
	if code != 200 || again["name"] != first["name"] {
		t.Fatalf("repeated firewall insert: %d %v, first %v", code, again, first)
	}
	if code, _ := call(t, s, "POST", base+"global/firewalls?requestId=1b2f7c1e-4a5d-4e6f-8a7b-1c2d3e4f5a6b", rule); code != 409 {
		t.Errorf("another request ID for the same rule: %d, want 409", code)
	}
	const del = "2c3f7c1e-4a5d-4e6f-8a7b-1c2d3e4f5a6b"
	_, d1 := call(t, s, "DELETE", base+"global/firewalls/r?requestId="+del, "")
	call(t, s, "GET", base+"global/operations/"+d1["name"].(string), "") // the delete completes
	if code, d2 := call(t, s, "DELETE", base+"global/firewalls/r?requestId="+del, ""); code != 200 || d2["name"] != d1["name"] {
		t.Errorf("repeated delete after it completed: %d %v", code, d2)
	}
}

// TestThrottleAndLostAnswers: a throttling burst refuses any request with
// the API's rate-limit answer; a lost answer acts first.
func TestThrottleAndLostAnswers(t *testing.T) {
	s := New(t, Options{})
	s.Throttle(2)
	if code, out := call(t, s, "GET", base+"aggregated/instances", ""); code != 403 || errReason(out) != "rateLimitExceeded" {
		t.Errorf("compute: %d %v", code, out)
	}
	if code, out := call(t, s, "GET", "/v1/projects/test-project/secrets/x", ""); code != 429 || !strings.Contains(out["error"].(map[string]any)["status"].(string), "RESOURCE_EXHAUSTED") {
		t.Errorf("secret manager: %d %v", code, out)
	}
	if code, _ := call(t, s, "GET", base+"aggregated/instances", ""); code != 200 {
		t.Errorf("after the burst: %d", code)
	}
	s.LoseAnswersReset("POST", "/instances", 1)
	req, _ := http.NewRequest("POST", s.URL+base+"zones/us-central1-a/instances", strings.NewReader(instanceJSON("vm-2", "e2-standard-2", "")))
	if resp, err := s.srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("lost answer came: %d", resp.StatusCode)
	}
	if _, ok := s.Instance("vm-2"); !ok {
		t.Error("the call whose answer was lost did not act")
	}
	if n := s.Injected(); n != 3 {
		t.Errorf("Injected = %d, want 3", n)
	}
}
