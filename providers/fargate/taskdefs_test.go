package fargate_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestStopDeletesTaskDefinitions: StopCluster leaves none of the cluster's
// task definitions ACTIVE or INACTIVE on a fake whose ListTaskDefinitions
// matches familyPrefix exactly, as AWS does, across pages, including those
// a previous stop deregistered but could not delete; a cluster whose name
// merely extends this one's keeps its own.
func TestStopDeletesTaskDefinitions(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	f.SetPageSize(1) // every listing takes several pages
	p, _ := newProvider(t, f)
	const cl, sibling = "c-defs", "c-defs-2"
	for _, name := range []string{cl, sibling} {
		spec := testSpec(name, "ann")
		if err := p.StartScheduler(ctx, spec); err != nil {
			t.Fatalf("StartScheduler(%s): %v", name, err)
		}
		sched := schedulerUp(t, p, name)
		if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
			t.Fatalf("StartWorker(%s): %v", name, err)
		}
	}
	count := func(cluster string) (live, total int) {
		for _, d := range f.TaskDefinitions() {
			if d.Tags["gateway-cluster"] != cluster {
				continue
			}
			total++
			if d.Status == "ACTIVE" || d.Status == "INACTIVE" {
				live++
			}
		}
		return live, total
	}
	if live, _ := count(cl); live != 2 {
		t.Fatalf("%d live task definitions of %s before the stop; want the scheduler's and the worker's", live, cl)
	}

	// The first stop deregisters but cannot delete: INACTIVE ones remain,
	// in families with no ACTIVE revision left.
	f.FailNext("ecs:DeleteTaskDefinitions", 1, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform ecs:DeleteTaskDefinitions")
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	for _, d := range f.TaskDefinitions() {
		if d.Tags["gateway-cluster"] == cl && d.Status != "INACTIVE" {
			t.Errorf("task definition %s is %s after a stop whose deletes failed; want INACTIVE", d.Family, d.Status)
		}
	}
	if err := p.StopCluster(ctx, cl); err != nil {
		t.Fatalf("StopCluster again: %v", err)
	}
	if live, total := count(cl); live != 0 || total != 2 {
		t.Errorf("after StopCluster: %d of %s's %d task definitions are ACTIVE or INACTIVE; want 0 of 2", live, cl, total)
	}
	if live, _ := count(sibling); live != 2 {
		t.Errorf("%d live task definitions of %s; StopCluster(%s) must leave its 2", live, sibling, cl)
	}
	if f.Calls("ecs:ListTaskDefinitionFamilies") == 0 {
		t.Error("the families were never listed")
	}
}
