package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// Figure 10, the web console: the clusters page's server time with 1,000
// clusters stored, on SQLite and PostgreSQL; the weight of a page with
// its scripts and styles, compressed; and the CPU that 100 open pages,
// each with its event stream, add to an idle gateway.

// pageTimes records how long the console's handler takes per request:
// the server's time, without the client's or the network's.
type pageTimes struct {
	mu    sync.Mutex
	times []time.Duration
}

func (p *pageTimes) timed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		if r.URL.Path == "/events" {
			return // a stream: its time is how long it was open
		}
		d := time.Since(t0)
		p.mu.Lock()
		p.times = append(p.times, d)
		p.mu.Unlock()
	})
}

func (p *pageTimes) take() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.times
	p.times = nil
	return t
}

func benchConsole(ctx context.Context, o Options) ([]Result, error) {
	return onBothDatabases(ctx, o, "console", benchConsoleOn)
}

func benchConsoleOn(ctx context.Context, o Options, pgURL, suffix string) ([]Result, error) {
	const fig = "10 console"
	stored, requests, tabs, idle := 1000, 400, 100, 15*time.Second
	if o.Quick {
		stored, requests, tabs, idle = 200, 80, 20, 3*time.Second
	}
	name := "console"
	if pgURL != "" {
		name = "console-postgres"
	}
	g, err := cpStartDB(ctx, o, name, pgURL, cpPollInterval, cpLeaseTTL)
	if err != nil {
		return nil, err
	}
	defer g.close()
	ann := scheduler.Who{ID: "ann", Name: "ann"}
	if _, err := g.create(ctx, stored, func(int) scheduler.Who { return ann }); err != nil {
		return nil, err
	}
	if err := g.waitStatus(ctx, "all running", 2*time.Minute, func(c map[store.Status]int) bool {
		return c[store.Running] == stored && c[store.Pending]+c[store.Starting] == 0
	}); err != nil {
		return nil, err
	}
	cookie, err := g.sessions.Start(ctx, auth.User{ID: "ann", Name: "ann"}, "login")
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", g.url+path, nil)
		if err != nil {
			return nil, err
		}
		req.AddCookie(cookie)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, err
	}

	// The page's server time, one request at a time, bounded in count
	// and time.
	page, err := get("/")
	if err != nil {
		return nil, err
	}
	// The page lists the newest 100 live clusters, and says how many
	// there are (all of them: ?all=1, measured below).
	if n := bytes.Count(page, []byte(`<tr data-cluster=`)); n != min(stored, 100) || !bytes.Contains(page, []byte(fmt.Sprintf("of your %d running clusters", stored))) {
		return nil, fmt.Errorf("the clusters page lists %d clusters, want the newest 100 of %d", n, stored)
	}
	g.pages.take()
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < requests && time.Now().Before(deadline); i++ {
		if _, err := get("/"); err != nil {
			return nil, err
		}
	}
	times := g.pages.take()
	p95, p50 := percentile(times, 0.95), percentile(times, 0.50)
	var blocks []float64
	for b := range 5 {
		part := times[b*len(times)/5 : (b+1)*len(times)/5]
		blocks = append(blocks, cpMs(percentile(part, 0.95)))
	}
	out := []Result{
		{Figure: fig, Case: fmt.Sprintf("clusters page p95, %d running%s", stored, suffix), Unit: "ms", Value: cpMs(p95),
			Target: "p95 <= 50 ms", Met: p95 <= 50*time.Millisecond, Samples: blocks,
			Note: fmt.Sprintf("%d GET / of one user's %d clusters, one at a time, server time (the handler's), %s uncompressed per page; p50 %.2f ms; the reconcile loop shares the %d cores",
				len(times), stored, humanSize(int64(len(page))), cpMs(p50), runtime.NumCPU())},
	}

	// 100 pages open, each with its event stream, nothing changing: the
	// CPU they add to the gateway's own idle work. Measured before the
	// changes below (which the loop takes a while to settle), once it is
	// quiet, alternately without and with the pages, so that a drift of
	// the loop's own work falls on both.
	if _, err := g.waitQuiet(ctx, time.Second, time.Minute); err != nil {
		return out, err
	}
	var base, with float64
	var rounds []float64 // each round's added share of a core, in %
	for range idleRounds {
		b, err := idleCores(ctx, idle/idleRounds)
		if err != nil {
			return out, err
		}
		// As a browser opens them: from the page, which names the
		// generation it shows.
		gen, err := g.core.ClustersGeneration(ctx, "ann")
		if err != nil {
			return out, err
		}
		closeTabs, err := openTabs(ctx, fmt.Sprintf("%s/events?since=%d", g.url, gen), cookie, tabs)
		if err != nil {
			return out, err
		}
		w, err := idleCores(ctx, idle/idleRounds)
		closeTabs()
		if err != nil {
			return out, err
		}
		base, with = base+b/idleRounds, with+w/idleRounds
		rounds = append(rounds, 100*(w-b))
	}
	added := with - base
	out = append(out, Result{Figure: fig, Case: fmt.Sprintf("%d open pages, idle%s", tabs, suffix), Unit: "% of a core",
		Value: 100 * added, Target: "< 1 % of a core", Met: added < 0.01, Samples: rounds,
		Note: fmt.Sprintf("CPU of the gateway's process over %s with %d event streams open (%.2f %% of a core) against %s without (%.2f %%), alternating in %d rounds; the streams' readers run in the same process and count too",
			idle, tabs, 100*with, idle, 100*base, idleRounds)})
	// The same page when each load follows a change of the user's
	// clusters (a scale of one of them), so that nothing rendered before
	// serves it: the cost of the first look after every change.
	names, err := g.core.List(ctx, "ann", []store.Status{store.Running})
	if err != nil || len(names) == 0 {
		return out, fmt.Errorf("listing ann's clusters: %v", err)
	}
	changed := requests / 4
	afterChange := func(path, what, target string, bound time.Duration) error {
		var fresh []time.Duration
		for i := 0; i < changed && time.Now().Before(deadline.Add(2*time.Minute)); i++ {
			// A real change each time: the cluster's workers between 0
			// and 1, from what it has now.
			name := names[i%len(names)].Name
			c, err := g.core.Get(ctx, "ann", name)
			if err != nil {
				return err
			}
			if _, err := g.core.Scale(ctx, ann, name, 1-min(c.DesiredWorkers, 1)); err != nil {
				return err
			}
			g.pages.take()
			if _, err := get(path); err != nil {
				return err
			}
			fresh = append(fresh, g.pages.take()...)
		}
		fp95 := percentile(fresh, 0.95)
		var fblocks []float64
		for b := range 5 {
			fblocks = append(fblocks, cpMs(percentile(fresh[b*len(fresh)/5:(b+1)*len(fresh)/5], 0.95)))
		}
		out = append(out, Result{Figure: fig, Case: fmt.Sprintf("%s p95 after a change, %d running%s", what, stored, suffix), Unit: "ms", Value: cpMs(fp95),
			Target: target, Met: bound == 0 || fp95 <= bound, Samples: fblocks,
			Note: fmt.Sprintf("%d GET %s, each after a scale of one of the clusters (untimed), so each renders the list anew (the ledger read for costs included); p50 %.2f ms",
				len(fresh), path, cpMs(percentile(fresh, 0.5)))})
		return nil
	}
	if err := afterChange("/", "clusters page", "p95 <= 50 ms", 50*time.Millisecond); err != nil {
		return out, err
	}
	if err := afterChange("/?all=1", "all clusters (?all=1)", "info", 0); err != nil {
		return out, err
	}

	// The weight of the page and what it loads, gzip-compressed, as a
	// browser fetches it on its first visit.
	if pgURL == "" {
		// Twice, as two first visits: -compare tests a figure on its
		// repetitions.
		var weights []float64
		var weight int
		var parts string
		for range 2 {
			page, err := get("/")
			if err != nil {
				return out, err
			}
			if weight, parts, err = pageWeight(page, get); err != nil {
				return out, err
			}
			weights = append(weights, float64(weight)/1000)
		}
		out = append(out, Result{Figure: fig, Case: fmt.Sprintf("page weight, clusters page with %d clusters, gzip", stored), Unit: "KB",
			Value: float64(weight) / 1000, Target: "<= 150 KB", Met: weight <= 150_000, Note: parts, Samples: weights})
	}

	o.Log.Info("console", "case", suffix, "p95", p95, "added cores", added)
	return out, nil
}

// idleRounds is how many times the idle CPU is measured without, then
// with, the open pages.
const idleRounds = 3

var assetRE = regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`)

// pageWeight is the compressed size of the page and of the scripts and
// styles it loads, and which they are.
func pageWeight(page []byte, get func(string) ([]byte, error)) (int, string, error) {
	total := gzipSize(page)
	parts := []string{fmt.Sprintf("page %s", humanSize(int64(total)))}
	for _, m := range assetRE.FindAllSubmatch(page, -1) {
		path := string(m[1])
		if strings.HasSuffix(path, ".txt") {
			continue // the licenses' link, not loaded
		}
		b, err := get(path)
		if err != nil {
			return 0, "", err
		}
		n := gzipSize(b)
		total += n
		parts = append(parts, fmt.Sprintf("%s %s", path, humanSize(int64(n))))
	}
	return total, "gzip -6 of each: " + strings.Join(parts, ", "), nil
}

func gzipSize(b []byte) int {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, 6)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Len()
}

// idleCores is this process's CPU over d, in cores.
func idleCores(ctx context.Context, d time.Duration) (float64, error) {
	c0, t0 := cpSelfCPU(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	return (cpSelfCPU() - c0).Seconds() / time.Since(t0).Seconds(), nil
}

// openTabs opens n event streams (at stream) as the cookie's user and
// reads them until closed; it returns once each has its first line.
func openTabs(ctx context.Context, stream string, cookie *http.Cookie, n int) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ready := make(chan error, n)
	tr := &http.Transport{MaxConnsPerHost: 0}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, "GET", stream, nil)
			if err != nil {
				ready <- err
				return
			}
			req.AddCookie(cookie)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				ready <- err
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			if _, err := rd.ReadString('\n'); err != nil {
				ready <- err
				return
			}
			ready <- nil
			_, _ = io.Copy(io.Discard, rd)
		}()
	}
	stop := func() {
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
	}
	for range n {
		select {
		case err := <-ready:
			if err != nil {
				stop()
				return nil, fmt.Errorf("opening the event streams: %w", err)
			}
		case <-time.After(time.Minute):
			stop()
			return nil, fmt.Errorf("opening the event streams: not all %d open in a minute", n)
		}
	}
	return stop, nil
}
