package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gatewayhq/gateway/images"
)

func TestAuthKind(t *testing.T) {
	tests := []struct {
		kind, host, user, want string
	}{
		{"", "123456789012.dkr.ecr.us-east-1.amazonaws.com", "", AuthECR},
		{"auto", "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "", AuthECR},
		{"auto", "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "", AuthECR},
		{"auto", "us-docker.pkg.dev", "", AuthGoogle},
		{"auto", "europe-west4-docker.pkg.dev", "", AuthGoogle},
		{"auto", "gcr.io", "", AuthGoogle},
		{"auto", "eu.gcr.io", "", AuthGoogle},
		{"auto", "registry.example.com:5000", "bob", AuthBasic},
		{"auto", "registry.example.com", "", authKeychain},
		{"auto", "notgcr.io", "", authKeychain},
		{"auto", "", "", authKeychain},
		{"Basic", "123456789012.dkr.ecr.us-east-1.amazonaws.com", "bob", AuthBasic},
		{"none", "gcr.io", "", AuthNone},
	}
	for _, tt := range tests {
		if got := authKind(tt.kind, tt.host, tt.user); got != tt.want {
			t.Errorf("authKind(%q, %q, %q) = %q, want %q", tt.kind, tt.host, tt.user, got, tt.want)
		}
	}
}

func TestDockerfile(t *testing.T) {
	pkgs := []images.Package{{Name: "gwdemo", Version: "1.0"}, {Name: "numpy", Version: "2.0.1"}}
	got := dockerfile("gateway-test/dask:1", "python3", "http://127.0.0.1:8080/simple/", false, pkgs)
	want := "FROM gateway-test/dask:1\n" +
		"ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off PIP_ROOT_USER_ACTION=ignore\n" +
		`RUN ["python3","-m","pip","install","--no-deps","--only-binary=:all:","--index-url","http://127.0.0.1:8080/simple/","--trusted-host","127.0.0.1","--","gwdemo==1.0","numpy==2.0.1"]` + "\n"
	if got != want {
		t.Errorf("dockerfile:\n%s\nwant\n%s", got, want)
	}
	if got := dockerfile("b", "/opt/py/bin/python", "", true, pkgs[:1]); !strings.Contains(got, `RUN ["/opt/py/bin/python","-m","pip","install","--no-deps","--","gwdemo==1.0"]`) {
		t.Errorf("dockerfile without an index, source builds allowed:\n%s", got)
	}
}

func TestRedact(t *testing.T) {
	r := newRedactor()
	r.add("s3cret-pass")
	r.add("x") // too short to mask
	r.addURL("https://user:p%40ss@pypi.example/simple/")
	r.addURL("https://glpat-token123@gitlab.example/api/v4/projects/1/packages/pypi/simple")
	for in, want := range map[string]string{
		"login with s3cret-pass failed":                                "login with **** failed",
		"Looking in indexes: https://user:p%40ss@pypi.example/simple/": "Looking in indexes: https://****@pypi.example/simple/",
		"https://other:anything@host/x":                                "https://****@host/x",
		"index https://glpat-token123@gitlab.example/simple":           "index https://****@gitlab.example/simple",
		"token glpat-token123 refused":                                 "token **** refused",
		"no secrets here, x":                                           "no secrets here, x",
	} {
		if got := r.redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMissingAndVerify(t *testing.T) {
	spec := images.Spec{Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}, {Name: "gwdemo", Version: "1.0"}, {Name: "msgpack", Version: "1.0.3"}}}
	have := images.Spec{Packages: []images.Package{{Name: "Dask", Version: "2024.8.0"}, {Name: "msgpack", Version: "1.0.4"}, {Name: "toolz", Version: "0.12.0"}}}
	got := missingPackages(spec, have)
	want := []images.Package{{Name: "gwdemo", Version: "1.0"}, {Name: "msgpack", Version: "1.0.3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("missingPackages = %v, want %v", got, want)
	}
	ms := verify(spec, have)
	table := images.FormatMismatches(ms)
	for _, s := range []string{"gwdemo", "(missing)", "msgpack", "1.0.3", "1.0.4"} {
		if !strings.Contains(table, s) {
			t.Errorf("verify table has no %q:\n%s", s, table)
		}
	}
	if strings.Contains(table, "dask") {
		t.Errorf("verify table lists a package that is there:\n%s", table)
	}
}

func TestLenient(t *testing.T) {
	s := lenient(images.Spec{Python: "3.11.2", Platform: "linux/x86_64", Packages: []images.Package{
		{Name: "Zope.Interface", Version: "5.5"}, {Name: "bad name", Version: "1"}, {Name: "odd", Version: "1 2"},
		{Name: "zope-interface", Version: "6.0"}, {Name: "Dask", Version: "2022.12.1+dfsg"},
	}})
	want := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2022.12.1+dfsg"}, {Name: "zope-interface", Version: "5.5"}}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("lenient = %+v, want %+v", s, want)
	}
}

func TestNewErrors(t *testing.T) {
	base := Base{Python: "3.11", Image: "gateway-test/dask:1"}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no engine, no repository", Config{}, "no Docker engine"},
		{"bad python", Config{Repository: "127.0.0.1:1/envs", Bases: []Base{{Python: "three", Image: "x"}}}, "images.bases[0]: python"},
		{"bad platform", Config{Repository: "127.0.0.1:1/envs", Bases: []Base{{Python: "3.11", Platform: "windows/amd64", Image: "x"}}}, "images.bases[0]: platform"},
		{"no image", Config{Repository: "127.0.0.1:1/envs", Bases: []Base{{Python: "3.11"}}}, "images.bases[0]: image is empty"},
		{"two bases for one kind", Config{Repository: "127.0.0.1:1/envs", Bases: []Base{base, {Python: "3.11.4", Platform: "linux/x86_64", Image: "y"}}}, "images.bases[1]: a second base"},
		{"bad repository", Config{Repository: "Not A Repo"}, "images.repository"},
		{"bad auth kind", Config{Repository: "127.0.0.1:1/envs", Auth: Auth{Kind: "kerberos"}}, `kind "kerberos"`},
		{"basic without user", Config{Repository: "127.0.0.1:1/envs", Auth: Auth{Kind: "basic"}}, "needs a username"},
		{"ecr without region", Config{Repository: "127.0.0.1:1/envs", Auth: Auth{Kind: "ecr"}}, "images.auth.aws_region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.LogDir = t.TempDir()
			b, err := New(tt.cfg)
			if err == nil {
				b.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// The region of an ECR repository comes from its host.
	b := newBuilder(t, Config{Repository: "123456789012.dkr.ecr.eu-west-3.amazonaws.com/envs"})
	if b.auth.kind != AuthECR || b.auth.region != "eu-west-3" {
		t.Errorf("auth kind %q region %q", b.auth.kind, b.auth.region)
	}
}

func TestEnsureErrors(t *testing.T) {
	host, _ := newRegistry(t, "", "")
	b := newBuilder(t, Config{Repository: host + "/envs", Bases: []Base{{Python: "3.11", Image: host + "/base:1"}}})
	ctx := testContext(t)

	_, err := b.Ensure(ctx, images.Spec{Python: "three", Platform: "linux/amd64"}, nil)
	if !errors.Is(err, images.ErrInvalidSpec) {
		t.Errorf("Ensure of an invalid spec: %v, want ErrInvalidSpec", err)
	}

	zip, part := codeZip(t, "mycode", nonce(t))
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{part}}
	_, err = b.Ensure(ctx, spec, nil)
	if !errors.Is(err, ErrNeedCode) || !strings.Contains(err.Error(), "mycode") {
		t.Errorf("Ensure without the code: %v, want ErrNeedCode naming mycode", err)
	}
	_, err = b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"mycode": append(zip, 'x')}))
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("Ensure with other code bytes: %v", err)
	}
	if b.started.Load() != 0 {
		t.Errorf("%d builds started", b.started.Load())
	}

	// No base for Python 3.12: failed at once, naming the configured bases
	// and the config key, with a log.
	spec.Python = "3.12"
	st, err := b.Ensure(ctx, spec, images.CodeFromBytes(map[string][]byte{"mycode": zip}))
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFailed || !strings.Contains(st.Error, "no base image for Python 3.12, CPU, linux/amd64") ||
		!strings.Contains(st.Error, "images.bases") || !strings.Contains(st.Error, host+"/base:1") ||
		!strings.Contains(st.Error, "gateway env logs "+st.Hash) {
		t.Errorf("no base: state %s, error:\n%s", st.State, st.Error)
	}
	if _, err := b.Wait(ctx, st.Hash); !errors.Is(err, ErrBuildFailed) {
		t.Errorf("Wait = %v, want ErrBuildFailed", err)
	}
	logs, err := b.Logs(st.Hash[:16])
	if err != nil || !strings.Contains(string(logs), "no base image") {
		t.Errorf("Logs = %q, %v", logs, err)
	}
	if got, ok := b.Status("env-" + st.Hash[:16]); !ok || got.State != StateFailed {
		t.Errorf("Status by tag = %+v, %v", got, ok)
	}

	if _, err := b.Logs(strings.Repeat("ab", 32)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Logs of an unknown hash: %v, want os.ErrNotExist", err)
	}
	if _, err := b.Logs("../../etc/passwd"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Logs of a path: %v", err)
	}
	if _, err := b.Wait(ctx, strings.Repeat("cd", 32)); !errors.Is(err, ErrUnknownBuild) {
		t.Errorf("Wait of an unknown hash: %v", err)
	}
	if _, ok := b.Status(strings.Repeat("cd", 32)); ok {
		t.Error("Status of an unknown hash is ok")
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ensure(ctx, spec, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Ensure after Close: %v", err)
	}
}

// savedImage is an image as docker save gives it: a config and
// uncompressed layers, each read only when asked, and counted.
type savedImage struct {
	cfg    []byte
	layers map[v1.Hash][]byte
	mu     sync.Mutex
	reads  map[v1.Hash]int
}

func newSavedImage(t *testing.T, layers ...string) *savedImage {
	t.Helper()
	s := &savedImage{layers: map[v1.Hash][]byte{}, reads: map[v1.Hash]int{}}
	cf := v1.ConfigFile{Architecture: "amd64", OS: "linux", RootFS: v1.RootFS{Type: "layers"}}
	for _, l := range layers {
		data := []byte(l)
		h, _, err := v1.SHA256(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		s.layers[h] = data
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, h)
	}
	var err error
	if s.cfg, err = json.Marshal(cf); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *savedImage) image(t *testing.T) v1.Image {
	t.Helper()
	img, err := partial.UncompressedToImage(s)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func (s *savedImage) RawConfigFile() ([]byte, error) { return s.cfg, nil }
func (s *savedImage) MediaType() (types.MediaType, error) {
	return types.DockerManifestSchema2, nil
}

func (s *savedImage) LayerByDiffID(h v1.Hash) (partial.UncompressedLayer, error) {
	if _, ok := s.layers[h]; !ok {
		return nil, fmt.Errorf("no layer %s", h)
	}
	return savedLayer{s, h}, nil
}

type savedLayer struct {
	s *savedImage
	h v1.Hash
}

func (l savedLayer) DiffID() (v1.Hash, error) { return l.h, nil }
func (l savedLayer) MediaType() (types.MediaType, error) {
	return types.DockerLayer, nil
}

func (l savedLayer) Uncompressed() (io.ReadCloser, error) {
	l.s.mu.Lock()
	l.s.reads[l.h]++
	l.s.mu.Unlock()
	return io.NopCloser(bytes.NewReader(l.s.layers[l.h])), nil
}

// TestLayersAbove: the layers a Docker build added are taken from its
// saved image by diff ID without reading a byte of the layers below (to
// digest them, every one would be gzipped: for a base of gigabytes, most
// of a build's time), and a build that is not on top of the image it was
// given is an error.
func TestLayersAbove(t *testing.T) {
	below := newSavedImage(t, "base", "wheel").image(t)
	tests := []struct {
		name    string
		built   []string
		want    []string
		wantErr string
	}{
		{"two added", []string{"base", "wheel", "pip", "label"}, []string{"pip", "label"}, ""},
		{"none added", []string{"base", "wheel"}, nil, ""},
		{"fewer layers", []string{"base"}, nil, "has 1 layers, fewer than the 2 it was built on"},
		{"another base", []string{"base", "other", "pip"}, nil, "layer 2 is sha256:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := newSavedImage(t, tt.built...)
			got, err := layersAbove(saved.image(t), below)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("layersAbove: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var contents []string
			for _, l := range got {
				// Digest is what pushing asks for first: it compresses
				// this layer, and this layer only.
				if _, err := l.Digest(); err != nil {
					t.Fatal(err)
				}
				rc, err := l.Uncompressed()
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				contents = append(contents, string(b))
			}
			if !slices.Equal(contents, tt.want) {
				t.Errorf("layers above: %q, want %q", contents, tt.want)
			}
			saved.mu.Lock()
			defer saved.mu.Unlock()
			for h, n := range saved.reads {
				if s := string(saved.layers[h]); n > 0 && !slices.Contains(tt.want, s) {
					t.Errorf("layer %q below the build's was read %d times", s, n)
				}
			}
		})
	}
}

// The step a push writes reads back as what it says (the console shows
// a build's reused and uploaded layers from it); no other step does.
func TestParsePushStep(t *testing.T) {
	for _, tt := range []struct {
		sum  pushSummary
		want PushStep
	}{
		{pushSummary{Layers: 8, Uploaded: 7, UploadedBytes: 40 << 20, ReusedBytes: 3 << 10}, PushStep{Layers: 8, Reused: 1, Uploaded: 7, ReusedSize: "3.0 KiB", UploadedSize: "40.0 MiB"}},
		{pushSummary{Layers: 1, Uploaded: 0, ReusedBytes: 12}, PushStep{Layers: 1, Reused: 1, ReusedSize: "12 B", UploadedSize: "0 B"}},
	} {
		got, ok := ParsePushStep(tt.sum.String())
		if !ok || got != tt.want {
			t.Errorf("ParsePushStep(%q) = %+v, %v; want %+v", tt.sum.String(), got, ok, tt.want)
		}
	}
	for _, step := range []string{"pushed 12.1 MiB of 40.0 MiB", "fetching 2 wheels", "", "8 layers of the image: 1 reused (3 KiB), 7 uploaded (40 MiB)"} {
		if got, ok := ParsePushStep(step); ok {
			t.Errorf("ParsePushStep(%q) = %+v, want not a push step", step, got)
		}
	}
}
