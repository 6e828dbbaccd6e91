package docker

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// listenProbe runs in a member's container, in its network namespace: it
// lists every listening TCP socket there (the container holds the member
// alone) and asks each, over the namespace's loopback, for /health in
// plain HTTP. It prints "listening N" and an "answers" line for each
// socket that answers HTTP.
const listenProbe = `
import socket
n = 0
for table, fam, any_, lo in (("tcp", socket.AF_INET, "00000000", "127.0.0.1"), ("tcp6", socket.AF_INET6, "0" * 32, "::1")):
    try:
        lines = open("/proc/net/" + table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if f[3] != "0A":
            continue
        host, port = f[1].split(":")
        n += 1
        s = socket.socket(fam)
        s.settimeout(20)
        try:
            s.connect((lo, int(port, 16)))
            s.sendall(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
            first = s.recv(64)
        except OSError:
            first = b""
        s.close()
        if first.startswith(b"HTTP/"):
            print("answers", table, host, int(port, 16), first.split(b"\r\n")[0].decode())
print("listening", n)
`

// A docker cluster's worker serves no plain HTTP (issue 32 re-test): its
// HTTP server (/metrics, /health, the sitemap), which listened on every
// address of its container and answered anyone on the cluster's network,
// is closed by the gateway's preload, which the launcher gives workers
// too. The probe runs inside the container (its own loopback); the
// cluster still computes.
func TestWorkerServesNoPlainHTTP(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	p := e.provider(e.config())
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	sched := startWithWorker(t, p, spec)
	// The worker has registered, so its servers have started.
	hostClient(t, spec, sched.Address, 1)

	for _, member := range []string{"worker-0", "scheduler"} {
		out, code := e.exec(context.Background(), containerName(e.gatewayID, cluster, member), "python3", "-c", listenProbe)
		if code != 0 {
			t.Fatalf("%s: the probe exits %d:\n%s", member, code, out)
		}
		if strings.Contains(out, "answers") {
			t.Errorf("%s answers plain HTTP:\n%s", member, out)
		}
		// Its Dask comm at least: a listing that found nothing proves
		// nothing.
		_, count, _ := strings.Cut(out, "listening ")
		if n, err := strconv.Atoi(strings.TrimSpace(count)); err != nil || n < 1 {
			t.Errorf("%s: no listening socket found:\n%s", member, out)
		}
	}
}
