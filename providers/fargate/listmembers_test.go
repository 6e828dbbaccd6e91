package fargate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestListMembers: the sweep's one-call listing reports every cluster as
// Describe does (a worker whose launcher found other software, with its
// table from the log; one that exited) with one listing of the ECS
// cluster per desired status and one DescribeTasks call per 100 tasks,
// however many clusters run; a cluster stopped since is listed without
// its logs being read again.
func TestListMembers(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f, func(c *fargate.Config) { c.LogGroup = "/gateway/dask" })
	const clusters = 4
	for i := range clusters {
		spec := testSpec(fmt.Sprintf("c%d", i), "ann")
		if err := p.StartScheduler(ctx, spec); err != nil {
			t.Fatal(err)
		}
		sched := schedulerUp(t, p, spec.Name)
		if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
			t.Fatal(err)
		}
	}
	mismatched, _ := f.TaskOf("c1", "worker-0")
	id := mismatched.ARN[strings.LastIndex(mismatched.ARN, "/")+1:]
	f.Log("/gateway/dask", "gateway/dask/"+id, strings.Split(testTable, "\n")...)
	if err := f.Exit(mismatched.ARN, images.MismatchExitCode, ""); err != nil {
		t.Fatal(err)
	}
	exited, _ := f.TaskOf("c2", "worker-0")
	if err := f.Exit(exited.ARN, 1, ""); err != nil {
		t.Fatal(err)
	}

	lists, describes := f.Calls("ecs:ListTasks"), f.Calls("ecs:DescribeTasks")
	all, err := p.ListMembers(ctx)
	if err != nil {
		t.Fatalf("ListMembers: %v", err)
	}
	if n := f.Calls("ecs:ListTasks") - lists; n != 2 {
		t.Errorf("ListMembers made %d ListTasks calls for %d clusters, want 2 (running and stopped)", n, clusters)
	}
	if n := f.Calls("ecs:DescribeTasks") - describes; n != 1 {
		t.Errorf("ListMembers made %d DescribeTasks calls for %d tasks, want 1", n, 2*clusters)
	}
	var names []string
	for i := range clusters {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	byCluster := contract.ListedAsDescribed(ctx, t, p, all, names...)
	if w := find(byCluster["c1"], "worker-0"); w == nil || w.State != providers.StateStopped || !strings.Contains(w.Reason, testTable) {
		t.Errorf("c1's worker, other software: %+v, want stopped with the table", w)
	}
	if w := find(byCluster["c2"], "worker-0"); w == nil || w.State != providers.StateStopped || !strings.Contains(w.Reason, "exit code 1") {
		t.Errorf("c2's worker that exited: %+v", w)
	}

	// Two live tasks of this gateway, each a "worker-0", that lost their
	// cluster tag: they belong to no cluster the listing can name, so
	// they are neither listed nor taken for duplicates of each other.
	var untagged []string
	for _, c := range []string{"c0", "c3"} {
		task, _ := f.TaskOf(c, "worker-0")
		if err := f.Untag(task.ARN, "gateway-cluster"); err != nil {
			t.Fatal(err)
		}
		untagged = append(untagged, task.ARN)
	}
	all, err = p.ListMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Cluster == "" {
			t.Errorf("a task without a cluster tag listed: %+v", m)
		}
	}
	for _, task := range f.Tasks() {
		if slices.Contains(untagged, task.ARN) && task.DesiredStatus != "RUNNING" {
			t.Errorf("task %s, without a cluster tag, was stopped (%s)", task.ARN, task.StoppedReason)
		}
	}

	if err := p.StopCluster(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	reads := f.Calls("logs:GetLogEvents")
	all, err = p.ListMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Cluster == "c1" && m.State != providers.StateStopped {
			t.Errorf("a member of a stopped cluster: %+v", m)
		}
	}
	if n := f.Calls("logs:GetLogEvents") - reads; n != 0 {
		t.Errorf("listing a stopped cluster read %d logs", n)
	}
}
