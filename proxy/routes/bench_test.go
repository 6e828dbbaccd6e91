package routes

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchRoutes is the size of the table in these benchmarks.
const benchRoutes = 10000

// benchTable fills a table with benchRoutes clusters named like the
// gateway's ("daskgateway-" is stripped before the lookup, the rest is a
// random hex ID) and returns their names.
func benchTable(tb testing.TB) (*Table, []string) {
	tb.Helper()
	t := New()
	names := make([]string, benchRoutes)
	for i := range names {
		names[i] = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
		t.SetRoute(names[i], "user"+strconv.Itoa(i%100), schedAddr(i), "http://"+dashAddr(i), nil, nil)
	}
	if t.Len() != benchRoutes {
		tb.Fatalf("Len = %d, want %d", t.Len(), benchRoutes)
	}
	return t, names
}

func schedAddr(i int) string { return fmt.Sprintf("10.%d.%d.%d:8786", i>>16&0xff, i>>8&0xff, i&0xff) }
func dashAddr(i int) string  { return fmt.Sprintf("10.%d.%d.%d:8787", i>>16&0xff, i>>8&0xff, i&0xff) }

// fallbackRoute is what the benchmarks' fallback answers for known names:
// a route built once, so the benchmark measures the table and its cache,
// not url.Parse (the gateway's fallback is a store query, see
// store.BenchmarkGetCluster).
var fallbackRoute = RouteFrom("elsewhere", "10.200.0.1:8786", "http://10.200.0.1:8787", nil, nil)

// BenchmarkTableLookup covers the proxy's per-connection route lookup over a
// table of benchRoutes clusters: hits (serial and parallel), misses without
// a fallback, misses answered from the fallback's cache (serial and
// parallel), and misses that reach the fallback every time (a flood of
// made-up names).
func BenchmarkTableLookup(b *testing.B) {
	b.Run("hit", func(b *testing.B) {
		t, names := benchTable(b)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			r, ok := t.Lookup(names[i])
			if !ok || r.Scheduler == "" {
				b.Fatalf("Lookup(%s) missed", names[i])
			}
			if i++; i == len(names) {
				i = 0
			}
		}
		// Spot-check content once: the loop only checks presence.
		if r, _ := t.Lookup(names[7]); r.Scheduler != schedAddr(7) || r.Dashboard.Host != dashAddr(7) {
			b.Fatalf("Lookup(names[7]) = %+v", r)
		}
	})

	b.Run("hit-parallel", func(b *testing.B) {
		t, names := benchTable(b)
		var seed, misses atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919) % benchRoutes)
			for pb.Next() {
				if _, ok := t.Lookup(names[i]); !ok {
					misses.Add(1)
				}
				if i += 7; i >= benchRoutes {
					i -= benchRoutes
				}
			}
		})
		if n := misses.Load(); n != 0 {
			b.Fatalf("%d lookups missed", n)
		}
	})

	b.Run("miss-no-fallback", func(b *testing.B) {
		t, _ := benchTable(b)
		b.ReportAllocs()
		for b.Loop() {
			if r, ok := t.Lookup("not-a-cluster"); ok || r.Owner != "" || r.Dashboard != nil {
				b.Fatalf("Lookup(not-a-cluster) = %+v, %v", r, ok)
			}
		}
	})

	// The name is not in the table but another replica runs it: after the
	// first lookup the answer comes from the fallback cache for cacheTTL.
	b.Run("miss-fallback-cached", func(b *testing.B) {
		t, _ := benchTable(b)
		var calls atomic.Int64
		t.SetFallback(func(string) (Route, bool) { calls.Add(1); return fallbackRoute, true })
		start := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			if r, ok := t.Lookup("on-another-replica"); !ok || r.Scheduler != fallbackRoute.Scheduler {
				b.Fatalf("Lookup(on-another-replica) = %+v, %v", r, ok)
			}
		}
		// One call per cacheTTL, and the first one.
		if max := int64(time.Since(start)/cacheTTL) + 1; calls.Load() > max {
			b.Fatalf("fallback called %d times in %v, want at most %d: the cache is not used", calls.Load(), time.Since(start), max)
		}
	})

	b.Run("miss-fallback-cached-parallel", func(b *testing.B) {
		t, _ := benchTable(b)
		var calls, wrong atomic.Int64
		t.SetFallback(func(string) (Route, bool) { calls.Add(1); return fallbackRoute, true })
		remote := make([]string, 64) // a few clusters run by other replicas
		for i := range remote {
			remote[i] = "remote-" + strconv.Itoa(i)
		}
		var seed atomic.Int64
		start := time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(13) % int64(len(remote)))
			for pb.Next() {
				if r, ok := t.Lookup(remote[i]); !ok || r.Scheduler != fallbackRoute.Scheduler {
					wrong.Add(1)
				}
				if i++; i == len(remote) {
					i = 0
				}
			}
		})
		if n := wrong.Load(); n != 0 {
			b.Fatalf("%d lookups returned the wrong route", n)
		}
		// Concurrent first lookups of a name may each call the fallback;
		// what must not happen is a call per lookup.
		if max := (int64(time.Since(start)/cacheTTL) + 1) * int64(len(remote)) * 4; calls.Load() > max {
			b.Fatalf("fallback called %d times, want at most %d", calls.Load(), max)
		}
	})

	// Every lookup is a name never seen within the cache's bound, so each
	// one reaches the fallback, which knows nothing: what a client sending
	// made-up server names costs, store query excluded.
	b.Run("miss-fallback-uncached", func(b *testing.B) {
		t, _ := benchTable(b)
		var calls atomic.Int64
		t.SetFallback(func(string) (Route, bool) { calls.Add(1); return Route{}, false })
		// More names than the cache holds (10,000 before it is reset), so
		// a name is never still cached when its turn comes again.
		bogus := make([]string, 4*benchRoutes)
		for i := range bogus {
			bogus[i] = fmt.Sprintf("bogus-%032x", i)
		}
		i, lookups := 0, int64(0)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := t.Lookup(bogus[i]); ok {
				b.Fatalf("Lookup(%s) found a route", bogus[i])
			}
			lookups++
			if i++; i == len(bogus) {
				i = 0
			}
		}
		if calls.Load() != lookups {
			b.Fatalf("fallback called %d times for %d lookups of uncached names", calls.Load(), lookups)
		}
	})
}
