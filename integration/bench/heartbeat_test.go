package main

import (
	"strings"
	"testing"
	"time"
)

// The control plane figure's heartbeat interval: the gateway's default,
// or what the environment says within the bounds cluster.heartbeat_interval
// takes; anything else stops the figure with what to set instead.
func TestHeartbeatSetting(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    time.Duration
		wantErr string
	}{
		{"", cpHeartbeatEvery, ""},
		{"15m", 15 * time.Minute, ""},
		{"1s", time.Second, ""},
		{"1h", time.Hour, ""},
		{"bad", 0, "give a duration from 1s to 1h"},
		{"500ms", 0, "give a duration from 1s to 1h"},
		{"2h", 0, "give a duration from 1s to 1h"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(cpHeartbeatEnv, tc.env)
			got, err := cpHeartbeat()
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), cpHeartbeatEnv)):
				t.Errorf("cpHeartbeat() = %v, %v; want an error naming %s and saying %q", got, err, cpHeartbeatEnv, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Errorf("cpHeartbeat() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
