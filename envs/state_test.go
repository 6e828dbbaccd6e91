package envs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

var carol = quota.Who{ID: "oidc:carol"}

// TestStateSurvivesRestart: who asked, and the build's status and log,
// are in the store: a new Service on the same database (the gateway
// started again, same replica) knows them. The build that was running
// when it stopped is failed, saying so, and can be asked for again.
func TestStateSurvivesRestart(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
		readySpec := images.Spec{Python: "3.10", Platform: "linux/amd64"}

		fb := newFakeBuilder()
		before := newService(t, openStore(t, url), fb)
		running, err := before.Ensure(ctx, alice, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		ready, err := before.Ensure(ctx, alice, readySpec, nil)
		if err != nil {
			t.Fatal(err)
		}
		readyRef := fb.Ref(ready.Hash)
		before.Updated(build.Status{Hash: ready.Hash, Ref: readyRef, State: build.StateReady, Built: true, Contents: readySpec, Steps: []string{"probing base", "ready"}})
		before.Close()

		fb2 := newFakeBuilder()
		fb2.images[readyRef] = readySpec
		after := newService(t, openStore(t, url), fb2)
		st, err := after.Status(ctx, alice, running.Hash)
		if err != nil || st.State != "failed" || !strings.Contains(st.Error, "restarted; ask again") {
			t.Errorf("the build running at the restart: %+v %v", st, err)
		}
		st, err = after.Status(ctx, alice, ready.Hash[:16])
		if err != nil || st.State != "ready" || st.Image != readyRef || st.Versions["python"] != "3.10" {
			t.Errorf("the ready build after the restart: %+v %v", st, err)
		}
		if log, err := after.Logs(ctx, alice, ready.Hash); err != nil || string(log) != "log of "+ready.Hash {
			t.Errorf("the log after the restart: %q %v", log, err)
		}
		for _, h := range []string{running.Hash, ready.Hash} {
			if _, err := after.Status(ctx, bob, h); !errors.Is(err, ErrNotFound) {
				t.Errorf("bob sees %.16s after the restart: %v", h, err)
			}
		}
		// Who asked still decides who runs the image.
		if ref, _, _, err := after.Resolve(ctx, alice, "", ready.Hash); err != nil || ref != readyRef {
			t.Errorf("alice's environment after the restart: %q %v", ref, err)
		}
		if _, _, _, err := after.Resolve(ctx, alice, readyRef, ""); err != nil {
			t.Errorf("alice's image after the restart: %v", err)
		}
		if _, _, _, err := after.Resolve(ctx, bob, readyRef, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("bob's run of alice's image after the restart: %v", err)
		}
		// Asked for again: built again, on this replica.
		if st, err := after.Ensure(ctx, alice, spec, nil); err != nil || st.State != "building" || len(fb2.owners) != 1 {
			t.Errorf("asked again after the restart: %+v %v (builds %d)", st, err, len(fb2.owners))
		}
	})
}

// TestReplicasShareBuilds: two replicas on one database (two store
// handles; on PostgreSQL as deployed). A build claimed by one is not
// started by the other, which shares its status, steps and log; who asked
// on either is known to both; a user who did not ask sees nothing on
// either.
func TestReplicasShareBuilds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
		fa, fb := newFakeBuilder(), newFakeBuilder()
		a := newService(t, openStore(t, url), fa, func(c *Config) { c.ReplicaID = "r-a" })
		b := newService(t, openStore(t, url), fb, func(c *Config) { c.ReplicaID = "r-b" })

		st, err := a.Ensure(ctx, alice, spec, nil)
		if err != nil || st.State != "building" {
			t.Fatal(st, err)
		}
		// Bob asks on the other replica: he shares alice's build.
		bst, err := b.Ensure(ctx, bob, spec, nil)
		if err != nil || bst.State != "building" || bst.Hash != st.Hash || len(fb.owners) != 0 {
			t.Fatalf("bob on replica b: %+v %v, %d builds started there", bst, err, len(fb.owners))
		}
		a.Updated(build.Status{Hash: st.Hash, Ref: st.Image, State: build.StateBuilding, Built: true, Steps: []string{"probing base", "installing 1 package"}})
		for _, svc := range []*Service{a, b} {
			for _, who := range []quota.Who{alice, bob} {
				got, err := svc.Status(ctx, who, st.Hash)
				if err != nil || got.State != "building" || len(got.Steps) != 2 || got.Steps[1] != "installing 1 package" {
					t.Errorf("%s on %s: %+v %v", who.ID, svc.cfg.ReplicaID, got, err)
				}
			}
			if _, err := svc.Status(ctx, carol, st.Hash); !errors.Is(err, ErrNotFound) {
				t.Errorf("carol on %s: %v", svc.cfg.ReplicaID, err)
			}
			if _, err := svc.Logs(ctx, carol, st.Hash); !errors.Is(err, ErrNotFound) {
				t.Errorf("carol's log on %s: %v", svc.cfg.ReplicaID, err)
			}
			if _, _, _, err := svc.Resolve(ctx, carol, "", st.Hash); !errors.Is(err, ErrInvalid) {
				t.Errorf("carol runs it on %s: %v", svc.cfg.ReplicaID, err)
			}
		}
		digest := "sha256:" + strings.Repeat("d", 64)
		a.Updated(build.Status{Hash: st.Hash, Ref: st.Image, Digest: digest, State: build.StateReady, Built: true, Contents: spec, Steps: []string{"ready"}})
		fb.images[st.Image] = spec // in the registry both replicas look into
		got, err := b.Status(ctx, bob, st.Hash[:12])
		if err != nil || got.State != "ready" || got.Versions["dask"] != "2024.8.0" || got.Digest != digest {
			t.Errorf("the ended build on replica b: %+v %v", got, err)
		}
		if log, err := b.Logs(ctx, alice, st.Hash); err != nil || string(log) != "log of "+st.Hash {
			t.Errorf("replica a's log on replica b: %q %v", log, err)
		}
		if ref, contents, known, err := b.Resolve(ctx, bob, "", st.Hash); err != nil || ref != st.Image || !known || contents.Packages[0].Name != "dask" {
			t.Errorf("bob runs it on replica b: %q %v %v", ref, known, err)
		}
		if _, _, _, err := b.Resolve(ctx, alice, st.Image, ""); err != nil {
			t.Errorf("alice's image on replica b: %v", err)
		}
		if _, _, _, err := b.Resolve(ctx, carol, st.Image, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("carol runs the image on replica b: %v", err)
		}
	})
}

// TestStaleBuildTakenOver: a replica that stops beating (it died) leaves
// its build failed, saying why, for every replica; asking again builds it
// on another replica; the dead one's late word is not taken.
func TestStaleBuildTakenOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		clk := testutil.NewClock(time.Now())
		dbA, dbB := openStore(t, url), openStore(t, url)
		dbA.SetClock(clk.Now)
		dbB.SetClock(clk.Now)
		spec := images.Spec{Python: "3.11", Platform: "linux/amd64"}
		fa, fb := newFakeBuilder(), newFakeBuilder()
		a := newService(t, dbA, fa, func(c *Config) { c.ReplicaID, c.Now = "r-a", clk.Now })
		b := newService(t, dbB, fb, func(c *Config) { c.ReplicaID, c.Now = "r-b", clk.Now })
		st, err := a.Ensure(ctx, alice, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(DefaultStaleAfter / 2)
		if got, _ := b.Status(ctx, alice, st.Hash); got.State != "building" {
			t.Fatalf("within the stale time: %+v", got)
		}
		if _, err := b.Ensure(ctx, bob, spec, nil); err != nil || len(fb.owners) != 0 {
			t.Fatalf("replica b built a build replica a holds: %v", err)
		}
		clk.Advance(DefaultStaleAfter)
		got, err := b.Status(ctx, alice, st.Hash)
		if err != nil || got.State != "failed" || !strings.Contains(got.Error, "the gateway building it stopped; ask again") {
			t.Fatalf("a silent replica's build: %+v %v", got, err)
		}
		if _, _, _, err := b.Resolve(ctx, alice, "", st.Hash); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is failed") {
			t.Errorf("run a silent replica's build: %v", err)
		}
		got2, err := b.Ensure(ctx, bob, spec, nil)
		if err != nil || got2.State != "building" || len(fb.owners) != 1 {
			t.Fatalf("asked again on replica b: %+v %v", got2, err)
		}
		a.Updated(build.Status{Hash: st.Hash, Ref: st.Image, State: build.StateFailed, Built: true, Error: "cancelled"})
		if got, _ := a.Status(ctx, alice, st.Hash); got.State != "building" || got.Error != "" {
			t.Errorf("the silent replica's late word was taken: %+v", got)
		}
	})
}

// TestPublish: admins publish a ready environment (by hash or prefix) or
// an image at run time; every replica lists it, and every user may run
// it; unpublished, it is closed again. The config's names cannot be
// taken or removed, and bad requests say what to fix.
func TestPublish(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		root := store.Actor{ID: "oidc:root", Name: "root"}
		spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
		other := images.Spec{Python: "3.12", Platform: "linux/amd64"}
		fa, fb := newFakeBuilder(), newFakeBuilder()
		cfgPub := withPublished(apitype.PublishedEnv{Name: "base", Image: "reg/base:1"})
		a := newService(t, openStore(t, url), fa, cfgPub, func(c *Config) { c.ReplicaID = "r-a" })
		b := newService(t, openStore(t, url), fb, cfgPub, func(c *Config) { c.ReplicaID = "r-b" })
		st, err := a.Ensure(ctx, alice, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		building, err := a.Ensure(ctx, alice, other, nil)
		if err != nil {
			t.Fatal(err)
		}
		fa.images[st.Image], fb.images[st.Image] = spec, spec // the registry both look into

		errCases := []struct {
			name string
			env  string
			req  apitype.PublishEnvRequest
			want error
			msg  string
		}{
			{"not ready", "team", apitype.PublishEnvRequest{Env: building.Hash}, ErrConflict, "is building, not ready"},
			{"a bad name", "a/b", apitype.PublishEnvRequest{Image: "reg/x:1"}, ErrInvalid, "no spaces"},
			{"a hash as a name", st.Hash, apitype.PublishEnvRequest{Image: "reg/x:1"}, ErrInvalid, "not a name"},
			{"neither", "team", apitype.PublishEnvRequest{}, ErrInvalid, "not both"},
			{"both", "team", apitype.PublishEnvRequest{Image: "reg/x:1", Env: st.Hash}, ErrInvalid, "not both"},
			{"the config's name", "base", apitype.PublishEnvRequest{Image: "reg/x:1"}, ErrConflict, "images.environments"},
			{"an unknown hash", "team", apitype.PublishEnvRequest{Env: strings.Repeat("0", 64)}, ErrNotFound, "no build"},
			{"a short prefix", "team", apitype.PublishEnvRequest{Env: st.Hash[:7]}, ErrInvalid, "not an environment hash"},
			{"not hex", "team", apitype.PublishEnvRequest{Env: "zzzzzzzzzz"}, ErrInvalid, "not an environment hash"},
			{"an image ID", "team", apitype.PublishEnvRequest{Image: "46d0"}, ErrInvalid, "image ID"},
		}
		for _, c := range errCases {
			if _, err := a.Publish(ctx, root, c.env, c.req); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: %v, want %v with %q", c.name, err, c.want, c.msg)
			}
		}
		if _, _, _, err := b.Resolve(ctx, bob, "", "team"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a name not published yet: %v", err)
		}

		a.Updated(build.Status{Hash: st.Hash, Ref: st.Image, State: build.StateReady, Built: true, Contents: spec})
		p, err := a.Publish(ctx, root, "team", apitype.PublishEnvRequest{Env: st.Hash[:10], Description: "the team's"})
		if err != nil || p.Image != st.Image {
			t.Fatalf("publish by prefix: %+v %v", p, err)
		}
		if _, err := b.Publish(ctx, root, "team", apitype.PublishEnvRequest{Image: "reg/x:1"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "unpublish it first") {
			t.Errorf("a name taken on the other replica: %v", err)
		}
		if _, err := b.Publish(ctx, root, "tools", apitype.PublishEnvRequest{Image: "ghcr.io/myorg/tools:1"}); err != nil {
			t.Fatal(err)
		}
		list, err := b.Published(ctx)
		if err != nil || len(list) != 3 || list[0].Name != "base" || list[1].Name != "team" || list[2].Name != "tools" || list[1].Versions["dask"] != "2024.8.0" || list[1].Description != "the team's" {
			t.Fatalf("listed on replica b: %+v %v", list, err)
		}
		// Everyone may run it now, by name and by image, on either replica.
		for _, svc := range []*Service{a, b} {
			if ref, _, _, err := svc.Resolve(ctx, carol, "", "team"); err != nil || ref != st.Image {
				t.Errorf("carol runs team on %s: %q %v", svc.cfg.ReplicaID, ref, err)
			}
			if _, err := svc.mayRun(ctx, carol, st.Image); err != nil {
				t.Errorf("carol runs team's image on %s: %v", svc.cfg.ReplicaID, err)
			}
			if _, err := svc.mayRun(ctx, carol, "ghcr.io/myorg/tools:1"); err != nil {
				t.Errorf("carol runs a published image on %s: %v", svc.cfg.ReplicaID, err)
			}
		}
		// Publishing opens the image, not the build's status or log.
		if _, err := b.Status(ctx, carol, st.Hash); !errors.Is(err, ErrNotFound) {
			t.Errorf("carol sees the published build's status: %v", err)
		}

		if err := b.Unpublish(ctx, root, "team"); err != nil {
			t.Fatal(err)
		}
		if err := a.Unpublish(ctx, root, "team"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unpublish twice: %v", err)
		}
		if err := a.Unpublish(ctx, root, "base"); !errors.Is(err, ErrConflict) {
			t.Errorf("unpublish the config's: %v", err)
		}
		if _, err := a.mayRun(ctx, carol, st.Image); !errors.Is(err, ErrInvalid) {
			t.Errorf("carol runs team's image after unpublish: %v", err)
		}
		if _, err := a.mayRun(ctx, alice, st.Image); err != nil {
			t.Errorf("alice, who asked, is refused after unpublish: %v", err)
		}
	})
}

// TestHeartbeat: a replica beats for the builds it holds, so a long step
// does not make them stale; once it stops (Close, as at the end of a
// process), they go stale and count as failed.
func TestHeartbeat(t *testing.T) {
	ctx := context.Background()
	db := sqliteStore(t)
	const stale = time.Second
	beats := make(chan time.Time, 100)
	a, err := New(ctx, Config{Store: beatNoter{db, beats}, Builder: newFakeBuilder(), ReplicaID: "r-a", MaxCodeBytes: 1 << 20, StaleAfter: stale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b := newService(t, db, newFakeBuilder(), func(c *Config) { c.ReplicaID, c.StaleAfter = "r-b", stale })
	st, err := a.Ensure(ctx, alice, images.Spec{Python: "3.11", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Past the time the build would be stale without beats, and with no
	// update from the build in that time: only beats.
	for staleAt := time.Now().Add(stale); ; {
		select {
		case at := <-beats:
			if at.Before(staleAt) {
				continue
			}
		case <-time.After(testutil.HangBound):
			t.Fatalf("no heartbeat in %s", testutil.HangBound)
		}
		break
	}
	if got, err := b.Status(ctx, alice, st.Hash); err != nil || got.State != "building" {
		t.Fatalf("a build whose replica beats: %+v %v", got, err)
	}
	a.Close()
	deadline := time.Now().Add(testutil.HangBound)
	for {
		got, err := b.Status(ctx, alice, st.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == "failed" && strings.Contains(got.Error, "stopped") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build of a replica that stopped beating: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStoreUnavailable: when the store cannot be read, requests fail as
// errors (the API's 500), never as "not found" or as allowed.
func TestStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	db := sqliteStore(t)
	fb := newFakeBuilder()
	svc := newService(t, db, fb, withAllowed(t, "*"))
	st, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.11", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := svc.Status(ctx, alice, st.Hash); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Status with the store down: %v", err)
	}
	if _, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.12", Platform: "linux/amd64"}, nil); err == nil {
		t.Error("Ensure with the store down")
	}
	if _, _, _, err := svc.Resolve(ctx, alice, st.Image, ""); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve with the store down: %v", err)
	}
	if _, err := svc.Publish(ctx, store.Actor{Name: "root"}, "x", apitype.PublishEnvRequest{Image: "reg/x:1"}); err == nil {
		t.Error("Publish with the store down")
	}
}

// beatNoter is a Store that sends the time of each heartbeat it stored
// (dropped when nobody reads them).
type beatNoter struct {
	Store
	beats chan<- time.Time
}

func (s beatNoter) BeatEnvBuilds(ctx context.Context, holder string) (int, error) {
	n, err := s.Store.BeatEnvBuilds(ctx, holder)
	if err == nil {
		select {
		case s.beats <- time.Now():
		default:
		}
	}
	return n, err
}
