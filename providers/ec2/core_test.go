package ec2

import (
	"context"
	"encoding/json"
	"errors"
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
// the EC2 provider (real SDK, the EC2 and SSM fakes): a cluster asked for
// with the client's versions boots its scheduler with them in its user
// data; when that scheduler's launcher prints its table and the machine
// powers itself off, the cluster fails with the table read from the
// console.
func TestMismatchFailsTheClusterThroughTheCore(t *testing.T) {
	// The launcher exits before Dask listens: the scheduler never accepts
	// a connection.
	e := newEnv(t, func(c *Config) {
		c.ProbeScheduler = func(context.Context, string) error { return errors.New("connection refused") }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	core := scheduler.New(scheduler.Config{
		GatewayID: "gw-test", Limits: scheduler.Limits{MaxWorkers: 2, MaxWorkerThreads: 4, MaxWorkerMemory: 16, Images: true},
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, ok := e.ec2.Instance(cl.Name, "scheduler")
		if ok {
			if !strings.Contains(in.UserData, images.ExpectEnv+"=") || !strings.Contains(in.UserData, `"numpy":"1.26.4"`) {
				t.Fatalf("the scheduler's user data lacks the client's versions")
			}
			e.ec2.Print(in.ID, mismatchConsole(testTable))
			e.ec2.ShutDown(in.ID)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduler instance after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		got, err := core.Get(ctx, "ann", cl.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.Failed {
			if !strings.Contains(got.Reason, "the scheduler runs other software than the client:\n"+testTable) {
				t.Errorf("cluster failed with %q; want the table:\n%s", got.Reason, testTable)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s is %s (%s) after 30s; want failed", cl.Name, got.Status, got.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
