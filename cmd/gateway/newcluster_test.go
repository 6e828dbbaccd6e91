package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNewClusterOptions: the cluster_options new-cluster sends for its
// flags, as the API receives them: only what was given (and workers), so
// that the gateway fills in the rest with its defaults; idle timeout 0 is
// sent, as it means never rather than the default.
func TestNewClusterOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the options received; "" when new-cluster must refuse first
		err  string
	}{
		{name: "workers only", args: []string{"--workers", "2", "--env", "none"}, want: `{"workers":2}`},
		{name: "defaults", args: []string{"--env", "none"}, want: `{"workers":0}`},
		{name: "no idle timeout", args: []string{"--idle-timeout", "0", "--env", "none"}, want: `{"idle_timeout":0,"workers":0}`},
		{name: "size and idle timeout", args: []string{"-n", "1", "--worker-threads", "3", "--worker-memory", "512MiB", "--idle-timeout", "20m", "--env", "none"},
			want: `{"idle_timeout":1200,"worker_memory":0.5,"worker_threads":3,"workers":1}`},
		{name: "machine options", args: []string{"--worker-cpus", "4", "--gpu-type", "t4", "--spot", "--env", "none"},
			want: `{"gpu_type":"t4","spot":true,"worker_cpus":4,"workers":0}`},
		{name: "a published environment, unchecked", args: []string{"--env", "team", "--allow-mismatch"},
			want: `{"allow_mismatch":true,"env":"team","workers":0}`},
		{name: "an image", args: []string{"--image", "reg/x:1"}, want: `{"image":"reg/x:1","workers":0}`},
		{name: "no threads", args: []string{"--worker-threads", "0"}, err: "--worker-threads must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, core := newImageGatewayCore(t)
			t.Setenv("PATH", t.TempDir()) // no Python: the image is not checked against one
			args := append([]string{"new-cluster", "--no-wait"}, tc.args...)
			out, stderr, err := g.runStderr(t, "ann", args...)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || len(core.asked) != 0 {
					t.Fatalf("gateway %s: %v (%d clusters asked for)\n%s%s\nwant it refused with %q", strings.Join(args, " "), err, len(core.asked), out, stderr, tc.err)
				}
				return
			}
			// The core refuses every cluster (a quota): what it was asked is the point.
			if err == nil || !strings.Contains(err.Error(), "max_clusters") || len(core.asked) != 1 {
				t.Fatalf("gateway %s: %v (%d clusters asked for)\n%s%s\nwant one request, refused", strings.Join(args, " "), err, len(core.asked), out, stderr)
			}
			got, err := json.Marshal(core.asked[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("gateway %s sent cluster_options %s, want %s", strings.Join(args, " "), got, tc.want)
			}
		})
	}
}
