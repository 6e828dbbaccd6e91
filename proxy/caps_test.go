package proxy

import (
	"slices"
	"testing"
)

// The waiting places' bookkeeping: which source holds the most, and
// which connection a newcomer may take the place of.
func TestWaitingVictims(t *testing.T) {
	type step struct {
		op     string // "add", "serve", "idle", "remove", "take"
		conn   int    // index into conns, or the new conn's index for add
		source string // add: its source; take: the newcomer's
		want   int    // take: the victim's index, -1 for none
		anyOf  []int  // take: any one of these, not taken before (a tie)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"none waits", []step{{op: "take", source: "a", want: -1}}},
		{"newcomer holds as many", []step{
			{op: "add", conn: 0, source: "a"},
			{op: "take", source: "a", want: -1},
			{op: "take", source: "b", want: 0},
		}},
		{"the heaviest source's oldest", []step{
			{op: "add", conn: 0, source: "light"},
			{op: "add", conn: 1, source: "heavy"},
			{op: "add", conn: 2, source: "heavy"},
			{op: "add", conn: 3, source: "heavy"},
			{op: "take", source: "new", want: 1},
			{op: "take", source: "new", want: 2},
			// A tie: either source may lose one, but not to itself.
			{op: "take", source: "light", want: -1},
			{op: "take", source: "heavy", want: -1},
		}},
		{"serving holds no waiting place", []step{
			{op: "add", conn: 0, source: "light"},
			{op: "add", conn: 1, source: "busy"},
			{op: "add", conn: 2, source: "busy"},
			{op: "serve", conn: 1},
			{op: "serve", conn: 2},
			{op: "serve", conn: 2}, // two requests at once (HTTP/2)
			{op: "idle", conn: 2},
			{op: "take", source: "light", want: -1},
			{op: "idle", conn: 2}, // waits again, as the newest
			// light and busy wait with one place each: either may go
			// first (the tie is not ordered), then the other.
			{op: "take", source: "new", anyOf: []int{0, 2}},
			{op: "take", source: "new", anyOf: []int{0, 2}},
			{op: "take", source: "new", want: -1},
		}},
		{"removed and taken ones never come back", []step{
			{op: "add", conn: 0, source: "a"},
			{op: "add", conn: 1, source: "a"},
			{op: "serve", conn: 0},
			{op: "remove", conn: 0},
			{op: "idle", conn: 0},
			{op: "take", source: "b", want: 1},
			{op: "serve", conn: 1},
			{op: "idle", conn: 1},
			{op: "take", source: "b", want: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w waiting
			conns := map[int]*heldConn{}
			taken := map[int]bool{}
			for i, s := range tt.steps {
				switch s.op {
				case "add":
					conns[s.conn] = &heldConn{source: s.source}
					w.add(conns[s.conn])
				case "serve":
					conns[s.conn].Serving(true)
				case "idle":
					conns[s.conn].Serving(false)
				case "remove":
					w.remove(conns[s.conn])
				case "take":
					got := -1
					if v := w.takeVictim(s.source); v != nil {
						for k, c := range conns {
							if c == v {
								got = k
							}
						}
					}
					if len(s.anyOf) > 0 {
						if !slices.Contains(s.anyOf, got) || taken[got] {
							t.Fatalf("step %d: newcomer from %q took the place of %d, want one of %v not taken before", i, s.source, got, s.anyOf)
						}
						taken[got] = true
					} else if got != s.want {
						t.Fatalf("step %d: newcomer from %q took the place of %d, want %d", i, s.source, got, s.want)
					}
				}
				checkBuckets(t, i, &w)
			}
		})
	}
}

// checkBuckets holds the buckets and most to the lists they summarise.
func checkBuckets(t *testing.T, step int, w *waiting) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	most := 0
	for source, l := range w.bySource {
		if l.Len() == 0 {
			t.Fatalf("step %d: %q listed with no connection", step, source)
		}
		if _, ok := w.buckets[l.Len()][source]; !ok {
			t.Fatalf("step %d: %q (%d waiting) not in its bucket", step, source, l.Len())
		}
		most = max(most, l.Len())
	}
	n := 0
	for _, b := range w.buckets {
		n += len(b)
	}
	if n != len(w.bySource) || most != w.most {
		t.Fatalf("step %d: %d sources in buckets, %d listed; most %d, want %d", step, n, len(w.bySource), w.most, most)
	}
}
