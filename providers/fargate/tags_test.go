package fargate_test

import (
	"context"
	"testing"

	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestOwnershipTags: the security group, the secret and the task
// definitions carry all four ownership tags docs/operating.md promises, like the
// tasks.
func TestOwnershipTags(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	const cl = "c-tags"
	spec := testSpec(cl, "ann@example.com")
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	sched := schedulerUp(t, p, cl)
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	want := map[string]string{
		"gateway-id":      testGateway,
		"gateway-cluster": cl,
		"gateway-member":  "cluster",
		"gateway-owner":   "ann@example.com",
	}
	check := func(what string, tags map[string]string) {
		t.Helper()
		for k, v := range want {
			if tags[k] != v {
				t.Errorf("%s: tag %s = %q; want %q (tags %v)", what, k, tags[k], v, tags)
			}
		}
	}
	var groups, secrets, defs int
	for _, g := range f.Groups() {
		if g.Tags["gateway-cluster"] == cl {
			groups++
			check("security group "+g.Name, g.Tags)
		}
	}
	for _, s := range f.Secrets() {
		if s.Tags["gateway-cluster"] == cl {
			secrets++
			check("secret "+s.Name, s.Tags)
		}
	}
	for _, d := range f.TaskDefinitions() {
		if d.Tags["gateway-cluster"] == cl {
			defs++
			check("task definition "+d.Family, d.Tags)
		}
	}
	if groups != 1 || secrets != 1 || defs != 2 {
		t.Errorf("found %d security groups, %d secrets, %d task definitions of %s; want 1, 1, 2", groups, secrets, defs, cl)
	}
	for _, task := range f.Tasks() {
		if task.Tags["gateway-owner"] != "ann@example.com" || task.Tags["gateway-member"] == "" {
			t.Errorf("task %s tags %v", task.ARN, task.Tags)
		}
	}
}
