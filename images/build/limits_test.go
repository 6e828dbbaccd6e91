package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gatewayhq/gateway/images"
)

// gatedRegistry is the in-memory registry, where pushes of env images
// (PUT of a manifest in /v2/envs/) wait until the gate opens: builds stay
// running, for as long as a test needs, without timing.
type gatedRegistry struct {
	next   http.Handler
	gate   chan struct{}
	once   sync.Once
	pushes chan string // the tag of each push that arrived
}

func (g *gatedRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v2/envs/manifests/") {
		g.pushes <- strings.TrimPrefix(r.URL.Path, "/v2/envs/manifests/")
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func (g *gatedRegistry) open() { g.once.Do(func() { close(g.gate) }) }

func newGatedRegistry(t *testing.T) (string, *gatedRegistry) {
	t.Helper()
	g := &gatedRegistry{next: registry.New(registry.Logger(log.New(io.Discard, "", 0))), gate: make(chan struct{}), pushes: make(chan string, 64)}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	t.Cleanup(g.open)
	return strings.TrimPrefix(srv.URL, "http://"), g
}

// waitPush waits for a push of tag to reach the registry.
func (g *gatedRegistry) waitPush(t *testing.T, ctx context.Context, tag string) {
	t.Helper()
	for {
		select {
		case got := <-g.pushes:
			if got == tag {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no push of %s", tag)
		}
	}
}

// TestBuildCapsPerOwner: an owner has at most MaxBuilds builds queued or
// running (a new one over it is refused with TooManyBuildsError, another
// owner still builds, asking for a running build joins it at no cost),
// and runs one build at a time, so that another owner's build takes a
// free slot before the first owner's second build (issue 14, finding 4).
// Queued code is in a mode-0600 file under SpoolDir, not in memory, and
// the file goes when the build ends.
func TestBuildCapsPerOwner(t *testing.T) {
	ctx := testContext(t)
	host, reg := newGatedRegistry(t)
	baseRef := pushBase(t, ctx, host, authn.Anonymous)
	logDir := t.TempDir()
	b := newBuilder(t, Config{Repository: host + "/envs", Auth: Auth{Kind: "none"}, Bases: []Base{{Python: "3.11", Image: baseRef}}, MaxConcurrentBuilds: 2, LogDir: logDir})
	spoolDir := filepath.Join(logDir, "spool")

	type req struct {
		spec images.Spec
		code images.Code
		zip  []byte
	}
	mk := func(i int) req {
		zip, part := codeZip(t, "code", nonce(t)+strconv.Itoa(i))
		spec := registryBase
		spec.Code = []images.CodePart{part}
		return req{spec, images.CodeFromBytes(map[string][]byte{"code": zip}), zip}
	}
	alice, bob := Owner{ID: "alice", MaxBuilds: 2}, Owner{ID: "bob", MaxBuilds: 2}
	r1, r2, r3, r4 := mk(1), mk(2), mk(3), mk(4)

	a1, err := b.EnsureFor(ctx, alice, r1.spec, r1.code)
	if err != nil || a1.State != StateBuilding {
		t.Fatalf("alice's first build: %+v %v", a1, err)
	}
	reg.waitPush(t, ctx, images.TagForHash(a1.Hash)) // running, held at its push
	a2, err := b.EnsureFor(ctx, alice, r2.spec, r2.code)
	if err != nil || a2.State != StateBuilding {
		t.Fatalf("alice's second build: %+v %v", a2, err)
	}
	_, err = b.EnsureFor(ctx, alice, r3.spec, r3.code)
	var tm *TooManyBuildsError
	if !errors.Is(err, ErrTooManyBuilds) || !errors.As(err, &tm) || tm.Active != 2 || tm.Max != 2 {
		t.Fatalf("alice's third build: %v, want TooManyBuildsError 2 of 2", err)
	}
	// Asking again for a build that runs joins it.
	if st, err := b.EnsureFor(ctx, alice, r1.spec, r1.code); err != nil || st.Hash != a1.Hash {
		t.Errorf("alice asking for her running build again: %+v %v", st, err)
	}
	if st, err := b.EnsureFor(ctx, bob, r2.spec, r2.code); err != nil || st.Hash != a2.Hash {
		t.Errorf("bob asking for alice's queued build: %+v %v", st, err)
	}

	// Bob's build takes the free slot while alice's second waits.
	b1, err := b.EnsureFor(ctx, bob, r4.spec, r4.code)
	if err != nil || b1.State != StateBuilding {
		t.Fatalf("bob's build while alice is at her cap: %+v %v", b1, err)
	}
	reg.waitPush(t, ctx, images.TagForHash(b1.Hash))
	st, _ := b.Status(a2.Hash)
	if st.State != StateBuilding || len(st.Steps) == 0 || !strings.HasPrefix(st.Steps[len(st.Steps)-1], "waiting for a build slot") {
		t.Errorf("alice's second build, with bob's and her first running: %q, want waiting for a slot", st.Steps)
	}

	// The queued build holds its code in a file, not in memory.
	b.mu.Lock()
	j := b.jobs[a2.Hash]
	b.mu.Unlock()
	j.mu.Lock()
	sp, layers := j.spool, j.layers
	j.mu.Unlock()
	if sp == nil || len(layers) != 1 || layers[0].Files != nil || layers[0].Spooled == nil {
		t.Fatalf("queued build: spool %v, layers %+v; want the code spooled and no files in memory", sp, layers)
	}
	fi, err := os.Stat(sp.path)
	if err != nil || filepath.Dir(sp.path) != spoolDir || fi.Mode().Perm() != 0o600 {
		t.Fatalf("spool file %s: %v %v, want mode 0600 in %s", sp.path, fi, err, spoolDir)
	}
	data, err := os.ReadFile(sp.path)
	if err != nil || !bytes.Contains(data, r2.zip) {
		t.Errorf("the spool file does not hold the code (%v)", err)
	}

	reg.open()
	for _, h := range []string{a1.Hash, a2.Hash, b1.Hash} {
		if st, err := b.Wait(ctx, h); err != nil {
			t.Fatalf("build %s: %v %q", h[:16], err, st.Steps)
		}
	}
	if left, _ := os.ReadDir(spoolDir); len(left) != 0 {
		t.Errorf("spool files left after the builds ended: %v", left)
	}
	if _, err := b.EnsureFor(ctx, alice, r3.spec, r3.code); err != nil {
		t.Errorf("alice's third build once the others ended: %v", err)
	}
	if _, err := b.Wait(ctx, mustHash(t, r3.spec)); err != nil {
		t.Error(err)
	}

	// A build that fails at once (no base for its Python) removes its
	// spooled code too.
	r5 := mk(5)
	r5.spec.Python = "3.12"
	if st, err := b.EnsureFor(ctx, alice, r5.spec, r5.code); err != nil || st.State != StateFailed {
		t.Errorf("a build without a base: %+v %v", st, err)
	}
	if left, _ := os.ReadDir(spoolDir); len(left) != 0 {
		t.Errorf("spool files left after a failed build: %v", left)
	}
}

// TestSpoolSweep: New removes spool files of a gateway that died, old
// enough that no live build of another process can still be waiting on
// the name (a live one reads through its open descriptor anyway).
func TestSpoolSweep(t *testing.T) {
	logDir := t.TempDir()
	spool := filepath.Join(logDir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(spool, "old.tar"), filepath.Join(spool, "fresh.tar")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("code"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * spoolMaxAge)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	newBuilder(t, Config{Repository: "127.0.0.1:1/envs", Auth: Auth{Kind: "none"}, LogDir: logDir})
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("an old spool file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh spool file was removed: %v", err)
	}
}

// engineEnvImage imports a tiny image into the engine as the environment
// image of a fresh hash (labelled as built by this package when built),
// removed at the end of the test, and returns the hash and reference.
func engineEnvImage(t *testing.T, cli *client.Client, b *Builder, built bool) (string, string) {
	t.Helper()
	sum := sha256.Sum256([]byte(nonce(t) + strconv.FormatBool(built)))
	hash := hex.EncodeToString(sum[:])
	ref := b.Ref(hash)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o755, Size: 5}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("hello"))
	_ = tw.Close()
	var changes []string
	if built {
		changes = append(changes, "LABEL "+LabelBuilt+"=1")
	}
	ctx := testContext(t)
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	removeImageAtEnd(t, cli, ref)
	return hash, ref
}

func engineHas(t *testing.T, cli *client.Client, ref string) bool {
	t.Helper()
	_, err := cli.ImageInspect(testContext(t), ref)
	if err != nil && !isEngineNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCollectGarbage: on a real engine, with a fake clock, the collector
// removes a built environment image that nobody asked for within the
// retention and nothing uses, and keeps one an active cluster names, one
// a container uses, one asked for recently, one it sees for the first
// time, and one it did not build (issue 14, finding 4).
func TestCollectGarbage(t *testing.T) {
	cli := dockerClient(t)
	ctx := testContext(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	b := newBuilder(t, Config{Docker: cli, Now: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }})
	setClock := func(t time.Time) { clockMu.Lock(); now = t; clockMu.Unlock() }
	const retention = 7 * 24 * time.Hour

	hOld, old := engineEnvImage(t, cli, b, true)
	hCluster, cluster := engineEnvImage(t, cli, b, true)
	hContainer, contained := engineEnvImage(t, cli, b, true)
	hRecent, recent := engineEnvImage(t, cli, b, true)
	hForeign, foreign := engineEnvImage(t, cli, b, false)
	for _, h := range []string{hOld, hCluster, hContainer, hRecent, hForeign} {
		b.Used(h)
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: contained, Entrypoint: []string{"/hello"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})

	setClock(now.Add(retention + time.Hour))
	b.Used(hRecent)
	_, unseen := engineEnvImage(t, cli, b, true) // no record of use yet

	removed, err := b.CollectGarbage(ctx, retention, []string{"docker.io/library/" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != old {
		t.Errorf("removed %q, want only %s", removed, old)
	}
	if engineHas(t, cli, old) {
		t.Errorf("%s is still in the engine", old)
	}
	for _, ref := range []string{cluster, contained, recent, foreign, unseen} {
		if !engineHas(t, cli, ref) {
			t.Errorf("%s was removed", ref)
		}
	}

	// What was in use counts as used at that pass: an hour later, with
	// its cluster gone, it is still kept.
	setClock(now.Add(time.Hour))
	removed, err = b.CollectGarbage(ctx, retention, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range removed {
		if r == cluster || r == unseen {
			t.Errorf("%s removed an hour after its last use", r)
		}
	}
}
