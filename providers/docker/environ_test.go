package docker

import (
	"context"
	"strings"
	"testing"
)

// TestOwnerEnvInTheContainers: the owner's variables (the environ option)
// are in the real scheduler's and worker's containers, and a Dask config
// value given as DASK_ variable is what Dask reads there.
func TestOwnerEnvInTheContainers(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	p := e.provider(e.config())
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	spec.Env = map[string]string{"DASK_BENCHSETS__DELAY": "0.25", "OWNER_FLAG": `it's "x" $y`}
	startWithWorker(t, p, spec)
	for _, member := range []string{"scheduler", "worker-0"} {
		out, code := e.exec(ctx, containerName(e.gatewayID, cluster, member), "python3", "-c",
			"import os, dask; print(repr(dask.config.get('benchsets.delay')), os.environ['OWNER_FLAG'])")
		if want := `0.25 it's "x" $y`; code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, %q; want %q", member, code, out, want)
		}
	}
}
