package gce

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
)

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
	ctx, core := coretest.Start(t, testGatewayID, e.p)
	cl := coretest.CreateWithVersions(ctx, t, core)
	table := strings.Replace(testTable, "worker", "scheduler", 1)
	name := instanceName(cl.Name, "scheduler")
	coretest.Eventually(t, "no running scheduler instance", func() bool {
		in, ok := e.srv.Instance(name)
		if !ok || in.Status != "RUNNING" {
			return false
		}
		script, _ := in.MetadataValue("startup-script")
		if !strings.Contains(script, images.ExpectEnv+"=") || !strings.Contains(script, `"numpy":"1.26.4"`) {
			t.Fatalf("the scheduler's startup script lacks the client's versions")
		}
		if err := e.srv.PowerOff(name, table); err != nil {
			t.Fatal(err)
		}
		return true
	})
	coretest.WaitMismatch(ctx, t, core, cl.Name, table)
}
