package envs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// fakeBuilder stands in for images/build (which has its own tests against
// a real engine and registry): this tests the service's tenancy, its state
// in the store and its error mapping around it.
type fakeBuilder struct {
	mu      sync.Mutex
	builds  map[string]build.Status // hash -> status of the builds it started
	exists  map[string]bool         // hashes whose image exists already
	images  map[string]images.Spec  // ref -> recorded spec
	owners  []build.Owner           // of each EnsureFor
	started []string                // the hash each EnsureFor started, or ""
	used    []string                // hashes Used was told of
}

func newFakeBuilder() *fakeBuilder {
	return &fakeBuilder{builds: map[string]build.Status{}, exists: map[string]bool{}, images: map[string]images.Spec{}}
}

func (f *fakeBuilder) Used(hash string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = append(f.used, hash)
}

func (f *fakeBuilder) EnsureFor(_ context.Context, owner build.Owner, spec images.Spec, code images.Code) (build.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owners = append(f.owners, owner)
	f.started = append(f.started, "")
	hash, err := spec.Hash()
	if err != nil {
		return build.Status{}, err
	}
	if f.exists[hash] {
		return build.Status{Hash: hash, Ref: f.Ref(hash), State: build.StateReady, Contents: spec}, nil
	}
	if len(spec.Code) > 0 && len(code) == 0 {
		return build.Status{}, build.ErrNeedCode
	}
	st := build.Status{Hash: hash, Ref: f.Ref(hash), State: build.StateBuilding, Built: true, Steps: []string{"probing base"}}
	f.builds[hash] = st
	f.started[len(f.started)-1] = hash
	return st, nil
}

func (f *fakeBuilder) Active(owner string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, o := range f.owners {
		if o.ID == owner && i < len(f.started) && f.started[i] != "" && f.builds[f.started[i]].State == build.StateBuilding {
			out = append(out, f.started[i])
		}
	}
	return out
}

func (f *fakeBuilder) Logs(hash string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.builds[hash]; !ok || !st.Built {
		return nil, os.ErrNotExist
	}
	return []byte("log of " + hash), nil
}

func (f *fakeBuilder) Ref(hash string) string { return "gateway-env:" + images.TagForHash(hash) }

func (f *fakeBuilder) Inspect(_ context.Context, ref string) (images.Spec, error) {
	switch ref {
	case "reg/unlabelled:1":
		return images.Spec{}, fmt.Errorf("%w: no label", images.ErrNoSpec)
	case "down.example/x:1":
		return images.Spec{}, &build.RegistryError{Ref: ref, Summary: "registry refused the image: 503", Err: errors.New("registry down.example answered 503: <html>the registry's page</html>")}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	spec, ok := f.images[ref]
	if !ok {
		return images.Spec{}, fmt.Errorf("image %s: %w", ref, images.ErrNotFound)
	}
	return spec, nil
}

var (
	alice = quota.Who{ID: "oidc:alice"}
	bob   = quota.Who{ID: "oidc:bob"}
)

// openStore opens the store at url; it is closed when the test ends.
func openStore(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteStore is a fresh SQLite store.
func sqliteStore(t *testing.T) *store.DB {
	t.Helper()
	return openStore(t, "sqlite://"+t.TempDir()+"/gateway.db")
}

// newService is a Service on db with builder b (nil: none), as replica
// "r-1" unless edit says otherwise; closed when the test ends.
func newService(t *testing.T, db Store, b Builder, edit ...func(*Config)) *Service {
	t.Helper()
	cfg := Config{Store: db, Builder: b, ReplicaID: "r-1", MaxCodeBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, e := range edit {
		e(&cfg)
	}
	svc, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func withPublished(p ...apitype.PublishedEnv) func(*Config) {
	return func(c *Config) { c.Published = p }
}

func withAllowed(t *testing.T, globs ...string) func(*Config) {
	re := mustAllowed(t, globs...)
	return func(c *Config) { c.Allowed = re }
}

func TestServiceTenancyAndErrors(t *testing.T) {
	testdb.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := openStore(t, url)
		fb := newFakeBuilder()
		svc := newService(t, db, fb)
		spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}

		st, err := svc.Ensure(ctx, alice, spec, nil)
		if err != nil || st.State != "building" {
			t.Fatalf("Ensure: %+v, %v", st, err)
		}
		if got, err := svc.Status(ctx, alice, st.Hash); err != nil || got.State != "building" || !reflect.DeepEqual(got.Steps, []string{"probing base"}) {
			t.Errorf("the asker cannot see her build: %+v %v", got, err)
		}
		if b, err := svc.Logs(ctx, alice, st.Hash); err != nil || string(b) != "log of "+st.Hash {
			t.Errorf("the asker cannot read her build log: %q %v", b, err)
		}
		if _, err := svc.Status(ctx, bob, st.Hash); !errors.Is(err, ErrNotFound) {
			t.Errorf("another user sees the build: %v", err)
		}
		if got, err := svc.Status(ctx, alice, st.Hash[:16]); err != nil || got.Hash != st.Hash {
			t.Errorf("the asker's build by the prefix the CLI shows: %+v, %v", got, err)
		}
		for _, prefix := range []string{st.Hash[:7], st.Hash[:16] + "X", "%", st.Hash[:8] + "%"} {
			if _, err := svc.Logs(ctx, alice, prefix); !errors.Is(err, ErrNotFound) {
				t.Errorf("Logs(%q): %v, want not found (too short, or not hex)", prefix, err)
			}
		}
		if _, err := svc.Logs(ctx, bob, st.Hash[:16]); !errors.Is(err, ErrNotFound) {
			t.Errorf("another user reads the build log by prefix: %v", err)
		}
		if _, err := svc.Logs(ctx, bob, st.Hash); !errors.Is(err, ErrNotFound) {
			t.Errorf("another user reads the build log: %v", err)
		}
		// The message no longer says the gateway forgets: it does not.
		if _, err := svc.Status(ctx, bob, st.Hash); err == nil || strings.Contains(err.Error(), "forgets") || strings.Contains(err.Error(), "since this gateway started") {
			t.Errorf("not-found message: %v", err)
		}
		// Bob asking for the same environment shares the image, and then may see it.
		if _, err := svc.Ensure(ctx, bob, spec, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Status(ctx, bob, st.Hash); err != nil {
			t.Errorf("after asking, bob cannot see the shared build: %v", err)
		}

		// A build without its code: refused, and nothing is left claimed.
		withCode := spec
		withCode.Code = []images.CodePart{{Name: "proj", Digest: images.DigestOf([]byte("zip"))}}
		if _, err := svc.Ensure(ctx, alice, withCode, nil); !errors.Is(err, ErrCodeRequired) {
			t.Errorf("a build without its code: %v, want ErrCodeRequired", err)
		}
		if _, err := db.EnvBuild(ctx, mustHashOf(t, withCode)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a build that did not start is stored: %v", err)
		}
		if _, err := svc.Status(ctx, alice, mustHashOf(t, withCode)); !errors.Is(err, ErrNotFound) {
			t.Errorf("the asker of a build that did not start sees it: %v", err)
		}
		_, err = svc.Ensure(ctx, alice, withCode, images.CodeFromBytes(map[string][]byte{"proj": make([]byte, 2<<20)}))
		if !errors.Is(err, images.ErrInvalidSpec) || !strings.Contains(err.Error(), "images.max_code_mib") {
			t.Errorf("code over the limit: %v", err)
		}
		if _, err := svc.Ensure(ctx, alice, images.Spec{Python: "two"}, nil); !errors.Is(err, images.ErrInvalidSpec) {
			t.Errorf("an invalid spec: %v", err)
		}

		// An image that existed: ready, nothing built, no log.
		found := images.Spec{Python: "3.12", Platform: "linux/amd64"}
		fb.exists[mustHashOf(t, found)] = true
		if st, err := svc.Ensure(ctx, alice, found, nil); err != nil || st.State != "ready" || st.Built {
			t.Errorf("an image that exists: %+v %v", st, err)
		}
		if _, err := svc.Logs(ctx, alice, mustHashOf(t, found)); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nothing was built") {
			t.Errorf("log of an image that existed: %v", err)
		}

		cloud := newService(t, db, fb, func(c *Config) {
			c.NoBuild = "its ec2 machines pull images from a registry, and images.repository names none"
		})
		if _, err := cloud.Ensure(ctx, alice, spec, nil); !errors.Is(err, ErrNoBuilder) || !strings.Contains(err.Error(), "images.repository") {
			t.Errorf("a cloud backend without a repository: %v, want ErrNoBuilder naming images.repository", err)
		}

		none := newService(t, sqliteStore(t), nil)
		if _, err := none.Ensure(ctx, alice, spec, nil); !errors.Is(err, ErrNoBuilder) {
			t.Errorf("without an engine: %v, want ErrNoBuilder", err)
		}
		if _, err := none.Status(ctx, alice, st.Hash); !errors.Is(err, ErrNotFound) {
			t.Errorf("status without an engine: %v", err)
		}
	})
}

// TestServiceBuilds: a user's builds are those they asked for, newest
// asked first, with their times and what the push did with the image's
// layers; a build's generation moves as the builder reports it.
func TestServiceBuilds(t *testing.T) {
	ctx := context.Background()
	db := sqliteStore(t)
	fb := newFakeBuilder()
	svc := newService(t, db, fb)
	older := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	newer := images.Spec{Python: "3.12", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.9.0"}}}
	bobs := images.Spec{Python: "3.10", Platform: "linux/amd64"}
	a, err := svc.Ensure(ctx, alice, older, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Ensure(ctx, alice, newer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ensure(ctx, bob, bobs, nil); err != nil {
		t.Fatal(err)
	}
	g0, err := svc.BuildGeneration(ctx, a.Hash)
	if err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	st := fb.builds[a.Hash]
	fb.mu.Unlock()
	st.State, st.Steps = build.StateReady, append(st.Steps, "2 layers of the image: 1 reused (3.0 MiB), 1 uploaded (12 B), then the config and manifest")
	st.Started, st.Finished = time.Now().Add(-time.Minute), time.Now()
	fb.mu.Lock()
	fb.builds[a.Hash] = st
	fb.mu.Unlock()
	svc.Updated(st)
	if g, err := svc.BuildGeneration(ctx, a.Hash); err != nil || g == g0 {
		t.Errorf("generation after an update: %d (before %d), %v", g, g0, err)
	}

	got, err := svc.Builds(ctx, alice, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("alice's builds: %+v %v", got, err)
	}
	// Both were asked for within the same millisecond, or a after b.
	byHash := map[string]apitype.EnvStatus{got[0].Hash: got[0], got[1].Hash: got[1]}
	ready, building := byHash[a.Hash], byHash[b.Hash]
	if ready.State != "ready" || building.State != "building" {
		t.Fatalf("alice's builds: %+v", got)
	}
	want := &apitype.EnvLayers{Layers: 2, Reused: 1, ReusedSize: "3.0 MiB", Uploaded: 1, UploadedSize: "12 B"}
	if !reflect.DeepEqual(ready.Layers, want) || ready.StartedAt.IsZero() || ready.FinishedAt.IsZero() || building.Layers != nil {
		t.Errorf("the ready build: layers %+v, %v to %v; the building one: layers %+v", ready.Layers, ready.StartedAt, ready.FinishedAt, building.Layers)
	}
	if one, _ := svc.Builds(ctx, alice, 1); len(one) != 1 {
		t.Errorf("limit 1: %d builds", len(one))
	}
	if got, _ := svc.Builds(ctx, bob, 10); len(got) != 1 || got[0].Hash == a.Hash || got[0].Hash == b.Hash {
		t.Errorf("bob's builds: %+v", got)
	}
	if _, err := svc.BuildGeneration(ctx, strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("generation of no build: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(context.Background(), Config{ReplicaID: "r"}); err == nil {
		t.Error("a service without a store")
	}
	if _, err := New(context.Background(), Config{Store: sqliteStore(t)}); err == nil {
		t.Error("a service without a replica id")
	}
}

func TestServiceResolve(t *testing.T) {
	ctx := context.Background()
	team := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	fb := newFakeBuilder()
	fb.images["reg/team:1"], fb.images["reg/other:2"] = team, team
	svc := newService(t, sqliteStore(t), fb, withPublished(apitype.PublishedEnv{Name: "team", Image: "reg/team:1"}), withAllowed(t, "reg/*", "down.example/*"))
	building, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.12", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	readySpec := images.Spec{Python: "3.10", Platform: "linux/amd64"}
	ready, err := svc.Ensure(ctx, alice, readySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	readyRef := fb.Ref(ready.Hash)
	svc.Updated(build.Status{Hash: ready.Hash, Ref: readyRef, State: build.StateReady, Built: true, Contents: readySpec})
	fb.images[readyRef] = readySpec
	failed, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.9", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Updated(build.Status{Hash: failed.Hash, Ref: fb.Ref(failed.Hash), State: build.StateFailed, Built: true, Error: "pip said no"})

	cases := []struct {
		name       string
		who        quota.Who
		image, env string
		ref        string
		contents   images.Spec
		known      bool
		err        string // "" for success; else a part of the ErrInvalid message
	}{
		{"a published name", alice, "", "team", "reg/team:1", team, true, ""},
		{"an image is looked into", alice, "reg/other:2", "", "reg/other:2", team, true, ""},
		{"an image that does not exist", alice, "reg/missing:1", "", "", images.Spec{}, false, "image reg/missing:1"},
		{"an image reference that is not one", alice, "reg/UPPER:1", "", "", images.Spec{}, false, `not an image reference: "reg/UPPER:1"`},
		{"an image made elsewhere runs, checked by its members", alice, "reg/unlabelled:1", "", "reg/unlabelled:1", images.Spec{}, false, ""},
		{"an unknown name", alice, "", "nope", "", images.Spec{}, false, `no environment "nope"`},
		{"a ready build of one's own", alice, "", ready.Hash, readyRef, readySpec, true, ""},
		{"someone else's build", bob, "", ready.Hash, "", images.Spec{}, false, "no environment"},
		{"one's own environment image by its tag", alice, readyRef, "", readyRef, readySpec, true, ""},
		{"another user's environment image by its tag", bob, readyRef, "", "", images.Spec{}, false, "you may not run that image"},
		{"another user's environment image by digest", bob, "gateway-env@sha256:" + strings.Repeat("a", 64), "", "", images.Spec{}, false, "you may not run that image"},
		{"a build still running", alice, "", building.Hash, "", images.Spec{}, false, "is building, not ready"},
		{"a failed build", alice, "", failed.Hash, "", images.Spec{}, false, "is failed, not ready"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, contents, known, err := svc.Resolve(ctx, c.who, c.image, c.env)
			if c.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err %v, want ErrInvalid with %q", err, c.err)
				}
				return
			}
			if err != nil || ref != c.ref || known != c.known || !reflect.DeepEqual(contents, c.contents) {
				t.Errorf("got %q %+v %v %v, want %q %+v %v", ref, contents, known, err, c.ref, c.contents, c.known)
			}
		})
	}

	if _, _, _, err := svc.Resolve(ctx, alice, "down.example/x:1", ""); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "registry refused the image: 503") || strings.Contains(err.Error(), "html") {
		t.Errorf("a registry that is down: %v, want ErrUnavailable with the summary only", err)
	}

	// Without an engine, an allowed image runs as named, unchecked.
	noEngine := newService(t, sqliteStore(t), nil, withAllowed(t, "reg/*"))
	ref, _, known, err := noEngine.Resolve(ctx, alice, "reg/any:1", "")
	if err != nil || ref != "reg/any:1" || known {
		t.Errorf("no engine: %q %v %v", ref, known, err)
	}
}

func mustAllowed(t *testing.T, globs ...string) []*regexp.Regexp {
	t.Helper()
	re, err := CompileAllowed(globs)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

func TestParsePublishedAndBases(t *testing.T) {
	pub := []struct {
		name    string
		entries []map[string]any
		want    []string // names in order, or nil when an error is wanted
		err     string
	}{
		{"sorted by name", []map[string]any{{"name": "b", "image": "r/b:1"}, {"name": "a", "image": "r/a:1", "description": "A"}}, []string{"a", "b"}, ""},
		{"needs an image", []map[string]any{{"name": "a"}}, nil, "needs a name"},
		{"no slash in a name", []map[string]any{{"name": "a/b", "image": "r/a:1"}}, nil, "no spaces"},
		{"a name cannot look like a hash", []map[string]any{{"name": strings.Repeat("a", 64), "image": "r/a:1"}}, nil, "needs a name"},
		{"twice", []map[string]any{{"name": "a", "image": "r/a:1"}, {"name": "a", "image": "r/a:2"}}, nil, "published twice"},
		{"unknown key", []map[string]any{{"name": "a", "image": "r/a:1", "tag": "x"}}, nil, `unknown key "tag"`},
		{"not a string", []map[string]any{{"name": 3, "image": "r/a:1"}}, nil, "must be a string"},
	}
	for _, c := range pub {
		t.Run("published/"+c.name, func(t *testing.T) {
			got, err := ParsePublished(c.entries)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err %v, want %q", err, c.err)
				}
				return
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if err != nil || !reflect.DeepEqual(names, c.want) {
				t.Errorf("%v %v, want %v", names, err, c.want)
			}
		})
	}

	bases := []struct {
		name    string
		entries []map[string]any
		want    []build.Base
		err     string
	}{
		{"python read as a number", []map[string]any{{"python": 3.11, "image": "r/py:3.11", "gpu": true}}, []build.Base{{Python: "3.11", Image: "r/py:3.11", GPU: true}}, ""},
		{"3.10 read as a number", []map[string]any{{"python": 3.10, "image": "r/py:3.10"}}, nil, `write the version as a string (python: "3.10")`},
		{"3.10 as a string", []map[string]any{{"python": "3.10", "image": "r/py:3.10"}}, []build.Base{{Python: "3.10", Image: "r/py:3.10"}}, ""},
		{"needs an image", []map[string]any{{"python": "3.12"}}, nil, "needs python"},
		{"gpu must be a bool", []map[string]any{{"python": "3.12", "image": "r", "gpu": "yes"}}, nil, "true or false"},
		{"unknown key", []map[string]any{{"python": "3.12", "image": "r", "cuda": "12"}}, nil, `unknown key "cuda"`},
	}
	channels := []struct {
		name    string
		entries []map[string]any
		want    map[string]string
		err     string
	}{
		{"two channels", []map[string]any{{"name": "conda-forge", "url": "https://conda.anaconda.org/conda-forge"}, {"name": "pkgs/main", "url": "https://repo.anaconda.com/pkgs/main"}},
			map[string]string{"conda-forge": "https://conda.anaconda.org/conda-forge", "pkgs/main": "https://repo.anaconda.com/pkgs/main"}, ""},
		{"needs a url", []map[string]any{{"name": "conda-forge"}}, nil, "needs a name"},
		{"twice", []map[string]any{{"name": "c", "url": "https://a"}, {"name": "c", "url": "https://b"}}, nil, "listed twice"},
		{"unknown key", []map[string]any{{"name": "c", "url": "https://a", "token": "x"}}, nil, `unknown key "token"`},
		{"not a string", []map[string]any{{"name": "c", "url": 3}}, nil, "must be a string"},
	}
	for _, c := range channels {
		t.Run("conda_channels/"+c.name, func(t *testing.T) {
			got, err := ParseCondaChannels(c.entries)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("%v %v, want %v", got, err, c.want)
			}
		})
	}
	for _, c := range bases {
		t.Run("bases/"+c.name, func(t *testing.T) {
			got, err := ParseBases(c.entries)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("%+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

// countingBuilder counts looks into images.
type countingBuilder struct {
	*fakeBuilder
	inspects int
}

func (c *countingBuilder) Inspect(ctx context.Context, ref string) (images.Spec, error) {
	c.inspects++
	return c.fakeBuilder.Inspect(ctx, ref)
}

func TestPublishedVersionsAreCached(t *testing.T) {
	ctx := context.Background()
	team := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	cb := &countingBuilder{fakeBuilder: newFakeBuilder()}
	cb.images["reg/team:1"] = team
	svc := newService(t, sqliteStore(t), cb, withPublished(apitype.PublishedEnv{Name: "gone", Image: "reg/gone:1"}, apitype.PublishedEnv{Name: "team", Image: "reg/team:1"}))
	for range 3 {
		got, err := svc.Published(ctx)
		if err != nil || len(got) != 2 || got[1].Versions["dask"] != "2024.8.0" || len(got[0].Versions) != 0 {
			t.Fatalf("Published: %+v, %v", got, err)
		}
	}
	if cb.inspects != 2 {
		t.Errorf("%d looks into 2 images over 3 listings, want 2", cb.inspects)
	}
}
