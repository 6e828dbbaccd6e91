package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers/internal/dashtest"
)

// A docker cluster's scheduler dashboard, published on the host, answers
// the gateway alone, and its members are bounded in memory (issue 32,
// finding 5): the scheduler by SchedulerMemory, a worker by the cluster's
// worker memory, both without swap; a process in a member that outgrows
// it is killed by the engine while the member's Dask goes on.
func TestDashboardGatewayOnlyAndMemoryBounded(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cfg := e.config()
	cfg.SchedulerMemory = 1 << 30
	p := e.provider(cfg)
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.WorkerMemory = 512 << 20
	sched := startWithWorker(t, p, spec)

	dctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	dashtest.GatewayOnly(dctx, t, cluster, sched.DashboardURL+spec.DashboardPrefix, spec.TLSCert, spec.TLSKey)

	for member, want := range map[string]int64{"scheduler": 1 << 30, "worker-0": 512 << 20} {
		hc := e.inspect(cluster, member).HostConfig
		if hc.Memory != want || hc.MemorySwap != want {
			t.Errorf("%s: memory %d, with swap %d; want %d for both", member, hc.Memory, hc.MemorySwap, want)
		}
	}
	// 1 GiB written in a 512 MiB worker: the engine kills that process.
	ctr := containerName(e.gatewayID, cluster, "worker-0")
	out, code := e.exec(ctx, ctr, "python3", "-c", "b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('wrote 1 GiB')")
	if code == 0 || strings.Contains(out, "wrote 1 GiB") {
		t.Errorf("1 GiB in a 512 MiB worker: exit %d, %q; want it killed", code, out)
	}
	if st := e.inspect(cluster, "worker-0").State; !st.Running {
		t.Errorf("the worker's container after the kill: %+v, want it running", st)
	}
}
