package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// The flood test runs the gateway in a child process (this test binary,
// dispatched by TestMain) whose descriptor limit is lowered, so that the
// flood's connections and the test's own do not share one limit.
const (
	floodHelperEnv  = "GATEWAY_TEST_FLOOD_HELPER" // the child's directory
	floodNoFileEnv  = "GATEWAY_TEST_FLOOD_NOFILE" // the child's descriptor limit
	floodReadyFile  = "ready.json"
	floodLogFile    = "gateway.log"
	floodFileLimit  = 1024
	floodSlots      = 1100 // connections the flood holds at once
	floodSources    = 100  // 127.0.0.2 and on: more than the per-source caps keep under the total
	floodMaxDials   = 8000 // in all, reconnections included
	floodTrickle    = 2 * time.Second
	floodRedialWait = 5 * time.Second
	floodHold       = 40 * time.Second // the flood's bound in time
	floodChecks     = 8
	floodCheckEvery = 2 * time.Second // the checks span the short deadlines, and reconnections
	hangBound       = 20 * time.Second
)

// floodReady is what the child tells the test.
type floodReady struct {
	Addr, Token, Metrics string
}

// floodHelper serves a gateway in dev mode with its descriptor limit
// lowered until SIGTERM or until its stdin closes (the test is gone).
func floodHelper(dir string) int {
	limit, err := strconv.ParseUint(os.Getenv(floodNoFileEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood helper:", floodNoFileEnv, err)
		return 2
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, "flood helper: setrlimit:", err)
		return 2
	}
	logFile, err := os.Create(filepath.Join(dir, floodLogFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood helper:", err)
		return 2
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fail := func(err error) int {
		log.Error("flood helper", "err", err)
		fmt.Fprintln(os.Stderr, "flood helper:", err)
		return 1
	}
	v := ConfigSchema().New()
	v.Set("dev", true)
	v.Set("listen", "127.0.0.1:0")
	v.Set("data_dir", filepath.Join(dir, "data"))
	v.Set("cluster.on_shutdown", "stop")
	v.Set("metrics_listen", "127.0.0.1:0")
	cfg, err := ConfigSchema().Load(v, "")
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() { // the test died: do not outlive it
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	g, err := New(ctx, cfg, log, "test")
	if err != nil {
		return fail(err)
	}
	secret := auth.NewToken(auth.APITokenPrefix)
	if err := g.store.CreateToken(ctx, &store.APIToken{ID: "flood", Owner: "dev-user-1", OwnerName: "dev", Name: "flood",
		Hash: auth.HashToken(secret), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		return fail(err)
	}
	metrics, err := metricsURL(filepath.Join(dir, floodLogFile))
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(floodReady{Addr: g.Addr().String(), Token: secret, Metrics: metrics})
	if err := os.WriteFile(filepath.Join(dir, floodReadyFile+".tmp"), b, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(filepath.Join(dir, floodReadyFile+".tmp"), filepath.Join(dir, floodReadyFile)); err != nil {
		return fail(err)
	}
	if err := g.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// metricsURL is the /metrics address New logged.
func metricsURL(logPath string) (string, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`msg=metrics url=(\S+)`).FindSubmatch(b)
	if m == nil {
		return "", errors.New("no metrics url in the log")
	}
	return string(m[1]), nil
}

// startFloodTarget runs the child gateway and waits until it serves.
func startFloodTarget(t *testing.T) (floodReady, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodHelperEnv+"="+dir, floodNoFileEnv+"="+strconv.Itoa(floodFileLimit))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once the child is gone and its stderr copied
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("the flooded gateway did not stop within 60 s of SIGTERM")
		}
		stdin.Close()
	})
	var ready floodReady
	deadline := time.Now().Add(2 * time.Minute)
	for tick := time.NewTicker(50 * time.Millisecond); ; <-tick.C {
		b, err := os.ReadFile(filepath.Join(dir, floodReadyFile))
		if err == nil {
			tick.Stop()
			if err := json.Unmarshal(b, &ready); err != nil {
				t.Fatal(err)
			}
			return ready, filepath.Join(dir, floodLogFile)
		}
		select {
		case <-exited:
			t.Fatalf("the gateway exited before serving: %v\n%s", waitErr, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the gateway did not serve within 2 minutes\n%s", stderr.String())
		}
	}
}

// floodStats counts what the flood saw.
type floodStats struct {
	dials, dialFailed, closedByServer atomic.Int64
}

// slowRequest is the start of one of the flood's requests (the rest
// follows a byte at a time): two in three are the red team's sign-in form
// declaring 1 MB, the others a form small enough to be read.
func slowRequest(i int, host string) string {
	length := 1000000
	if i%3 == 2 {
		length = 1000
	}
	return fmt.Sprintf("POST /auth/ticket HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\nt=", host, length)
}

// flood holds floodSlots slow requests to addr from floodSources loopback
// addresses, a byte every floodTrickle, reconnecting floodRedialWait after the
// gateway closes one, until ctx ends or floodMaxDials connections were
// made. opened is closed once every slot has dialled once.
func flood(ctx context.Context, addr string, st *floodStats, opened chan<- struct{}) *sync.WaitGroup {
	var wg, first sync.WaitGroup
	var budget atomic.Int64
	budget.Store(floodMaxDials)
	first.Add(floodSlots)
	for i := range floodSlots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := net.IPv4(127, 0, 0, byte(2+i%floodSources))
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
			once := sync.OnceFunc(first.Done)
			defer once()
			for ctx.Err() == nil && budget.Add(-1) >= 0 {
				st.dials.Add(1)
				c, err := d.DialContext(ctx, "tcp", addr)
				once()
				if err != nil {
					st.dialFailed.Add(1)
				} else if trickle(ctx, c, slowRequest(i, addr)) {
					st.closedByServer.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(floodRedialWait):
				}
			}
		}()
	}
	go func() { first.Wait(); close(opened) }()
	return &wg
}

// trickle sends start, then a byte every floodTrickle, until the gateway
// closes the connection (true) or ctx ends.
func trickle(ctx context.Context, c net.Conn, start string) bool {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := io.WriteString(c, start); err != nil {
		return ctx.Err() == nil
	}
	closed := make(chan struct{})
	go func() { // an answer or the close ends the request
		_, _ = c.Read(make([]byte, 1))
		close(closed)
	}()
	tick := time.NewTicker(floodTrickle)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-closed:
			return ctx.Err() == nil
		case <-tick.C:
			if _, err := io.WriteString(c, "a"); err != nil {
				return ctx.Err() == nil
			}
		}
	}
}

// timedGet sends one request on a new connection from 127.0.0.1 and
// returns how long the answer took.
func timedGet(url, token string) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: hangBound, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return time.Since(start), err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return took, err
}

// metricValue is one sample of a /metrics page ("" labels: the first).
func metricValue(t *testing.T, url, name, labels string) float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: hangBound}).Get(url)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+labels+" "); ok {
			f, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s%s in the metrics", name, labels)
	return 0
}

// Regression test for issue 32 finding 2: slow unauthenticated requests
// (the sign-in form declaring 1 MB, sent a byte at a time) from many
// addresses took every descriptor of the gateway, and /api/health and
// authenticated calls timed out. Under a flood of floodSlots such
// requests from floodSources addresses against a descriptor limit of
// floodFileLimit, both keep answering: the 1 MB forms are refused before
// they are read, the small ones cut by the short body deadline, the
// per-source cap refuses most connections, and at the total the oldest
// waiting connection makes room; the refusals are counted in /metrics.
func TestSlowRequestFlood(t *testing.T) {
	target, logPath := startFloodTarget(t)
	base := "http://" + target.Addr
	if _, err := timedGet(base+"/api/health", ""); err != nil {
		t.Fatalf("health before the flood: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), floodHold)
	defer cancel()
	var st floodStats
	opened := make(chan struct{})
	wg := flood(ctx, target.Addr, &st, opened)
	select {
	case <-opened:
	case <-ctx.Done():
		t.Fatal("the flood did not open its connections in time")
	}

	var health, authed []time.Duration
	tick := time.NewTicker(floodCheckEvery)
	defer tick.Stop()
	for i := range floodChecks {
		if i > 0 {
			<-tick.C
		}
		took, err := timedGet(base+"/api/health", "")
		if err != nil {
			t.Fatalf("health check %d during the flood (%d connections made): %v after %v", i+1, st.dials.Load(), err, took.Round(time.Millisecond))
		}
		health = append(health, took)
		took, err = timedGet(base+"/api/v1/clusters/", target.Token)
		if err != nil {
			t.Fatalf("authenticated call %d during the flood (%d connections made): %v after %v", i+1, st.dials.Load(), err, took.Round(time.Millisecond))
		}
		authed = append(authed, took)
	}
	if ctx.Err() != nil || st.dials.Load() >= floodMaxDials {
		t.Fatalf("the flood ended (%v, %d connections) before the checks did: the checks did not run under it", floodHold, st.dials.Load())
	}
	refusedSource := metricValue(t, target.Metrics, "gateway_http_connections_refused_total", `{reason="refused_source"}`)
	refusedTotal := metricValue(t, target.Metrics, "gateway_http_connections_refused_total", `{reason="refused_total"}`)
	evicted := metricValue(t, target.Metrics, "gateway_http_connections_refused_total", `{reason="evicted"}`)
	open := metricValue(t, target.Metrics, "gateway_http_connections", "")
	cancel()
	wg.Wait()

	slices.Sort(health)
	slices.Sort(authed)
	t.Logf("figure: flood of %d slow requests from %d addresses (%d connections made, %d dials failed, %d closed by the gateway) against a descriptor limit of %d: "+
		"/api/health %v median, %v max; authenticated GET /api/v1/clusters/ %v median, %v max (%d each); refused by the per-source cap %.0f, by the total %.0f, evicted %.0f; %.0f HTTP connections open",
		floodSlots, floodSources, st.dials.Load(), st.dialFailed.Load(), st.closedByServer.Load(), floodFileLimit,
		health[len(health)/2].Round(time.Millisecond), health[len(health)-1].Round(time.Millisecond),
		authed[len(authed)/2].Round(time.Millisecond), authed[len(authed)-1].Round(time.Millisecond), floodChecks, refusedSource, refusedTotal, evicted, open)
	if refusedSource+refusedTotal+evicted == 0 {
		t.Error("no connection refused or evicted during a flood over the caps")
	}
	logText, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(logText), "too many open files"); n > 0 {
		t.Errorf("the gateway ran out of descriptors %d times during the flood", n)
	}
}
