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
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/pki"
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
	// next reads lines until want says yes, counting heartbeats.
	beats := 0
	next := func(what string, want func(c counts) bool) {
		t.Helper()
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if line == "" {
				beats++
				continue
			}
			var c counts
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			t.Logf("counts %+v", c)
			if want(c) {
				return
			}
		}
		t.Fatalf("the stream ended before %s: %v", what, lines.Err())
	}
	next("the worker joined", func(c counts) bool { return c.Workers == 1 && c.Clients >= 1 })
	seen := beats
	time.Sleep(2500 * time.Millisecond) // two beats, at least
	if err := p.StopWorker(ctx, cluster, "worker-1"); err != nil {
		t.Fatal(err)
	}
	next("the worker left", func(c counts) bool { return c.Workers == 0 })
	if beats-seen < 2 {
		t.Errorf("%d heartbeats in 2.5s at a beat of 1s", beats-seen)
	}
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
// wake-up: a watch opened half way through a second still gets them just
// after whole seconds.
func TestHealthWatchBeatsOnWholeSeconds(t *testing.T) {
	const cluster = "ticks"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, cert, dash, _ := startTLSScheduler(ctx, t, cluster)
	client := watchClient(cluster, cert)
	url := dash + "/clusters/" + cluster + "/gateway-health/watch?beat=1"
	openWatch(ctx, t, client, url).Body.Close() // the dashboard is up

	// Half way through a second: a loop ticking from the watch's start
	// would write its heartbeats about half a second after whole seconds.
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(1500 * time.Millisecond).Sub(now))
	resp := openWatch(ctx, t, client, url)
	defer resp.Body.Close()
	lines := countsFirst(t, resp)
	var after []time.Duration // each heartbeat's arrival, after the last whole second
	for len(after) < 4 && lines.Scan() {
		if strings.TrimSpace(lines.Text()) != "" {
			continue // counts (a client came or went)
		}
		at := time.Now()
		after = append(after, at.Sub(at.Truncate(time.Second)))
	}
	if len(after) < 4 {
		t.Fatalf("the stream ended after %d heartbeats: %v", len(after), lines.Err())
	}
	// A loaded machine may wake the scheduler's loop late now and then.
	early := 0
	for _, d := range after {
		if d < 400*time.Millisecond {
			early++
		}
	}
	if early < 3 {
		t.Errorf("heartbeats arrived %v after whole seconds, want most within 400ms", after)
	}
}
