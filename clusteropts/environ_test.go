package clusteropts_test

import (
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/clusteropts"
)

func TestDaskConfigVar(t *testing.T) {
	for _, tc := range []struct{ key, want, err string }{
		{"distributed.worker.memory.target", "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET", ""},
		{"distributed.scheduler.work-stealing", "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING", ""},
		{"array.chunk-size", "DASK_ARRAY__CHUNK_SIZE", ""},
		{"", "", "want a dotted key"},
		{"a..b", "", "want a dotted key"},
		{"a.b c", "", "letters, digits"},
		{"a.b=c", "", "letters, digits"},
	} {
		got, err := clusteropts.DaskConfigVar(tc.key)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.key, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
}

func TestCheckEnviron(t *testing.T) {
	many := map[string]string{}
	for i := range clusteropts.MaxEnviron + 1 {
		many["V"+strings.Repeat("X", i)] = ""
	}
	big := map[string]string{}
	for i := range 10 {
		big["V"+strings.Repeat("X", i)] = strings.Repeat("y", clusteropts.MaxEnvironValue)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // each problem's words; none: accepted
	}{
		{"ok", map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "_x": "", "OMP_NUM_THREADS": "1"}, nil},
		{"bad names", map[string]string{"1A": "", "A-B": "", "": ""}, []string{`"": a name`, `"1A": a name`, `"A-B": a name`}},
		{"reserved", map[string]string{"PATH": "", "ld_preload": "", "GATEWAY_X": "", "DASK_GATEWAY__AUTH": "", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": "", "PYTHONPATH": "", "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT": ""},
			[]string{"DASK_DISTRIBUTED__COMM__TLS__CA_FILE is reserved", "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT is reserved", "DASK_GATEWAY__AUTH is reserved", "GATEWAY_X is reserved", "PATH is reserved", "PYTHONPATH is reserved", "ld_preload is reserved"}},
		{"line break", map[string]string{"A": "x\ny", "B": "x\rz", "C": "\x00"}, []string{"A: the value holds a line break", "B: the value", "C: the value"}},
		{"long value", map[string]string{"A": strings.Repeat("x", clusteropts.MaxEnvironValue+1)}, []string{"A: the value is longer than 4096"}},
		{"long name", map[string]string{strings.Repeat("N", clusteropts.MaxEnvironName+1): ""}, []string{"the name is longer than 128"}},
		{"too many", many, []string{"sets 65 variables; at most 64"}},
		{"too large", big, []string{"at most 32768 are allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clusteropts.CheckEnviron(tc.env)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d of them: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want %q", i, got[i], w)
				}
			}
			for _, p := range got {
				if strings.Contains(p, "0.1") || strings.Contains(p, "yyyy") || strings.Contains(p, "x\ny") {
					t.Errorf("a problem shows a value: %q", p)
				}
			}
		})
	}
}

// Old rows (no environ) decode; rows with it keep it.
func TestDecodeEnviron(t *testing.T) {
	o, err := clusteropts.Decode([]byte(`{"workers":1,"worker_threads":1,"worker_memory":2,"idle_timeout":0}`))
	if err != nil || o.Environ != nil {
		t.Fatalf("old row: %+v, %v", o, err)
	}
	o, err = clusteropts.Decode([]byte(`{"workers":1,"environ":{"A":"1"}}`))
	if err != nil || o.Environ["A"] != "1" {
		t.Fatalf("row with environ: %+v, %v", o, err)
	}
	if _, err := clusteropts.Decode([]byte(`{"environ":{"A":1}}`)); err == nil || !strings.Contains(err.Error(), "environ") {
		t.Errorf("environ of numbers: %v", err)
	}
	r, err := clusteropts.RequestFrom(map[string]any{"environ": map[string]string{"A": "1"}})
	if err != nil || r.Environ["A"] != "1" {
		t.Errorf("RequestFrom: %+v, %v", r, err)
	}
}
