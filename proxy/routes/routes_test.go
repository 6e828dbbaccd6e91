package routes

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSetRouteDashboard(t *testing.T) {
	tests := []struct {
		name      string
		dashboard string
		wantHost  string // "" means Dashboard must be nil
		wantURL   string
	}{
		{"http with port", "http://10.0.0.5:8787", "10.0.0.5:8787", "http://10.0.0.5:8787"},
		{"https with path", "https://sched.internal:8787/status", "sched.internal:8787", "https://sched.internal:8787/status"},
		{"ipv6", "http://[fd00::1]:8787", "[fd00::1]:8787", "http://[fd00::1]:8787"},
		{"empty", "", "", ""},
		{"host:port without scheme", "localhost:8787", "", ""},
		{"path only", "/dashboard", "", ""},
		{"scheme without host", "http://", "", ""},
		{"unparsable: bad ipv6", "http://[::1", "", ""},
		{"unparsable: control char", "http://host\x7f:8787", "", ""},
		{"unparsable: missing scheme", "://host:8787", "", ""},
		{"unparsable: bad escape", "http://host:8787/%zz", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New()
			tb.SetRoute("c1", "alice", "10.0.0.5:8786", tt.dashboard, nil, nil)
			r, ok := tb.Lookup("c1")
			if !ok {
				t.Fatalf("Lookup(c1) missing after SetRoute with dashboard %q", tt.dashboard)
			}
			// The scheduler route survives whatever the dashboard URL is.
			if r.Owner != "alice" || r.Scheduler != "10.0.0.5:8786" {
				t.Errorf("route = %+v, want owner alice, scheduler 10.0.0.5:8786", r)
			}
			if tt.wantHost == "" {
				if r.Dashboard != nil {
					t.Errorf("Dashboard = %v, want nil for %q", r.Dashboard, tt.dashboard)
				}
				return
			}
			if r.Dashboard == nil {
				t.Fatalf("Dashboard = nil, want host %s", tt.wantHost)
			}
			if r.Dashboard.Host != tt.wantHost || r.Dashboard.String() != tt.wantURL {
				t.Errorf("Dashboard = %s (host %s), want %s (host %s)", r.Dashboard, r.Dashboard.Host, tt.wantURL, tt.wantHost)
			}
			if tb.Len() != 1 {
				t.Errorf("Len = %d, want 1", tb.Len())
			}
		})
	}
}

func TestTableOperations(t *testing.T) {
	type op struct {
		kind                           string // set, delete
		cluster, owner, sched, dashURL string
	}
	type want struct {
		cluster   string
		ok        bool
		owner     string
		sched     string
		dashboard string // "" means nil
	}
	tests := []struct {
		name    string
		ops     []op
		wantLen int
		want    []want
	}{
		{
			name:    "empty table",
			wantLen: 0,
			want:    []want{{cluster: "c1"}, {cluster: ""}},
		},
		{
			name:    "set one",
			ops:     []op{{"set", "c1", "alice", "h1:8786", "http://h1:8787"}},
			wantLen: 1,
			want: []want{
				{"c1", true, "alice", "h1:8786", "http://h1:8787"},
				{cluster: "c2"},
				{cluster: "C1"}, // names are case-sensitive
			},
		},
		{
			name: "set several",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", ""},
				{"set", "c2", "bob", "h2:8786", "http://h2:8787"},
				{"set", "c3", "alice", "h3:8786", "http://h3:8787"},
			},
			wantLen: 3,
			want: []want{
				{"c1", true, "alice", "h1:8786", ""},
				{"c2", true, "bob", "h2:8786", "http://h2:8787"},
				{"c3", true, "alice", "h3:8786", "http://h3:8787"},
			},
		},
		{
			name: "replace changes every field",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", "http://h1:8787"},
				{"set", "c1", "bob", "h9:9000", "http://h9:9001"},
			},
			wantLen: 1,
			want:    []want{{"c1", true, "bob", "h9:9000", "http://h9:9001"}},
		},
		{
			name: "replace with a bad dashboard drops the old dashboard",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", "http://h1:8787"},
				{"set", "c1", "alice", "h2:8786", "h2:8787"},
			},
			wantLen: 1,
			want:    []want{{"c1", true, "alice", "h2:8786", ""}},
		},
		{
			name: "delete",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", ""},
				{"set", "c2", "bob", "h2:8786", ""},
				{kind: "delete", cluster: "c1"},
			},
			wantLen: 1,
			want:    []want{{cluster: "c1"}, {"c2", true, "bob", "h2:8786", ""}},
		},
		{
			name: "delete missing is a no-op",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", ""},
				{kind: "delete", cluster: "nope"},
				{kind: "delete", cluster: "nope"},
			},
			wantLen: 1,
			want:    []want{{"c1", true, "alice", "h1:8786", ""}},
		},
		{
			name: "delete then set again",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", "http://h1:8787"},
				{kind: "delete", cluster: "c1"},
				{"set", "c1", "carol", "h3:8786", ""},
			},
			wantLen: 1,
			want:    []want{{"c1", true, "carol", "h3:8786", ""}},
		},
		{
			name: "delete everything",
			ops: []op{
				{"set", "c1", "alice", "h1:8786", ""},
				{kind: "delete", cluster: "c1"},
			},
			wantLen: 0,
			want:    []want{{cluster: "c1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New()
			for _, o := range tt.ops {
				switch o.kind {
				case "set":
					tb.SetRoute(o.cluster, o.owner, o.sched, o.dashURL, nil, nil)
				case "delete":
					tb.DeleteRoute(o.cluster)
				default:
					t.Fatalf("bad op %q", o.kind)
				}
			}
			if got := tb.Len(); got != tt.wantLen {
				t.Errorf("Len = %d, want %d", got, tt.wantLen)
			}
			for _, w := range tt.want {
				r, ok := tb.Lookup(w.cluster)
				if ok != w.ok {
					t.Errorf("Lookup(%q) ok = %v, want %v (route %+v)", w.cluster, ok, w.ok, r)
					continue
				}
				if !ok {
					if r.Owner != "" || r.Scheduler != "" || r.Dashboard != nil || r.ClusterCert != nil {
						t.Errorf("Lookup(%q) missing but returned %+v, want zero Route", w.cluster, r)
					}
					continue
				}
				if r.Owner != w.owner || r.Scheduler != w.sched {
					t.Errorf("Lookup(%q) = owner %q scheduler %q, want %q %q", w.cluster, r.Owner, r.Scheduler, w.owner, w.sched)
				}
				switch {
				case w.dashboard == "" && r.Dashboard != nil:
					t.Errorf("Lookup(%q).Dashboard = %s, want nil", w.cluster, r.Dashboard)
				case w.dashboard != "" && (r.Dashboard == nil || r.Dashboard.String() != w.dashboard):
					t.Errorf("Lookup(%q).Dashboard = %v, want %s", w.cluster, r.Dashboard, w.dashboard)
				}
			}
		})
	}
}

// TestConcurrentReadersAndWriters runs under -race: writers keep setting and
// deleting routes while readers look them up. Every route a reader sees must
// be one a writer wrote whole, never a mix.
func TestConcurrentReadersAndWriters(t *testing.T) {
	const (
		clusters = 64
		writers  = 4
		readers  = 8
		rounds   = 2000 // per writer
		lookups  = 4000 // per reader
	)
	tb := New()
	// For cluster c, generation g writes owner "o<c>-<g>", scheduler
	// "s<c>-<g>:8786" and dashboard "http://d<c>-<g>:8787".
	var wg sync.WaitGroup
	var done, hits atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				c := (i*writers + w) % clusters
				g := strconv.Itoa(i)
				id := strconv.Itoa(c)
				if i%5 == 4 {
					tb.DeleteRoute("c" + id)
					continue
				}
				dash := "http://d" + id + "-" + g + ":8787"
				if i%7 == 0 {
					dash = "" // some routes have no dashboard
				}
				tb.SetRoute("c"+id, "o"+id+"-"+g, "s"+id+"-"+g+":8786", dash, nil, nil)
			}
		}(w)
	}
	errs := make(chan error, readers)
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; i < lookups; i++ {
				c := (i + r) % clusters
				id := strconv.Itoa(c)
				route, ok := tb.Lookup("c" + id)
				done.Add(1)
				if n := tb.Len(); n < 0 || n > clusters {
					errs <- fmt.Errorf("Len = %d, outside [0,%d]", n, clusters)
					return
				}
				if !ok {
					continue
				}
				hits.Add(1)
				g, found := strings.CutPrefix(route.Owner, "o"+id+"-")
				if !found {
					errs <- fmt.Errorf("c%s: owner %q belongs to another cluster", id, route.Owner)
					return
				}
				if want := "s" + id + "-" + g + ":8786"; route.Scheduler != want {
					errs <- fmt.Errorf("c%s: torn route: owner %q with scheduler %q", id, route.Owner, route.Scheduler)
					return
				}
				if route.Dashboard != nil {
					if want := "d" + id + "-" + g + ":8787"; route.Dashboard.Host != want {
						errs <- fmt.Errorf("c%s: torn route: owner %q with dashboard %s", id, route.Owner, route.Dashboard)
						return
					}
				}
			}
		}(r)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if done.Load() == 0 || hits.Load() == 0 {
		t.Errorf("readers did %d lookups with %d hits; the test exercised nothing", done.Load(), hits.Load())
	}
	if n := tb.Len(); n > clusters {
		t.Errorf("final Len = %d, want at most %d", n, clusters)
	}
}

func BenchmarkLookup(b *testing.B) {
	const n = 10000
	tb := New()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("daskgateway-%032x", i)
		tb.SetRoute(names[i], "user"+strconv.Itoa(i%100), fmt.Sprintf("10.%d.%d.%d:8786", i>>16, (i>>8)&0xff, i&0xff), fmt.Sprintf("http://10.%d.%d.%d:8787", i>>16, (i>>8)&0xff, i&0xff), nil, nil)

	}
	if tb.Len() != n {
		b.Fatalf("Len = %d, want %d", tb.Len(), n)
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine walks the names from its own offset with a stride
		// coprime to n, so goroutines do not hammer the same keys in step.
		i := int(seed.Add(7919)) % n
		misses := 0
		for pb.Next() {
			if _, ok := tb.Lookup(names[i]); !ok {
				misses++
			}
			i += 7
			if i >= n {
				i -= n
			}
		}
		if misses != 0 {
			b.Errorf("%d lookups missed", misses)
		}
	})
}
