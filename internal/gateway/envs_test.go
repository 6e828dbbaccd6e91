package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/build"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
)

// fakeBuilder stands in for images/build (which has its own tests against
// a real engine and registry): this tests the service's tenancy and error
// mapping around it.
type fakeBuilder struct {
	builds map[string]build.Status // hash -> status
	images map[string]images.Spec  // ref -> recorded spec
	owners []build.Owner           // of each EnsureFor
	used   []string                // hashes Used was told of
}

func (f *fakeBuilder) Used(hash string) { f.used = append(f.used, hash) }

func (f *fakeBuilder) EnsureFor(_ context.Context, owner build.Owner, spec images.Spec, code map[string][]byte) (build.Status, error) {
	f.owners = append(f.owners, owner)
	hash, err := spec.Hash()
	if err != nil {
		return build.Status{}, err
	}
	if len(spec.Code) > 0 && len(code) == 0 {
		return build.Status{}, build.ErrNeedCode
	}
	st := build.Status{Hash: hash, Ref: "gateway-env:env-" + hash[:16], State: build.StateBuilding, Built: true}
	f.builds[hash] = st
	return st, nil
}

func (f *fakeBuilder) Status(hash string) (build.Status, bool) {
	st, ok := f.builds[hash]
	return st, ok
}

func (f *fakeBuilder) Logs(hash string) ([]byte, error) {
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

func TestEnvServiceTenancyAndErrors(t *testing.T) {
	ctx := context.Background()
	fb := &fakeBuilder{builds: map[string]build.Status{}, images: map[string]images.Spec{}}
	svc := newEnvService(fb, nil, 1<<20)
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}

	st, err := svc.Ensure(ctx, alice, spec, nil)
	if err != nil || st.State != "building" {
		t.Fatalf("Ensure: %+v, %v", st, err)
	}
	if _, err := svc.Status(ctx, alice, st.Hash); err != nil {
		t.Errorf("the asker cannot see her build: %v", err)
	}
	if _, err := svc.Logs(ctx, alice, st.Hash); err != nil {
		t.Errorf("the asker cannot read her build log: %v", err)
	}
	if _, err := svc.Status(ctx, bob, st.Hash); !errors.Is(err, api.ErrEnvNotFound) {
		t.Errorf("another user sees the build: %v", err)
	}
	if got, err := svc.Status(ctx, alice, st.Hash[:16]); err != nil || got.Hash != st.Hash {
		t.Errorf("the asker's build by the prefix the CLI shows: %+v, %v", got, err)
	}
	for _, prefix := range []string{st.Hash[:7], st.Hash[:16] + "X"} {
		if _, err := svc.Logs(ctx, alice, prefix); !errors.Is(err, api.ErrEnvNotFound) {
			t.Errorf("Logs(%q): %v, want not found (too short, or not hex)", prefix, err)
		}
	}
	if _, err := svc.Logs(ctx, bob, st.Hash[:16]); !errors.Is(err, api.ErrEnvNotFound) {
		t.Errorf("another user reads the build log by prefix: %v", err)
	}
	if _, err := svc.Logs(ctx, bob, st.Hash); !errors.Is(err, api.ErrEnvNotFound) {
		t.Errorf("another user reads the build log: %v", err)
	}
	// Bob asking for the same environment shares the image, and then may see it.
	if _, err := svc.Ensure(ctx, bob, spec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Status(ctx, bob, st.Hash); err != nil {
		t.Errorf("after asking, bob cannot see the shared build: %v", err)
	}

	withCode := spec
	withCode.Code = []images.CodePart{{Name: "proj", Digest: images.DigestOf([]byte("zip"))}}
	if _, err := svc.Ensure(ctx, alice, withCode, nil); !errors.Is(err, api.ErrCodeRequired) {
		t.Errorf("a build without its code: %v, want ErrCodeRequired", err)
	}
	_, err = svc.Ensure(ctx, alice, withCode, map[string][]byte{"proj": make([]byte, 2<<20)})
	if !errors.Is(err, images.ErrInvalidSpec) || !strings.Contains(err.Error(), "images.max_code_mib") {
		t.Errorf("code over the limit: %v", err)
	}

	cloud := newEnvService(fb, nil, 1<<20)
	cloud.noBuild = "its ec2 machines pull images from a registry, and images.repository names none"
	if _, err := cloud.Ensure(ctx, alice, spec, nil); !errors.Is(err, api.ErrNoBuilder) || !strings.Contains(err.Error(), "images.repository") {
		t.Errorf("a cloud backend without a repository: %v, want ErrNoBuilder naming images.repository", err)
	}

	none := newEnvService(nil, nil, 1<<20)
	if _, err := none.Ensure(ctx, alice, spec, nil); !errors.Is(err, api.ErrNoBuilder) {
		t.Errorf("without an engine: %v, want ErrNoBuilder", err)
	}
	if _, err := none.Status(ctx, alice, st.Hash); !errors.Is(err, api.ErrEnvNotFound) {
		t.Errorf("status without an engine: %v", err)
	}
}

func TestEnvServiceResolve(t *testing.T) {
	ctx := context.Background()
	team := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	fb := &fakeBuilder{builds: map[string]build.Status{}, images: map[string]images.Spec{"reg/team:1": team, "reg/other:2": team}}
	svc := newEnvService(fb, []api.PublishedEnv{{Name: "team", Image: "reg/team:1"}}, 1<<20)
	svc.allowed = mustAllowed(t, "reg/*", "down.example/*")
	building, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.12", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	readySpec := images.Spec{Python: "3.10", Platform: "linux/amd64"}
	ready, err := svc.Ensure(ctx, alice, readySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	fb.builds[ready.Hash] = build.Status{Hash: ready.Hash, Ref: "gateway-env:ready", State: build.StateReady, Contents: readySpec}
	readyRef := fb.Ref(ready.Hash)
	fb.images[readyRef] = readySpec
	failed, err := svc.Ensure(ctx, alice, images.Spec{Python: "3.9", Platform: "linux/amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fb.builds[failed.Hash] = build.Status{Hash: failed.Hash, State: build.StateFailed}

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
		{"a ready build of one's own", alice, "", ready.Hash, "gateway-env:ready", readySpec, true, ""},
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
				if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), c.err) {
					t.Errorf("err %v, want ErrInvalid with %q", err, c.err)
				}
				return
			}
			if err != nil || ref != c.ref || known != c.known || !reflect.DeepEqual(contents, c.contents) {
				t.Errorf("got %q %+v %v %v, want %q %+v %v", ref, contents, known, err, c.ref, c.contents, c.known)
			}
		})
	}

	if _, _, _, err := svc.Resolve(ctx, alice, "down.example/x:1", ""); !errors.Is(err, scheduler.ErrUnavailable) || !strings.Contains(err.Error(), "registry refused the image: 503") || strings.Contains(err.Error(), "html") {
		t.Errorf("a registry that is down: %v, want ErrUnavailable with the summary only", err)
	}

	// Without an engine, an allowed image runs as named, unchecked.
	noEngine := newEnvService(nil, nil, 1<<20)
	noEngine.allowed = mustAllowed(t, "reg/*")
	ref, _, known, err := noEngine.Resolve(ctx, alice, "reg/any:1", "")
	if err != nil || ref != "reg/any:1" || known {
		t.Errorf("no engine: %q %v %v", ref, known, err)
	}
}

func mustAllowed(t *testing.T, globs ...string) []*regexp.Regexp {
	t.Helper()
	re, err := compileAllowed(globs)
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
			got, err := parsePublished(c.entries)
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
		{"needs an image", []map[string]any{{"python": "3.12"}}, nil, "needs python"},
		{"gpu must be a bool", []map[string]any{{"python": "3.12", "image": "r", "gpu": "yes"}}, nil, "true or false"},
		{"unknown key", []map[string]any{{"python": "3.12", "image": "r", "cuda": "12"}}, nil, `unknown key "cuda"`},
	}
	for _, c := range bases {
		t.Run("bases/"+c.name, func(t *testing.T) {
			got, err := parseBases(c.entries)
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
	fakeBuilder
	inspects int
}

func (c *countingBuilder) Inspect(ctx context.Context, ref string) (images.Spec, error) {
	c.inspects++
	return c.fakeBuilder.Inspect(ctx, ref)
}

func TestPublishedVersionsAreCached(t *testing.T) {
	ctx := context.Background()
	team := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}}}
	cb := &countingBuilder{fakeBuilder: fakeBuilder{images: map[string]images.Spec{"reg/team:1": team}}}
	svc := newEnvService(cb, []api.PublishedEnv{{Name: "team", Image: "reg/team:1"}, {Name: "gone", Image: "reg/gone:1"}}, 1<<20)
	for range 3 {
		got, err := svc.Published(ctx)
		if err != nil || len(got) != 2 || got[0].Versions["dask"] != "2024.8.0" || len(got[1].Versions) != 0 {
			t.Fatalf("Published: %+v, %v", got, err)
		}
	}
	if cb.inspects != 2 {
		t.Errorf("%d looks into 2 images over 3 listings, want 2", cb.inspects)
	}
}
