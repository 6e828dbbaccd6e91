package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestHealthDetailsOnMetricsPort: the public /api/health tells anyone the
// status alone, the metrics port's /health tells the operator which check
// failed and where the database is (issue 32, finding 6); here with the
// gateway's real SQLite store, closed under it.
func TestHealthDetailsOnMetricsPort(t *testing.T) {
	cfg := devConfig(t)
	cfg.MetricsListen = "127.0.0.1:0"
	g := runGateway(t, cfg)
	public := "http://" + g.Addr().String() + "/api/health"
	metrics := "http://" + g.MetricsAddr().String() + "/health"
	type answer struct {
		Status string `json:"status"`
		Checks map[string][]struct {
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"checks"`
	}
	get := func(url string) (int, answer, string) {
		t.Helper()
		code, body := hostStatus(t, "GET", url, "")
		var a answer
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("GET %s: %d %q: %v", url, code, body, err)
		}
		return code, a, body
	}
	if code, _, body := get(public); code != 200 || strings.TrimSpace(body) != `{"status":"pass"}` {
		t.Errorf("public health with the database up: %d %s, want 200 {\"status\":\"pass\"}", code, body)
	}
	if code, a, body := get(metrics); code != 200 || a.Status != "pass" || len(a.Checks["database"]) != 1 || a.Checks["database"][0].Status != "pass" {
		t.Errorf("metrics port health with the database up: %d %s, want 200 with the database check", code, body)
	}

	if err := g.store.Close(); err != nil {
		t.Fatal(err)
	}
	// The health answer is kept a second: poll for the one that says so,
	// for at most half a minute.
	var body string
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); <-tick.C {
		var code int
		var a answer
		code, a, body = get(metrics)
		if code == 503 {
			if a.Status != "fail" || len(a.Checks["database"]) != 1 || !strings.Contains(a.Checks["database"][0].Output, "SQLite in "+cfg.DataDir) {
				t.Errorf("metrics port health with the database closed: %s, want the database check failing and naming %s", body, cfg.DataDir)
			}
			break
		}
	}
	if !strings.Contains(body, "fail") {
		t.Fatalf("metrics port health never failed with the database closed: %s", body)
	}
	if code, _, body := get(public); code != 503 || strings.TrimSpace(body) != `{"status":"fail"}` {
		t.Errorf("public health with the database closed: %d %s, want 503 {\"status\":\"fail\"} and nothing else", code, body)
	}
}
