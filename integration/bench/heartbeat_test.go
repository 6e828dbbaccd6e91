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

// The stand-in schedulers' heartbeats fall on whole seconds of their own
// clocks, each off from this one by its skew.
func TestTick(t *testing.T) {
	base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Duration // after base
		skew time.Duration
		want time.Duration
	}{
		{0, 0, 0},
		{time.Nanosecond, 0, time.Second},
		{400 * time.Millisecond, 0, time.Second},
		{400 * time.Millisecond, time.Millisecond, time.Second - time.Millisecond},
		{400 * time.Millisecond, -time.Millisecond, time.Second + time.Millisecond},
		{time.Second - time.Millisecond, time.Millisecond, time.Second - time.Millisecond},
		{time.Second + 2*time.Millisecond, time.Millisecond, 2*time.Second - time.Millisecond},
	} {
		if got := cpTick(base.Add(tc.at), tc.skew).Sub(base); got != tc.want {
			t.Errorf("cpTick(+%v, skew %v) = +%v, want +%v", tc.at, tc.skew, got, tc.want)
		}
	}
}
