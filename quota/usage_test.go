package quota_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// TestInUseOfStoreSummary: what admission reads (the store's per-owner
// summary, through InUseOf) equals InUse.Add over the same clusters: the
// store reads quota.Shape's JSON as quotas mean it.
func TestInUseOfStoreSummary(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "u.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shapes := []struct {
		shape   quota.Shape
		workers int
		status  store.Status
	}{
		{quota.Shape{Provider: "fargate", Worker: quota.Size{VCPUs: 0.25, MemoryGiB: 0.5}, Scheduler: quota.Size{VCPUs: 1, MemoryGiB: 2}}, 3, store.Pending},
		{quota.Shape{Provider: "ec2", Region: "eu-west-1", Worker: quota.Size{VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "t4", InstanceType: "g4dn.xlarge", PriceHour: 0.526},
			Scheduler: quota.Size{VCPUs: 2, MemoryGiB: 3.75, InstanceType: "c5.large"}}, 2, store.Running},
		{quota.Shape{Provider: "gce", Worker: quota.Size{VCPUs: 8, MemoryGiB: 32, GPUs: 2, GPUType: "l4"}, Scheduler: quota.Size{VCPUs: 2, MemoryGiB: 8, GPUs: 1, GPUType: "t4"}}, 0, store.Starting},
		{quota.Shape{Provider: "local", Worker: quota.Size{VCPUs: 1, MemoryGiB: 1}}, 5, store.Stopping}, // not live
	}
	var want quota.InUse
	for i, s := range shapes {
		b, err := json.Marshal(s.shape)
		if err != nil {
			t.Fatal(err)
		}
		c := &store.Cluster{Name: fmt.Sprintf("c%d", i), Owner: "alice", Status: s.status, Shape: string(b), DesiredWorkers: s.workers}
		if err := db.CreateCluster(ctx, c); err != nil {
			t.Fatal(err)
		}
		if s.status.Live() {
			want.Add(s.shape, s.workers)
		}
	}
	u, err := db.OwnerUsage(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	got := quota.InUseOf(u)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got.Clusters != want.Clusters || !near(got.VCPUs, want.VCPUs) || !near(got.MemoryGiB, want.MemoryGiB) || got.GPUs != want.GPUs ||
		fmt.Sprint(got.GPUsByType) != fmt.Sprint(want.GPUsByType) {
		t.Fatalf("InUseOf(summary) = %+v, InUse.Add over the clusters = %+v", got, want)
	}
}
