package scheduler

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Options are the user-settable options of a cluster: the dask-gateway
// "cluster_options", with the same spec format so its Python client can
// show and validate them.
type Options struct {
	Workers       int     `json:"workers"`
	WorkerThreads int     `json:"worker_threads"`
	WorkerMemory  float64 `json:"worker_memory"` // GiB, as dask-gateway's worker_memory
	// IdleTimeout stops the cluster after this many seconds without tasks
	// or clients; 0 means never.
	IdleTimeout int `json:"idle_timeout"`
	// MaxLifetime (seconds) is set by the gateway from the owner's quota,
	// never by a request: the cluster stops after running this long.
	MaxLifetime int `json:"max_lifetime,omitempty"`
}

// Limits bound what one cluster may ask for.
type Limits struct {
	MaxWorkers       int
	MaxWorkerThreads int
	MaxWorkerMemory  float64 // GiB
	// DefaultIdleTimeout applies when a request sets none; MaxIdleTimeout
	// bounds what a request may set (0: no bound, and 0 allowed = never).
	DefaultIdleTimeout time.Duration
	MaxIdleTimeout     time.Duration
}

// OptionField is one entry of GET /api/v1/options.
type OptionField struct {
	Field   string         `json:"field"`
	Label   string         `json:"label"`
	Default any            `json:"default"`
	Spec    map[string]any `json:"spec"`
}

const minWorkerMemory = 0.25 // GiB: below this a Dask worker pauses at once

// minIdle is 0 (never) unless admins bound the idle timeout, and then a
// minute: shorter would stop clusters between two interactive commands.
func (l Limits) minIdle() int {
	if l.MaxIdleTimeout > 0 {
		return 60
	}
	return 0
}

func (l Limits) maxIdle() int {
	if l.MaxIdleTimeout > 0 {
		return int(l.MaxIdleTimeout / time.Second)
	}
	return 365 * 24 * 3600
}

// Defaults are used for fields a request leaves out, within the limits.
func (l Limits) Defaults() Options {
	return Options{Workers: 0, WorkerThreads: 1, WorkerMemory: math.Min(2, l.MaxWorkerMemory), IdleTimeout: int(l.DefaultIdleTimeout / time.Second)}
}

// Spec describes the options for the dask-gateway client.
func (l Limits) Spec() []OptionField {
	d := l.Defaults()
	return []OptionField{
		{Field: "workers", Label: "Workers at start", Default: d.Workers, Spec: map[string]any{"type": "int", "min": 0, "max": l.MaxWorkers}},
		{Field: "worker_threads", Label: "Threads per worker", Default: d.WorkerThreads, Spec: map[string]any{"type": "int", "min": 1, "max": l.MaxWorkerThreads}},
		{Field: "worker_memory", Label: "Memory per worker (GiB)", Default: d.WorkerMemory, Spec: map[string]any{"type": "float", "min": minWorkerMemory, "max": l.MaxWorkerMemory}},
		{Field: "idle_timeout", Label: "Stop after idle for (seconds; 0: never)", Default: d.IdleTimeout, Spec: map[string]any{"type": "int", "min": l.minIdle(), "max": l.maxIdle()}},
	}
}

// ParseOptions validates raw cluster options against the limits. Every
// problem is reported at once, each naming the field and what is allowed.
func (l Limits) ParseOptions(raw map[string]json.RawMessage) (Options, error) {
	o := l.Defaults()
	known := map[string]bool{}
	for _, f := range l.Spec() {
		known[f.Field] = true
	}
	var problems []string
	var unknown []string
	given := make(map[string]json.RawMessage, len(raw))
	for k, v := range raw {
		switch {
		case !known[k]:
			unknown = append(unknown, k)
		case string(v) != "null": // null means "the default", as if left out
			given[k] = v
		}
	}
	raw = given
	if len(unknown) > 0 {
		sort.Strings(unknown)
		fields := make([]string, 0, len(known))
		for k := range known {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		problems = append(problems, fmt.Sprintf("unknown option(s) %s; known options are %s",
			strings.Join(unknown, ", "), strings.Join(fields, ", ")))
	}
	if v, ok := raw["workers"]; ok {
		n, err := intOption("workers", v, 0, l.MaxWorkers)
		if err != nil {
			problems = append(problems, err.Error())
		}
		o.Workers = n
	}
	if v, ok := raw["worker_threads"]; ok {
		n, err := intOption("worker_threads", v, 1, l.MaxWorkerThreads)
		if err != nil {
			problems = append(problems, err.Error())
		}
		o.WorkerThreads = n
	}
	if v, ok := raw["worker_memory"]; ok {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) {
			problems = append(problems, fmt.Sprintf("worker_memory must be a number of GiB, got %s", v))
		} else if f < minWorkerMemory || f > l.MaxWorkerMemory {
			problems = append(problems, fmt.Sprintf("worker_memory must be between %g and %g GiB, got %g", minWorkerMemory, l.MaxWorkerMemory, f))
		}
		o.WorkerMemory = f
	}
	if v, ok := raw["idle_timeout"]; ok {
		n, err := intOption("idle_timeout", v, l.minIdle(), l.maxIdle())
		if err != nil {
			problems = append(problems, err.Error()+" seconds")
		}
		o.IdleTimeout = n
	}
	if len(problems) > 0 {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return o, nil
}

func intOption(name string, v json.RawMessage, lo, hi int) (int, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s must be a whole number, got %s", name, v)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%s must be between %d and %d, got %s", name, lo, hi, v)
	}
	return int(f), nil
}
