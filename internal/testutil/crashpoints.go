package testutil

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/internal/crashpoint"
)

// EachCrashPoint runs f in a subtest for each of a backend's crash points
// (its registration's), with a context whose point, instead of crashing,
// notes that it was reached. The subtest fails if f returns without
// reaching it: a backend's tests say at once which point a change no
// longer reaches.
func EachCrashPoint(t *testing.T, names []crashpoint.Name, f func(t *testing.T, ctx context.Context)) {
	t.Helper()
	for _, name := range names {
		t.Run(string(name), func(t *testing.T) {
			points, err := crashpoint.Parse(string(name), names...)
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
	if len(names) == 0 {
		t.Fatal("no crash points to run")
	}
}
