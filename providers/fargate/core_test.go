package fargate_test

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
)

// TestMismatchFailsTheClusterThroughTheCore runs the scheduling core on
// the Fargate provider (real SDK, the fake ECS and CloudWatch Logs): a
// cluster asked for with the client's versions starts its scheduler with
// them in the launch's override; when that scheduler's launcher exits with
// 97 and its table in the task's log, the cluster fails with the table.
func TestMismatchFailsTheClusterThroughTheCore(t *testing.T) {
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	ctx, core := coretest.Start(t, testGateway, p)
	cl := coretest.CreateWithVersions(ctx, t, core)
	var task fargatetest.Task
	coretest.Eventually(t, "no scheduler task", func() bool {
		var ok bool
		task, ok = f.TaskOf(cl.Name, "scheduler")
		return ok
	})
	if got := task.Environment[images.ExpectEnv]; !strings.Contains(got, `"numpy":"1.26.4"`) {
		t.Fatalf("the scheduler's override has %s=%q; want the client's versions", images.ExpectEnv, got)
	}
	table := images.MismatchMarker + ": this scheduler does not run the client's software\n" +
		"package  client  image\n" +
		"numpy    1.26.4  1.24.2"
	id := task.ARN[strings.LastIndex(task.ARN, "/")+1:]
	f.Log("/gateway/dask", "gateway/dask/"+id, append([]string{"gateway-env: python=3.11 numpy=1.24.2"}, strings.Split(table, "\n")...)...)
	if err := f.Exit(task.ARN, images.MismatchExitCode, ""); err != nil {
		t.Fatal(err)
	}
	coretest.WaitMismatch(ctx, t, core, cl.Name, table)
}
