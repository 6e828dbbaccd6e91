package contract

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// Capability names one optional interface of providers/provider.go, which
// the core finds by a type assertion on the provider.
type Capability string

// The optional capabilities, named as their interfaces.
const (
	InstanceTypes  Capability = "InstanceTypes"
	Spot           Capability = "Spot"
	Regional       Capability = "Regional"
	Immediate      Capability = "Immediate"
	StopTimes      Capability = "StopTimes"
	LogReader      Capability = "LogReader"
	Closer         Capability = "Closer"
	MemberLister   Capability = "MemberLister"
	LeftoverLister Capability = "LeftoverLister"
	StartPacer     Capability = "StartPacer"
)

// capability is how the suite recognises one capability and what it checks
// of a backend that has it.
type capability struct {
	name       Capability
	implements func(providers.Provider) bool
	exercise   func(*testing.T, Harness)
}

func has[I any](p providers.Provider) bool {
	_, ok := p.(I)
	return ok
}

// Capabilities are every optional capability the suite knows, in the
// order provider.go declares them.
func Capabilities() []Capability {
	var out []Capability
	for _, c := range capabilityList() {
		out = append(out, c.name)
	}
	return out
}

func capabilityList() []capability {
	return []capability{
		{InstanceTypes, has[providers.InstanceTypes], instanceTypes},
		{Spot, has[providers.Spot], spot},
		{Regional, has[providers.Regional], regional},
		{Immediate, has[providers.Immediate], immediate},
		{StopTimes, has[providers.StopTimes], stopTimes},
		{LogReader, has[providers.LogReader], logReader},
		{MemberLister, has[providers.MemberLister], listMembers},
		{LeftoverLister, has[providers.LeftoverLister], leftoverLister},
		{StartPacer, has[providers.StartPacer], startPacer},
		{Closer, has[providers.Closer], closer},
	}
}

// capabilities checks that the harness declares exactly what the backend
// implements (a capability the core would use unchecked, or one the
// harness believes in that the core would never see, both fail), then
// exercises each.
func capabilities(t *testing.T, h Harness) {
	p := h.New(t)
	var run []capability
	for _, c := range capabilityList() {
		declared, implemented := slices.Contains(h.Capabilities, c.name), c.implements(p)
		switch {
		case implemented && !declared:
			t.Errorf("the backend implements providers.%s, which its harness does not declare: add contract.%s to Harness.Capabilities", c.name, c.name)
		case declared && !implemented:
			t.Errorf("the harness declares %s, which the backend does not implement: the core would never use it", c.name)
		case declared:
			run = append(run, c)
		}
	}
	for _, d := range h.Capabilities {
		if !slices.Contains(Capabilities(), d) {
			t.Errorf("the harness declares %q, which is not a capability of providers/provider.go (%v)", d, Capabilities())
		}
	}
	for _, c := range run {
		t.Run(string(c.name), func(t *testing.T) { c.exercise(t, h) })
	}
}

// instanceTypes: the listing has types, each named and sized, once each.
func instanceTypes(t *testing.T, h Harness) {
	e := newEnv(t, h)
	its, err := e.p.(providers.InstanceTypes).InstanceTypes(e.ctx)
	if err != nil {
		t.Fatalf("InstanceTypes: %v", err)
	}
	if len(its) == 0 {
		t.Fatal("InstanceTypes listed nothing: the core would have no machine to choose")
	}
	seen := map[string]bool{}
	for _, it := range its {
		if it.Name == "" || it.VCPUs <= 0 || it.MemoryGiB <= 0 || seen[it.Name] {
			t.Errorf("instance type %+v: want a name listed once, vCPUs and memory", it)
		}
		seen[it.Name] = true
	}
}

// spot: workers asked for on spot capacity run.
func spot(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, spec := e.cluster("ann", func(s *providers.ClusterSpec) { s.Spot = true })
	s := e.schedulerRunning(name)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatalf("StartWorker on spot: %v", err)
	}
	e.wait(name, "the spot worker to run", func(ms []providers.Member) bool {
		w := find(ms, "worker-0")
		return w != nil && w.State == providers.StateRunning
	})
}

// regional: the backend reports the region it was configured for.
func regional(t *testing.T, h Harness) {
	if h.Region == "" {
		t.Fatal("Harness.Region is empty: set it to the region the backend is configured for")
	}
	e := newEnv(t, h)
	if got := e.p.(providers.Regional).Region(); got != h.Region {
		t.Errorf("Region() = %q, want %q: quotas' allowed_regions are checked against it", got, h.Region)
	}
}

// immediate: a member is described as soon as its start call returned.
func immediate(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, spec := e.cluster("ann")
	ms, err := e.p.Describe(e.ctx, name)
	if err != nil || find(ms, "scheduler") == nil {
		t.Fatalf("Describe right after StartScheduler: %s, %v; want the scheduler listed", describe(ms), err)
	}
	s := e.schedulerRunning(name)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatal(err)
	}
	if ms, err = e.p.Describe(e.ctx, name); err != nil || find(ms, "worker-0") == nil {
		t.Fatalf("Describe right after StartWorker: %s, %v; want worker-0 listed", describe(ms), err)
	}
}

// stopTimes: once StopCluster has stopped a cluster, the backend dates
// each member's end, between its start and the stop's return. Cloud APIs
// date to the second, hence the second's slack before the start.
func stopTimes(t *testing.T, h Harness) {
	e := newEnv(t, h)
	before := time.Now().Add(-time.Second)
	name, spec := e.cluster("ann")
	s := e.schedulerRunning(name)
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", s.Address); err != nil {
		t.Fatal(err)
	}
	e.wait(name, "worker-0 to run", func(ms []providers.Member) bool {
		w := find(ms, "worker-0")
		return w != nil && w.State == providers.StateRunning
	})
	e.stopAll(name)
	after := time.Now()
	for _, m := range []string{"scheduler", "worker-0"} {
		at, ok := e.p.(providers.StopTimes).StoppedAt(name, m)
		if !ok || at.Before(before) || at.After(after) {
			t.Errorf("StoppedAt(%s) = %v, %v; want a time between %v and %v", m, at, ok, before, after)
		}
	}
}

// logReader: the logs of a running cluster carry the scheduler's lines,
// each prefixed by its member's name, at most tail of them per member; an
// unknown cluster has none.
func logReader(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name, _ := e.cluster("ann")
	e.schedulerRunning(name)
	lr := e.p.(providers.LogReader)
	deadline := time.Now().Add(h.timeout())
	for {
		var b bytes.Buffer
		err := lr.Logs(e.ctx, name, 1, &b)
		if err != nil && !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("Logs: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) == 1 && strings.HasPrefix(lines[0], "[scheduler] ") {
			break
		}
		if len(lines) > 1 {
			t.Fatalf("Logs with tail 1 of a cluster with only its scheduler:\n%s\nwant one line", b.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, Logs: %q, %v; want a line of the scheduler's, prefixed [scheduler]", h.timeout(), b.String(), err)
		}
		time.Sleep(h.poll())
	}
	var b bytes.Buffer
	if err := lr.Logs(e.ctx, NewClusterName(), 0, &b); (err != nil && !errors.Is(err, providers.ErrNotFound)) || b.Len() > 0 {
		t.Errorf("Logs of an unknown cluster: %q, %v; want nothing, and no error or one matching providers.ErrNotFound", b.String(), err)
	}
}

// leftoverLister: what a running cluster shares is listed by its tags, as
// that cluster's; StopCluster removes it, after which deleting it again is
// success.
func leftoverLister(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ll := e.p.(providers.LeftoverLister)
	name, _ := e.cluster("ann")
	e.schedulerRunning(name)
	ofCluster := func() []providers.Leftover {
		all, err := ll.ListLeftovers(e.ctx)
		if err != nil {
			t.Fatalf("ListLeftovers: %v", err)
		}
		var out []providers.Leftover
		for _, l := range all {
			if l.Cluster == name {
				out = append(out, l)
			}
		}
		return out
	}
	var shared []providers.Leftover
	deadline := time.Now().Add(h.timeout())
	for shared = ofCluster(); len(shared) == 0; shared = ofCluster() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, ListLeftovers lists nothing of running cluster %s: a backend that lists leftovers makes shared resources", h.timeout(), name)
		}
		time.Sleep(h.poll())
	}
	for _, l := range shared {
		if l.Kind == "" || l.ID == "" {
			t.Errorf("leftover %+v: want a kind and an id", l)
		}
	}
	e.stopAll(name)
	deadline = time.Now().Add(h.timeout())
	for left := ofCluster(); len(left) > 0; left = ofCluster() {
		if time.Now().After(deadline) {
			t.Fatalf("after StopCluster, %s still has %+v", name, left)
		}
		time.Sleep(h.poll())
	}
	for _, l := range shared {
		if err := ll.DeleteLeftover(e.ctx, l); err != nil {
			t.Errorf("DeleteLeftover of %+v, already gone: %v; want success", l, err)
		}
	}
}

// startPacer: the first wait between polls of a booting member is set.
func startPacer(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if d := e.p.(providers.StartPacer).StartPoll(); d <= 0 {
		t.Errorf("StartPoll() = %s, want a positive wait", d)
	}
}

// closer: closing a backend whose clusters are stopped succeeds, and
// again (a gateway's shutdown and its deferred cleanup may both close).
// The cluster is started without env.cluster's cleanup: a closed backend
// takes no more calls.
func closer(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := NewClusterName()
	if err := e.p.StartScheduler(e.ctx, h.Spec(t, name, "ann")); err != nil {
		t.Fatalf("StartScheduler(%s): %v", name, err)
	}
	e.schedulerRunning(name)
	e.stopAll(name)
	for _, leave := range []bool{true, false, false} {
		if err := e.p.(providers.Closer).Close(e.ctx, leave); err != nil {
			t.Errorf("Close(leave=%v): %v", leave, err)
		}
	}
}
