package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/scheduler"
)

var testLimits = scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8}

// raw turns field -> JSON text into ParseOptions' input.
func raw(kv map[string]string) map[string]json.RawMessage {
	if kv == nil {
		return nil
	}
	out := map[string]json.RawMessage{}
	for k, v := range kv {
		out[k] = json.RawMessage(v)
	}
	return out
}

func TestParseOptions(t *testing.T) {
	def := testLimits.Defaults()
	if !reflect.DeepEqual(def, scheduler.Options{Workers: 0, WorkerThreads: 1, WorkerMemory: 2}) {
		t.Fatalf("Defaults %+v", def)
	}
	cases := []struct {
		name string
		in   map[string]string
		want scheduler.Options
		errs []string // when set: ParseOptions fails, its message holds each
	}{
		// defaults
		{name: "nil", in: nil, want: def},
		{name: "empty", in: map[string]string{}, want: def},
		{name: "all set", in: map[string]string{"workers": "3", "worker_threads": "2", "worker_memory": "4.5"},
			want: scheduler.Options{Workers: 3, WorkerThreads: 2, WorkerMemory: 4.5}},

		// environ: on every backend, names checked, reserved ones refused
		{name: "environ", in: map[string]string{"environ": `{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "MY_FLAG": ""}`},
			want: scheduler.Options{WorkerThreads: 1, WorkerMemory: 2, Environ: map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "MY_FLAG": ""}}},
		{name: "environ not a mapping", in: map[string]string{"environ": `["A=1"]`}, errs: []string{"environ must map variable names to string values"}},
		{name: "environ number value", in: map[string]string{"environ": `{"A": 1}`}, errs: []string{"environ must map variable names to string values"}},
		{name: "environ bad name", in: map[string]string{"environ": `{"1A": "x", "A-B": "y"}`}, errs: []string{`environ variable "1A": a name is letters`, `environ variable "A-B"`}},
		{name: "environ reserved", in: map[string]string{"environ": `{"LD_PRELOAD": "/tmp/x.so", "path": "/tmp", "GATEWAY_OWNER_ID": "x", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": "/x", "PYTHONSTARTUP": "/x"}`},
			errs: []string{"LD_PRELOAD is reserved", "path is reserved", "GATEWAY_OWNER_ID is reserved", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE is reserved", "PYTHONSTARTUP is reserved"}},
		{name: "environ multi-line value", in: map[string]string{"environ": `{"A": "x\ny"}`}, errs: []string{"environ variable A: the value holds a line break"}},

		// workers: whole numbers in [0, MaxWorkers]
		{name: "workers min", in: map[string]string{"workers": "0"}, want: def},
		{name: "workers max", in: map[string]string{"workers": "10"}, want: scheduler.Options{Workers: 10, WorkerThreads: 1, WorkerMemory: 2}},
		{name: "workers whole float", in: map[string]string{"workers": "3.0"}, want: scheduler.Options{Workers: 3, WorkerThreads: 1, WorkerMemory: 2}},
		{name: "workers exponent", in: map[string]string{"workers": "1e1"}, want: scheduler.Options{Workers: 10, WorkerThreads: 1, WorkerMemory: 2}},
		{name: "workers negative zero", in: map[string]string{"workers": "-0"}, want: def},
		{name: "workers above max", in: map[string]string{"workers": "11"}, errs: []string{"workers must be between 0 and 10, got 11"}},
		{name: "workers far above max", in: map[string]string{"workers": "1e2"}, errs: []string{"workers must be between 0 and 10, got 1e2"}},
		{name: "workers negative", in: map[string]string{"workers": "-1"}, errs: []string{"workers must be between 0 and 10, got -1"}},
		{name: "workers fraction", in: map[string]string{"workers": "2.5"}, errs: []string{"workers must be a whole number, got 2.5"}},
		{name: "workers string", in: map[string]string{"workers": `"2"`}, errs: []string{`workers must be a whole number, got "2"`}},
		{name: "workers bool", in: map[string]string{"workers": "true"}, errs: []string{"workers must be a whole number, got true"}},
		{name: "workers list", in: map[string]string{"workers": "[1]"}, errs: []string{"workers must be a whole number, got [1]"}},
		{name: "workers object", in: map[string]string{"workers": `{"n":1}`}, errs: []string{"workers must be a whole number"}},
		{name: "workers overflow", in: map[string]string{"workers": "1e400"}, errs: []string{"workers must be a whole number, got 1e400"}},
		{name: "workers NaN string", in: map[string]string{"workers": `"NaN"`}, errs: []string{`workers must be a whole number, got "NaN"`}},
		{name: "workers bare NaN", in: map[string]string{"workers": "NaN"}, errs: []string{"workers must be a whole number, got NaN"}},
		{name: "workers Infinity", in: map[string]string{"workers": "Infinity"}, errs: []string{"workers must be a whole number, got Infinity"}},

		// worker_threads: whole numbers in [1, MaxWorkerThreads]
		{name: "threads min", in: map[string]string{"worker_threads": "1"}, want: def},
		{name: "threads max", in: map[string]string{"worker_threads": "4"}, want: scheduler.Options{Workers: 0, WorkerThreads: 4, WorkerMemory: 2}},
		{name: "threads zero", in: map[string]string{"worker_threads": "0"}, errs: []string{"worker_threads must be between 1 and 4, got 0"}},
		{name: "threads above max", in: map[string]string{"worker_threads": "5"}, errs: []string{"worker_threads must be between 1 and 4, got 5"}},
		{name: "threads fraction", in: map[string]string{"worker_threads": "1.5"}, errs: []string{"worker_threads must be a whole number, got 1.5"}},
		{name: "threads string", in: map[string]string{"worker_threads": `"four"`}, errs: []string{`worker_threads must be a whole number, got "four"`}},
		{name: "threads null is the default", in: map[string]string{"worker_threads": "null"}, want: def},

		// worker_memory: GiB in [0.25, MaxWorkerMemory]
		{name: "memory min", in: map[string]string{"worker_memory": "0.25"}, want: scheduler.Options{Workers: 0, WorkerThreads: 1, WorkerMemory: 0.25}},
		{name: "memory max", in: map[string]string{"worker_memory": "8"}, want: scheduler.Options{Workers: 0, WorkerThreads: 1, WorkerMemory: 8}},
		{name: "memory integer", in: map[string]string{"worker_memory": "1"}, want: scheduler.Options{Workers: 0, WorkerThreads: 1, WorkerMemory: 1}},
		{name: "memory below min", in: map[string]string{"worker_memory": "0.24"}, errs: []string{"worker_memory must be between 0.25 and 8 GiB, got 0.24"}},
		{name: "memory above max", in: map[string]string{"worker_memory": "8.01"}, errs: []string{"worker_memory must be between 0.25 and 8 GiB, got 8.01"}},
		{name: "memory zero", in: map[string]string{"worker_memory": "0"}, errs: []string{"worker_memory must be between 0.25 and 8 GiB, got 0"}},
		{name: "memory negative", in: map[string]string{"worker_memory": "-2"}, errs: []string{"worker_memory must be between 0.25 and 8 GiB, got -2"}},
		{name: "memory string", in: map[string]string{"worker_memory": `"2"`}, errs: []string{`worker_memory must be a number of GiB, got "2"`}},
		{name: "memory with unit", in: map[string]string{"worker_memory": `"2GiB"`}, errs: []string{`worker_memory must be a number of GiB, got "2GiB"`}},
		{name: "memory bare NaN", in: map[string]string{"worker_memory": "NaN"}, errs: []string{"worker_memory must be a number of GiB, got NaN"}},
		{name: "memory NaN string", in: map[string]string{"worker_memory": `"NaN"`}, errs: []string{`worker_memory must be a number of GiB, got "NaN"`}},
		{name: "memory overflow", in: map[string]string{"worker_memory": "1e400"}, errs: []string{"worker_memory must be a number of GiB, got 1e400"}},
		{name: "memory -Infinity", in: map[string]string{"worker_memory": "-Infinity"}, errs: []string{"worker_memory must be a number of GiB, got -Infinity"}},
		{name: "memory null is the default", in: map[string]string{"worker_memory": "null"}, want: def},

		// unknown options name the known ones
		{name: "unknown", in: map[string]string{"image": `"evil"`},
			errs: []string{"unknown option(s) image; known options are environ, idle_timeout, worker_memory, worker_threads, workers"}},
		{name: "unknown several, sorted", in: map[string]string{"zeta": "1", "cores": "1", "workers": "1"},
			errs: []string{"unknown option(s) cores, zeta; known options are environ, idle_timeout, worker_memory, worker_threads, workers"}},
		{name: "names are case sensitive", in: map[string]string{"Workers": "1"},
			errs: []string{"unknown option(s) Workers;"}},

		// every problem at once, in a stable order
		{name: "several problems", in: map[string]string{"workers": "11", "worker_threads": "0", "worker_memory": `"x"`, "zzz": "1"},
			errs: []string{"invalid request: unknown option(s) zzz; known options are environ, idle_timeout, worker_memory, worker_threads, workers; " +
				"workers must be between 0 and 10, got 11; worker_threads must be between 1 and 4, got 0; " +
				`worker_memory must be a number of GiB, got "x"`}},
		{name: "two bad values", in: map[string]string{"workers": "-1", "worker_memory": "100"},
			errs: []string{"workers must be between 0 and 10, got -1", "worker_memory must be between 0.25 and 8 GiB, got 100"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testLimits.ParseOptions(raw(tc.in))
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("ParseOptions(%v): %v", tc.in, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("ParseOptions(%v) = %+v, want %+v", tc.in, got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseOptions(%v) = %+v, want an error", tc.in, got)
			}
			if !errors.Is(err, scheduler.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if !reflect.DeepEqual(got, scheduler.Options{}) {
				t.Errorf("options %+v returned with an error", got)
			}
		})
	}
}

func TestLimitsSpec(t *testing.T) {
	for _, l := range []scheduler.Limits{
		testLimits,
		{MaxWorkers: 50, MaxWorkerThreads: 64, MaxWorkerMemory: 256},
		{MaxWorkers: 1, MaxWorkerThreads: 1, MaxWorkerMemory: 2},
		{MaxWorkers: 1, MaxWorkerThreads: 1, MaxWorkerMemory: 2, DefaultIdleTimeout: 20 * time.Minute, MaxIdleTimeout: time.Hour},
	} {
		t.Run(fmt.Sprintf("%+v", l), func(t *testing.T) {
			spec := l.Spec()
			def := l.Defaults()
			want := []struct {
				field, typ string
				def, min   any
				max        any
			}{
				{"workers", "int", def.Workers, 0, l.MaxWorkers},
				{"worker_threads", "int", def.WorkerThreads, 1, l.MaxWorkerThreads},
				{"worker_memory", "float", def.WorkerMemory, 0.25, l.MaxWorkerMemory},
				{"idle_timeout", "int", def.IdleTimeout, map[bool]int{true: 60, false: 0}[l.MaxIdleTimeout > 0],
					map[bool]int{true: int(l.MaxIdleTimeout / time.Second), false: 365 * 24 * 3600}[l.MaxIdleTimeout > 0]},
			}
			if len(spec) != len(want)+1 || spec[len(want)].Field != "environ" || spec[len(want)].Spec["type"] != "mapping" {
				t.Fatalf("%d fields (%+v), want %d and environ, a mapping, on every backend", len(spec), spec, len(want))
			}
			for i, w := range want {
				f := spec[i]
				if f.Field != w.field || f.Label == "" || f.Default != w.def ||
					f.Spec["type"] != w.typ || f.Spec["min"] != w.min || f.Spec["max"] != w.max || len(f.Spec) != 3 {
					t.Errorf("field %d: %+v, want %+v", i, f, w)
				}
			}

			// The advertised bounds are the ones ParseOptions enforces.
			for _, f := range spec[:len(want)] {
				lo, hi := fmt.Sprint(f.Spec["min"]), fmt.Sprint(f.Spec["max"])
				var below, above string
				if f.Spec["type"] == "int" {
					below = fmt.Sprint(f.Spec["min"].(int) - 1)
					above = fmt.Sprint(f.Spec["max"].(int) + 1)
				} else {
					below = fmt.Sprint(f.Spec["min"].(float64) - 0.01)
					above = fmt.Sprint(f.Spec["max"].(float64) + 0.01)
				}
				for _, v := range []string{lo, hi} {
					if _, err := l.ParseOptions(raw(map[string]string{f.Field: v})); err != nil {
						t.Errorf("%s=%s (a bound) refused: %v", f.Field, v, err)
					}
				}
				for _, v := range []string{below, above} {
					if _, err := l.ParseOptions(raw(map[string]string{f.Field: v})); !errors.Is(err, scheduler.ErrInvalid) {
						t.Errorf("%s=%s (out of bounds) accepted: %v", f.Field, v, err)
					}
				}
			}

			// The spec is served as JSON in dask-gateway's format.
			b, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			var back []map[string]any
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			for i, f := range back[:len(want)] {
				s, _ := f["spec"].(map[string]any)
				if f["field"] != want[i].field || f["label"] == "" || f["default"] == nil || s["type"] != want[i].typ ||
					s["min"] == nil || s["max"] == nil {
					t.Errorf("JSON field %d: %s", i, b)
				}
			}
		})
	}
}

// Known bug: the defaults are not checked against the limits. With
// max_worker_memory below the 2 GiB default, a cluster created without
// options gets workers bigger than the limit, and the spec advertises a
// default outside its own [min, max].
func TestRegressionDefaultsOutsideLimits(t *testing.T) {
	l := scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 1}
	o, err := l.ParseOptions(nil)
	if err == nil && o.WorkerMemory > l.MaxWorkerMemory {
		t.Errorf("ParseOptions(nil) = %+v: worker_memory above the limit of %g GiB", o, l.MaxWorkerMemory)
	}
	for _, f := range l.Spec() {
		if f.Field == "worker_memory" && f.Default.(float64) > f.Spec["max"].(float64) {
			t.Errorf("spec of %s: default %v above max %v", f.Field, f.Default, f.Spec["max"])
		}
	}
}

func TestParseSoftwareOptions(t *testing.T) {
	images := scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8, Images: true, Provider: "docker"}
	def := images.Defaults()
	with := func(f func(*scheduler.Options)) scheduler.Options {
		o := def
		f(&o)
		return o
	}
	cases := []struct {
		name   string
		limits scheduler.Limits
		in     map[string]string
		want   scheduler.Options
		errs   []string
	}{
		{name: "an image", limits: images, in: map[string]string{"image": `"registry.example.com/team/env:1"`},
			want: with(func(o *scheduler.Options) { o.Image = "registry.example.com/team/env:1" })},
		{name: "an environment with the client's versions", limits: images,
			in: map[string]string{"env": `"team"`, "client_env": `{"python":"3.11","numpy":""}`, "allow_mismatch": "true"},
			want: with(func(o *scheduler.Options) {
				o.Env, o.ClientEnv, o.AllowMismatch = "team", map[string]string{"python": "3.11", "numpy": ""}, true
			})},
		{name: "both", limits: images, in: map[string]string{"image": `"a:1"`, "env": `"team"`}, errs: []string{"give image or env, not both"}},
		{name: "an image with a space", limits: images, in: map[string]string{"image": `"a b"`}, errs: []string{"image must be an image reference"}},
		{name: "an image that is not a string", limits: images, in: map[string]string{"image": "3"}, errs: []string{"image must be an image reference"}},
		{name: "an env with a slash", limits: images, in: map[string]string{"env": `"../x"`}, errs: []string{"env must be an environment name or hash"}},
		{name: "client_env not a map", limits: images, in: map[string]string{"client_env": `["numpy"]`}, errs: []string{"client_env must map package names to versions"}},
		{name: "client_env too long an entry", limits: images, in: map[string]string{"client_env": fmt.Sprintf(`{"numpy":%q}`, strings.Repeat("1", 65))}, errs: []string{"client_env entry"}},
		{name: "allow_mismatch not a bool", limits: images, in: map[string]string{"allow_mismatch": `"yes"`}, errs: []string{"allow_mismatch must be true or false"}},
		{name: "several problems at once", limits: images, in: map[string]string{"image": "1", "allow_mismatch": "2"},
			errs: []string{"image must be", "allow_mismatch must be"}},
		{name: "an image on the local provider", limits: scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8, Provider: "local"},
			in: map[string]string{"image": `"a:1"`}, errs: []string{"the local provider runs no container images: image and env need the docker, ec2, fargate or gce provider"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.limits.ParseOptions(raw(c.in))
			if len(c.errs) > 0 {
				if !errors.Is(err, scheduler.ErrInvalid) {
					t.Fatalf("err %v, want ErrInvalid", err)
				}
				for _, e := range c.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q lacks %q", err, e)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestSpotOptionOffered: spot is offered to backends with instance types
// and to those that say they have spot capacity without them (Fargate),
// and refused by the others.
func TestSpotOptionOffered(t *testing.T) {
	spotOnly := testLimits
	spotOnly.Spot = true
	typed := testLimits
	typed.InstanceTypes = true
	for _, tc := range []struct {
		name   string
		limits scheduler.Limits
		offer  bool
	}{
		{"no spot capacity", testLimits, false},
		{"spot capacity without instance types", spotOnly, true},
		{"instance types", typed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, f := range tc.limits.Spec() {
				if f.Field == "spot" {
					n++
				}
				if tc.limits.Spot && !tc.limits.InstanceTypes && f.Field == "worker_vm_type" {
					t.Errorf("machine option %s offered without instance types", f.Field)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.offer]; n != want {
				t.Errorf("spot offered %d times; want %d", n, want)
			}
			o, err := tc.limits.ParseOptions(raw(map[string]string{"spot": "true"}))
			switch {
			case tc.offer && (err != nil || !o.Spot):
				t.Errorf("spot: true = %+v, %v; want admitted", o, err)
			case !tc.offer && (!errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "unknown option(s) spot")):
				t.Errorf("spot: true = %v; want unknown option", err)
			}
		})
	}
}
