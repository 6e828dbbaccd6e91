package scheduler_test

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/store"
)

// TestUnreadableStoredOptions: a cluster whose stored options row cannot
// be read fails, with a reason that names it and what is wrong, wherever
// the loop first reads the row: before the scheduler starts, when a
// legacy cluster is adopted, before workers start and when its idle
// timeout is checked. (It used to run on zero options: no threads, no
// memory limit, no idle timeout nor maximum lifetime.)
func TestUnreadableStoredOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(h *harness, options string) string // makes the row with options, returns its name
		options string
		want    string
	}{
		{name: "scheduler start", setup: corruptBeforeStart, options: `{"workers":0,"worker_threads":"two"}`,
			want: "worker_threads: want a whole number, got string"},
		{name: "legacy adoption", setup: legacyRunning, options: `{"worker_memory":[2]}`,
			want: "worker_memory: want a number, got array"},
		{name: "worker start", setup: corruptRunning(2), options: `{"idle_timeout":60`, want: "not valid JSON"},
		{name: "idle check", setup: corruptRunning(1), options: `["workers"]`, want: "want a JSON object, got array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			name := tc.setup(h, tc.options)
			got := h.waitStatus(name, store.Failed)
			for _, want := range []string{"cluster " + name + ": its stored options cannot be read", tc.want} {
				if !strings.Contains(got.Reason, want) {
					t.Errorf("reason %q, want it to say %q", got.Reason, want)
				}
			}
			h.checkDown(name)
		})
	}
}

// setOptions writes a cluster's options row (and how many workers it
// wants) as the store holds it.
func (h *harness) setOptions(name, options string, workers int) {
	h.t.Helper()
	_, err := h.st.UpdateCluster(h.ctx, name, func(x *store.Cluster) (store.Event, error) {
		x.Options, x.DesiredWorkers = options, workers
		return store.Event{}, nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// corruptBeforeStart records a cluster, spoils its options and starts the
// loop.
func corruptBeforeStart(h *harness, options string) string {
	cl := h.create("alice", 0)
	h.setOptions(cl.Name, options, 0)
	h.start()
	return cl.Name
}

// corruptRunning runs a cluster with one worker, spoils its options (and
// asks for workers) while the gateway is down, and restarts it.
func corruptRunning(workers int) func(h *harness, options string) string {
	return func(h *harness, options string) string {
		cl := h.create("alice", 1)
		h.start()
		h.waitSettled(cl.Name, 1)
		h.stop()
		h.setOptions(cl.Name, options, workers)
		h.restart()
		return cl.Name
	}
}

// legacyRunning stores a running cluster from before shapes existed (its
// scheduler runs, as after a restart) with options and starts the loop.
func legacyRunning(h *harness, options string) string {
	donor := h.create("alice", 0) // for a certificate
	legacy := &store.Cluster{Name: "0123456789abcdef", Owner: "alice", Status: store.Running, Provider: "fake", Options: options,
		TLSCert: donor.TLSCert, TLSKey: donor.TLSKey}
	if err := h.st.CreateCluster(h.ctx, legacy); err != nil {
		h.t.Fatal(err)
	}
	spec := providers.ClusterSpec{Name: legacy.Name, Owner: legacy.Owner, GatewayID: testGatewayID,
		DashboardPrefix: "/clusters/" + legacy.Name, TLSCert: legacy.TLSCert, TLSKey: legacy.TLSKey}
	if err := h.fp.StartScheduler(h.ctx, spec); err != nil {
		h.t.Fatal(err)
	}
	h.start()
	return legacy.Name
}
