package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// fakeSharing is the core's sharing over fakeClusters: its shares by
// cluster, decided by the real policy (sharing.Decide, cluster.sharing
// "any"), and stops that the decision allows.
type fakeSharing struct {
	f      *fakeClusters
	shares map[string][]store.Share
}

// sharedWith adds sharing to f and the console (SetSharing).
func (tc *testConsole) sharedWith() *fakeSharing {
	fs := &fakeSharing{f: tc.clusters, shares: map[string][]store.Share{}}
	tc.clusters.shares = fs
	tc.console.SetSharing(fs)
	return fs
}

// share shares cluster with the user id, allowing allow, and moves no
// one's generation: a share is not a change of the viewer's own clusters.
func (fs *fakeSharing) share(cluster, id string, allow ...string) {
	fs.f.mu.Lock()
	defer fs.f.mu.Unlock()
	fs.shares[cluster] = append(fs.shares[cluster], store.Share{Cluster: cluster, Kind: "user", Subject: id, SubjectName: id, Allow: allow})
}

func (fs *fakeSharing) grant(c *store.Cluster, who quota.Who) sharing.Grant {
	return sharing.Decide(sharing.Any, c.Owner, fs.shares[c.Name], who.ID, who.Groups)
}

func (fs *fakeSharing) SharedWith(_ context.Context, who quota.Who, _ []store.Status) ([]SharedCluster, error) {
	fs.f.mu.Lock()
	defer fs.f.mu.Unlock()
	var out []SharedCluster
	for _, c := range fs.f.clusters {
		if g := fs.grant(c, who); g.Shared() {
			cp := *c
			out = append(out, SharedCluster{Cluster: &cp, Grant: g})
		}
	}
	return out, nil
}

func (fs *fakeSharing) Reach(_ context.Context, who quota.Who, name string, need sharing.Action) (*store.Cluster, sharing.Grant, error) {
	fs.f.mu.Lock()
	defer fs.f.mu.Unlock()
	c, err := fs.reachLocked(who, name, need)
	if err != nil {
		return nil, sharing.Grant{}, err
	}
	cp := *c
	return &cp, fs.grant(c, who), nil
}

// reachLocked is Reach under f.mu, answering the fake's own cluster.
func (fs *fakeSharing) reachLocked(who quota.Who, name string, need sharing.Action) (*store.Cluster, error) {
	c, ok := fs.f.clusters[name]
	if !ok {
		return nil, fmt.Errorf("%w: cluster %s", errNotFound, name)
	}
	g := fs.grant(c, who)
	switch {
	case !g.Owner && !g.Shared():
		return nil, fmt.Errorf("%w: cluster %s", errNotFound, name)
	case !g.May(need):
		return nil, fmt.Errorf("%w: cluster %s is shared with you without %s", errForbidden, name, need)
	}
	return c, nil
}

func (fs *fakeSharing) StopAs(_ context.Context, who quota.Who, name string) error {
	fs.f.mu.Lock()
	defer fs.f.mu.Unlock()
	c, err := fs.reachLocked(who, name, sharing.Stop)
	if err != nil {
		return err
	}
	fs.f.stopped = append(fs.f.stopped, name)
	c.Status = store.Stopping
	fs.f.gen[c.Owner]++
	return nil
}

// hostileOwner is an owner's name as an identity provider may send it.
const hostileOwner = `<script>alert("owner")</script>`

// Clusters shared with the user are on their list and open on their
// pages, marked with their owner, with only the controls their shares
// allow; what their shares refuse is refused; a cluster not shared with
// them stays out of the list and 404.
func TestSharedClusters(t *testing.T) {
	viewOnly := running("b-view", "bob")
	viewOnly.OwnerName = hostileOwner
	mayAll := withOptions(running("b-all", "bob"), `{}`) // priced
	mayAll.OwnerName = "bob"
	private := running("b-private", "bob")
	f := newFakeClusters(running("a1", "alice"), viewOnly, mayAll, private)
	f.logs["b-view"] = "bob's scheduler says hello\n"
	tc := newTestConsole(t, f).clusterPages()
	fs := tc.sharedWith()
	fs.share("b-view", "alice")
	fs.share("b-all", "alice", "scale", "stop")
	a := tc.browser(alice)

	list := a.get("/")
	if list.Status != http.StatusOK {
		t.Fatalf("GET /: %d", list.Status)
	}
	mustContain(t, "the list", list.Body, `data-cluster="a1"`, `data-cluster="b-view"`, `data-cluster="b-all"`,
		"shared by &lt;script&gt;alert(&#34;owner&#34;)&lt;/script&gt;", "shared by bob")
	mustNotContain(t, "the list", list.Body, "b-private", hostileOwner)
	row := func(name string) string {
		i := strings.Index(list.Body, `<tr data-cluster="`+name+`"`)
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", name, list.Body)
		}
		return list.Body[i : i+strings.Index(list.Body[i:], "</tr>")]
	}
	mustNotContain(t, "b-view's row", row("b-view"), "/scale", "/stop")
	mustContain(t, "b-all's row", row("b-all"), `action="/c/b-all/scale"`, `action="/c/b-all/stop"`)
	mustContain(t, "a1's row", row("a1"), `action="/c/a1/scale"`, `action="/c/a1/stop"`)
	// bob's ledger is not alice's: no cost so far is shown as none spent.
	mustNotContain(t, "b-all's row", row("b-all"), "$0.00")

	page := a.get("/c/b-view")
	if page.Status != http.StatusOK {
		t.Fatalf("GET /c/b-view: %d %s", page.Status, page.Body)
	}
	mustContain(t, "b-view's page", page.Body, "Shared with you by <strong>&lt;script&gt;", "you may view it and connect to it",
		"bob&#39;s scheduler says hello")
	mustNotContain(t, "b-view's page", page.Body, hostileOwner, `action="/c/b-view/stop"`, `action="/c/b-view/scale"`)
	mustContain(t, "b-all's page", a.get("/c/b-all").Body, `action="/c/b-all/stop"`, `action="/c/b-all/scale"`)

	// What the shares refuse is refused, whatever the page showed.
	for _, action := range []string{"stop", "scale"} {
		if got := a.post("/c/b-view/"+action, url.Values{"workers": {"2"}}); got.Status != http.StatusForbidden {
			t.Errorf("POST /c/b-view/%s: %d, want 403", action, got.Status)
		}
		if got := a.post("/c/b-private/"+action, url.Values{"workers": {"2"}}); got.Status != http.StatusNotFound {
			t.Errorf("POST /c/b-private/%s: %d, want 404", action, got.Status)
		}
	}
	if got := a.get("/c/b-private"); got.Status != http.StatusNotFound {
		t.Errorf("GET /c/b-private: %d, want 404", got.Status)
	}
	if got := a.get("/events?cluster=b-private"); got.Status != http.StatusNotFound {
		t.Errorf("the stream of b-private: %d, want 404", got.Status)
	}
	if slices.Contains(f.stopped, "b-view") || f.scaled["b-view"] != 0 {
		t.Fatalf("a view-only share changed b-view: stopped %v, scaled %v", f.stopped, f.scaled)
	}
	// What they allow is done.
	if got := a.post("/c/b-all/scale", url.Values{"workers": {"2"}}); got.Status != http.StatusSeeOther || f.scaled["b-all"] != 2 {
		t.Errorf("POST /c/b-all/scale: %d, scaled %v", got.Status, f.scaled)
	}
	if got := a.post("/c/b-all/stop", nil); got.Status != http.StatusSeeOther || !slices.Contains(f.stopped, "b-all") {
		t.Errorf("POST /c/b-all/stop: %d, stopped %v", got.Status, f.stopped)
	}
}

// The list's stream moves when a cluster shared with the user changes, and
// when a cluster is shared with them: bob's changes move no generation of
// alice's own.
func TestSharedClustersLive(t *testing.T) {
	f := newFakeClusters(running("a1", "alice"), running("b1", "bob"), running("b2", "bob"))
	tc := newTestConsole(t, f).clusterPages()
	fs := tc.sharedWith()
	fs.share("b1", "alice")
	ctx := context.Background()
	gen := func() int64 {
		t.Helper()
		g, err := tc.console.listGeneration(ctx, "alice")
		if err != nil || g < 0 {
			t.Fatalf("listGeneration: %d, %v", g, err)
		}
		return g
	}
	g0 := gen()
	if gen() != g0 {
		t.Fatal("the generation moved with nothing changed")
	}
	f.change("bob", func(m map[string]*store.Cluster) { m["b1"].ReadyWorkers = 3 })
	g1 := gen()
	if g1 == g0 {
		t.Fatal("a shared cluster's change did not move the list's generation")
	}
	frag, _, err := tc.console.clustersTable(ctx, alice, g1, false)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the stream's table", frag, `data-cluster="b1"`, "3 / ")
	mustNotContain(t, "the stream's table", frag, "b2")
	fs.share("b2", "alice")
	if gen() == g1 {
		t.Fatal("a new share did not move the list's generation")
	}
}
