package fargate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/scheduler"
)

// TestSpotOption: a gateway on Fargate offers and admits the spot option
// (docs/operating.md promises FARGATE_SPOT), and a cluster asking for it gets its
// workers, not its scheduler, on FARGATE_SPOT.
func TestSpotOption(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	limits := scheduler.New(scheduler.Config{}, nil, p, nil, nil).Limits()
	offered := false
	for _, field := range limits.Spec() {
		offered = offered || field.Field == "spot"
	}
	if !offered {
		t.Errorf("the options offered on fargate lack spot: %+v", limits.Spec())
	}
	opts, err := limits.ParseOptions(map[string]json.RawMessage{"spot": json.RawMessage("true"), "workers": json.RawMessage("1")})
	if err != nil {
		t.Fatalf("ParseOptions(spot: true) on fargate: %v", err)
	}
	if !opts.Spot {
		t.Fatal("spot: true parsed as false")
	}

	const cl = "c-spot"
	spec := testSpec(cl, "ann")
	spec.Spot = opts.Spot
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	sched := schedulerUp(t, p, cl)
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	for member, want := range map[string]string{"scheduler": "FARGATE", "worker-0": "FARGATE_SPOT"} {
		task, ok := f.TaskOf(cl, member)
		if !ok {
			t.Fatalf("no task for %s", member)
		}
		if task.CapacityProvider != want {
			t.Errorf("%s runs on %s; want %s", member, task.CapacityProvider, want)
		}
	}
}
