package build

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/gatewayhq/gateway/images"
)

// updates records what Config.OnUpdate is told.
type updates struct {
	mu sync.Mutex
	st []Status
}

func (u *updates) add(st Status) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.st = append(u.st, st)
}

func (u *updates) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.st = nil
}

func (u *updates) all() []Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Status(nil), u.st...)
}

// TestOnUpdate: a build reports each step, its push progress and its end
// to Config.OnUpdate, the last report being the final status; a build
// that fails at once reports its failure.
func TestOnUpdate(t *testing.T) {
	ctx := testContext(t)
	host, _ := newRegistry(t, "", "")
	baseRef := pushBase(t, ctx, host, authn.Anonymous)
	var u updates
	b := newBuilder(t, Config{Repository: host + "/envs", Auth: Auth{Kind: "none"}, Bases: []Base{{Python: "3.11", Image: baseRef}}, OnUpdate: u.add})

	st, err := b.Ensure(ctx, registryBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	final, err := b.Wait(ctx, st.Hash)
	if err != nil {
		t.Fatal(err)
	}
	got := u.all()
	if len(got) < 3 {
		t.Fatalf("%d updates: %+v", len(got), got)
	}
	last := got[len(got)-1]
	if last.State != StateReady || last.Hash != st.Hash || !last.Finished.Equal(final.Finished) || last.Contents.Python != "3.11" || len(last.Steps) != len(final.Steps) {
		t.Errorf("last update %+v, want the final status %+v", last, final)
	}
	var pushed, probing bool
	for i, s := range got[:len(got)-1] {
		if s.State != StateBuilding {
			t.Errorf("update %d before the end is %s", i, s.State)
		}
		for _, step := range s.Steps {
			pushed = pushed || strings.HasPrefix(step, "pushed ")
			probing = probing || strings.HasPrefix(step, "probing base")
		}
	}
	if !pushed || !probing {
		t.Errorf("updates lack the probe or the push progress: %+v", got)
	}

	// No base for the spec: failed at once, and reported.
	u.reset()
	other := images.Spec{Python: "3.12", Platform: "linux/amd64"}
	st, err = b.Ensure(ctx, other, nil)
	if err != nil || st.State != StateFailed {
		t.Fatalf("a spec without a base: %+v %v", st, err)
	}
	if got := u.all(); len(got) != 1 || got[0].State != StateFailed || !strings.Contains(got[0].Error, "no base image") {
		t.Errorf("updates of a build failed at once: %+v", got)
	}
}
