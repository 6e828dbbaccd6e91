package images

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// Every backend that runs images (docker, ec2, fargate, gce) starts its
// schedulers and workers through LauncherScript, whose preload is
// BenchPreload (a worker's and its nanny's HTTP server closed): so
// the dashboard guard (a client certificate of the cluster's CA on every
// path) and the bench agent's checks travel with it. The docker tests run
// this launcher in real containers; the cloud backends' tests check that
// they write this launcher and give schedulers the dashboard's TLS files.
func TestLauncherCarriesThePreload(t *testing.T) {
	const head = "import base64, zlib\nBENCH_PRELOAD, LAUNCHER = zlib.decompress(base64.b64decode("
	if !strings.HasPrefix(LauncherScript, head) {
		t.Fatalf("the launcher does not start by unpacking BENCH_PRELOAD: %.80q", LauncherScript)
	}
	lit := LauncherScript[len(head):]
	lit = lit[:strings.Index(lit, ")")]
	var b64 string
	if err := json.Unmarshal([]byte(lit), &b64); err != nil {
		t.Fatalf("the packed literal: %v", err)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	packed, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	preload, launcher, ok := strings.Cut(string(packed), "\x00")
	if !ok || preload != BenchPreload || launcher != stripComments(launcherScript) {
		t.Fatal("the launcher does not carry BenchPreload and launcher.py")
	}
	for _, want := range []string{
		"ServerNode.start_http_server = start_http_server", // the guard, before the dashboard listens
		"ctx.verify_mode = ssl.CERT_REQUIRED",
		"@web.stream_request_body", // the bench agent's body is read after its headers are checked
		"self.http_server.stop()",  // a worker's or nanny's HTTP server, closed before it accepts
	} {
		if !strings.Contains(BenchPreload, want) {
			t.Errorf("BenchPreload lacks %q", want)
		}
	}
	for _, want := range []string{`if role in ("scheduler", "worker")`, `argv += ["--preload", path]`, `argv += ["--preload-nanny", path]`} {
		if !strings.Contains(launcher, want) {
			t.Errorf("the launcher lacks %q: it passes the preload to schedulers, workers and nannies", want)
		}
	}
}
