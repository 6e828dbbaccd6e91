package ec2

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestListMembers: the sweep's one-call listing reports every cluster as
// Describe does (spot notices, a member that shut itself down, a launch
// EC2 does not list yet) with one DescribeInstances page and one spot
// request lookup, however many clusters run.
func TestListMembers(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	const clusters = 6
	workers := map[string]string{} // cluster -> its worker's instance id
	for i := range clusters {
		s := spec(fmt.Sprintf("c%d", i))
		s.Spot = true
		if err := e.p.StartScheduler(c, s); err != nil {
			t.Fatal(err)
		}
		if err := e.p.StartWorker(c, s, "worker-0", "10.0.1.10:8786"); err != nil {
			t.Fatal(err)
		}
		in, _ := e.ec2.Instance(s.Name, "worker-0")
		workers[s.Name] = in.ID
	}
	e.ec2.NoticeInterruption(workers["c1"])
	exited(e.ec2, workers["c2"])
	// A launch EC2 does not list yet.
	e.ec2.SetVisibilityDelay(100)
	if err := e.p.StartScheduler(c, spec("hidden")); err != nil {
		t.Fatal(err)
	}

	describes, spots := len(e.ec2.Requests("DescribeInstances")), len(e.ec2.Requests("DescribeSpotInstanceRequests"))
	all, err := e.p.ListMembers(c)
	if err != nil {
		t.Fatalf("ListMembers: %v", err)
	}
	if n := len(e.ec2.Requests("DescribeInstances")) - describes; n != 1 {
		t.Errorf("ListMembers made %d DescribeInstances calls for %d clusters, want 1", n, clusters+1)
	}
	if reqs := e.ec2.Requests("DescribeSpotInstanceRequests")[spots:]; len(reqs) != 1 {
		t.Errorf("ListMembers made %d DescribeSpotInstanceRequests calls, want 1", len(reqs))
	} else if q := reqs[0].Params; q.Get("SpotInstanceRequestId.1") != "" || q.Get("Filter.1.Name") != "status-code" {
		// By id, one request EC2 does not list yet fails the call for all.
		t.Errorf("spot requests asked by %v, want by status code", q)
	}
	names := []string{"hidden"}
	for i := range clusters {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	byCluster := contract.ListedAsDescribed(c, t, e.p, all, names...)
	if w, _ := memberByName(byCluster["c1"], "worker-0"); w.State != providers.StateStopped || !strings.Contains(w.Reason, "spot interruption") {
		t.Errorf("c1's worker with an interruption notice: %+v", w)
	}
	if w, _ := memberByName(byCluster["c2"], "worker-0"); w.State != providers.StateStopped || !strings.Contains(w.Reason, "shut itself down") {
		t.Errorf("c2's worker that exited: %+v", w)
	}
	if s, _ := memberByName(byCluster["hidden"], "scheduler"); s.State != providers.StatePending {
		t.Errorf("a scheduler launched but not listed yet: %+v, want pending", s)
	}

	// A cluster stopped (and so forgotten) stays listed, terminated, for
	// a while: listing it makes no new record of it, and reads no
	// console again.
	e.ec2.SetVisibilityDelay(0)
	if err := e.p.StopCluster(c, "c2"); err != nil {
		t.Fatal(err)
	}
	consoles := len(e.ec2.Requests("GetConsoleOutput"))
	all, err = e.p.ListMembers(c)
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, m := range all {
		if m.Cluster == "c2" {
			listed++
			if m.State != providers.StateStopped {
				t.Errorf("a member of a stopped cluster: %+v", m)
			}
		}
	}
	if listed == 0 {
		t.Errorf("the stopped cluster's terminated instances are not listed: %+v", all)
	}
	if n := len(e.ec2.Requests("GetConsoleOutput")) - consoles; n != 0 {
		t.Errorf("listing a stopped cluster read %d consoles", n)
	}
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if e.p.consoles["c2"] != nil || e.p.ready["c2"] != nil {
		t.Errorf("listing a stopped cluster made records of it again: consoles %v, ready %v", e.p.consoles["c2"], e.p.ready["c2"])
	}
}
