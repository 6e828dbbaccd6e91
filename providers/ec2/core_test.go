package ec2

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
)

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
	ctx, core := coretest.Start(t, "gw-test", e.p)
	cl := coretest.CreateWithVersions(ctx, t, core)
	coretest.Eventually(t, "no scheduler instance", func() bool {
		in, ok := e.ec2.Instance(cl.Name, "scheduler")
		if !ok {
			return false
		}
		if !strings.Contains(in.UserData, images.ExpectEnv+"=") || !strings.Contains(in.UserData, `"numpy":"1.26.4"`) {
			t.Fatalf("the scheduler's user data lacks the client's versions")
		}
		e.ec2.Print(in.ID, mismatchConsole(testTable))
		e.ec2.ShutDown(in.ID)
		return true
	})
	coretest.WaitMismatch(ctx, t, core, cl.Name, testTable)
}
