package local_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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

	pool := routes.NewPool(func(tc *tls.Config) *http.Transport { return &http.Transport{TLSClientConfig: tc} })
	client := &http.Client{Transport: pool.Transport(cluster, cert.CertPEM)}
	var resp *http.Response
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, dash+"/clusters/"+cluster+"/gateway-health/watch?beat=1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err = client.Do(req); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the dashboard did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // it may start a moment after the scheduler
	}
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
