package main

import (
	"strings"
	"testing"
)

func TestConfigEnviron(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dask, vars []string
		want       map[string]string
		names      string
		err        string
	}{
		{name: "none"},
		{name: "both", dask: []string{"distributed.worker.memory.target=0.1"}, vars: []string{"OMP_NUM_THREADS=1", "EMPTY="},
			want:  map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "OMP_NUM_THREADS": "1", "EMPTY": ""},
			names: "distributed.worker.memory.target=0.1 OMP_NUM_THREADS=1 EMPTY="},
		{name: "value with =", vars: []string{"A=b=c"}, want: map[string]string{"A": "b=c"}, names: "A=b=c"},
		{name: "no =", dask: []string{"distributed.worker.memory.target"}, err: `--dask-config "distributed.worker.memory.target": give key=value`},
		{name: "var no =", vars: []string{"A"}, err: `--env-var "A": give NAME=value`},
		{name: "bad key", dask: []string{"a..b=1"}, err: "--dask-config: dask config key"},
		{name: "twice", dask: []string{"a.b=1", "a.b=2"}, err: "--dask-config a.b given twice"},
		{name: "var and key", dask: []string{"a.b=1"}, vars: []string{"DASK_A__B=2"}, err: "--env-var DASK_A__B: the variable is given twice"},
		{name: "reserved", vars: []string{"LD_PRELOAD=/tmp/x.so"}, err: "LD_PRELOAD is reserved"},
		{name: "reserved dask", dask: []string{"distributed.comm.tls.ca-file=/x"}, err: "DASK_DISTRIBUTED__COMM__TLS__CA_FILE is reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, names, err := configEnviron("--dask-config", "--env-var", tc.dask, tc.vars)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(env) != len(tc.want) || strings.Join(names, " ") != tc.names {
				t.Fatalf("%v %q %v; want %v %q", env, names, err, tc.want, tc.names)
			}
			for k, v := range tc.want {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
		})
	}
}
