package testutil

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/internal/crashpoint"
)

// EachCrashPoint runs f in a subtest for each crash point whose name starts
// with prefix, with a context whose point, instead of crashing, notes that
// it was reached. The subtest fails if f returns without reaching it: a
// backend's tests say at once which point a change no longer reaches.
func EachCrashPoint(t *testing.T, prefix string, f func(t *testing.T, ctx context.Context)) {
	t.Helper()
	n := 0
	for _, name := range crashpoint.All() {
		if !strings.HasPrefix(string(name), prefix) {
			continue
		}
		n++
		t.Run(string(name), func(t *testing.T) {
			points, err := crashpoint.Parse(string(name))
			if err != nil {
				t.Fatal(err)
			}
			var reached atomic.Bool
			f(t, crashpoint.With(t.Context(), points.WithCrash(io.Discard, func() { reached.Store(true) })))
			if !t.Failed() && !reached.Load() {
				t.Errorf("%s is not reached", name)
			}
		})
	}
	if n == 0 {
		t.Fatalf("no crash point is named %s…", prefix)
	}
}
