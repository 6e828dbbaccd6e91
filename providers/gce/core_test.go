package gce

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// nopRouter is the core's router without a proxy behind it.
type nopRouter struct{}

func (nopRouter) SetRoute(string, string, string, string, []byte) {}
func (nopRouter) DeleteRoute(string)                              {}

// TestMismatchFailsTheClusterThroughTheCore runs the scheduling core on
// the Compute Engine provider (real client library, the fake): a cluster
// asked for with the client's versions starts its scheduler with them in
// its startup script; when that scheduler's script records the
// launcher's table in gateway/status and powers the machine off, the
// cluster fails with the table.
func TestMismatchFailsTheClusterThroughTheCore(t *testing.T) {
	e := newEnv(t, nil)
	// The launcher exits before Dask listens: the scheduler never
	// becomes ready.
	e.srv.AutoReady(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	core := scheduler.New(scheduler.Config{
		GatewayID: testGatewayID, Limits: scheduler.Limits{MaxWorkers: 2, MaxWorkerThreads: 4, MaxWorkerMemory: 16, Images: true},
		StartTimeout: time.Minute, PollInterval: 20 * time.Millisecond, Concurrency: 2, CertLifetime: time.Hour, WorkerRestarts: 3,
	}, st, e.p, nopRouter{}, slog.New(slog.DiscardHandler))
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
	table := strings.Replace(testTable, "worker", "scheduler", 1)
	name := instanceName(cl.Name, "scheduler")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if in, ok := e.srv.Instance(name); ok && in.Status == "RUNNING" {
			script, _ := in.MetadataValue("startup-script")
			if !strings.Contains(script, images.ExpectEnv+"=") || !strings.Contains(script, `"numpy":"1.26.4"`) {
				t.Fatalf("the scheduler's startup script lacks the client's versions")
			}
			if err := e.srv.PowerOff(name, table); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no running scheduler instance after 30s")
		}
		time.Sleep(20 * time.Millisecond)
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
