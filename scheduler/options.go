package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// Options are a cluster's options (see clusteropts): ParseOptions makes
// them of a request, within the limits.
type Options = clusteropts.Options

// optionsOf reads the options stored with a cluster. A row that cannot be
// read is an error naming the cluster: the loop fails the cluster with it
// rather than run it sized, timed out and limited by zero options.
func optionsOf(cl *store.Cluster) (Options, error) {
	o, err := clusteropts.Decode([]byte(cl.Options))
	if err != nil {
		return Options{}, fmt.Errorf("cluster %s: its stored options cannot be read: %w", cl.Name, err)
	}
	return o, nil
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
	// InstanceTypes says the backend chooses machines by type: the
	// machine options are offered; GPUTypes are the models it knows.
	InstanceTypes bool
	GPUTypes      []string
	// Spot says the backend can put workers on spot capacity without
	// instance types (Fargate): the spot option is offered. Backends with
	// instance types offer it anyway.
	Spot bool
	// Provider names the backend, for messages.
	Provider string
	// Images says the backend runs container images: the software options
	// (image, env, client_env, allow_mismatch) are offered.
	Images bool
}

// OptionField is one entry of GET /api/v1/options.
type OptionField = clusteropts.Field

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

// Within is the limits as they bind a user whose quota is eff: the
// quota's tighter bounds show in the options published to that user
// (Spec), so that clients offer only what will be admitted. A default
// idle timeout over the quota's maximum comes down to it, as Create
// brings it down.
func (l Limits) Within(eff quota.Effective) Limits {
	if m := eff.Limits.MaxWorkersPerCluster; m != nil && float64(*m) < float64(l.MaxWorkers) {
		l.MaxWorkers = int(*m)
	}
	if m := eff.Limits.MaxIdleTimeout; m != nil && *m != quota.UnlimitedDuration {
		if d := time.Duration(*m); l.MaxIdleTimeout == 0 || d < l.MaxIdleTimeout {
			l.MaxIdleTimeout = d
		}
		if l.DefaultIdleTimeout == 0 || l.DefaultIdleTimeout > l.MaxIdleTimeout {
			l.DefaultIdleTimeout = l.MaxIdleTimeout
		}
	}
	return l
}

// OptionSpec is the options published to who (GET /api/v1/options): the
// limits within who's quota.
func (c *Core) OptionSpec(ctx context.Context, who Who) ([]OptionField, error) {
	eff, err := c.effective(ctx, who)
	if err != nil {
		return nil, err
	}
	return c.cfg.Limits.Within(eff).Spec(), nil
}

// Spec describes the options for the dask-gateway client.
func (l Limits) Spec() []OptionField {
	d := l.Defaults()
	out := []OptionField{
		{Field: "workers", Label: "Workers at start", Default: d.Workers, Spec: map[string]any{"type": "int", "min": 0, "max": l.MaxWorkers}},
		{Field: "worker_threads", Label: "Threads per worker", Default: d.WorkerThreads, Spec: map[string]any{"type": "int", "min": 1, "max": l.MaxWorkerThreads}},
		{Field: "worker_memory", Label: "Memory per worker (GiB)", Default: d.WorkerMemory, Spec: map[string]any{"type": "float", "min": minWorkerMemory, "max": l.MaxWorkerMemory}},
		{Field: "idle_timeout", Label: "Stop after idle for (seconds; 0: never)", Default: d.IdleTimeout, Spec: map[string]any{"type": "int", "min": l.minIdle(), "max": l.maxIdle()}},
		{Field: "environ", Label: "Environment variables of the scheduler and workers (Dask config: DASK_SECTION__KEY)", Default: map[string]string{}, Spec: map[string]any{"type": "mapping"}},
	}
	if l.Images {
		out = append(out,
			OptionField{Field: "image", Label: "Container image (empty: the gateway's default)", Default: "", Spec: map[string]any{"type": "string"}},
			OptionField{Field: "env", Label: "Environment (a published name, or a hash from gateway env build)", Default: "", Spec: map[string]any{"type": "string"}},
			OptionField{Field: "client_env", Label: "The client's versions of the packages that must match", Default: map[string]string{}, Spec: map[string]any{"type": "mapping"}},
			OptionField{Field: "allow_mismatch", Label: "Run even if the image's software differs from the client's", Default: false, Spec: map[string]any{"type": "bool"}},
		)
	}
	if l.InstanceTypes {
		gpuTypes := append([]string{""}, l.GPUTypes...)
		out = append(out,
			OptionField{Field: "worker_cpus", Label: "vCPUs per worker (0: one per thread)", Default: 0, Spec: map[string]any{"type": "int", "min": 0, "max": maxMachineCPUs}},
			OptionField{Field: "worker_gpus", Label: "GPUs per worker", Default: 0, Spec: map[string]any{"type": "int", "min": 0, "max": maxMachineGPUs}},
			OptionField{Field: "gpu_type", Label: "GPU model (empty: any)", Default: "", Spec: map[string]any{"type": "select", "options": gpuTypes}},
			OptionField{Field: "worker_vm_type", Label: "Worker instance type (empty: the cheapest that fits)", Default: "", Spec: map[string]any{"type": "string"}},
			OptionField{Field: "scheduler_vm_type", Label: "Scheduler instance type (empty: chosen)", Default: "", Spec: map[string]any{"type": "string"}},
		)
	}
	if l.InstanceTypes || l.Spot {
		out = append(out, OptionField{Field: "spot", Label: "Workers on spot capacity (on-demand when there is none)", Default: false, Spec: map[string]any{"type": "bool"}})
	}
	return out
}

// parseSoftware reads the software options (only known when the backend
// runs images: ParseOptions refused them otherwise).
func parseSoftware(raw map[string]json.RawMessage, o *Options) []string {
	var problems []string
	if v, ok := raw["image"]; ok {
		if err := json.Unmarshal(v, &o.Image); err != nil || len(o.Image) > 512 || strings.ContainsAny(o.Image, " \t\n") {
			problems = append(problems, fmt.Sprintf("image must be an image reference such as registry.example.com/team/env:tag, got %s", v))
		}
	}
	if v, ok := raw["env"]; ok {
		if err := json.Unmarshal(v, &o.Env); err != nil || len(o.Env) > 128 || strings.ContainsAny(o.Env, " \t\n/:") {
			problems = append(problems, fmt.Sprintf("env must be an environment name or hash, got %s", v))
		}
	}
	if o.Image != "" && o.Env != "" {
		problems = append(problems, "give image or env, not both")
	}
	if v, ok := raw["client_env"]; ok {
		if err := json.Unmarshal(v, &o.ClientEnv); err != nil || len(o.ClientEnv) > 32 {
			problems = append(problems, fmt.Sprintf("client_env must map package names to versions, got %.100s", v))
		}
		for k, ver := range o.ClientEnv {
			if len(k) > 64 || len(ver) > 64 {
				problems = append(problems, fmt.Sprintf("client_env entry %.64q is too long", k))
				break
			}
		}
	}
	if v, ok := raw["allow_mismatch"]; ok {
		if err := json.Unmarshal(v, &o.AllowMismatch); err != nil {
			problems = append(problems, fmt.Sprintf("allow_mismatch must be true or false, got %s", v))
		}
	}
	return problems
}

// The largest machines the clouds sell, bounding what a request may ask.
const (
	maxMachineCPUs = 896
	maxMachineGPUs = 16
)

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
		msg := fmt.Sprintf("unknown option(s) %s; known options are %s", strings.Join(unknown, ", "), strings.Join(fields, ", "))
		if !l.InstanceTypes && (slices.Contains(unknown, "worker_gpus") || slices.Contains(unknown, "gpu_type") || slices.Contains(unknown, "worker_vm_type")) {
			// The likeliest reason: a GPU or typed request to a backend
			// sized by resources (local, Fargate, which has no GPUs).
			msg = fmt.Sprintf("the %s provider has no instance types or GPUs: machines by type and GPU clusters need the ec2 or gce provider (%s)", orDefault(l.Provider, "configured"), msg)
		}
		if !l.Images && (slices.Contains(unknown, "image") || slices.Contains(unknown, "env")) {
			msg = fmt.Sprintf("the %s provider runs no container images: image and env need the docker, ec2, fargate or gce provider (%s)", orDefault(l.Provider, "configured"), msg)
		}
		problems = append(problems, msg)
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
	if v, ok := raw["environ"]; ok {
		if err := json.Unmarshal(v, &o.Environ); err != nil {
			problems = append(problems, "environ must map variable names to string values, such as {\"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET\": \"0.1\"}")
		} else {
			problems = append(problems, clusteropts.CheckEnviron(o.Environ)...)
		}
	}
	problems = append(problems, l.parseMachine(raw, &o)...)
	problems = append(problems, parseSoftware(raw, &o)...)
	if len(problems) > 0 {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return o, nil
}

// parseMachine reads the machine options (only known when the backend has
// instance types: ParseOptions refused them otherwise).
func (l Limits) parseMachine(raw map[string]json.RawMessage, o *Options) []string {
	var problems []string
	for _, f := range []struct {
		name string
		dst  *int
		max  int
	}{{"worker_cpus", &o.WorkerCPUs, maxMachineCPUs}, {"worker_gpus", &o.WorkerGPUs, maxMachineGPUs}} {
		if v, ok := raw[f.name]; ok {
			n, err := intOption(f.name, v, 0, f.max)
			if err != nil {
				problems = append(problems, err.Error())
			}
			*f.dst = n
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"gpu_type", &o.GPUType}, {"worker_vm_type", &o.WorkerVMType}, {"scheduler_vm_type", &o.SchedulerVMType}} {
		if v, ok := raw[f.name]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil || len(*f.dst) > 64 || strings.ContainsAny(*f.dst, " \t\n/") {
				problems = append(problems, fmt.Sprintf("%s must be a name such as %s, got %s", f.name, map[string]string{
					"gpu_type": "a10g or t4", "worker_vm_type": "g5.xlarge", "scheduler_vm_type": "m6i.large"}[f.name], v))
			}
		}
	}
	if o.GPUType != "" && !slices.Contains(l.GPUTypes, o.GPUType) {
		problems = append(problems, fmt.Sprintf("gpu_type %q is not one of %s", o.GPUType, strings.Join(l.GPUTypes, ", ")))
	}
	if o.GPUType != "" && o.WorkerGPUs == 0 && o.WorkerVMType == "" {
		o.WorkerGPUs = 1 // asking for a model asks for one of them
	}
	if v, ok := raw["spot"]; ok {
		if err := json.Unmarshal(v, &o.Spot); err != nil {
			problems = append(problems, fmt.Sprintf("spot must be true or false, got %s", v))
		}
	}
	return problems
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
