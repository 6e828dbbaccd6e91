package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A flag's bad value is answered with what to type, not with Go's parser
// ("strconv.ParseInt: parsing ...").
func TestFlagValueErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"new-cluster", "--workers", "abc"}, `--workers "abc": the value must be a whole number, e.g. --workers 2`},
		{[]string{"new-cluster", "-n", "1.5"}, `--workers "1.5": the value must be a whole number`},
		{[]string{"scale", "x", "--workers", "two"}, `--workers "two": the value must be a whole number`},
		{[]string{"new-cluster", "--idle-timeout", "20"}, `--idle-timeout "20": the value must be a duration such as 90s, 20m or 1h30m`},
		{[]string{"new-cluster", "--spot=maybe"}, `--spot "maybe": the value must be true or false`},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(tc.args, "--gateway", "http://127.0.0.1:1"))
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "time:") {
			t.Errorf("gateway %s: %v; want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestWorkerCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 workers", 1: "1 worker", 2: "2 workers"} {
		if got := workerCount(n); got != want {
			t.Errorf("workerCount(%d) = %q, want %q", n, got, want)
		}
	}
}
