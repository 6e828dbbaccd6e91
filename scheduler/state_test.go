package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// TestEndedClusterLeavesNoRecord: the loop's record of a cluster (its
// worker exits, idle and heartbeat clocks, settled state) goes when the
// cluster ends, stopped or failed, so that a long-lived gateway keeps
// nothing of the clusters it ran.
func TestEndedClusterLeavesNoRecord(t *testing.T) {
	for _, end := range []string{"stopped", "failed"} {
		t.Run(end, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			cl := h.create("alice", 2)
			h.waitSettled(cl.Name, 2)
			h.fp.exitWorker(cl.Name, "worker-0", "segfault") // an exit is counted in the record
			h.waitSettled(cl.Name, 2)
			if !h.core.HasRecord(cl.Name) {
				t.Fatal("a running cluster has no record")
			}
			want := store.Stopped
			if end == "stopped" {
				if err := h.core.Stop(h.ctx, "alice", cl.Name, "done"); err != nil {
					t.Fatal(err)
				}
			} else {
				want = store.Failed
				h.fp.exitScheduler(cl.Name, "killed")
			}
			h.waitStatus(cl.Name, want)
			eventually(t, 10*time.Second, "the record to go", func() (bool, string) {
				return !h.core.HasRecord(cl.Name), fmt.Sprintf("record kept for %s", cl.Name)
			})
		})
	}
}
