// Package contract is the behaviour every provider owes the scheduling
// core, as a test suite each implementation runs unchanged against its
// backend (local processes, or a cloud's wire-level fake):
//
//   - a started scheduler is described, then running with an address;
//   - starts are idempotent: the same name twice is one member;
//   - workers join by name, and stop by name, a second stop being no error;
//   - List finds every member by the gateway's ownership tag, with its
//     cluster, name, role and owner;
//   - StopCluster leaves nothing of the cluster and nothing of the others
//     touched, and is idempotent; unknown names are not errors;
//   - a cancelled context starts nothing;
//   - two gateways sharing an account or project never list, stop or
//     reap each other's members or resources, with both safeguards (the
//     server-side ownership filter, the provider's re-check) and with the
//     re-check alone (isolation.go);
//   - each optional capability of providers/provider.go the backend
//     implements is declared by its harness and keeps its promise
//     (capabilities.go).
package contract

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Harness adapts one provider to the suite.
type Harness struct {
	// New returns a provider on a fresh backend; the harness registers its
	// own cleanup.
	New func(t *testing.T) providers.Provider
	// Spec returns a valid spec for a new cluster named cluster, owned by
	// owner, with the GatewayID the provider was made with.
	Spec func(t *testing.T, cluster, owner string) providers.ClusterSpec
	// Timeout bounds each wait for a state (default one minute).
	Timeout time.Duration
	// Poll is the pause between two Describes (default 100ms).
	Poll time.Duration
	// Capabilities are the optional interfaces of providers/provider.go
	// the backend implements: the suite fails when they differ from what
	// it implements, and exercises each of them.
	Capabilities []Capability
	// Region is what a Regional backend must report: the region it was
	// configured for.
	Region string
	// Isolation shows that two gateways sharing the backend's account or
	// project never touch each other's members or resources
	// (isolation.go); every backend declares it.
	Isolation *Isolation
}

func (h Harness) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return time.Minute
}

func (h Harness) poll() time.Duration {
	if h.Poll > 0 {
		return h.Poll
	}
	return 100 * time.Millisecond
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("SchedulerStartsAndIsDescribed", func(t *testing.T) { schedulerStarts(t, h) })
	t.Run("StartsAreIdempotent", func(t *testing.T) { startsIdempotent(t, h) })
	t.Run("WorkersJoinAndStopByName", func(t *testing.T) { workersJoinAndStop(t, h) })
	t.Run("ListFindsMembersByOwnershipTag", func(t *testing.T) { listByTag(t, h) })
	t.Run("StopClusterLeavesNothingAndSparesOthers", func(t *testing.T) { stopCluster(t, h) })
	t.Run("UnknownNamesAreNotErrors", func(t *testing.T) { unknownNames(t, h) })
	t.Run("CancelledContextStartsNothing", func(t *testing.T) { cancelled(t, h) })
	t.Run("Capabilities", func(t *testing.T) { capabilities(t, h) })
	t.Run("GatewaysSharingAnAccountAreIsolated", func(t *testing.T) { isolation(t, h) })
}

// NewClusterName is a cluster name as the core makes them.
func NewClusterName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is one test's provider with helpers around it.
type env struct {
	t   *testing.T
	h   Harness
	p   providers.Provider
	ctx context.Context
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*h.timeout())
	t.Cleanup(cancel)
	return &env{t: t, h: h, p: h.New(t), ctx: ctx}
}

// cluster starts a cluster's scheduler and removes the cluster at the end;
// edits adjust the harness's spec.
func (e *env) cluster(owner string, edits ...func(*providers.ClusterSpec)) (string, providers.ClusterSpec) {
	e.t.Helper()
	name := NewClusterName()
	spec := e.h.Spec(e.t, name, owner)
	for _, edit := range edits {
		edit(&spec)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.h.timeout())
		defer cancel()
		_ = e.p.StopCluster(ctx, name)
	})
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		e.t.Fatalf("StartScheduler(%s): %v", name, err)
	}
	return name, spec
}

// wait describes the cluster until ok holds, failing after the timeout
// with what was last described.
func (e *env) wait(cluster, what string, ok func([]providers.Member) bool) []providers.Member {
	e.t.Helper()
	deadline := time.Now().Add(e.h.timeout())
	for {
		ms, err := e.p.Describe(e.ctx, cluster)
		if err != nil {
			e.t.Fatalf("Describe(%s): %v", cluster, err)
		}
		if ok(ms) {
			return ms
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("after %s, %s: %s; members: %s", e.h.timeout(), cluster, what, describe(ms))
		}
		time.Sleep(e.h.poll())
	}
}

// stopAll stops the cluster and waits until nothing of it runs.
func (e *env) stopAll(cluster string) {
	e.t.Helper()
	if err := e.p.StopCluster(e.ctx, cluster); err != nil {
		e.t.Fatalf("StopCluster(%s): %v", cluster, err)
	}
	e.wait(cluster, "nothing to run", func(ms []providers.Member) bool { return len(live(ms)) == 0 })
}

func describe(ms []providers.Member) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf("[%s %s %s addr=%q reason=%q] ", m.Name, m.Role, m.State, m.Address, m.Reason)
	}
	if s == "" {
		return "none"
	}
	return s
}

func find(ms []providers.Member, name string) *providers.Member {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

func live(ms []providers.Member) []providers.Member {
	var out []providers.Member
	for _, m := range ms {
		if m.State != providers.StateStopped {
			out = append(out, m)
		}
	}
	return out
}

// schedulerRunning waits for the scheduler to run with an address.
func (e *env) schedulerRunning(cluster string) providers.Member {
	e.t.Helper()
	ms := e.wait(cluster, "the scheduler to run with an address", func(ms []providers.Member) bool {
		s := find(ms, "scheduler")
		return s != nil && s.State == providers.StateRunning && s.Address != ""
	})
	return *find(ms, "scheduler")
}

func schedulerStarts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, _ := e.cluster("ann")
	s := e.schedulerRunning(name)
	if s.Role != providers.RoleScheduler || s.Cluster != name || s.DashboardURL == "" {
		t.Errorf("scheduler described as %+v; want role scheduler, cluster %s and a dashboard URL", s, name)
	}
}

func startsIdempotent(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, spec := e.cluster("ann")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatalf("second StartScheduler: %v", err)
	}
	s := e.schedulerRunning(name)
	for range 2 {
		if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
			t.Fatalf("StartWorker: %v", err)
		}
	}
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatalf("StartScheduler on a running scheduler: %v", err)
	}
	ms := e.wait(name, "one scheduler and one worker-0", func(ms []providers.Member) bool { return find(ms, "worker-0") != nil })
	count := map[string]int{}
	for _, m := range live(ms) {
		count[m.Name]++
	}
	if count["scheduler"] != 1 || count["worker-0"] != 1 || len(count) != 2 {
		t.Errorf("members after repeated starts: %s; want one scheduler and one worker-0", describe(ms))
	}
}

func workersJoinAndStop(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, spec := e.cluster("ann")
	s := e.schedulerRunning(name)
	for _, w := range []string{"worker-0", "worker-1"} {
		if err := e.p.StartWorker(e.ctx, spec, w, s.Address); err != nil {
			t.Fatalf("StartWorker(%s): %v", w, err)
		}
	}
	e.wait(name, "both workers to run", func(ms []providers.Member) bool {
		n := 0
		for _, m := range ms {
			if m.Role == providers.RoleWorker && m.State == providers.StateRunning {
				n++
			}
		}
		return n == 2
	})
	if err := e.p.StopWorker(e.ctx, name, "worker-1"); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	if err := e.p.StopWorker(e.ctx, name, "worker-1"); err != nil {
		t.Fatalf("second StopWorker: %v", err)
	}
	ms := e.wait(name, "worker-1 stopped or gone, worker-0 running", func(ms []providers.Member) bool {
		w1, w0 := find(ms, "worker-1"), find(ms, "worker-0")
		return (w1 == nil || w1.State == providers.StateStopped) && w0 != nil && w0.State == providers.StateRunning
	})
	if w1 := find(ms, "worker-1"); w1 != nil && w1.Reason != "" {
		t.Errorf("a worker stopped on request carries a reason %q: the core would count it as lost", w1.Reason)
	}
}

func listByTag(t *testing.T, h Harness) {
	e := newEnv(t, h)
	a, spec := e.cluster("ann")
	b, _ := e.cluster("bob")
	s := e.schedulerRunning(a)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatal(err)
	}
	e.wait(a, "worker-0 to be described", func(ms []providers.Member) bool { return find(ms, "worker-0") != nil })
	deadline := time.Now().Add(h.timeout())
	for {
		all, err := e.p.List(e.ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		got := map[string]providers.Member{}
		for _, m := range live(all) {
			got[m.Cluster+"/"+m.Name] = m
		}
		sa, w, sb := got[a+"/scheduler"], got[a+"/worker-0"], got[b+"/scheduler"]
		if sa.Owner == "ann" && sa.Role == providers.RoleScheduler && w.Owner == "ann" && w.Role == providers.RoleWorker &&
			sb.Owner == "bob" && sb.Role == providers.RoleScheduler {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("List after %s: %s; want %s/scheduler and worker-0 owned by ann, %s/scheduler owned by bob", h.timeout(), describe(all), a, b)
		}
		time.Sleep(h.poll())
	}
}

func stopCluster(t *testing.T, h Harness) {
	e := newEnv(t, h)
	a, spec := e.cluster("ann")
	b, _ := e.cluster("ann")
	s := e.schedulerRunning(a)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatal(err)
	}
	e.wait(a, "worker-0 to be described", func(ms []providers.Member) bool { return find(ms, "worker-0") != nil })
	if err := e.p.StopCluster(e.ctx, a); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	if err := e.p.StopCluster(e.ctx, a); err != nil {
		t.Fatalf("second StopCluster: %v", err)
	}
	e.wait(a, "nothing to run", func(ms []providers.Member) bool { return len(live(ms)) == 0 })
	deadline := time.Now().Add(h.timeout())
	for {
		all, err := e.p.List(e.ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		left := 0
		for _, m := range live(all) {
			if m.Cluster == a {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after StopCluster, List still has %d live members of %s: %s", left, a, describe(all))
		}
		time.Sleep(h.poll())
	}
	if sb := e.schedulerRunning(b); sb.Cluster != b {
		t.Errorf("the other cluster's scheduler: %+v", sb)
	}
}

func unknownNames(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := NewClusterName()
	if err := e.p.StopWorker(e.ctx, name, "worker-0"); err != nil {
		t.Errorf("StopWorker of an unknown cluster: %v", err)
	}
	if err := e.p.StopCluster(e.ctx, name); err != nil {
		t.Errorf("StopCluster of an unknown cluster: %v", err)
	}
	ms, err := e.p.Describe(e.ctx, name)
	if err != nil || len(live(ms)) != 0 {
		t.Errorf("Describe of an unknown cluster: %s, %v; want nothing and no error", describe(ms), err)
	}
}

func cancelled(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := NewClusterName()
	spec := h.Spec(t, name, "ann")
	t.Cleanup(func() { _ = e.p.StopCluster(context.Background(), name) })
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := e.p.StartScheduler(ctx, spec); err == nil {
		t.Errorf("StartScheduler with a cancelled context succeeded")
	}
	// Nothing may appear afterwards either.
	time.Sleep(3 * h.poll())
	ms, err := e.p.Describe(e.ctx, name)
	if err != nil || len(live(ms)) != 0 {
		t.Errorf("after a cancelled start: %s, %v; want nothing", describe(ms), err)
	}
}

// listMembers: a backend that lists every cluster's members in one call
// reports each of them as its Describe does, for every cluster.
func listMembers(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ml := e.p.(providers.MemberLister)
	a, spec := e.cluster("ann")
	b, _ := e.cluster("bob")
	s := e.schedulerRunning(a)
	e.schedulerRunning(b)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatal(err)
	}
	e.wait(a, "worker-0 to run", func(ms []providers.Member) bool {
		w := find(ms, "worker-0")
		return w != nil && w.State == providers.StateRunning
	})
	key := func(ms []providers.Member) string {
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		return describe(ms)
	}
	deadline := time.Now().Add(h.timeout())
	for {
		all, err := ml.ListMembers(e.ctx)
		if err != nil {
			t.Fatalf("ListMembers: %v", err)
		}
		same, state := true, ""
		for _, c := range []string{a, b} {
			desc, err := e.p.Describe(e.ctx, c)
			if err != nil {
				t.Fatalf("Describe(%s): %v", c, err)
			}
			var listed []providers.Member
			for _, m := range all {
				if m.Cluster == c {
					listed = append(listed, m)
				}
			}
			lk, dk := key(listed), key(desc)
			same = same && lk == dk && len(desc) > 0
			state += fmt.Sprintf("%s: listed %s, described %s; ", c, lk, dk)
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListMembers and Describe disagree after %s: %s", h.timeout(), state)
		}
		time.Sleep(h.poll())
	}
}

// ListedAsDescribed fails t unless listed (a ListMembers answer) holds,
// for each of clusters, what Describe reports for it, member by member
// (name, state, address and reason), and returns listed by cluster. A
// backend's own tests use it where the suite's states cannot reach
// (losses its fake makes, launches not listed yet).
func ListedAsDescribed(ctx context.Context, t testing.TB, p providers.Provider, listed []providers.Member, clusters ...string) map[string][]providers.Member {
	t.Helper()
	key := func(ms []providers.Member) string {
		ms = slices.Clone(ms)
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s/%s %s %s %q; ", m.Cluster, m.Name, m.State, m.Address, m.Reason)
		}
		return b.String()
	}
	byCluster := map[string][]providers.Member{}
	for _, m := range listed {
		byCluster[m.Cluster] = append(byCluster[m.Cluster], m)
	}
	for _, c := range clusters {
		desc, err := p.Describe(ctx, c)
		if err != nil {
			t.Fatalf("Describe(%s): %v", c, err)
		}
		if got, want := key(byCluster[c]), key(desc); got != want {
			t.Errorf("%s: listed %s\ndescribed %s", c, got, want)
		}
	}
	return byCluster
}
