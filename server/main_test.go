package server

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(floodHelperEnv); dir != "" {
		os.Exit(floodHelper(dir)) // the gateway TestSlowRequestFlood floods
	}
	os.Exit(m.Run())
}
