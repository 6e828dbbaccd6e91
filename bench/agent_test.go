package bench

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
	"github.com/gatewayhq/gateway/providers/local/localtest"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// agentCluster starts a real Dask cluster (Debian's distributed) with the
// local provider, whose scheduler has the gateway's preload, and returns
// its dashboard base URL, a client that trusts its certificate, and the
// cluster's key pair.
func agentCluster(t *testing.T, name string) (string, *http.Client, pki.Pair) {
	t.Helper()
	if out, err := exec.Command(testPython, "-c", "import distributed").CombinedOutput(); err != nil {
		t.Fatalf("this test runs real Dask at %s (on Debian: apt-get install python3-distributed): %v\n%s", testPython, err, out)
	}
	p, err := local.New(local.Config{Dir: t.TempDir(), Python: testPython, GatewayID: "gw-agent-test", StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background(), false) })
	pair, err := pki.ClusterCert(name, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := providers.ClusterSpec{Name: name, Owner: "alice", GatewayID: "gw-agent-test", TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
		DashboardPrefix: "/clusters/" + name, WorkerThreads: 1, WorkerMemory: 1 << 30}
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), name) })
	dash, addr := localtest.WaitScheduler(ctx, t, p, name)
	if err := p.StartWorker(ctx, spec, "w0", addr); err != nil {
		t.Fatal(err)
	}
	pool := routes.NewPool(func(tc *tls.Config) *http.Transport { return &http.Transport{TLSClientConfig: tc} })
	hc := &http.Client{Transport: pool.Transport(name, pair.CertPEM, pair.KeyPEM), Timeout: 60 * time.Second}
	base := dash + "/clusters/" + name + "/"
	// The dashboard may answer a moment after the scheduler file is written.
	for {
		resp, err := hc.Get(base + "health")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the dashboard did not answer: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return base, hc, pair
}

func zipSuite(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for n, body := range files {
		w, err := z.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestAgentRunsNextToTheScheduler: through the preload every scheduler
// starts with, a signed agent runs a suite's client next to a real
// scheduler, in its Python: the runner lists the suite in its hello,
// runs a benchmark that checks it is the scheduler's child, and a hung
// sample is ended by killing the runner. Requests without the cluster's
// key are refused before anything runs, as are hostile suites.
func TestAgentRunsNextToTheScheduler(t *testing.T) {
	const name = "agent"
	base, hc, pair := agentCluster(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Refused: no signature, another cluster's key, and ops before load.
	other, err := pki.ClusterCert("other", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"gateway-bench/load", strings.NewReader("import os; os._exit(3)"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an unsigned load: %s, want 403", resp.Status)
	}
	wrong, err := NewAgent(base, "", hc, string(other.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.load(ctx); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Errorf("load signed with another cluster's key: %v, want a bad signature", err)
	}
	a, err := NewAgent(base, "", hc, string(pair.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.call(ctx, "next", []byte(`{"session":"x"}`), nil); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("next before load: %v, want not loaded", err)
	}

	// A suite that is not top-level Python files is refused, and nothing
	// is written outside the session's folder.
	outside := filepath.Join(os.TempDir(), "gateway-agent-escape.py")
	_ = os.Remove(outside)
	for _, bad := range []map[string]string{
		{"../gateway-agent-escape.py": "x = 1\n"},
		{"sub/bench_x.py": "x = 1\n"},
		{"bench_x.sh": "x = 1\n"},
	} {
		if _, err := a.start(ctx, zipSuite(t, bad), nil); err == nil || !strings.Contains(err.Error(), "not a top-level Python file") {
			t.Errorf("suite %v: %v, want refused", bad, err)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("a suite wrote %s", outside)
	}
	if _, err := a.start(ctx, []byte("not a zip"), nil); err == nil {
		t.Error("a suite that is not a zip was accepted")
	}

	suite := zipSuite(t, map[string]string{
		"bench_here.py": `import os
import time


def bench_here(client):
    assert client.submit(sum, range(10)).result() == 45
    assert client.run_on_scheduler(os.getpid) == os.getppid(), "the client does not run next to the scheduler"


def bench_hang(client):
    time.sleep(3600)
`,
		"bench_broken.py": "def bench_x(client:\n",
	})
	var stderr bytes.Buffer
	rn, l, err := startAgentRunner(ctx, a, suite, &stderr)
	if err != nil {
		t.Fatalf("starting the runner next to the scheduler: %v", err)
	}
	defer rn.close()
	if got := strings.Join(l.Benchmarks, ","); got != "bench_here.py::bench_hang,bench_here.py::bench_here" {
		t.Errorf("listed %s", got)
	}
	if len(l.Errors) != 1 || l.Errors[0].File != "bench_broken.py" || l.Versions["distributed"] == "" {
		t.Errorf("listing %+v", l)
	}
	res, err := rn.do(ctx, "bench_here.py::bench_here", time.Minute)
	if err != nil || !res.OK || res.WallS <= 0 || res.Metrics["memory_samples"] < 1 {
		t.Fatalf("bench_here: %+v, %v", res, err)
	}
	if res, err := rn.do(ctx, "bench_here.py::bench_hang", 2*time.Second); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a hung sample: %+v, %v; want a timeout", res, err)
	}
	// Killed: the agent forgot its session.
	p := rn.p.(*agentProc)
	if err := p.send(ctx, []byte(`{"id":"bench_here.py::bench_here"}`)); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("a killed runner's session: %v, want no session", err)
	}
	// A new runner works after it, and starting another (which loads
	// the same agent again) leaves it running.
	rn2, _, err := startAgentRunner(ctx, a, suite, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rn2.close()
	rn3, _, err := startAgentRunner(ctx, a, suite, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rn3.close()
	for i, r := range []*runner{rn2, rn3} {
		if res, err := r.do(ctx, "bench_here.py::bench_here", time.Minute); err != nil || !res.OK {
			t.Errorf("runner %d after a kill: %+v, %v", i+2, res, err)
		}
	}
}

// TestAgentAbsent: a scheduler without the preload (tornado's own 404)
// is said to have no agent, not a protocol error.
func TestAgentAbsent(t *testing.T) {
	pair, err := pki.ClusterCert("old", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>404: Not Found</html>", http.StatusNotFound)
	}))
	defer srv.Close()
	a, err := NewAgent(srv.URL+"/clusters/old/", "", srv.Client(), string(pair.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.start(context.Background(), nil, nil); !errors.Is(err, ErrNoAgent) {
		t.Errorf("start on a scheduler without the preload: %v, want ErrNoAgent", err)
	}
	if _, err := NewAgent(srv.URL, "", srv.Client(), string(pair.CertPEM)); err == nil {
		t.Error("a certificate was taken for a private key")
	}
}

// The bench agent's door checks a request's signature before reading its
// body, against the real preload in a real scheduler (issue 32, finding
// 5): a signed request runs once (its replay is refused), a signature
// from outside the clock window or of the old form is refused, and a body
// over MaxAgentBody is refused from its headers, the connection closed
// with most of the body never sent.
func TestAgentRefusesReplaysAndOversizedBodies(t *testing.T) {
	const name = "agentsig"
	base, hc, pair := agentCluster(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := NewAgent(base, "", hc, string(pair.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	post := func(op string, body []byte, sig string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"gateway-bench/"+op, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Gateway-Bench", sig)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}

	signed := sign(a.key, "load", time.Now(), newNonce(), agentScript)
	if code, body := post("load", agentScript, signed); code != http.StatusOK {
		t.Fatalf("a signed load: %d %s, want 200", code, body)
	}
	if code, body := post("load", agentScript, signed); code != http.StatusForbidden || !strings.Contains(body, "replayed") {
		t.Errorf("the same load again: %d %s, want 403 replayed", code, body)
	}
	for _, c := range []struct {
		name, sig, want string
		body            []byte
	}{
		{"an hour-old signature", sign(a.key, "load", time.Now().Add(-time.Hour), newNonce(), agentScript), "stale", agentScript},
		{"a signature from twice the window ahead", sign(a.key, "load", time.Now().Add(2*AgentWindow), newNonce(), agentScript), "stale", agentScript},
		{"the old form (no time, no nonce)", hex.EncodeToString(make([]byte, 32)), "bad signature", agentScript},
		{"another body under a valid signature", sign(a.key, "load", time.Now(), newNonce(), agentScript), "bad signature", []byte("import os; os._exit(3)")},
	} {
		if code, body := post("load", c.body, c.sig); code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 %s", c.name, code, body, c.want)
		}
	}
	if err := a.load(ctx); err != nil {
		t.Errorf("the agent's own load: %v", err)
	}

	// 95 MB announced, a valid signature: the answer comes from the
	// headers, and the scheduler closes the connection rather than read on.
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := pki.MemberTLS(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	d := tls.Dialer{Config: tc}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang bound, not a speed check
	const announced = 95 << 20
	fmt.Fprintf(conn, "POST %sgateway-bench/load HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nX-Gateway-Bench: %s\r\n\r\n",
		u.Path, u.Host, announced, sign(a.key, "load", time.Now(), newNonce(), nil))
	// No byte of the body is sent: the answer must come from the headers
	// alone (a scheduler waiting for the body would answer nothing before
	// the deadline). Sending some first raced the scheduler's hang-up:
	// a write could meet a closed connection (EPIPE in a CI run).
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a 95 MB body announced in the headers: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 95 MB body: %s %s, want 413", resp.Status, msg)
	}
	// The rest is not read: the scheduler hung up, and a client still
	// sending finds the connection gone long before 95 MB.
	sent := 64 << 10
	chunk := make([]byte, 64<<10)
	for ; sent < announced; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			break
		}
	}
	if sent >= announced {
		t.Errorf("the scheduler took all %d bytes of a body it refused", announced)
	}

	// A body without a length (chunked) is cut at MaxAgentBody: the
	// request fails, and the agent serves on.
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 64<<10)
		for sent := 0; sent <= MaxAgentBody+1<<20; sent += len(chunk) {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"gateway-bench/load", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Gateway-Bench", sign(a.key, "load", time.Now(), newNonce(), nil))
	resp, err = hc.Do(req)
	pr.CloseWithError(errors.New("done")) // ends the writer
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a chunked body over %d bytes: %s, want 400 or 413 (cut at the limit, not read whole)", MaxAgentBody, resp.Status)
		}
	}
	if err := a.load(ctx); err != nil {
		t.Errorf("the agent after an oversized chunked body: %v", err)
	}
}

// The limits the gateway signs and sends by are the preload's.
func TestAgentLimitsAreThePreloads(t *testing.T) {
	want := fmt.Sprintf("WINDOW, MAX_BODY, MAX_NONCES = %d, %d << 20,", int(AgentWindow/time.Second), MaxAgentBody>>20)
	if !strings.Contains(images.BenchPreload, want) {
		t.Errorf("images.BenchPreload does not say %q", want)
	}
}
