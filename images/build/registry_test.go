package build

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/images"
)

// registryBase is a small base image whose labels record its environment,
// so that a Builder without an engine can assemble on it.
var registryBase = images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{
	{Name: "dask", Version: "2024.8.0"}, {Name: "distributed", Version: "2024.8.0"}, {Name: "msgpack", Version: "1.0.8"},
}}

// pushBase pushes registryBase as host/base:3.11 and returns its reference.
func pushBase(t *testing.T, ctx context.Context, host string, auth authn.Authenticator) string {
	t.Helper()
	img, err := images.Assemble(nil, registryBase, []images.Layer{{Name: "python", Files: map[string]images.File{
		"usr/bin/python3": {Data: []byte("#!/bin/false\n"), Mode: 0o755},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/base:3.11"
	if err := images.Push(ctx, img, ref, auth); err != nil {
		t.Fatal(err)
	}
	return ref
}

func registryImage(t *testing.T, ctx context.Context, ref string, auth authn.Authenticator) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkEnvImage checks an env image pulled from a registry: its labels
// record spec, it has wantLayers layers, and the last holds the code zip.
func checkEnvImage(t *testing.T, img v1.Image, spec images.Spec, wantLayers int, zip []byte) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := spec.Canonical()
	if cf.Config.Labels[images.LabelSpec] != string(doc) || cf.Config.Labels[images.LabelHash] != mustHash(t, spec) {
		t.Errorf("labels %v, want the spec %s", cf.Config.Labels, doc)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != wantLayers {
		t.Fatalf("%d layers, want %d", len(layers), wantLayers)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	if !strings.Contains(string(data), string(zip)) {
		t.Error("the last layer does not hold the code zip")
	}
}

func TestRegistryBasicAuth(t *testing.T) {
	ctx := testContext(t)
	const user, pass = "gateway", "reg-s3cret-pw"
	host, requests := newRegistry(t, user, pass)
	auth := &authn.Basic{Username: user, Password: pass}
	baseRef := pushBase(t, ctx, host, auth)

	zip, part := codeZip(t, "mycode", nonce(t))
	spec := registryBase
	spec.Code = []images.CodePart{part}
	code := images.CodeFromBytes(map[string][]byte{"mycode": zip, "unrelated": []byte("ignored")})
	cfg := Config{
		Repository: host + "/envs",
		Auth:       Auth{Kind: "basic", Username: user, Password: pass},
		Bases:      []Base{{Python: "3.11", Image: baseRef}},
	}
	b := newBuilder(t, cfg)

	st, err := b.Ensure(ctx, spec, code)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateBuilding || st.Ref != host+"/envs:"+images.TagForHash(st.Hash) || st.Hash != mustHash(t, spec) {
		t.Fatalf("first Ensure = %+v", st)
	}
	st, err = b.Wait(ctx, st.Hash)
	if err != nil {
		t.Fatalf("Wait: %v\nsteps %q", err, st.Steps)
	}
	if st.State != StateReady || !st.Built || st.Finished.Before(st.Started) {
		t.Errorf("after Wait: %+v", st)
	}
	if !hasStep(st, "no packages to install") || hasStep(st, "installing") || !hasStep(st, "pushed ") {
		t.Errorf("steps %q: want assembly only, with push progress", st.Steps)
	}
	for _, s := range st.Steps {
		if strings.HasPrefix(s, "pushed ") && !strings.HasSuffix(s, " MiB") {
			t.Errorf("progress step %q", s)
		}
	}
	if want, _ := registryBase.Normalize(); st.Contents.Python != "3.11" || len(st.Contents.Packages) != len(want.Packages) {
		t.Errorf("contents %+v", st.Contents)
	}
	img := registryImage(t, ctx, st.Ref, auth)
	checkEnvImage(t, img, spec, 2, zip)

	// A second Ensure finds the image, with one request.
	before := requests.n.Load()
	again, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.State != StateReady || again.Built || again.Ref != st.Ref {
		t.Errorf("second Ensure = %+v", again)
	}
	if n := requests.n.Load() - before; n != 1 {
		t.Errorf("the cache hit took %d registry requests, want 1", n)
	}
	if b.started.Load() != 1 {
		t.Errorf("%d builds started, want 1", b.started.Load())
	}

	// The same spec built by another Builder into another repository is the
	// same image.
	cfg2 := cfg
	cfg2.Repository = host + "/envs2"
	b2 := newBuilder(t, cfg2)
	st2, err := b2.Ensure(ctx, spec, code)
	if err != nil {
		t.Fatal(err)
	}
	if st2, err = b2.Wait(ctx, st2.Hash); err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	if d2, _ := registryImage(t, ctx, st2.Ref, auth).Digest(); d1 != d2 {
		t.Errorf("the same spec gave digests %s and %s", d1, d2)
	}

	// Inspect of the env image reads its labels.
	got, err := b.Inspect(ctx, st.Ref)
	if want, _ := spec.Normalize(); err != nil || got.Python != want.Python || len(got.Code) != 1 {
		t.Errorf("Inspect = %+v, %v", got, err)
	}

	logs, err := b.Logs(st.Hash)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"build of " + st.Ref + " started", "no packages to install", "pushed " + st.Ref + "@sha256:", "is ready"} {
		if !strings.Contains(string(logs), s) {
			t.Errorf("the log has no %q:\n%s", s, logs)
		}
	}
	if strings.Contains(string(logs), pass) {
		t.Error("the log has the registry password")
	}

	// A wrong password is a clear error, without the password.
	bad := cfg
	bad.Auth.Password = "wrong-password"
	bad.Repository = host + "/envs3"
	bb := newBuilder(t, bad)
	_, err = bb.Ensure(ctx, spec, code)
	if err == nil || !strings.Contains(err.Error(), `refused basic auth as user "gateway"`) || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("Ensure with a wrong password: %v", err)
	}
}

func TestRegistryMissingPackagesNeedEngine(t *testing.T) {
	ctx := testContext(t)
	host, _ := newRegistry(t, "", "")
	baseRef := pushBase(t, ctx, host, nil)
	b := newBuilder(t, Config{Repository: host + "/envs", Auth: Auth{Kind: "none"}, Bases: []Base{{Python: "3.11", Image: baseRef}}})
	spec := registryBase
	spec.Packages = append(spec.Packages[:len(spec.Packages):len(spec.Packages)], images.Package{Name: "gwdemo", Version: "1.0"})
	st, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = b.Wait(ctx, st.Hash)
	if err == nil || st.State != StateFailed || !strings.Contains(st.Error, "1 package must be installed") || !strings.Contains(st.Error, "needs a Docker engine") {
		t.Errorf("Wait = %v; status %+v", err, st)
	}
	logs, _ := b.Logs(st.Hash)
	if !strings.Contains(string(logs), "gwdemo==1.0 (not in the base)") {
		t.Errorf("the log does not say what is missing:\n%s", logs)
	}

	// What an image without labels has can only be probed with an engine.
	plain := host + "/plain:1"
	if err := images.Push(ctx, empty.Image, plain, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect(ctx, plain); err == nil || !strings.Contains(err.Error(), "needs a Docker engine") {
		t.Errorf("Inspect of an unlabelled image without an engine: %v", err)
	}
	if _, err := b.Inspect(ctx, host+"/nothing:1"); !errors.Is(err, images.ErrNotFound) {
		t.Errorf("Inspect of a missing image: %v", err)
	}
}

// TestRegistryBaseOfAnotherPython: a base whose environment has another
// Python than images.bases says fails the build, naming both.
func TestRegistryBaseOfAnotherPython(t *testing.T) {
	ctx := testContext(t)
	host, _ := newRegistry(t, "", "")
	baseRef := pushBase(t, ctx, host, nil)
	b := newBuilder(t, Config{Repository: host + "/envs", Bases: []Base{{Python: "3.12", Image: baseRef}}})
	spec := registryBase
	spec.Python = "3.12"
	st, err := b.Ensure(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ = b.Wait(ctx, st.Hash)
	if st.State != StateFailed || !strings.Contains(st.Error, "has Python 3.11, but images.bases lists it for Python 3.12") {
		t.Errorf("status %+v", st)
	}
}

// fakeECR is a loopback stand-in for ECR's GetAuthorizationToken (AWS JSON
// 1.1): it checks the request is SigV4-signed and returns token.
func fakeECR(t *testing.T, token string) (string, func() int) {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" ||
			!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDGATEWAYTEST/") ||
			!strings.Contains(r.Header.Get("Authorization"), "/us-east-1/ecr/aws4_request") {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"__type":"InvalidParameterException","message":"unexpected request: target %q"}`, r.Header.Get("X-Amz-Target"))
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"authorizationData": []map[string]any{{
			"authorizationToken": base64.StdEncoding.EncodeToString([]byte("AWS:" + token)),
			"expiresAt":          float64(time.Now().Add(12 * time.Hour).Unix()),
			"proxyEndpoint":      "https://123456789012.dkr.ecr.us-east-1.amazonaws.com",
		}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
}

func setAWSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDGATEWAYTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "gateway-test-secret-key")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestECRAuth(t *testing.T) {
	setAWSEnv(t)
	ctx := testContext(t)
	const token = "ecr-registry-token-0123456789"
	endpoint, calls := fakeECR(t, token)
	host, _ := newRegistry(t, "AWS", token)
	baseRef := pushBase(t, ctx, host, &authn.Basic{Username: "AWS", Password: token})

	b := newBuilder(t, Config{
		Repository: host + "/envs",
		Auth:       Auth{Kind: "ecr", AWSRegion: "us-east-1", ECREndpoint: endpoint},
		Bases:      []Base{{Python: "3.11", Image: baseRef}},
	})
	zip, part := codeZip(t, "mycode", nonce(t))
	spec := registryBase
	spec.Code = []images.CodePart{part}
	st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"mycode": zip}))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.Wait(ctx, st.Hash); err != nil {
		t.Fatalf("%v\n%q", err, st.Steps)
	}
	checkEnvImage(t, registryImage(t, ctx, st.Ref, &authn.Basic{Username: "AWS", Password: token}), spec, 2, zip)
	if again, err := b.Ensure(ctx, spec, nil); err != nil || again.State != StateReady || again.Built {
		t.Errorf("second Ensure = %+v, %v", again, err)
	}
	if n := calls(); n != 1 {
		t.Errorf("%d GetAuthorizationToken calls, want 1 (the token is cached)", n)
	}
	logs, _ := b.Logs(st.Hash)
	if strings.Contains(string(logs), token) || strings.Contains(strings.Join(st.Steps, "\n"), token) {
		t.Error("the log or the steps have the ECR token")
	}

	// A failing token request is a clear error.
	b2 := newBuilder(t, Config{
		Repository: host + "/envs",
		Auth:       Auth{Kind: "ecr", AWSRegion: "eu-west-1", ECREndpoint: endpoint},
	})
	if _, err := b2.Ensure(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), "GetAuthorizationToken (region eu-west-1)") {
		t.Errorf("Ensure with a failing ECR endpoint: %v", err)
	}
}

type countingTokens struct {
	mu sync.Mutex
	n  int
}

func (c *countingTokens) Token() (*oauth2.Token, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return &oauth2.Token{AccessToken: "ya29.gateway-test-token", Expiry: time.Now().Add(time.Hour)}, nil
}

func TestGoogleAuth(t *testing.T) {
	ctx := testContext(t)
	host, _ := newRegistry(t, "oauth2accesstoken", "ya29.gateway-test-token")
	ts := &countingTokens{}
	b := newBuilder(t, Config{Repository: host + "/envs", Auth: Auth{Kind: "google", TokenSource: ts}})
	spec := registryBase
	img, err := images.Assemble(nil, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := b.Ref(mustHash(t, spec))
	if err := images.Push(ctx, img, ref, &authn.Basic{Username: "oauth2accesstoken", Password: "ya29.gateway-test-token"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		st, err := b.Ensure(ctx, spec, nil)
		if err != nil || st.State != StateReady || st.Built || st.Ref != ref {
			t.Fatalf("Ensure = %+v, %v", st, err)
		}
	}
	// Status and Wait know a cache hit; there is no build log.
	hash := mustHash(t, spec)
	if st, ok := b.Status(hash); !ok || st.State != StateReady || st.Built || st.Ref != ref {
		t.Errorf("Status after a cache hit = %+v, %v", st, ok)
	}
	if st, err := b.Wait(ctx, hash); err != nil || st.State != StateReady {
		t.Errorf("Wait after a cache hit = %+v, %v", st, err)
	}
	if _, err := b.Logs(hash); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Logs after a cache hit: %v, want os.ErrNotExist", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.n != 1 {
		t.Errorf("%d tokens fetched, want 1 (reused while valid)", ts.n)
	}
}
