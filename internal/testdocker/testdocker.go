// Package testdocker gives tests a Docker engine and the Dask image they run
// containers from.
//
// The image is made by scripts/testimage.sh (debootstrap, then docker
// import), which the README's test command runs before the tests: a test
// never downloads anything itself. Without an engine the tests that need one
// are skipped with a message saying what to start, unless
// GATEWAY_TEST_REQUIRE_DOCKER=1 (set by the test command where it started
// an engine), which makes a missing engine a failure.
package testdocker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ory/dockertest/v3"
)

// Defaults matching scripts/testimage.sh, for a test run without the test
// command (go test ./providers/docker after running the script once).
const (
	defaultImage  = "gateway-test/dask:bookworm-1"
	defaultRootfs = "/var/cache/gateway-test/dask-bookworm-1"
)

func required() bool { return os.Getenv("GATEWAY_TEST_REQUIRE_DOCKER") == "1" }

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (GATEWAY_TEST_REQUIRE_DOCKER=1)", msg)
	}
	t.Skipf("%s; skipping (scripts/test.sh starts an engine and builds the image when run as root)", msg)
}

// Pool returns a dockertest pool on the engine of DOCKER_HOST (or the local
// socket), or skips the test when none answers.
func Pool(t testing.TB) *dockertest.Pool {
	t.Helper()
	pool, err := dockertest.NewPool("")
	if err != nil {
		unavailable(t, "no Docker engine: %v", err)
	}
	if err := pool.Client.Ping(); err != nil {
		unavailable(t, "no Docker engine answers (start dockerd --bridge=none --iptables=false --ip6tables=false): %v", err)
	}
	return pool
}

// DaskImage returns the reference of the local image with Debian's Python 3
// and python3-distributed (and pip), checking that the engine has it.
func DaskImage(t testing.TB) string {
	t.Helper()
	pool := Pool(t)
	ref := os.Getenv("GATEWAY_TEST_DASK_IMAGE")
	if ref == "" {
		ref = defaultImage
	}
	if _, err := pool.Client.InspectImage(ref); err != nil {
		unavailable(t, "the test image %s is not in the Docker engine (run scripts/testimage.sh): %v", ref, err)
	}
	return ref
}

// Rootfs returns the root filesystem DaskImage was made from, for running a
// Dask client in the same environment (chroot; needs root).
func Rootfs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("GATEWAY_TEST_DASK_ROOTFS")
	if dir == "" {
		dir = defaultRootfs
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/python3")); err != nil {
		unavailable(t, "the test image's root filesystem %s is missing (run scripts/testimage.sh): %v", dir, err)
	}
	if os.Geteuid() != 0 {
		unavailable(t, "running Python in %s needs root (chroot)", dir)
	}
	return dir
}

// ChrootPython writes an executable wrapper into dir that runs the Python of
// rootfs under chroot, with the working directory kept when it exists in
// rootfs too, and returns its path: an interpreter for --python whose
// environment is exactly the image's.
func ChrootPython(t testing.TB, rootfs, dir string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("chroot needs Linux")
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		unavailable(t, "no chroot command: %v", err)
	}
	path := filepath.Join(dir, "python3")
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s /usr/bin/python3 \"$@\"\n", chroot, rootfs)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
