// Package crashpoint names the moments where a crash of the gateway could
// leave its durable state and the outside world disagreeing: between a
// write to the store and the call to a backend it announces, between a
// backend's answer and the write that records it, around the route and the
// ledger and the lease. Code marks each such moment with Hit.
//
// In normal operation nothing happens at a point. In the crash test mode
// (the GATEWAY_CRASH_AT environment variable of `gateway serve` and
// `gateway dev`) the process kills itself with SIGKILL at a named point, at
// its Nth hit, or at the Nth point hit of any name, so that the test of
// crash safety can stop the gateway at every boundary in turn, as kill -9
// or a power cut would: no deferred function runs, nothing is flushed.
//
// The points travel in the context (like net/http/httptrace's hooks), so
// that the core, the store and every backend can mark them without a
// package-level switch.
package crashpoint

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvVar is the environment variable that turns the test mode on:
// "NAME" crashes at the first hit of the point NAME, "NAME@N" at its Nth
// hit, "@N" at the Nth hit of any point.
const EnvVar = "GATEWAY_CRASH_AT"

// Marker starts the line written to standard error just before the crash,
// which tells a test that its point was reached (and not some other
// failure).
const Marker = "crashpoint: crashing at "

// Points decides where the process crashes. A nil *Points never crashes.
type Points struct {
	target Name  // "" means any point
	nth    int64 // the hit (1-based) that crashes
	hits   atomic.Int64
	out    io.Writer
	crash  func()
}

// Parse reads a spec in EnvVar's syntax. "" returns nil (no crashes).
// Given the points there are (known), a name not among them is refused: a
// test would otherwise wait for a crash that never comes.
func Parse(spec string, known ...Name) (*Points, error) {
	if spec == "" {
		return nil, nil
	}
	name, count, hasCount := strings.Cut(spec, "@")
	p := &Points{target: Name(name), nth: 1, out: os.Stderr, crash: killSelf}
	if hasCount {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("crashpoint: %s=%q: the count after @ must be a whole number from 1", EnvVar, spec)
		}
		p.nth = n
	}
	if name == "" && !hasCount {
		return nil, fmt.Errorf("crashpoint: %s=%q: give a point's name, NAME@N, or @N", EnvVar, spec)
	}
	if name != "" && len(known) > 0 && !slices.Contains(known, Name(name)) {
		return nil, fmt.Errorf("crashpoint: %s=%q: no such point; the points are listed by `gateway debug crash-points`", EnvVar, spec)
	}
	return p, nil
}

// WithCrash replaces what happens at the crash (a test of this package, or
// of code that marks points, records instead of dying).
func (p *Points) WithCrash(out io.Writer, crash func()) *Points {
	p.out, p.crash = out, crash
	return p
}

// Hits is how many hits of the target (or of any point) there were.
func (p *Points) Hits() int64 {
	if p == nil {
		return 0
	}
	return p.hits.Load()
}

func (p *Points) hit(name Name) {
	if p.target != "" && p.target != name {
		return
	}
	if n := p.hits.Add(1); n == p.nth {
		fmt.Fprintf(p.out, "%s%s (hit %d)\n", Marker, name, n)
		p.crash()
	}
}

// killSelf is what kill -9 from outside does: nothing after it runs.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is delivered asynchronously; never go on
}

type ctxKey struct{}

// With returns ctx carrying p; every Hit under it consults p.
func With(ctx context.Context, p *Points) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the points ctx carries (nil when none).
func From(ctx context.Context) *Points {
	p, _ := ctx.Value(ctxKey{}).(*Points)
	return p
}

// Hit marks the point name. Outside the test mode it costs one context
// lookup.
func Hit(ctx context.Context, name Name) {
	if p := From(ctx); p != nil {
		p.hit(name)
	}
}
