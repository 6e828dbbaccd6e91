package build

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/perms"
)

// TestEveryOperationIsCalled: the interfaces the IAM actions are derived
// from list no operation the package does not call.
func TestEveryOperationIsCalled(t *testing.T) {
	if err := perms.CheckCalled(".", reflect.TypeFor[ecrAPI]()); err != nil {
		t.Error(err)
	}
}

// ecrActionsOf maps one registry API request to the IAM actions ECR checks
// for it, by repository (ECR's "Amazon ECR registry API to IAM" mapping).
// ok is false for a request ECR's mapping does not cover.
func ecrActionsOf(r *http.Request) (byRepo map[string][]string, ok bool) {
	p, found := strings.CutPrefix(r.URL.Path, "/v2/")
	if !found {
		return nil, false
	}
	if p == "" {
		return nil, true // the version check: no action
	}
	add := func(repo string, actions ...string) map[string][]string {
		if byRepo == nil {
			byRepo = map[string][]string{}
		}
		byRepo[repo] = append(byRepo[repo], actions...)
		return byRepo
	}
	if repo, _, ok := strings.Cut(p, "/manifests/"); ok {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return add(repo, "ecr:BatchGetImage"), true
		case http.MethodPut:
			return add(repo, "ecr:PutImage"), true
		case http.MethodDelete:
			return add(repo, "ecr:BatchDeleteImage"), true
		}
		return nil, false
	}
	if repo, rest, ok := strings.Cut(p, "/blobs/uploads"); ok {
		switch {
		case r.Method == http.MethodPost && (rest == "" || rest == "/"):
			add(repo, "ecr:InitiateLayerUpload")
			if r.URL.Query().Get("digest") != "" { // a monolithic upload
				add(repo, "ecr:UploadLayerPart", "ecr:CompleteLayerUpload")
			}
			if from := r.URL.Query().Get("from"); from != "" && r.URL.Query().Get("mount") != "" {
				// A cross-repository mount reads the blob from its source.
				add(from, "ecr:GetDownloadUrlForLayer")
			}
			return byRepo, true
		case r.Method == http.MethodPatch && rest != "":
			return add(repo, "ecr:UploadLayerPart"), true
		case r.Method == http.MethodPut && rest != "":
			add(repo, "ecr:CompleteLayerUpload")
			if r.ContentLength > 0 {
				add(repo, "ecr:UploadLayerPart")
			}
			return byRepo, true
		}
		return nil, false
	}
	if repo, _, ok := strings.Cut(p, "/blobs/"); ok {
		switch r.Method {
		case http.MethodGet:
			return add(repo, "ecr:GetDownloadUrlForLayer"), true
		case http.MethodHead:
			return add(repo, "ecr:BatchCheckLayerAvailability"), true
		}
		return nil, false
	}
	if repo, ok := strings.CutSuffix(p, "/tags/list"); ok && r.Method == http.MethodGet {
		return add(repo, "ecr:ListImages"), true
	}
	if p == "_catalog" && r.Method == http.MethodGet {
		return add("*", "ecr:DescribeRepositories"), true
	}
	return nil, false
}

// ecrRecorder records, while on, the ECR actions of the requests it passes
// to the registry, and the requests ECR's mapping does not cover.
type ecrRecorder struct {
	next http.Handler

	mu      sync.Mutex
	on      bool
	actions map[string]map[string]bool
	unknown []string
}

func (e *ecrRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	if e.on {
		byRepo, ok := ecrActionsOf(r)
		if !ok {
			e.unknown = append(e.unknown, r.Method+" "+r.URL.String())
		}
		for repo, acts := range byRepo {
			if e.actions[repo] == nil {
				e.actions[repo] = map[string]bool{}
			}
			for _, a := range acts {
				e.actions[repo][a] = true
			}
		}
	}
	e.mu.Unlock()
	e.next.ServeHTTP(w, r)
}

func (e *ecrRecorder) record(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.on = on
}

func (e *ecrRecorder) of(repo string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for a := range e.actions[repo] {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// repoBlobs keeps blobs per repository, as ECR does (go-containerregistry's
// in-memory registry shares them between repositories, so a push would
// find the base's layers already in the environment repository).
type repoBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

// key names a blob of a repository. The registry names the repository of
// a finished chunked upload (PUT /v2/<repo>/blobs/uploads/<id>) with a
// trailing "/blobs", which is not part of it.
func (b *repoBlobs) key(repo string, h v1.Hash) string {
	return strings.TrimSuffix(repo, "/blobs") + "@" + h.String()
}

func (b *repoBlobs) Get(_ context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[b.key(repo, h)]
	if !ok {
		return nil, registry.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b *repoBlobs) Stat(_ context.Context, repo string, h v1.Hash) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[b.key(repo, h)]
	if !ok {
		return 0, registry.ErrNotFound
	}
	return int64(len(data)), nil
}

func (b *repoBlobs) Put(_ context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[b.key(repo, h)] = data
	return nil
}

// TestECRActionsAreTheRequestsMade: what the builder does with a registry
// (build an environment on a base read from one repository, push it to
// images.repository, find it again, read its labels, read another image's)
// needs exactly ECRRepositoryActions on images.repository and
// ECRReadActions on the base's repository, by ECR's mapping of registry
// requests to IAM actions. The Terraform module grants these lists
// (terraform/modules_test.go), so they are what the code does, not what
// someone wrote down.
func TestECRActionsAreTheRequestsMade(t *testing.T) {
	ctx := testContext(t)
	rec := &ecrRecorder{actions: map[string]map[string]bool{}}
	rec.next = registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(&repoBlobs{m: map[string][]byte{}}))
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host

	// The operator puts the base in its repository (not the gateway).
	img, err := images.Assemble(nil, registryBase, []images.Layer{{Name: "python", Files: map[string]images.File{
		"usr/bin/python3": {Data: []byte("#!/bin/false\n"), Mode: 0o755},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	baseRef := host + "/gateway-main/bases:3.11"
	if err := images.Push(ctx, img, baseRef, nil); err != nil {
		t.Fatal(err)
	}

	rec.record(true)
	b := newBuilder(t, Config{
		Repository: host + "/gateway-main/environments",
		Auth:       Auth{Kind: AuthNone},
		Bases:      []Base{{Python: "3.11", Image: baseRef}},
	})
	zip, part := codeZip(t, "mycode", nonce(t))
	spec := registryBase
	spec.Code = []images.CodePart{part}
	st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"mycode": zip}))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil || st.State != StateReady {
		t.Fatalf("the build: %v, %+v", err, st)
	}
	if again, err := b.Ensure(ctx, spec, nil); err != nil || again.Built {
		t.Fatalf("the second Ensure: %v, %+v", err, again)
	}
	if _, err := b.Inspect(ctx, st.Ref); err != nil {
		t.Fatalf("Inspect of the environment: %v", err)
	}
	if _, err := b.Inspect(ctx, baseRef); err != nil {
		t.Fatalf("Inspect of the base: %v", err)
	}
	rec.record(false)

	rec.mu.Lock()
	if len(rec.unknown) > 0 {
		t.Errorf("requests ECR's IAM mapping (ecrActionsOf) does not cover, so no policy can be derived for them: %q", rec.unknown)
	}
	var repos []string
	for r := range rec.actions {
		repos = append(repos, r)
	}
	rec.mu.Unlock()
	slices.Sort(repos)
	if want := []string{"gateway-main/bases", "gateway-main/environments"}; !slices.Equal(repos, want) {
		t.Errorf("the builder made requests to the repositories %q, want %q", repos, want)
	}
	for _, tc := range []struct {
		repo, list string
		want       []string
	}{
		{"gateway-main/environments", "ECRRepositoryActions", ECRRepositoryActions()},
		{"gateway-main/bases", "ECRReadActions", ECRReadActions()},
	} {
		want := slices.Sorted(slices.Values(tc.want))
		if got := rec.of(tc.repo); !slices.Equal(got, want) {
			t.Errorf("on %s the builder's requests need %q; %s() says %q", tc.repo, got, tc.list, want)
		}
	}
}

// TestECRActions: the union is sorted, without duplicates, and holds each
// list.
func TestECRActions(t *testing.T) {
	all := ECRActions()
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("ECRActions() = %q: want sorted, without duplicates", all)
	}
	for _, a := range slices.Concat(ECRUnscopedActions(), ECRRepositoryActions(), ECRReadActions()) {
		if !slices.Contains(all, a) {
			t.Errorf("ECRActions() lacks %s", a)
		}
	}
	if got := ECRUnscopedActions(); !slices.Equal(got, []string{"ecr:GetAuthorizationToken"}) {
		t.Errorf("ECRUnscopedActions() = %q", got)
	}
}
