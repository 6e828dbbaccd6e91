package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// quotaRef lets a test make the quota service after the harness made the
// store it reads.
type quotaRef struct{ s *quota.Service }

func (q *quotaRef) Effective(ctx context.Context, who quota.Who) (quota.Effective, error) {
	return q.s.Effective(ctx, who)
}
func (q *quotaRef) OnExceed() quota.OnExceed { return q.s.OnExceed() }

// newQuotaHarness is a harness whose core enforces the given default
// quota entry (JSON), with scale requests beyond it clamped or refused.
func newQuotaHarness(t *testing.T, defaults string, mode quota.OnExceed) *harness {
	t.Helper()
	ref := &quotaRef{}
	h := newHarness(t, func(c *scheduler.Config) {
		c.Quotas = ref
		c.Price = func(s quota.Size) float64 { return s.VCPUs * 0.25 }
	})
	l, err := quota.ParseLimits([]byte(defaults))
	if err != nil {
		t.Fatal(err)
	}
	if ref.s, err = quota.NewService(h.st, []quota.ConfigEntry{{Subject: quota.DefaultSubject, Limits: l}}, mode); err != nil {
		t.Fatal(err)
	}
	return h
}

func wantQuotaErr(t *testing.T, err error, limit string, parts ...string) {
	t.Helper()
	var x *quota.ExceededError
	if !errors.Is(err, scheduler.ErrQuota) || !errors.As(err, &x) {
		t.Fatalf("err = %v, want a quota refusal", err)
	}
	if x.Limit != limit {
		t.Errorf("refused by %q, want %q (%v)", x.Limit, limit, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("message %q does not say %q", err, p)
		}
	}
}

func TestQuotaAdmission(t *testing.T) {
	h := newQuotaHarness(t, `{"max_clusters": 2, "max_vcpus": 6}`, quota.Clamp)
	h.start()
	a := h.create("alice", 2)
	h.create("alice", 1)
	_, err := h.core.Create(h.ctx, who("alice"), nil)
	wantQuotaErr(t, err, "max_clusters", "would run 3 clusters of your 2", "default (config)", "2 clusters running")
	// Bob has his own allowance.
	bob, err := h.core.Create(h.ctx, who("bob"), rawOptions(t, map[string]any{"workers": 3, "worker_threads": 2}))
	if err != nil {
		t.Fatalf("bob's first cluster: %v", err)
	}
	_, err = h.core.Create(h.ctx, who("bob"), rawOptions(t, map[string]any{"workers": 1, "worker_threads": 2}))
	wantQuotaErr(t, err, "max_vcpus", "would use 8 vCPUs of your 6", "6 in use by 1 cluster", "this request asks for 2")

	// A stopped cluster leaves room; stopping is always allowed.
	if err := h.core.Stop(h.ctx, "alice", a.Name, "test"); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(a.Name, store.Stopped)
	if _, err := h.core.Create(h.ctx, who("alice"), nil); err != nil {
		t.Errorf("after a stop: %v", err)
	}
	if got := h.cluster(bob.Name); got.OwnerName != "bob" || !strings.Contains(got.Shape, `"vcpus":2`) {
		t.Errorf("stored owner name %q, shape %s; want bob and 2-vCPU workers", got.OwnerName, got.Shape)
	}
}

func TestQuotaScale(t *testing.T) {
	for _, mode := range []quota.OnExceed{quota.Clamp, quota.Refuse} {
		t.Run(string(mode), func(t *testing.T) {
			h := newQuotaHarness(t, `{"max_vcpus": 4}`, mode)
			h.start()
			cl := h.create("alice", 1)
			h.waitSettled(cl.Name, 1)
			msg, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 5)
			switch mode {
			case quota.Clamp:
				if err != nil || !strings.Contains(msg, "scaling to 4 instead") || !strings.Contains(msg, "would use 5 vCPUs of your 4") {
					t.Fatalf("Scale = %q, %v; want a clamp to 4 that names the limit", msg, err)
				}
				h.waitSettled(cl.Name, 4)
			case quota.Refuse:
				wantQuotaErr(t, err, "max_vcpus", "refused", "would use 5 vCPUs of your 4", "keeps its 1 workers")
				h.waitPolls(3)
				if got := h.cluster(cl.Name); got.DesiredWorkers != 1 {
					t.Fatalf("refused scale changed the cluster: %s", describe(got))
				}
			}
			// Shrinking is never refused.
			if msg, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 0); err != nil || msg != "" {
				t.Fatalf("scale down: %q, %v", msg, err)
			}
			h.waitSettled(cl.Name, 0)
		})
	}
}

func TestQuotaAdaptive(t *testing.T) {
	h := newQuotaHarness(t, `{"max_vcpus": 3, "max_workers_per_cluster": 4}`, quota.Refuse)
	h.start()
	cl := h.create("alice", 0)
	h.waitSettled(cl.Name, 0)
	msg, err := h.core.Adapt(h.ctx, who("alice"), cl.Name, 0, 10, true)
	if err != nil || !strings.Contains(msg, "your limit of 4 workers per cluster") {
		t.Fatalf("Adapt = %q, %v; want the maximum clamped to the quota's 4", msg, err)
	}
	h.fp.configure(func(f *fakeProvider) { f.desired = map[string]int{cl.Name: 10} })
	h.waitSettled(cl.Name, 3) // adaptive growth is clamped whatever on_exceed says
	h.waitPolls(3)
	evs := h.events(cl.Name)
	if n := countKind(evs, "quota"); n != 1 {
		t.Errorf("%d quota events, want one (not one per poll): %v", n, kinds(evs))
	}
	if got := h.cluster(cl.Name); got.DesiredWorkers != 3 {
		t.Errorf("adaptive grew past the quota: %s", describe(got))
	}
}

// TestLedgerFollowsMembers: the ledger opens an interval for the
// scheduler and every worker, closes a worker's at scale-down and every
// one at stop.
func TestLedgerFollowsMembers(t *testing.T) {
	h := newQuotaHarness(t, `{}`, quota.Clamp)
	h.start()
	cl := h.create("alice", 2)
	h.waitSettled(cl.Name, 2)
	if _, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 1); err != nil {
		t.Fatal(err)
	}
	h.waitSettled(cl.Name, 1)
	open, err := h.st.OpenMembers(h.ctx, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 2 {
		t.Errorf("open after scale-down: %v, want the scheduler and one worker", open)
	}
	if err := h.core.Stop(h.ctx, "alice", cl.Name, "test"); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(cl.Name, store.Stopped)
	ivs, err := h.st.Intervals(h.ctx, store.LedgerFilter{Cluster: cl.Name})
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]bool{}
	for _, iv := range ivs {
		members[iv.Member] = true
		if iv.Open {
			t.Errorf("%s still open after the stop", iv.Member)
		}
		if iv.Member != "scheduler" && (iv.VCPUs != 1 || iv.PriceHour != 0.25) {
			t.Errorf("%s recorded %g vCPUs at %g/h, want 1 at 0.25", iv.Member, iv.VCPUs, iv.PriceHour)
		}
	}
	if len(ivs) != 3 || !members["scheduler"] || !members["worker-0"] || !members["worker-1"] {
		t.Errorf("ledger members %v, want scheduler, worker-0, worker-1 once each", members)
	}
}

// TestBudget: past the monthly budget a user can stop clusters but not
// start or grow them.
func TestBudget(t *testing.T) {
	h := newQuotaHarness(t, `{"monthly_vcpu_hours": 2}`, quota.Clamp)
	clk := testutil.NewClock(time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC))
	h.core.SetClock(clk.Now)
	h.st.SetClock(clk.Now)
	h.start()
	cl := h.create("alice", 2)
	h.waitSettled(cl.Name, 2)
	clk.Advance(time.Hour) // 2 vCPU-hours used (the scheduler has none)
	_, err := h.core.Create(h.ctx, who("alice"), nil)
	wantQuotaErr(t, err, "monthly_vcpu_hours", "2 of your 2 vCPU-hours since 2026-12-01", "can stop clusters")
	msg, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 4)
	if err != nil || !strings.Contains(msg, "scaling to 2 instead") {
		t.Errorf("Scale past the budget = %q, %v; want to stay at 2", msg, err)
	}
	if err := h.core.Stop(h.ctx, "alice", cl.Name, "test"); err != nil {
		t.Errorf("Stop past the budget: %v", err)
	}
	h.waitStatus(cl.Name, store.Stopped)
	// Next month starts afresh.
	clk.Advance(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC).Sub(clk.Now()))
	if _, err := h.core.Create(h.ctx, who("alice"), nil); err != nil {
		t.Errorf("Create in a new month: %v", err)
	}
}

func TestQuotaTimeouts(t *testing.T) {
	h := newQuotaHarness(t, `{"max_idle_timeout": "10m", "max_lifetime": "1m"}`, quota.Clamp)
	clk := testutil.NewClock(time.Now())
	h.core.SetClock(clk.Now)
	h.start()
	_, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"idle_timeout": 0}))
	wantQuotaErr(t, err, "max_idle_timeout", "never stopping when idle", "up to 600 seconds")
	cl, err := h.core.Create(h.ctx, who("alice"), nil) // the default comes within the maximum
	if err != nil {
		t.Fatal(err)
	}
	if got := h.cluster(cl.Name); !strings.Contains(got.Options, `"idle_timeout":600`) || !strings.Contains(got.Options, `"max_lifetime":60`) {
		t.Errorf("options %s, want idle_timeout 600 and max_lifetime 60", got.Options)
	}
	h.waitSettled(cl.Name, 0)
	clk.Advance(61 * time.Second)
	got := h.waitStatus(cl.Name, store.Stopped)
	if !strings.Contains(got.Reason, "your quota's maximum lifetime of 1m0s") {
		t.Errorf("reason %q, want the quota's lifetime", got.Reason)
	}
}

func TestAdminStop(t *testing.T) {
	h := newQuotaHarness(t, `{}`, quota.Clamp)
	h.start()
	cl := h.create("alice", 1)
	by := store.Actor{ID: "oidc:root", Name: "root"}
	if err := h.core.AdminStop(h.ctx, by, cl.Name); err != nil {
		t.Fatal(err)
	}
	got := h.waitStatus(cl.Name, store.Stopped)
	if got.Reason != "stopped by admin root" {
		t.Errorf("reason %q", got.Reason)
	}
	if err := h.core.AdminStop(h.ctx, by, cl.Name); !errors.Is(err, scheduler.ErrConflict) {
		t.Errorf("second AdminStop = %v, want ErrConflict", err)
	}
	if err := h.core.AdminStop(h.ctx, by, "0123456789abcdef"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Errorf("AdminStop(unknown) = %v, want ErrNotFound", err)
	}
	log, err := h.st.AuditLog(h.ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "cluster.stop" || log[0].Target != "cluster:"+cl.Name || log[0].Actor != "root" ||
		!strings.Contains(log[0].Before, `"status":"`) || strings.Contains(log[0].Before, `"STOPPING"`) || !strings.Contains(log[0].After, `"status":"STOPPING"`) {
		t.Errorf("audit log %+v, want one cluster.stop by root with the status before and after", log)
	}
}

func TestQuotaAdaptMinimum(t *testing.T) {
	for _, mode := range []quota.OnExceed{quota.Clamp, quota.Refuse} {
		t.Run(string(mode), func(t *testing.T) {
			h := newQuotaHarness(t, `{"max_vcpus": 3, "max_workers_per_cluster": 8}`, mode)
			h.start()
			cl := h.create("alice", 1)
			h.waitSettled(cl.Name, 1)
			msg, err := h.core.Adapt(h.ctx, who("alice"), cl.Name, 8, 8, true)
			switch mode {
			case quota.Clamp:
				if err != nil || !strings.Contains(msg, "starting from 3 instead") || !strings.Contains(msg, "vCPUs of your 3") {
					t.Fatalf("Adapt = %q, %v; want the minimum clamped to 3", msg, err)
				}
				h.waitSettled(cl.Name, 3)
			case quota.Refuse:
				wantQuotaErr(t, err, "max_vcpus", "Adaptive minimum of 5 workers refused")
				h.waitPolls(3)
			}
			if got := h.cluster(cl.Name); got.DesiredWorkers > 3 {
				t.Errorf("an adaptive minimum went past the quota: %s", describe(got))
			}
		})
	}
}

// TestLedgerWorkerStopFails: a scale-down closes the worker's interval at
// the intent; when the stop itself fails, the worker that still runs is
// stopped again later and never taken for a wanted worker, even when the
// cluster grows back meanwhile.
func TestLedgerWorkerStopFails(t *testing.T) {
	h := newQuotaHarness(t, `{}`, quota.Clamp)
	h.start()
	cl := h.create("alice", 2)
	h.waitSettled(cl.Name, 2)
	h.fp.configure(func(f *fakeProvider) { f.stopWorkerErr = errors.New("API throttled") })
	if _, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 1); err != nil {
		t.Fatal(err)
	}
	h.waitPolls(3)
	if _, err := h.core.Scale(h.ctx, who("alice"), cl.Name, 2); err != nil {
		t.Fatal(err)
	}
	h.waitPolls(3)
	h.fp.configure(func(f *fakeProvider) { f.stopWorkerErr = nil })
	h.waitCluster(cl.Name, "to run worker-0 and a new worker", func(*store.Cluster) bool {
		w := h.fp.runningWorkers(cl.Name)
		return len(w) == 2 && !slices.Contains(w, "worker-1")
	})
	open, err := h.st.OpenMembers(h.ctx, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := open["worker-1"]; ok || len(open) != 3 {
		t.Errorf("open ledger members %v, want the scheduler and the two running workers", open)
	}
}

// TestAdoptLegacyCluster: a cluster stored before quotas and the ledger
// (no shape) is given its shape and opens ledger intervals for what runs.
func TestAdoptLegacyCluster(t *testing.T) {
	h := newQuotaHarness(t, `{}`, quota.Clamp)
	h.start()
	cl := h.create("alice", 1)
	h.waitSettled(cl.Name, 1)
	h.stop()
	// Make it look like a row migrated from before: no shape, no ledger.
	if _, err := h.st.UpdateCluster(h.ctx, cl.Name, func(x *store.Cluster) (store.Event, error) {
		x.Shape = "{}"
		return store.Event{}, nil
	}); err == nil {
		t.Fatal("a recorded shape could be changed")
	}
	legacy := &store.Cluster{Name: "0123456789abcdef", Owner: "bob", Status: store.Pending, Provider: "fake", Options: `{"worker_threads":2,"worker_memory":1}`,
		DesiredWorkers: 1, TLSCert: cl.TLSCert, TLSKey: cl.TLSKey}
	if err := h.st.CreateCluster(h.ctx, legacy); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.waitSettled(legacy.Name, 1)
	got := h.waitCluster(legacy.Name, "to be given a shape", func(x *store.Cluster) bool { return strings.Contains(x.Shape, `"vcpus":2`) })
	open, err := h.st.OpenMembers(h.ctx, legacy.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 2 {
		t.Errorf("open ledger members %v (shape %s), want the scheduler and its worker", open, got.Shape)
	}
}
