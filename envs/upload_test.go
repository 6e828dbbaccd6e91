package envs_test

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/quota"
)

// uploadServer is the real API with svc behind it, on loopback, counting
// what it reads of each request's body.
func uploadServer(t *testing.T, svc api.Envs) (*httptest.Server, *testutil.BodyReads) {
	t.Helper()
	a := auth.NewStaticTokens(map[string]auth.User{"alice-token-000000": {Name: "alice"}, "bob-token-00000000": {Name: "bob"}})
	s := api.New(api.Config{Version: "test", UploadDir: t.TempDir()}, nil, a, nil, nil)
	s.SetEnvs(svc)
	h, counts := testutil.CountBodyReads(s)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, counts
}

// codeRequest is an environment request of its own spec carrying size
// bytes of code: over 1 MiB, so that it is admitted before it is read.
func codeRequest(t *testing.T, size int) []byte {
	t.Helper()
	zip := make([]byte, size)
	if _, err := rand.Read(zip); err != nil {
		t.Fatal(err)
	}
	spec := images.Spec{Python: "3.11", Platform: "linux/amd64", Code: []images.CodePart{{Name: "proj", Digest: images.DigestOf(zip)}}}
	b, err := json.Marshal(apitype.EnvRequest{Spec: spec, Code: map[string][]byte{"proj": zip}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body (of length n) as request id.
func post(t *testing.T, srv *httptest.Server, token, id string, body io.Reader, n int) (int, string) {
	t.Helper()
	status, answer, err := testutil.SendBody(srv.Client(), srv.URL+"/api/v1/envs", token, id, body, int64(n))
	if err != nil {
		t.Fatalf("request %s: %v", id, err)
	}
	return status, answer
}

// TestUploadAdmittedBeforeRead: a request that carries code counts against
// its user's max_builds from before its body is read, so that concurrent
// uploads over the cap are refused (429) with none of their bytes read:
// while another upload of theirs is in flight, and while a build of theirs
// runs. Another user is not held up, and once the build ends the next
// upload is read and built.
func TestUploadAdmittedBeforeRead(t *testing.T) {
	one := quota.Amount(1)
	fb := envs.NewFakeBuilder()
	svc := envs.NewTestService(t, fb, func(c *envs.Config) {
		c.Quotas, c.MaxCodeBytes = envs.SameQuotas(&one, "user:alice (api)"), 8<<20
	})
	srv, counts := uploadServer(t, svc)
	const size = 2 << 20

	// Upload "a" stays in flight: half its body sent, the rest held back.
	a := codeRequest(t, size)
	pr, pw := io.Pipe()
	type answer struct {
		status int
		body   string
	}
	aDone := make(chan answer, 1)
	go func() {
		status, body := post(t, srv, "alice-token-000000", "a", pr, len(a))
		aDone <- answer{status, body}
	}()
	go func() { _, _ = pw.Write(a[:len(a)/2]) }()
	select {
	case <-counts.Reached("a", 1):
	case <-time.After(time.Minute):
		t.Fatal("the gateway read nothing of the first upload in a minute")
	}

	refusedUnread := func(id, wantIn string) {
		t.Helper()
		b := codeRequest(t, size)
		status, body := post(t, srv, "alice-token-000000", id, strings.NewReader(string(b)), len(b))
		if status != http.StatusTooManyRequests || !strings.Contains(body, "quota_exceeded") || !strings.Contains(body, wantIn) {
			t.Errorf("upload %s over max_builds: %d %s, want 429 quota_exceeded saying %q", id, status, body, wantIn)
		}
		if n := counts.Read(id); n != 0 {
			t.Errorf("the gateway read %d bytes of refused upload %s, want none", n, id)
		}
	}
	refusedUnread("b", "1 request of yours is uploading code for a build, and your limit is 1")

	// bob has his own builds.
	bob := codeRequest(t, size)
	if status, body := post(t, srv, "bob-token-00000000", "bob", strings.NewReader(string(bob)), len(bob)); status != http.StatusAccepted {
		t.Errorf("bob's upload while alice's is in flight: %d %s, want 202", status, body)
	}

	if _, err := pw.Write(a[len(a)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	got := <-aDone
	if got.status != http.StatusAccepted || counts.Read("a") != int64(len(a)) {
		t.Fatalf("the upload in flight: %d %s, %d of %d bytes read; want 202, all read", got.status, got.body, counts.Read("a"), len(a))
	}
	var st apitype.EnvStatus
	if err := json.Unmarshal([]byte(got.body), &st); err != nil {
		t.Fatal(err)
	}
	refusedUnread("c", "1 environment builds of yours are queued or running ("+st.Hash[:16])

	// The build ends: the next upload is read and starts one.
	fb.Finish(st.Hash)
	d := codeRequest(t, size)
	if status, body := post(t, srv, "alice-token-000000", "d", strings.NewReader(string(d)), len(d)); status != http.StatusAccepted || counts.Read("d") != int64(len(d)) {
		t.Errorf("an upload after the build ended: %d %s, %d bytes read; want 202 and all read", status, body, counts.Read("d"))
	}
}

// TestUploadRefusedUnreadWithoutBuilder: a gateway that builds nothing
// says so (501) before reading any code.
func TestUploadRefusedUnreadWithoutBuilder(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(*envs.Config)
		build envs.Builder
	}{
		{"no engine", func(c *envs.Config) { c.MaxCodeBytes = 8 << 20 }, nil},
		{"builds off", func(c *envs.Config) { c.MaxCodeBytes, c.NoBuild = 8<<20, "images.builder is off" }, envs.NewFakeBuilder()},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := envs.NewTestService(t, c.build, c.edit)
			srv, counts := uploadServer(t, svc)
			b := codeRequest(t, 2<<20)
			status, body := post(t, srv, "alice-token-000000", "x", strings.NewReader(string(b)), len(b))
			if status != http.StatusNotImplemented || !strings.Contains(body, "no_builder") {
				t.Errorf("%d %s, want 501 no_builder", status, body)
			}
			if n := counts.Read("x"); n != 0 {
				t.Errorf("the gateway read %d bytes of an upload it cannot build, want none", n)
			}
		})
	}
}
