package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// TestUnreadableOptionsAnswered: a cluster whose stored options cannot be
// read (the loop fails it, saying why) is still answered, alone and in its
// owner's list, with null options and its reason; the owner's other
// clusters are not lost with it.
func TestUnreadableOptionsAnswered(t *testing.T) {
	srv, core, _ := newTestServer(t)
	for name, opts := range map[string]string{"bad1": `{"idle_timeout":60`, "bad2": `{"worker_threads":"two"}`} {
		core.clusters[name] = &store.Cluster{Name: name, Owner: "alice", Status: store.Failed, Options: opts, CreatedAt: time.UnixMilli(8000),
			Reason: "cluster " + name + ": its stored options cannot be read: ..."}
	}
	for _, path := range []string{"/api/v1/clusters/bad1", "/api/v1/clusters/bad2?view=detail", "/api/v1/clusters/?status=FAILED,RUNNING&view=detail"} {
		code, _, body := do(t, srv, "GET", path, "alice-token-000000", "")
		var got map[string]json.RawMessage
		if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
			t.Errorf("GET %s: %d %q (%v); want 200 with a JSON object", path, code, body, err)
		}
	}
	code, _, body := do(t, srv, "GET", "/api/v1/clusters/?status=FAILED,RUNNING&view=detail", "alice-token-000000", "")
	var list map[string]struct {
		Options json.RawMessage `json:"options"`
		Reason  string          `json:"reason"`
	}
	if err := json.Unmarshal(body, &list); err != nil || code != http.StatusOK {
		t.Fatalf("list: %d %s (%v)", code, body, err)
	}
	for _, name := range []string{"bad1", "bad2"} {
		if c := list[name]; string(c.Options) != "null" || c.Reason == "" {
			t.Errorf("%s in the list: options %s, reason %q; want null options and the reason", name, c.Options, c.Reason)
		}
	}
	if c, ok := list["run1"]; !ok || string(c.Options) != `{"workers":1}` {
		t.Errorf("run1 in the list: %+v (listed: %v); want its options as stored", c, ok)
	}
}
