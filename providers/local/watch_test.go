package local_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// The gateway's preload streams a real scheduler's counts (the core's
// health watch, scheduler/watch.go): a JSON line at once, another when a
// worker leaves, and empty heartbeat lines at the beat in between.
func TestHealthWatchStreams(t *testing.T) {
	const cluster = "watch"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, cert, dash, addr := startTLSScheduler(ctx, t, cluster)
	if err := p.StartWorker(ctx, tlsSpec("gw-watch-local", cluster, cert), "worker-1", addr); err != nil {
		t.Fatal(err)
	}

	client := watchClient(cluster, cert)
	resp := openWatch(ctx, t, client, dash+"/clusters/"+cluster+"/gateway-health/watch?beat=1")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("watch: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	type counts struct {
		Workers    int `json:"workers"`
		Clients    int `json:"clients"`
		Processing int `json:"processing"`
		Desired    int `json:"desired_workers"`
	}
	// next reads lines until want says yes of one: its counts, or nil for
	// a heartbeat (which it counts).
	beats := 0
	next := func(what string, want func(c *counts) bool) {
		t.Helper()
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if line == "" {
				beats++
				if want(nil) {
					return
				}
				continue
			}
			var c counts
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			t.Logf("counts %+v", c)
			if want(&c) {
				return
			}
		}
		t.Fatalf("the stream ended before %s: %v", what, lines.Err())
	}
	next("the worker joined", func(c *counts) bool { return c != nil && c.Workers == 1 && c.Clients >= 1 })
	// With nothing changing, heartbeats come at the beat: two of them,
	// then the worker leaves.
	seen := beats
	next("two heartbeats", func(*counts) bool { return beats-seen >= 2 })
	if err := p.StopWorker(ctx, cluster, "worker-1"); err != nil {
		t.Fatal(err)
	}
	next("the worker left", func(c *counts) bool { return c != nil && c.Workers == 0 })
}

// A scheduler whose event loop blocks ends its watch itself (the
// preload's watchdog thread, ?stall=): with heartbeats minutes apart, that
// is how the gateway learns of it within the heartbeat timeout. The loop
// is blocked through the bench agent's signed load, which runs its
// setup in the loop; the stream must end before the load returns.
func TestHealthWatchEndsWhenLoopBlocks(t *testing.T) {
	const cluster = "wedge"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, cert, dash, _ := startTLSScheduler(ctx, t, cluster)
	client := watchClient(cluster, cert)
	resp := openWatch(ctx, t, client, dash+"/clusters/"+cluster+"/gateway-health/watch?beat=3600&stall=1")
	defer resp.Body.Close()
	lines := countsFirst(t, resp)

	block, _ := pem.Decode(cert.KeyPEM)
	key := sha256.Sum256(block.Bytes)
	body := []byte("import time\ndef setup(s):\n    time.sleep(6)\n    return {}\n")
	// The bench agent's signature (bench.Agent): a time and a nonce, then
	// the MAC of the op, those and the body.
	ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), strings.Repeat("ab", 16)
	mac := hmac.New(sha256.New, key[:])
	mac.Write(append([]byte("load\n"+ts+"\n"+nonce+"\n"), body...))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dash+"/clusters/"+cluster+"/gateway-bench/load", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Gateway-Bench", "t="+ts+",n="+nonce+",s="+hex.EncodeToString(mac.Sum(nil)))
	loaded := make(chan string, 1)
	go func() {
		r, err := client.Do(req)
		if err != nil {
			loaded <- err.Error()
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		loaded <- r.Status + " " + string(b)
	}()

	ended := make(chan error, 1)
	go func() {
		for lines.Scan() {
			if strings.TrimSpace(lines.Text()) != "" {
				t.Logf("line %q", lines.Text())
			}
		}
		ended <- lines.Err()
	}()
	select {
	case err := <-ended:
		t.Logf("the stream ended while the loop was blocked: %v", err)
	case got := <-loaded:
		t.Fatalf("the blocked loop's load returned (%s) and the stream still runs", got)
	case <-ctx.Done():
		t.Fatal("neither the stream ended nor the load returned")
	}
	if got := <-loaded; !strings.HasPrefix(got, "200") {
		t.Errorf("load: %s", got)
	}
	// The scheduler lives on: a new watch streams.
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, dash+"/clusters/"+cluster+"/gateway-health/watch?beat=3600&stall=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	if l := bufio.NewScanner(again.Body); !l.Scan() || !strings.HasPrefix(l.Text(), "{") {
		t.Fatalf("after the block: %q, %v", l.Text(), l.Err())
	}
}

// watchClient is the gateway's client for the cluster's dashboard: TLS
// checked against its certificate.
func watchClient(cluster string, cert pki.Pair) *http.Client {
	pool := routes.NewPool(func(tc *tls.Config) *http.Transport { return &http.Transport{TLSClientConfig: tc} })
	return &http.Client{Transport: pool.Transport(cluster, cert.CertPEM, cert.KeyPEM)}
}

// countsFirst reads the watch's first line, which must be the counts, and
// returns the scanner for the rest.
func countsFirst(t *testing.T, resp *http.Response) *bufio.Scanner {
	t.Helper()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "{") {
		t.Fatalf("no counts line first: %q, %v", lines.Text(), lines.Err())
	}
	return lines
}

// openWatch opens a watch at url, trying again while the dashboard is not
// up yet (it may start a moment after the scheduler).
func openWatch(ctx context.Context, t *testing.T, client *http.Client, url string) *http.Response {
	t.Helper()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			return resp
		}
		if ctx.Err() != nil {
			t.Fatalf("the dashboard did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The preload's heartbeats fall on the wall clock's whole seconds, so
// that the gateway reads all the heartbeats of one second in one
// wake-up: a watch opened half way through a second still gets them on
// whole seconds, each a beat after the last (not a tick late). The
// preload's watch runs under a clock of the test's (wallClockWatch), so
// that a loaded machine waking the loop late cannot move what is checked.
func TestHealthWatchBeatsOnWholeSeconds(t *testing.T) {
	const start = 1_700_000_000.5 // half way through a second
	for _, beat := range []float64{1, 3} {
		t.Run(fmt.Sprintf("beat %gs", beat), func(t *testing.T) {
			got := wallClockWatch(t, start, beat, 4)
			for i, at := range got {
				if frac := at - math.Floor(at); frac > 0.01 {
					t.Errorf("heartbeat %d written at %.3f, %.3fs after a whole second; want on it", i, at, frac)
				}
				if i > 0 && math.Abs(at-got[i-1]-beat) > 0.01 {
					t.Errorf("heartbeats %d and %d written %.3fs apart; want the beat, %gs", i-1, i, at-got[i-1], beat)
				}
			}
			if got[0]-start > beat+1 {
				t.Errorf("first heartbeat at %.3f, %.3fs after the watch opened at %.3f; want within a beat and a tick", got[0], got[0]-start, start)
			}
		})
	}
}

// wallClockWatch runs the preload's watch handler (images.BenchPreload,
// in /usr/bin/python3) against a scheduler whose counts never change, on
// a clock that starts at the wall time start and moves only when the
// handler sleeps, waking it 3 ms late as a busy loop would. It returns the
// wall times at which the handler wrote its first n heartbeats.
func wallClockWatch(t *testing.T, start, beat float64, n int) []float64 {
	t.Helper()
	const python = "/usr/bin/python3"
	preload := filepath.Join(t.TempDir(), "preload.py")
	if err := os.WriteFile(preload, []byte(images.BenchPreload), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.HangBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", watchClockHarness, preload, fmt.Sprint(start), fmt.Sprint(beat), strconv.Itoa(n))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("the watch under a test clock (%s): %v\n%s", python, err, stderr)
	}
	var got []float64
	if err := json.Unmarshal(out, &got); err != nil || len(got) != n {
		t.Fatalf("harness printed %q (%v); want %d heartbeat times", out, err, n)
	}
	return got
}

// watchClockHarness loads the preload given as its first argument and
// drives its watch handler: the handler's time, asyncio and random are
// the harness's, and its request is a stand-in with the beat asked for.
const watchClockHarness = `
import asyncio, json, random, sys, types

path, start, beat, want = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ns = {"__name__": "gateway_preload"}
exec(compile(open(path).read(), path, "exec"), ns)

clock = {"wall": start, "mono": 5000.25}

async def sleep(d):
    d = max(d, 0) + 0.003  # woken late, as a loaded loop is
    clock["wall"] += d
    clock["mono"] += d

ns["time"] = types.SimpleNamespace(time=lambda: clock["wall"], monotonic=lambda: clock["mono"])
ns["asyncio"] = types.SimpleNamespace(sleep=sleep)
ns["random"] = random.Random(1)

beats = []

class Done(Exception):
    pass

class Handler:
    def get_argument(self, name, default):
        return {"beat": beat}.get(name, default)
    def set_header(self, k, v):
        pass
    def set_status(self, code):
        raise SystemExit("watch refused: %d" % code)
    def write(self, s):
        if s == "\n":
            beats.append(clock["wall"])
    async def flush(self):
        if len(beats) >= want:
            raise Done()

class Web:
    RequestHandler = Handler

counts = {"workers": {}, "clients": {}, "task_groups": {}}
scheduler = types.SimpleNamespace(adaptive_target=lambda: 0, **counts)
asyncio.run(ns["watch_handler"](scheduler, Web)().get())
print(json.dumps(beats))
`
