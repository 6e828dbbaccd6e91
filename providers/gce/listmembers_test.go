package gce

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// TestListMembers: the sweep's one-call listing reports every cluster as
// Describe does (a preempted Spot worker, one deleted on preemption
// before anything saw it stopped, one whose Dask exited) with one
// aggregated listing, followed page by page, however many clusters run.
func TestListMembers(t *testing.T) {
	e := newEnv(t, nil) // pages of 2 instances
	const clusters = 4
	for i := range clusters {
		spec := testSpec(t, fmt.Sprintf("c%d", i), "ann")
		spec.Spot = true
		if err := e.p.StartScheduler(e.ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
			t.Fatal(err)
		}
		e.describe(spec.Name)
	}
	if err := e.srv.Preempt("gw-c0-worker-0"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{e.srv.Preempt("gw-c1-worker-0"), e.srv.Remove("gw-c1-worker-0")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.srv.PowerOff("gw-c2-worker-0", "dask worker exited with status 1"); err != nil {
		t.Fatal(err)
	}

	lists := len(e.srv.RequestsTo("GET", "/aggregated/instances"))
	all, err := e.p.ListMembers(e.ctx)
	if err != nil {
		t.Fatalf("ListMembers: %v", err)
	}
	// 2*clusters-1 instances on pages of 2: a listing of every page, once.
	if n, pages := len(e.srv.RequestsTo("GET", "/aggregated/instances"))-lists, (2*clusters-1+1)/2; n != pages {
		t.Errorf("ListMembers made %d aggregated listing requests for %d clusters, want %d (one listing)", n, clusters, pages)
	}
	var names []string
	for i := range clusters {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	byCluster := contract.ListedAsDescribed(e.ctx, t, e.p, all, names...)
	for _, c := range []struct{ cluster, reason string }{
		{"c0", "spot preemption"},
		{"c1", "spot preemption"}, // deleted: known from what the provider remembers
		{"c2", "dask worker exited with status 1"},
	} {
		var w *providers.Member
		for i, m := range byCluster[c.cluster] {
			if m.Name == "worker-0" {
				w = &byCluster[c.cluster][i]
			}
		}
		if w == nil || w.State != providers.StateStopped || !strings.Contains(w.Reason, c.reason) {
			t.Errorf("%s's worker: %+v, want stopped for %q", c.cluster, w, c.reason)
		}
	}

	// A listing that raced with StopCluster records a member of the
	// cluster after StopCluster forgot it: once the member is seen gone,
	// nothing of the cluster is kept.
	e.p.mu.Lock()
	raced := *e.p.clusters["c3"].members["worker-0"]
	e.p.mu.Unlock()
	if err := e.p.StopCluster(e.ctx, "c3"); err != nil {
		t.Fatal(err)
	}
	e.p.remember("c3", "worker-0", raced)
	if _, err := e.p.ListMembers(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.p.mu.Lock()
	left := e.p.clusters["c3"]
	e.p.mu.Unlock()
	if left != nil {
		t.Errorf("a stopped cluster's records are kept after a listing: %+v", left)
	}

	// A cluster whose scheduler's guest attributes cannot be read is left
	// out (its full pass says why); the others are listed.
	spec := testSpec(t, "c9", "ann")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	e.srv.FailRequests("GET", "/getGuestAttributes", -1, 403)
	all, err = e.p.ListMembers(e.ctx)
	if err != nil {
		t.Fatalf("ListMembers with one scheduler's guest attributes refused: %v", err)
	}
	clustersListed := map[string]bool{}
	for _, m := range all {
		clustersListed[m.Cluster] = true
	}
	if clustersListed["c9"] || !clustersListed["c0"] || !clustersListed["c2"] {
		t.Errorf("listed clusters %v; want c0 to c2 and not c9", clustersListed)
	}
}
