package envs

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// TestImagePolicy: every image a user names goes through mayRun, decided
// from the reference alone before any engine or registry lookup (issue 14,
// findings 1 and 3). Image IDs and their prefixes are refused; the
// environment repository is open to those who asked for the environment
// (or when published), never through the allow-list; published and default
// images always run; anything else needs images.allowed_registries. Every
// refusal reads the same, whether the image exists or not.
func TestImagePolicy(t *testing.T) {
	ctx := context.Background()
	cb := &countingBuilder{fakeBuilder: newFakeBuilder()}
	ready := images.Spec{Python: "3.11", Platform: "linux/amd64"}
	published := images.Spec{Python: "3.12", Platform: "linux/amd64"}
	pubHash := mustHashOf(t, published)
	db := sqliteStore(t)
	svc := newService(t, db, cb, withPublished(apitype.PublishedEnv{Name: "team", Image: "reg/team:1"}, apitype.PublishedEnv{Name: "shared", Image: cb.Ref(pubHash)}),
		func(c *Config) { c.DefaultImage = "gateway-test/dask:bookworm-1" }, withAllowed(t, "ghcr.io/myorg/*", "python:3.1?"))
	st, err := svc.Ensure(ctx, alice, ready, nil)
	if err != nil {
		t.Fatal(err)
	}
	aliceRef := cb.Ref(st.Hash)
	for _, r := range []string{aliceRef, "reg/team:1", cb.Ref(pubHash)} {
		cb.images[r] = ready
	}
	tag := images.TagForHash(st.Hash)

	const idRefusal = "an image ID or a prefix of one is not accepted"
	const refusal = "you may not run that image"
	cases := []struct {
		name  string
		who   quota.Who
		image string
		want  string // "" allowed; else the refusal
	}{
		{"one's own environment", alice, aliceRef, ""},
		{"one's own environment, docker.io form", alice, "docker.io/library/" + aliceRef, ""},
		{"another's environment", bob, aliceRef, refusal},
		{"another's environment, docker.io form", bob, "docker.io/library/" + aliceRef, refusal},
		{"another's environment, index.docker.io form", bob, "index.docker.io/library/gateway-env:" + tag, refusal},
		{"an environment nobody built", bob, "gateway-env:env-0123456789abcdef", refusal},
		{"an environment image by digest", alice, "gateway-env@sha256:" + strings.Repeat("a", 64), refusal},
		{"a published environment image", bob, cb.Ref(pubHash), ""},
		{"a published image", bob, "reg/team:1", ""},
		{"a published image, docker.io form", bob, "docker.io/reg/team:1", ""},
		{"the default image", bob, "gateway-test/dask:bookworm-1", ""},
		{"allow-list glob", bob, "ghcr.io/myorg/tool:1", ""},
		{"allow-list: * crosses /", bob, "ghcr.io/myorg/sub/tool@sha256:" + strings.Repeat("b", 64), ""},
		{"allow-list: familiar Docker Hub form", bob, "python:3.11", ""},
		{"allow-list: docker.io form of the same", bob, "docker.io/library/python:3.12", ""},
		{"allow-list: ? is one character", bob, "python:3.100", refusal},
		{"allow-list: another org", bob, "ghcr.io/other/tool:1", refusal},
		{"allow-list: a longer org name", bob, "ghcr.io/myorgevil/tool:1", refusal},
		{"allow-list: another port", bob, "ghcr.io:443/myorg/tool:1", refusal},
		{"allow-list: a loopback registry", bob, "127.0.0.1:19999/x:tag", refusal},
		{"not on any list", bob, "reg/other:2", refusal},
		{"a unique prefix of an image ID", bob, "46d0", idRefusal},
		{"a whole image ID", bob, strings.Repeat("46d0", 16), idRefusal},
		{"sha256: and an ID", bob, "sha256:" + strings.Repeat("46d0", 16), idRefusal},
		{"sha256: and a prefix", bob, "sha256:46d0", idRefusal},
		{"upper-case hex", alice, "46D0", idRefusal},
		{"a hex name with a tag", alice, "46d0:latest", idRefusal},
		{"not a reference", alice, "reg/UPPER:1", "not an image reference"},
	}
	for _, c := range cases {
		if c.want == "" {
			cb.images[c.image] = ready // found when looked into
		}
		t.Run(c.name, func(t *testing.T) {
			before := cb.inspects
			ref, _, _, err := svc.Resolve(ctx, c.who, c.image, "")
			if c.want == "" {
				if err != nil || ref != c.image {
					t.Errorf("refused: %q %v", ref, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want ErrInvalid with %q", err, c.want)
			}
			if cb.inspects != before {
				t.Errorf("a refused image was looked up %d times", cb.inspects-before)
			}
		})
	}

	// Running one's environment image counts as asking for it (the image
	// collector keeps it).
	if !slices.Contains(cb.used, st.Hash) {
		t.Errorf("running alice's environment image did not record its use (%q)", cb.used)
	}

	// One answer for an image that exists and one that does not.
	_, _, _, exists := svc.Resolve(ctx, bob, aliceRef, "")
	_, _, _, missing := svc.Resolve(ctx, bob, "gateway-env:env-0123456789abcdef", "")
	if exists == nil || missing == nil || exists.Error() != missing.Error() {
		t.Errorf("refusals differ: %v / %v", exists, missing)
	}

	// The enumeration of the finding: 0…f with a client environment that
	// matches nothing. Sixteen identical answers, nothing looked up.
	before := cb.inspects
	var first error
	for _, d := range "0123456789abcdef" {
		_, _, _, err := svc.Resolve(ctx, bob, string(d), "")
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("image %c: %v, want ErrInvalid", d, err)
		}
		if first == nil {
			first = err
		} else if err.Error() != first.Error() {
			t.Errorf("image %c answers %q, image 0 %q", d, err, first)
		}
	}
	if cb.inspects != before {
		t.Errorf("the enumeration looked up %d images", cb.inspects-before)
	}

	// The allow-list never opens the environment repository.
	all := newService(t, sqliteStore(t), cb, withAllowed(t, "*"))
	if err := all.note(ctx, alice, st.Hash); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := all.Resolve(ctx, bob, aliceRef, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("allow-list * opened another's environment: %v", err)
	}
	cb.images["reg/other:2"] = ready
	if _, _, _, err := all.Resolve(ctx, bob, "reg/other:2", ""); err != nil {
		t.Errorf("allow-list * refused reg/other:2: %v", err)
	}

	// Without an engine the same policy applies.
	none := newService(t, db, nil, func(c *Config) { c.EnvRepo = build.LocalRepository + ":x" }, withAllowed(t, "*"))
	for _, img := range []string{"46d0", aliceRef} {
		if _, _, _, err := none.Resolve(ctx, bob, img, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("no engine, image %s: %v, want refused", img, err)
		}
	}
}

func mustHashOf(t *testing.T, s images.Spec) string {
	t.Helper()
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCompileAllowedErrors(t *testing.T) {
	for _, g := range []string{"", " ", "ghcr.io/a b"} {
		if _, err := CompileAllowed([]string{g}); err == nil || !strings.Contains(err.Error(), "images.allowed_registries[0]") {
			t.Errorf("glob %q: %v", g, err)
		}
	}
}

// countingRegistry is a loopback HTTP server that counts requests and
// answers each with status and a distinctive body.
func countingRegistry(t *testing.T, status int, body string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &n
}

// TestRegistriesContactedOnlyWhenAllowed: an image in a registry that the
// allow-list does not name makes no request at all; an allowed registry's
// error body is never repeated; a closed port and an open one that fails
// give answers of the same shape (issue 14, finding 3). The builder is
// the real one, looking images up with go-containerregistry.
func TestRegistriesContactedOnlyWhenAllowed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const secret = "DISTINCTIVE-REGISTRY-BODY-4f1c"
	host, requests := countingRegistry(t, http.StatusInternalServerError, `{"errors":[{"code":"UNKNOWN","message":"`+secret+`"}]}`+secret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	b, err := build.New(build.Config{Repository: "127.0.0.1:1/envs", Auth: build.Auth{Kind: "none"}, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	svc := newService(t, sqliteStore(t), b)

	// Not allowed: refused, and the registry hears nothing.
	if _, _, _, err := svc.Resolve(ctx, alice, host+"/x:tag", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a registry not allowed: %v, want refused", err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("a registry not allowed got %d requests", n)
	}

	svc.cfg.Allowed = mustAllowed(t, "127.0.0.1:*")
	shape := regexp.MustCompile(`^cannot look into image 127\.0\.0\.1:[0-9]+/x:tag: registry [a-z ]+(: [0-9]{3})?$`)
	var answers []string
	for _, reg := range []string{host, closed} {
		_, _, _, err := svc.Resolve(ctx, alice, reg+"/x:tag", "")
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("registry %s: %v, want ErrUnavailable", reg, err)
		}
		msg := strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
		if strings.Contains(msg, secret) || strings.Contains(msg, "UNKNOWN") {
			t.Errorf("the registry's body is in the answer: %s", msg)
		}
		if !shape.MatchString(msg) {
			t.Errorf("answer %q is not a summary", msg)
		}
		answers = append(answers, msg)
	}
	if requests.Load() == 0 {
		t.Error("the allowed registry was not asked")
	}
	if !strings.HasSuffix(answers[0], "registry refused the image: 500") || !strings.HasSuffix(answers[1], "registry could not be reached") {
		t.Errorf("answers %q", answers)
	}
}

// importImage makes a small image in the engine (one file, no layers of a
// base) tagged ref, and returns its ID.
func importImage(t *testing.T, cli *client.Client, ref string, changes ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := []byte(fmt.Sprintf("secret of %s\n", ref))
	if err := tw.WriteHeader(&tar.Header{Name: "secret.txt", Mode: 0o644, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	ii, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return ii.ID
}

// TestImageIDsRefusedOnEngine is finding 1 on a real engine: alice's
// environment image is in the engine; bob names it by a unique prefix of
// its ID, by sha256:<id> and by its whole ID, and is refused with the
// answer an ID that matches nothing gets, before the engine is asked.
func TestImageIDsRefusedOnEngine(t *testing.T) {
	testdocker.Pool(t)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	b, err := build.New(build.Config{Docker: cli, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cb := &countingEngine{Builder: b}
	svc := newService(t, sqliteStore(t), cb, withAllowed(t, "*")) // the allow-list opens neither IDs nor environments

	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "gwtest", Version: fmt.Sprint(time.Now().UnixNano())}}}
	hash := mustHashOf(t, spec)
	ref := b.Ref(hash)
	doc, err := spec.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(importImage(t, cli, ref, "LABEL "+images.LabelSpec+"="+strconv.Quote(string(doc))+" "+images.LabelHash+"="+hash), "sha256:")
	ctx := context.Background()
	if err := svc.note(ctx, alice, hash); err != nil {
		t.Fatal(err)
	}
	if got, _, known, err := svc.Resolve(ctx, alice, ref, ""); err != nil || got != ref || !known {
		t.Fatalf("alice's own environment image: %q %v", got, err)
	}
	_, _, _, none := svc.Resolve(ctx, bob, "0000", "")
	if none == nil {
		t.Fatal("an ID matching nothing was accepted")
	}
	// The shortest prefix the engine resolves uniquely is what the
	// red-team used; every length is refused.
	before := cb.inspects.Load()
	for _, img := range []string{id[:4], id[:12], id, "sha256:" + id, "sha256:" + id[:12]} {
		_, _, _, err := svc.Resolve(ctx, bob, img, "")
		if err == nil || err.Error() != none.Error() {
			t.Errorf("bob with %q: %v, want the answer of an ID that matches nothing (%v)", img, err, none)
		}
		_, _, _, err = svc.Resolve(ctx, alice, img, "")
		if err == nil {
			t.Errorf("alice with %q was accepted: an ID is never a reference", img)
		}
	}
	if _, _, _, err := svc.Resolve(ctx, bob, ref, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("bob with alice's tag: %v", err)
	}
	if n := cb.inspects.Load() - before; n != 0 {
		t.Errorf("refused images were looked up in the engine %d times", n)
	}
}

// countingEngine counts the real builder's lookups.
type countingEngine struct {
	*build.Builder
	inspects atomic.Int64
}

func (c *countingEngine) Inspect(ctx context.Context, ref string) (images.Spec, error) {
	c.inspects.Add(1)
	return c.Builder.Inspect(ctx, ref)
}

// fakeQuotas gives every user the same max_builds.
type fakeQuotas struct {
	max *quota.Amount
	src string
}

func (f fakeQuotas) Effective(context.Context, quota.Who) (quota.Effective, error) {
	return quota.Effective{Limits: quota.Limits{MaxBuilds: f.max}, Sources: map[string]string{"max_builds": f.src}}, nil
}

// tooManyBuilder refuses every build as over the owner's cap.
type tooManyBuilder struct{ *fakeBuilder }

func (f *tooManyBuilder) EnsureFor(_ context.Context, owner build.Owner, _ images.Spec, _ images.Code) (build.Status, error) {
	f.owners = append(f.owners, owner)
	return build.Status{}, &build.TooManyBuildsError{Active: owner.MaxBuilds, Max: owner.MaxBuilds, Hashes: []string{strings.Repeat("ab", 32), strings.Repeat("cd", 32)}}
}

// TestBuildQuota: each build is started for its user with their max_builds
// (2 without a quota service, none when unlimited), and a build over the
// cap is a quota refusal that names the limit, where it comes from and how
// to raise it (issue 14, finding 4; the cap itself is images/build's).
func TestBuildQuota(t *testing.T) {
	ctx := context.Background()
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64"}
	three, unlimited := quota.Amount(3), quota.Unlimited
	cases := []struct {
		name   string
		quotas Quotas
		want   int
		src    string
	}{
		{"no quota service", nil, DefaultMaxBuilds, quota.BuiltinSource},
		{"a group's limit", fakeQuotas{&three, "group:team (config)"}, 3, "group:team (config)"},
		{"unlimited", fakeQuotas{&unlimited, "default (api)"}, -1, "default (api)"},
		{"no limit set", fakeQuotas{nil, ""}, -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := &tooManyBuilder{newFakeBuilder()}
			svc := newService(t, sqliteStore(t), fb, func(cfg *Config) { cfg.Quotas = c.quotas })
			_, err := svc.Ensure(ctx, quota.Who{ID: "oidc:ann", Name: "ann"}, spec, nil)
			if len(fb.owners) != 1 || fb.owners[0] != (build.Owner{ID: "oidc:ann", MaxBuilds: c.want}) {
				t.Fatalf("owners %+v, want ann with max %d", fb.owners, c.want)
			}
			var qe *quota.ExceededError
			if !errors.As(err, &qe) || !errors.Is(err, quota.ErrExceeded) || qe.Limit != "max_builds" || qe.Source != c.src {
				t.Fatalf("err %v, want a max_builds quota refusal from %q", err, c.src)
			}
			for _, want := range []string{"max_builds", "from " + c.src, "abababababababab", "gateway admin quota set user:ann --max-builds"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err, want)
				}
			}
		})
	}
}

// TestImagesInUse: the image collector keeps the images of every active
// cluster, read from the real store, and not those of stopped ones.
func TestImagesInUse(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/gateway.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i, c := range []struct {
		status store.Status
		opts   string
	}{
		{store.Pending, `{"image":"gateway-env:env-1111111111111111"}`},
		{store.Running, `{"image":"reg/team:1","workers":2}`},
		{store.Stopping, `{"image":"gateway-env:env-2222222222222222"}`},
		{store.Stopped, `{"image":"gateway-env:env-3333333333333333"}`},
		{store.Failed, `{"image":"gateway-env:env-4444444444444444"}`},
		{store.Running, `{}`},
	} {
		cl := &store.Cluster{Name: fmt.Sprintf("c%d", i), Owner: "oidc:ann", Status: c.status, Provider: "docker", Options: c.opts, TLSCert: []byte("c"), TLSKey: []byte("k")}
		if err := db.CreateCluster(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ImagesInUse(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"gateway-env:env-1111111111111111", "gateway-env:env-2222222222222222", "reg/team:1"}
	if !slices.Equal(got, want) {
		t.Errorf("images in use %q, want %q", got, want)
	}

	// A row that cannot be read might hide an image in use: nothing is
	// collected, and the error names the cluster.
	bad := &store.Cluster{Name: "corrupt", Owner: "oidc:ann", Status: store.Running, Provider: "docker",
		Options: `{"image":"reg/team:2","workers":"two"}`, TLSCert: []byte("c"), TLSKey: []byte("k")}
	if err := db.CreateCluster(ctx, bad); err != nil {
		t.Fatal(err)
	}
	got, err = ImagesInUse(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "cluster corrupt: its stored options cannot be read") || !strings.Contains(err.Error(), "workers") {
		t.Errorf("ImagesInUse with a corrupt row = %q, %v; want an error naming the cluster and the field", got, err)
	}
}
