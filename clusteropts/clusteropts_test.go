package clusteropts_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/clusteropts"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want clusteropts.Options
		err  string // "" for none
	}{
		{name: "stored row", in: `{"workers":2,"worker_threads":1,"worker_memory":2,"idle_timeout":0,"max_lifetime":3600,"image":"r.example/e:1","client_env":{"dask":"2024.1.0"}}`,
			want: clusteropts.Options{Workers: 2, WorkerThreads: 1, WorkerMemory: 2, MaxLifetime: 3600, Image: "r.example/e:1", ClientEnv: map[string]string{"dask": "2024.1.0"}}},
		{name: "machine options", in: `{"worker_cpus":4,"worker_gpus":1,"gpu_type":"t4","spot":true}`,
			want: clusteropts.Options{WorkerCPUs: 4, WorkerGPUs: 1, GPUType: "t4", Spot: true}},
		{name: "empty object", in: `{}`},
		{name: "null fields are left zero", in: `{"workers":null}`},
		{name: "unknown keys are left alone", in: `{"workers":1,"from_a_newer_gateway":true}`, want: clusteropts.Options{Workers: 1}},
		{name: "empty", in: ``, err: "malformed cluster options: empty, want a JSON object"},
		{name: "bad JSON", in: `{"workers":`, err: "malformed cluster options: not valid JSON: unexpected end of JSON input"},
		{name: "not an object", in: `[1]`, err: "malformed cluster options: want a JSON object, got array"},
		{name: "number as string", in: `{"worker_threads":"2"}`, err: "malformed cluster options: worker_threads: want a whole number, got string"},
		{name: "fraction for a whole number", in: `{"workers":1.5}`, err: "workers: want a whole number, got number 1.5"},
		{name: "bool as string", in: `{"spot":"yes"}`, err: "spot: want true or false, got string"},
		{name: "versions not strings", in: `{"client_env":{"dask":1}}`, err: "client_env: want a string, got number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clusteropts.Decode([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, clusteropts.ErrMalformed) {
					t.Fatalf("Decode(%s) = %+v, %v; want ErrMalformed saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestRequest: a request carries the fields set and those it names, no
// others (which the gateway fills in), in the wire's names.
func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  clusteropts.Request
		want string
		err  string
	}{
		{name: "nothing", want: `{}`},
		{name: "zero workers named", req: clusteropts.Request{Set: []string{clusteropts.FieldWorkers}}, want: `{"workers":0}`},
		{name: "no idle timeout, asked for", req: clusteropts.Request{Options: clusteropts.Options{Workers: 2}, Set: []string{clusteropts.FieldIdleTimeout}},
			want: `{"idle_timeout":0,"workers":2}`},
		{name: "machine and software", req: clusteropts.Request{Options: clusteropts.Options{WorkerMemory: 1.5, Spot: true, Env: "abc", ClientEnv: map[string]string{"dask": "1"}}},
			want: `{"client_env":{"dask":"1"},"env":"abc","spot":true,"worker_memory":1.5}`},
		{name: "unknown name", req: clusteropts.Request{Set: []string{"idle-timeout"}}, err: `"idle-timeout" is no option`},
		{name: "lifetime", req: clusteropts.Request{Options: clusteropts.Options{MaxLifetime: 60}}, err: "max_lifetime comes from the owner's quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Marshal = %s, %v; want an error saying %q", b, err, tc.err)
				}
				return
			}
			if err != nil || string(b) != tc.want {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tc.want)
			}
		})
	}
}

func TestRequestFrom(t *testing.T) {
	r, err := clusteropts.RequestFrom(map[string]any{"worker_threads": 2, "idle_timeout": 0, "env": "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(r); err != nil || string(b) != `{"env":"abc","idle_timeout":0,"worker_threads":2}` {
		t.Errorf("RequestFrom's request = %s, %v", b, err)
	}
	for in, want := range map[string]map[string]any{
		"unknown option(s) gpus, shape":       {"gpus": 1, "shape": "x", "workers": 1},
		"worker_threads: want a whole number": {"worker_threads": "2"},
	} {
		if _, err := clusteropts.RequestFrom(want); err == nil || !strings.Contains(err.Error(), in) || !errors.Is(err, clusteropts.ErrMalformed) {
			t.Errorf("RequestFrom(%v) = %v; want ErrMalformed saying %q", want, err, in)
		}
	}
}
