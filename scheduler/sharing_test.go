package scheduler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// TestSharedClusterCountsAgainstOwner: bob scales alice's cluster, shared
// with him: her quota bounds it (clamped to her 2 workers per cluster,
// said in her terms), not his (he may run nothing of his own), and it
// stays out of his usage; the change is recorded with its audit row.
func TestSharedClusterCountsAgainstOwner(t *testing.T) {
	ref := &quotaRef{}
	h := newHarness(t, func(c *scheduler.Config) {
		c.Quotas = ref
		c.Sharing = sharing.Any
	})
	entries, err := quota.ParseConfig([]map[string]any{
		{"subject": "user:alice", "max_workers_per_cluster": 2},
		{"subject": "user:bob", "max_vcpus": 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ref.s, err = quota.NewService(h.st, entries, quota.Clamp); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.RecordUserClaims(h.ctx, &store.UserClaims{ID: "bob", Name: "bob", ClaimsAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.start()
	cl := h.create("alice", 0)
	if _, err := h.core.Share(h.ctx, who("alice"), cl.Name, scheduler.ShareRequest{With: []string{"user:bob"}, Allow: []string{"scale"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.core.Create(h.ctx, who("bob"), rawOptions(t, map[string]any{"workers": 1})); !errors.Is(err, quota.ErrExceeded) {
		t.Fatalf("bob's own cluster: %v, want his quota's refusal", err)
	}

	msg, err := h.core.Scale(h.ctx, who("bob"), cl.Name, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"beyond the quota of its owner alice", "over alice's limit of 2 workers per cluster", "scaling to 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("bob's scale: %q, want it to say %q", msg, want)
		}
	}
	if got := h.cluster(cl.Name); got.DesiredWorkers != 2 || got.Owner != "alice" {
		t.Errorf("after bob's scale: %d workers of %s's, want 2 of alice's", got.DesiredWorkers, got.Owner)
	}
	if use, _ := h.st.OwnerUsage(h.ctx, "bob"); use.Clusters != 0 {
		t.Errorf("alice's cluster counts in bob's usage: %+v", use)
	}
	evs := h.events(cl.Name)
	if last := evs[len(evs)-1]; last.Kind != "scale" || !strings.Contains(last.Message, "by bob") {
		t.Errorf("the scale's event: %+v", last)
	}
	audit, err := h.st.AuditLog(h.ctx, store.AuditFilter{Target: "cluster:" + cl.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || audit[0].Action != "cluster.scale" || audit[0].ActorID != "bob" || !strings.Contains(audit[0].After, `"workers":2`) ||
		audit[1].Action != "cluster.share" || audit[1].ActorID != "alice" {
		t.Errorf("audit: %+v", audit)
	}

	// Without scale, adapt is refused as scale is; stop was never allowed.
	if _, err := h.core.Share(h.ctx, who("alice"), cl.Name, scheduler.ShareRequest{With: []string{"user:bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.core.Adapt(h.ctx, who("bob"), cl.Name, 0, 2, true); !errors.Is(err, scheduler.ErrForbidden) {
		t.Errorf("bob's adapt without scale: %v, want ErrForbidden", err)
	}
	if err := h.core.StopAs(h.ctx, who("bob"), cl.Name); !errors.Is(err, scheduler.ErrForbidden) {
		t.Errorf("bob's stop: %v, want ErrForbidden", err)
	}
	if got := h.cluster(cl.Name); got.Status != store.Pending && got.Status != store.Starting && got.Status != store.Running {
		t.Errorf("the cluster is %s after refused requests", got.Status)
	}
}
