package scheduler_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// CheckCreate answers what Create would, refusal for refusal, and
// creates nothing: the console names the quota that would refuse a
// cluster before its form is sent.
func TestCheckCreate(t *testing.T) {
	h := newQuotaHarness(t, `{"max_clusters": 1, "max_vcpus": 6, "max_workers_per_cluster": 4}`, quota.Refuse)
	h.start()
	opts := func(m map[string]any) map[string]json.RawMessage { return rawOptions(t, m) }
	tests := []struct {
		name        string
		owner       string
		raw         map[string]json.RawMessage
		before      func()
		wantLimit   string // the quota that refuses ("": none)
		wantInvalid bool
		wantWorkers int
		wantPrice   float64 // per hour: 0.25 per vCPU (the fake backend's scheduler has none)
	}{
		{name: "admitted", owner: "alice", raw: opts(map[string]any{"workers": 2, "worker_threads": 2}), wantWorkers: 2, wantPrice: 2 * 2 * 0.25},
		{name: "over the per-cluster workers", owner: "alice", raw: opts(map[string]any{"workers": 5}), wantLimit: "max_workers_per_cluster", wantWorkers: 5, wantPrice: 5 * 0.25},
		{name: "over the vCPUs", owner: "alice", raw: opts(map[string]any{"workers": 4, "worker_threads": 2}), wantLimit: "max_vcpus", wantWorkers: 4, wantPrice: 4 * 2 * 0.25},
		{name: "bad option", owner: "alice", raw: opts(map[string]any{"workers": "many"}), wantInvalid: true},
		{name: "unknown option", owner: "alice", raw: opts(map[string]any{"<b>x</b>": 1}), wantInvalid: true},
		{name: "over the clusters", owner: "bob", raw: opts(map[string]any{"workers": 1}),
			before: func() { h.create("bob", 0) }, wantLimit: "max_clusters", wantWorkers: 1, wantPrice: 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			before, err := h.st.ListClusters(h.ctx, store.Filter{Owner: tt.owner})
			if err != nil {
				t.Fatal(err)
			}
			shape, workers, checkErr := h.core.CheckCreate(h.ctx, who(tt.owner), tt.raw)
			after, err := h.st.ListClusters(h.ctx, store.Filter{Owner: tt.owner})
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) {
				t.Fatalf("CheckCreate created a cluster: %d clusters, had %d", len(after), len(before))
			}
			switch {
			case tt.wantLimit != "":
				var x *quota.ExceededError
				if !errors.As(checkErr, &x) || x.Limit != tt.wantLimit || x.Source == "" {
					t.Fatalf("CheckCreate: %v, want a refusal by %s that names its source", checkErr, tt.wantLimit)
				}
			case tt.wantInvalid:
				if !errors.Is(checkErr, scheduler.ErrInvalid) {
					t.Fatalf("CheckCreate: %v, want ErrInvalid", checkErr)
				}
			case checkErr != nil:
				t.Fatalf("CheckCreate: %v", checkErr)
			}
			if !tt.wantInvalid && (workers != tt.wantWorkers || math.Abs(shape.PriceHour(workers)-tt.wantPrice) > 1e-9) {
				t.Errorf("CheckCreate: %d workers at %g/h (%+v), want %d at %g/h", workers, shape.PriceHour(workers), shape, tt.wantWorkers, tt.wantPrice)
			}
			// Create says the same, word for word.
			cl, createErr := h.core.Create(h.ctx, who(tt.owner), tt.raw)
			if (checkErr == nil) != (createErr == nil) || checkErr != nil && checkErr.Error() != createErr.Error() {
				t.Fatalf("CheckCreate said %v, Create %v", checkErr, createErr)
			}
			if cl != nil {
				if err := h.core.Stop(h.ctx, tt.owner, cl.Name, "test"); err != nil {
					t.Fatal(err)
				}
				h.waitStatus(cl.Name, store.Stopped)
			}
		})
	}
}

// The options published to a user are the gateway's limits within the
// user's quota.
func TestOptionSpecWithinQuota(t *testing.T) {
	h := newQuotaHarness(t, `{"max_workers_per_cluster": 3, "max_idle_timeout": "10m"}`, quota.Clamp)
	spec, err := h.core.OptionSpec(h.ctx, who("alice"))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]scheduler.OptionField{}
	for _, f := range spec {
		fields[f.Field] = f
	}
	if got := fields["workers"].Spec["max"]; got != 3 {
		t.Errorf("workers max %v, want the quota's 3 (the gateway allows 5)", got)
	}
	if got := fields["idle_timeout"]; got.Spec["max"] != 600 || got.Default != 600 {
		t.Errorf("idle_timeout %+v, want max and default 600 seconds", got)
	}
	// Without a quota, the gateway's own limits.
	plain := newHarness(t)
	spec, err = plain.core.OptionSpec(plain.ctx, who("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if spec[0].Field != "workers" || spec[0].Spec["max"] != 5 {
		t.Errorf("without quotas: %+v, want workers up to 5", spec[0])
	}
}

// IdleLeft counts down on the loop's idle clock, is the whole timeout
// while the cluster is busy, and is unknown without a timeout.
func TestIdleLeft(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	h := newHarness(t)
	h.core.SetClock(clk.Now)
	h.start()
	timed, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"workers": 1, "idle_timeout": 60}))
	if err != nil {
		t.Fatal(err)
	}
	never, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"idle_timeout": 0}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.core.IdleLeft(h.cluster(timed.Name)); ok {
		t.Error("IdleLeft of a pending cluster is known")
	}
	h.waitSettled(timed.Name, 1)
	h.waitStatus(never.Name, store.Running)
	h.waitPolls(2)
	clk.Advance(20 * time.Second)
	h.waitPolls(2)
	if left, ok := h.core.IdleLeft(h.cluster(timed.Name)); !ok || left != 40*time.Second {
		t.Errorf("IdleLeft after 20s idle: %s, %v; want 40s", left, ok)
	}
	h.fp.configure(func(f *fakeProvider) { f.busy = map[string]bool{timed.Name: true} })
	h.waitPolls(3)
	clk.Advance(time.Second)
	h.waitPolls(3)
	if left, ok := h.core.IdleLeft(h.cluster(timed.Name)); !ok || left != 60*time.Second {
		t.Errorf("IdleLeft while busy: %s, %v; want the whole 60s", left, ok)
	}
	if left, ok := h.core.IdleLeft(h.cluster(never.Name)); ok {
		t.Errorf("IdleLeft without an idle timeout: %s", left)
	}
}
