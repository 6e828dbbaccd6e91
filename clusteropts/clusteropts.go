// Package clusteropts is a cluster's options: the dask-gateway
// "cluster_options" that a request sets, that the gateway stores with the
// cluster (filled in with its defaults) and that the cluster's JSON shows.
// The server, the control loop, the environment service, the client and the
// CLI share this one type and its one decoder; the package imports nothing
// of the gateway's, so that each of them may.
//
// What a request may set, and within which limits, is the server's
// (scheduler.Limits.ParseOptions): it depends on the backend and on
// configuration.
package clusteropts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gatewayhq/gateway/internal/jsonkind"
)

// Options are the options of a cluster.
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

	// Machines, for backends with instance types (EC2, Compute Engine):
	// by resources (the cheapest allowed type that fits is chosen) or by
	// name; Spot puts workers on spot capacity.
	WorkerCPUs      int    `json:"worker_cpus,omitempty"`
	WorkerGPUs      int    `json:"worker_gpus,omitempty"`
	GPUType         string `json:"gpu_type,omitempty"`
	WorkerVMType    string `json:"worker_vm_type,omitempty"`
	SchedulerVMType string `json:"scheduler_vm_type,omitempty"`
	Spot            bool   `json:"spot,omitempty"`

	// The software, for backends that run images (docker and the clouds):
	// Image is a container image reference; Env names an environment
	// instead (the hash POST /api/v1/envs answered, or an environment an
	// admin published), which the gateway turns into Image. ClientEnv are
	// the client's versions of the packages that must match
	// (images.ExpectedVersions): the image's are compared before launch,
	// and every member compares its own at start. AllowMismatch skips both.
	Image         string            `json:"image,omitempty"`
	Env           string            `json:"env,omitempty"`
	ClientEnv     map[string]string `json:"client_env,omitempty"`
	AllowMismatch bool              `json:"allow_mismatch,omitempty"`

	// Environ are environment variables set in the scheduler's and every
	// worker's process, on every backend: Dask config values among them
	// (DaskConfigVar names them), so that two clusters of one environment
	// may differ by configuration alone. CheckEnviron says which are
	// allowed. The values are the owner's: they are not logged.
	Environ map[string]string `json:"environ,omitempty"`
}

// WorkerMemoryBytes is WorkerMemory in bytes, as backends limit memory.
func (o Options) WorkerMemoryBytes() int64 {
	return int64(math.Round(o.WorkerMemory * (1 << 30)))
}

// ErrMalformed is the error of options that are not an object of options
// of the right types.
var ErrMalformed = errors.New("malformed cluster options")

// Decode reads options as stored with a cluster or shown in its JSON.
// Keys it does not know are left alone: a row written by a newer gateway
// (replicas are upgraded one at a time) is read by an older one.
func Decode(b []byte) (Options, error) {
	var o Options
	if len(bytes.TrimSpace(b)) == 0 {
		return Options{}, fmt.Errorf("%w: empty, want a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			if ute.Field == "" {
				return Options{}, fmt.Errorf("%w: want a JSON object, got %s", ErrMalformed, ute.Value)
			}
			return Options{}, fmt.Errorf("%w: %s: want %s, got %s", ErrMalformed, ute.Field, jsonkind.Of(ute.Type), ute.Value)
		}
		return Options{}, fmt.Errorf("%w: not valid JSON: %v", ErrMalformed, err)
	}
	return o, nil
}

// Request is what a client asks for: the options it sets, the others left
// to the gateway, which fills them in with its defaults (and brings a
// default idle timeout within the caller's quota, which it does not do to
// one that was asked for). A zero field is left out unless Set names it:
// idle_timeout 0 asks for no idle timeout, where leaving it out takes the
// default. Fields the backend does not offer must be left out (a request
// naming them is refused).
type Request struct {
	Options
	// Set are the JSON names of fields sent even when zero.
	Set []string
}

// Field names whose zero is a choice of its own, for Request.Set.
const (
	FieldWorkers     = "workers"
	FieldIdleTimeout = "idle_timeout"
)

// MarshalJSON is the request's cluster_options object.
func (r Request) MarshalJSON() ([]byte, error) {
	if r.MaxLifetime != 0 {
		return nil, errors.New("cluster options: max_lifetime comes from the owner's quota, not from a request")
	}
	fields := jsonFields()
	for _, f := range r.Set {
		if _, ok := fields[f]; !ok {
			return nil, fmt.Errorf("cluster options: %q is no option", f)
		}
	}
	v := reflect.ValueOf(r.Options)
	out := make(map[string]any, len(fields))
	for name, i := range fields {
		if fv := v.Field(i); !fv.IsZero() || slices.Contains(r.Set, name) {
			out[name] = fv.Interface()
		}
	}
	return json.Marshal(out)
}

// jsonFields maps the options' JSON names to their fields' indexes.
func jsonFields() map[string]int {
	t := reflect.TypeFor[Options]()
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = i
	}
	return out
}

// RequestFrom makes a Request of options given as a map (as the benchmark
// records them): every key it holds counts as set; a key that is no option
// is an error naming it.
func RequestFrom(m map[string]any) (Request, error) {
	fields := jsonFields()
	var unknown []string
	set := make([]string, 0, len(m))
	for k := range m {
		if _, ok := fields[k]; !ok {
			unknown = append(unknown, k)
		}
		set = append(set, k)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Request{}, fmt.Errorf("%w: unknown option(s) %s", ErrMalformed, strings.Join(unknown, ", "))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	o, err := Decode(b)
	if err != nil {
		return Request{}, err
	}
	sort.Strings(set)
	return Request{Options: o, Set: set}, nil
}

// Field is one option as GET /api/v1/options publishes it (dask-gateway's
// cluster_options spec, which its options widget renders): the control
// loop makes the list (scheduler.Limits.Spec); the API and the web
// console show it.
type Field struct {
	Field   string         `json:"field"`
	Label   string         `json:"label"`
	Default any            `json:"default"`
	Spec    map[string]any `json:"spec"`
}
