package build

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testdocker"
)

// buildHangBound bounds a test's builds against hangs only: reading and
// gzipping a base of hundreds of MB under -race takes minutes on a 2-core
// machine busy with the integration tests (CI's TestLayersBuild ran out of
// a 3-minute bound at "reading base"), and a speed target is the
// benchmark's to judge, not a test's.
const buildHangBound = 20 * time.Minute

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildHangBound)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newBuilder returns a Builder on cfg with a fresh log directory, closed at
// the end of the test.
func newBuilder(t *testing.T, cfg Config) *Builder {
	t.Helper()
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// countingHandler counts the requests that reach next.
type countingHandler struct {
	n    atomic.Int64
	next http.Handler
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.next.ServeHTTP(w, r)
}

// newRegistry starts go-containerregistry's in-memory registry on
// 127.0.0.1, behind basic auth when user is not empty, and returns its
// host:port and its request counter.
func newRegistry(t *testing.T, user, pass string) (string, *countingHandler) {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	c := &countingHandler{next: h}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("registry is on %s, want 127.0.0.1", u.Host)
	}
	return u.Host, c
}

// codeZip returns a zip with one module, gwusercode.py, whose VALUE is
// value, and the code part naming it.
func codeZip(t *testing.T, partName, value string) ([]byte, images.CodePart) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "gwusercode.py", Method: zip.Deflate, Modified: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "VALUE = %q\n", value)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), images.CodePart{Name: partName, Digest: images.DigestOf(buf.Bytes())}
}

// nonce is a value unique to this run, so that specs (through their code
// parts) do not meet images left by an earlier run.
func nonce(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

// dockerClient returns a client of the test engine, skipping the test when
// there is none (testdocker's rules).
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	testdocker.Pool(t)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// removeImageAtEnd removes ref from the engine when the test ends.
func removeImageAtEnd(t *testing.T, cli *client.Client, ref string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
}

// runPython runs python3 -c code in a throwaway container of ref (no
// network) and returns its output and exit status.
func runPython(t *testing.T, cli *client.Client, ref, code string) (string, int64) {
	t.Helper()
	ctx := testContext(t)
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: []string{"python3", "-c", code}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	}()
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	var code64 int64
	select {
	case res := <-waitC:
		code64 = res.StatusCode
	case err := <-errC:
		t.Fatal(err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		t.Fatal(err)
	}
	return out.String(), code64
}

// baseSpec probes the test image once per test binary.
var (
	baseMu    sync.Mutex
	baseSpecs = map[string]images.Spec{}
)

func probeBase(t *testing.T, cli *client.Client, ref string) images.Spec {
	t.Helper()
	baseMu.Lock()
	defer baseMu.Unlock()
	if s, ok := baseSpecs[ref]; ok {
		return s
	}
	b := newBuilder(t, Config{Docker: cli})
	s, err := b.Inspect(testContext(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	baseSpecs[ref] = s
	return s
}

// pick returns the base's packages of these names (all must be there).
func pick(t *testing.T, base images.Spec, names ...string) []images.Package {
	t.Helper()
	var out []images.Package
	for _, n := range names {
		i := slices.IndexFunc(base.Packages, func(p images.Package) bool { return p.Name == n })
		if i < 0 {
			t.Fatalf("the base has no package %s (it has %v)", n, base.Packages)
		}
		out = append(out, base.Packages[i])
	}
	return out
}

func hasStep(st Status, prefix string) bool {
	return slices.ContainsFunc(st.Steps, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func mustHash(t *testing.T, s images.Spec) string {
	t.Helper()
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
