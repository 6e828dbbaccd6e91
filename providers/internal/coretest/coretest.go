// Package coretest runs the scheduling core on a cloud provider for the
// providers' tests: a SQLite store in a temporary directory and the core's
// loop until the test ends, plus the steps the backends' version-check
// tests share (a cluster asked for with the client's versions, and the
// wait for it to fail with the table).
package coretest

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// NopRouter is the core's router without a proxy behind it.
type NopRouter struct{}

func (NopRouter) SetRoute(string, string, string, string, []byte, []byte) {}
func (NopRouter) DeleteRoute(string)                                      {}

// Wait bounds every wait of these tests.
const Wait = 30 * time.Second

// Start runs a core on p with a fresh SQLite store, until the test ends,
// and returns it with a context that ends with the test.
func Start(t *testing.T, gatewayID string, p providers.Provider) (context.Context, *scheduler.Core) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	core := scheduler.New(scheduler.Config{
		GatewayID: gatewayID, Limits: scheduler.Limits{MaxWorkers: 2, MaxWorkerThreads: 4, MaxWorkerMemory: 16, Images: true},
		StartTimeout: time.Minute, PollInterval: 20 * time.Millisecond, Concurrency: 2, CertLifetime: time.Hour, WorkerRestarts: 3,
	}, st, p, NopRouter{}, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	wg.Go(func() { _ = core.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = st.Close()
	})
	return ctx, core
}

// ClientVersions are the versions CreateWithVersions's client has.
const ClientVersions = `{"python":"3.11","numpy":"1.26.4"}`

// CreateWithVersions asks for a cluster as user ann, with the client's
// versions (ClientVersions).
func CreateWithVersions(ctx context.Context, t *testing.T, core *scheduler.Core) *store.Cluster {
	t.Helper()
	raw := map[string]json.RawMessage{"client_env": json.RawMessage(ClientVersions)}
	cl, err := core.Create(ctx, scheduler.Who{ID: "ann", Name: "ann"}, raw)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return cl
}

// Eventually calls ok every 20 ms until it is true, failing the test with
// what after Wait.
func Eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s", what, Wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitMismatch waits for ann's cluster to fail, and checks that it failed
// with the launcher's table.
func WaitMismatch(ctx context.Context, t *testing.T, core *scheduler.Core, name, table string) {
	t.Helper()
	var got *store.Cluster
	Eventually(t, "the cluster has not failed", func() bool {
		var err error
		if got, err = core.Get(ctx, "ann", name); err != nil {
			t.Fatal(err)
		}
		return got.Status == store.Failed
	})
	if !strings.Contains(got.Reason, "the scheduler runs other software than the client:\n"+table) {
		t.Errorf("cluster failed with %q; want the table:\n%s", got.Reason, table)
	}
}
