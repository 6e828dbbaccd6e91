package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

func envHash(c byte) string { return strings.Repeat(string(c), 64) }

// TestEnvBuildClaims: a build is claimed by one replica at a time; the
// loser gets the stored row; the holder writes its status and releases it
// when the build ends; a holder that stops beating is taken over after the
// stale time, and its late writes are refused; a claim given up puts the
// row back as it was.
func TestEnvBuildClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		const stale = 2 * time.Minute
		h := envHash('a')

		if _, err := db.EnvBuild(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown build: %v", err)
		}
		won, prev, err := db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-1", stale)
		if err != nil || !won || prev != nil {
			t.Fatalf("first claim: %v %+v %v", won, prev, err)
		}
		won, cur, err := db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-2", stale)
		if err != nil || won || cur == nil || cur.Holder != "r-1" || cur.State != store.EnvBuilding || !cur.Built {
			t.Fatalf("second replica's claim: %v %+v %v, want lost to r-1", won, cur, err)
		}
		if won, _, err := db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-1", stale); err != nil || !won {
			t.Fatalf("the holder's claim again: %v %v", won, err)
		}

		clk.Advance(time.Minute)
		up := &store.EnvBuild{Hash: h, Ref: "reg/env:env-a", State: store.EnvBuilding, Steps: []string{"probing base", "installing 3 packages"}, Built: true, StartedAt: clk.Now(), Holder: "r-1"}
		if err := db.UpdateEnvBuild(ctx, up); err != nil {
			t.Fatal(err)
		}
		got, err := db.EnvBuild(ctx, h)
		if err != nil || !slices.Equal(got.Steps, up.Steps) || got.Holder != "r-1" || !got.Heartbeat.Equal(clk.Now()) {
			t.Fatalf("after an update: %+v %v", got, err)
		}
		if err := db.UpdateEnvBuild(ctx, &store.EnvBuild{Hash: h, State: "failed", Holder: "r-2"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an update by a replica that does not hold it: %v", err)
		}

		// r-1 beats, then falls silent: r-2 takes over after stale.
		clk.Advance(90 * time.Second)
		if n, err := db.BeatEnvBuilds(ctx, "r-1"); err != nil || n != 1 {
			t.Fatalf("beat: %d %v", n, err)
		}
		clk.Advance(90 * time.Second)
		if won, _, _ := db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-2", stale); won {
			t.Fatal("claimed 90s after a beat, within the stale time")
		}
		clk.Advance(stale)
		won, prev, err = db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-2", stale)
		if err != nil || !won || prev == nil || prev.Holder != "r-1" || len(prev.Steps) != 2 {
			t.Fatalf("claim of a stale build: %v %+v %v", won, prev, err)
		}
		if got, _ := db.EnvBuild(ctx, h); got.Holder != "r-2" || len(got.Steps) != 0 || got.State != store.EnvBuilding {
			t.Fatalf("after the take-over: %+v", got)
		}
		if err := db.UpdateEnvBuild(ctx, &store.EnvBuild{Hash: h, State: "ready", Holder: "r-1"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the old holder's late update: %v", err)
		}

		// The build ends: released, so anyone may claim it (to check the
		// image again).
		done := &store.EnvBuild{Hash: h, Ref: "reg/env:env-a", State: "ready", Steps: []string{"ready"}, Contents: `{"python":"3.11"}`, Digest: "sha256:" + strings.Repeat("d", 64),
			Built: true, StartedAt: clk.Now(), FinishedAt: clk.Now(), Holder: "r-2"}
		if err := db.UpdateEnvBuild(ctx, done); err != nil {
			t.Fatal(err)
		}
		got, _ = db.EnvBuild(ctx, h)
		if got.Holder != "" || got.State != "ready" || got.Contents != done.Contents || got.Digest != done.Digest || !got.FinishedAt.Equal(clk.Now()) {
			t.Fatalf("the ended build: %+v", got)
		}
		won, prev, err = db.ClaimEnvBuild(ctx, h, "reg/env:env-a", "r-3", stale)
		if err != nil || !won || prev.State != "ready" {
			t.Fatalf("claim of an ended build: %v %+v %v", won, prev, err)
		}
		// No build after all (the code was missing): the row is put back.
		if err := db.ReleaseEnvBuild(ctx, h, "r-3", prev); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.EnvBuild(ctx, h); got.State != "ready" || got.Holder != "" || got.Contents != done.Contents {
			t.Fatalf("after the release: %+v", got)
		}
		// A new hash released is gone; a release by a non-holder does nothing.
		h2 := envHash('b')
		if won, prev, _ := db.ClaimEnvBuild(ctx, h2, "reg/env:env-b", "r-1", stale); !won || prev != nil {
			t.Fatal("claim of a new hash")
		}
		if err := db.ReleaseEnvBuild(ctx, h2, "r-2", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnvBuild(ctx, h2); err != nil {
			t.Fatalf("a release by a replica that does not hold it removed the row: %v", err)
		}
		if err := db.ReleaseEnvBuild(ctx, h2, "r-1", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnvBuild(ctx, h2); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("released new hash: %v", err)
		}
		if _, _, err := db.ClaimEnvBuild(ctx, h2, "x", "", stale); err == nil {
			t.Fatal("a claim without a holder")
		}
	})
}

// TestEnvBuildAbandon: a replica starting again fails the builds it held
// (they died with it), and no one else's.
func TestEnvBuildAbandon(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		for _, c := range []struct {
			hash, holder string
		}{{envHash('1'), "r-1"}, {envHash('2'), "r-1"}, {envHash('3'), "r-2"}} {
			if won, _, err := db.ClaimEnvBuild(ctx, c.hash, "ref", c.holder, time.Minute); !won || err != nil {
				t.Fatal(won, err)
			}
		}
		if err := db.UpdateEnvBuild(ctx, &store.EnvBuild{Hash: envHash('2'), State: "ready", Holder: "r-1"}); err != nil {
			t.Fatal(err)
		}
		n, err := db.AbandonEnvBuilds(ctx, "r-1", "the gateway building it restarted; ask again")
		if err != nil || n != 1 {
			t.Fatalf("abandoned %d, %v; want 1", n, err)
		}
		got, _ := db.EnvBuild(ctx, envHash('1'))
		if got.State != "failed" || got.Holder != "" || !strings.Contains(got.Error, "restarted") {
			t.Errorf("abandoned build: %+v", got)
		}
		if got, _ := db.EnvBuild(ctx, envHash('2')); got.State != "ready" {
			t.Errorf("a finished build was abandoned: %+v", got)
		}
		if got, _ := db.EnvBuild(ctx, envHash('3')); got.State != store.EnvBuilding || got.Holder != "r-2" {
			t.Errorf("another replica's build was abandoned: %+v", got)
		}
	})
}

// TestEnvBuildClaimRace: two store handles on one database (two
// replicas), many claims of one hash at once: exactly one wins, and every
// loser is told who holds it.
func TestEnvBuildClaimRace(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		a, _ := openTestDB(t, url)
		b, _ := openTestDB(t, url)
		ctx := context.Background()
		for round := range 5 {
			h := fmt.Sprintf("%064x", round+1)
			var mu sync.Mutex
			var winners []string
			var wg sync.WaitGroup
			for i := range 8 {
				db := a
				if i%2 == 1 {
					db = b
				}
				holder := fmt.Sprintf("r-%d", i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					won, cur, err := db.ClaimEnvBuild(ctx, h, "ref", holder, time.Minute)
					if err != nil {
						t.Errorf("claim by %s: %v", holder, err)
						return
					}
					if !won && (cur == nil || cur.Holder == "" || cur.Holder == holder) {
						t.Errorf("%s lost, to %+v", holder, cur)
					}
					if won {
						mu.Lock()
						winners = append(winners, holder)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			got, err := a.EnvBuild(ctx, h)
			if len(winners) != 1 || err != nil || got.Holder != winners[0] {
				t.Fatalf("round %d: winners %v, stored %+v %v", round, winners, got, err)
			}
		}
	})
}

// TestEnvLogsAndAskers: logs are kept bounded to their last MiB from a
// line's start; who asked is kept per user, and found by prefix.
func TestEnvLogsAndAskers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		h := envHash('c')
		if _, err := db.EnvLog(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no log: %v", err)
		}
		line := strings.Repeat("x", 99) + "\n"
		big := "first line\n" + strings.Repeat(line, (store.MaxEnvLog/len(line))+10) + "last line\n"
		if err := db.PutEnvLog(ctx, h, []byte(big)); err != nil {
			t.Fatal(err)
		}
		got, err := db.EnvLog(ctx, h)
		if err != nil || len(got) > store.MaxEnvLog || !strings.HasSuffix(string(got), "last line\n") || strings.Contains(string(got), "first line") || !strings.HasPrefix(string(got), "xxx") {
			t.Fatalf("bounded log: %d bytes, %q…, %v", len(got), got[:min(len(got), 20)], err)
		}
		// Invalid UTF-8 and NUL from a build's output are stored, replaced.
		if err := db.PutEnvLog(ctx, h, []byte("a\x00b\xffc\n")); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.EnvLog(ctx, h); string(got) != "a\uFFFDb\uFFFDc\n" {
			t.Errorf("log %q", got)
		}

		h1, h2, h3 := "abcdef01"+strings.Repeat("1", 56), "abcdef01"+strings.Repeat("2", 56), "abcdef02"+strings.Repeat("3", 56)
		for _, a := range []struct{ hash, user string }{{h1, "alice"}, {h2, "alice"}, {h3, "alice"}, {h3, "bob"}, {h1, "alice"}} {
			if err := db.NoteEnvAsker(ctx, a.hash, a.user); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
		}
		for _, c := range []struct {
			hash, user string
			want       bool
		}{{h1, "alice", true}, {h1, "bob", false}, {h3, "bob", true}, {h3[:16], "bob", false}} {
			if got, err := db.EnvAsked(ctx, c.hash, c.user); err != nil || got != c.want {
				t.Errorf("EnvAsked(%.16s, %s) = %v %v", c.hash, c.user, got, err)
			}
		}
		for _, c := range []struct {
			user, prefix string
			want         []string
		}{
			{"alice", "abcdef01", []string{h1, h2}},
			{"alice", "abcdef02", []string{h3}},
			{"bob", "abcdef01", nil},
			{"bob", "abcdef", []string{h3}},
			{"alice", "%", nil},
			{"alice", "abcdef0_", nil},
		} {
			got, err := db.EnvAskedHashes(ctx, c.user, c.prefix, 5)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("EnvAskedHashes(%s, %q) = %v %v, want %v", c.user, c.prefix, got, err, c.want)
			}
		}
		if got, _ := db.EnvAskedHashes(ctx, "alice", "abcdef", 2); len(got) != 2 {
			t.Errorf("limit 2: %v", got)
		}
	})
}

// TestAskedEnvBuilds: a user's builds are those of the environments they
// asked for, most recently asked first, within the limit; a build's
// generation moves with its status and with its log, and is not found
// for a hash with no build.
func TestAskedEnvBuilds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, clk := openTestDB(t, url)
		ctx := context.Background()
		ha, hb, hc := envHash('a'), envHash('b'), envHash('c')
		for _, h := range []string{ha, hb, hc} {
			if won, _, err := db.ClaimEnvBuild(ctx, h, "reg/env:"+h[:4], "r-1", time.Minute); err != nil || !won {
				t.Fatalf("claim %.4s: %v %v", h, won, err)
			}
		}
		// alice asks for a, then b, then a again; bob for c; nobody asked
		// for d, which has no build either.
		for _, a := range []struct{ hash, user string }{{ha, "alice"}, {hb, "alice"}, {hc, "bob"}, {ha, "alice"}, {envHash('d'), "alice"}} {
			clk.Advance(time.Second)
			if err := db.NoteEnvAsker(ctx, a.hash, a.user); err != nil {
				t.Fatal(err)
			}
		}
		hashes := func(bs []*store.EnvBuild) []string {
			var out []string
			for _, b := range bs {
				out = append(out, b.Hash[:1])
			}
			return out
		}
		for _, c := range []struct {
			user  string
			limit int
			want  []string
		}{{"alice", 10, []string{"a", "b"}}, {"alice", 1, []string{"a"}}, {"bob", 10, []string{"c"}}, {"carol", 10, nil}} {
			got, err := db.AskedEnvBuilds(ctx, c.user, c.limit)
			if err != nil || !slices.Equal(hashes(got), c.want) {
				t.Errorf("AskedEnvBuilds(%s, %d) = %v %v, want %v", c.user, c.limit, hashes(got), err, c.want)
			}
		}
		if got, _ := db.AskedEnvBuilds(ctx, "bob", 10); len(got) != 1 || got[0].Ref != "reg/env:cccc" || got[0].State != store.EnvBuilding {
			t.Errorf("bob's build: %+v", got)
		}

		// The list's generation: alice's moves with her builds and her
		// asks, not with bob's; carol's is 0.
		listGen := func(user string) int64 {
			t.Helper()
			g, err := db.AskedEnvBuildsGeneration(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		if g := listGen("carol"); g != 0 {
			t.Errorf("the generation of a user who asked for nothing: %d", g)
		}
		la, lb := listGen("alice"), listGen("bob")
		clk.Advance(time.Second)
		if err := db.UpdateEnvBuild(ctx, &store.EnvBuild{Hash: hc, State: "ready", Holder: "r-1"}); err != nil {
			t.Fatal(err)
		}
		if a, b := listGen("alice"), listGen("bob"); a != la || b == lb {
			t.Errorf("bob's build changed: alice's list %d -> %d (want kept), bob's %d -> %d (want moved)", la, a, lb, b)
		}
		clk.Advance(time.Second)
		if err := db.NoteEnvAsker(ctx, hb, "alice"); err != nil {
			t.Fatal(err)
		}
		if a := listGen("alice"); a == la {
			t.Errorf("alice asked again: her list's generation stayed %d", a)
		}
		la = listGen("alice")

		gen := func() int64 {
			t.Helper()
			g, err := db.EnvBuildGeneration(ctx, ha)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		g0 := gen()
		clk.Advance(time.Second)
		if err := db.UpdateEnvBuild(ctx, &store.EnvBuild{Hash: ha, State: store.EnvBuilding, Steps: []string{"step"}, Holder: "r-1"}); err != nil {
			t.Fatal(err)
		}
		g1 := gen()
		clk.Advance(time.Second)
		if err := db.PutEnvLog(ctx, ha, []byte("a line\n")); err != nil {
			t.Fatal(err)
		}
		g2 := gen()
		if g1 == g0 || g2 == g1 {
			t.Errorf("generations %d, %d, %d: want a move at the update and at the log", g0, g1, g2)
		}
		if g := gen(); g != g2 {
			t.Errorf("generation moved with nothing changed: %d, then %d", g2, g)
		}
		if a := listGen("alice"); a == la {
			t.Errorf("alice's build changed: her list's generation stayed %d", a)
		}
		if _, err := db.EnvBuildGeneration(ctx, envHash('d')); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("generation of a hash with no build: %v", err)
		}
	})
}

// TestPublishedEnvs: publishing and unpublishing are stored, listed by
// name, refused when taken or absent, and audited.
func TestPublishedEnvs(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		db, _ := openTestDB(t, url)
		ctx := context.Background()
		admin := store.Actor{ID: "oidc:root", Name: "root"}
		if err := db.PublishEnv(ctx, &store.PublishedEnv{Name: "team", Image: "reg/env:env-a", EnvHash: envHash('a'), Description: "the team's"}, admin); err != nil {
			t.Fatal(err)
		}
		if err := db.PublishEnv(ctx, &store.PublishedEnv{Name: "base", Image: "reg/base:1"}, admin); err != nil {
			t.Fatal(err)
		}
		if err := db.PublishEnv(ctx, &store.PublishedEnv{Name: "team", Image: "reg/other:1"}, admin); !errors.Is(err, store.ErrExists) {
			t.Fatalf("a name published twice: %v", err)
		}
		got, err := db.PublishedEnvs(ctx)
		if err != nil || len(got) != 2 || got[0].Name != "base" || got[1].Name != "team" || got[1].EnvHash != envHash('a') || got[1].CreatedBy != "root" || got[1].Description != "the team's" {
			t.Fatalf("published: %+v %v", got, err)
		}
		if err := db.UnpublishEnv(ctx, "team", admin); err != nil {
			t.Fatal(err)
		}
		if err := db.UnpublishEnv(ctx, "team", admin); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unpublish twice: %v", err)
		}
		if got, _ := db.PublishedEnvs(ctx); len(got) != 1 || got[0].Name != "base" {
			t.Fatalf("after unpublish: %+v", got)
		}
		log, err := db.AuditLog(ctx, store.AuditFilter{Target: "env:team"})
		if err != nil || len(log) != 2 || log[0].Action != "env.unpublish" || log[1].Action != "env.publish" || log[0].ActorID != "oidc:root" ||
			!strings.Contains(log[1].After, "reg/env:env-a") || !strings.Contains(log[0].Before, "reg/env:env-a") {
			t.Fatalf("audit: %+v %v", log, err)
		}
	})
}
