package fargate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// nopRouter is the core's router without a proxy behind it.
type nopRouter struct{}

func (nopRouter) SetRoute(string, string, string, string, []byte) {}
func (nopRouter) DeleteRoute(string)                              {}

// TestMismatchFailsTheClusterThroughTheCore runs the scheduling core on
// the Fargate provider (real SDK, the fake ECS and CloudWatch Logs): a
// cluster asked for with the client's versions starts its scheduler with
// them in the launch's override; when that scheduler's launcher exits with
// 97 and its table in the task's log, the cluster fails with the table.
func TestMismatchFailsTheClusterThroughTheCore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	core := scheduler.New(scheduler.Config{
		GatewayID: testGateway, Limits: scheduler.Limits{MaxWorkers: 2, MaxWorkerThreads: 2, MaxWorkerMemory: 4, Images: true},
		StartTimeout: time.Minute, PollInterval: 20 * time.Millisecond, Concurrency: 2, CertLifetime: time.Hour, WorkerRestarts: 3,
	}, st, p, nopRouter{}, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = core.Run(ctx) }()
	defer wg.Wait()
	defer cancel()

	raw := map[string]json.RawMessage{"client_env": json.RawMessage(`{"python":"3.11","numpy":"1.26.4"}`)}
	cl, err := core.Create(ctx, scheduler.Who{ID: "ann", Name: "ann"}, raw)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var task fargatetest.Task
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if task, ok = f.TaskOf(cl.Name, "scheduler"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduler task after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	for {
		got, err := core.Get(ctx, "ann", cl.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.Failed {
			if !strings.Contains(got.Reason, "the scheduler runs other software than the client:\n"+table) {
				t.Errorf("cluster failed with %q; want the table:\n%s", got.Reason, table)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s is %s (%s) after 30s; want failed", cl.Name, got.Status, got.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
