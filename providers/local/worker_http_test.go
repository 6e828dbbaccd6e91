package local_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
)

// No member of a running cluster answers plain HTTP (issue 32 re-test): a
// worker, and its nanny when it has one, served /metrics, /health and its
// sitemap to anyone on a random port of every address, while the gateway
// reads nothing from them. Every TCP port a member process listens on is
// asked for /health in plain HTTP over loopback; none may answer. The
// cluster still computes (real Dask, its workers on the scheduler's TLS
// comm).
func TestMembersServeNoPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nanny bool
	}{{"worker", false}, {"worker under a nanny", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := "nohttp"
			if tc.nanny {
				cluster = "nohttpnanny"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			p, cert, _, addr := startTLSScheduler(ctx, t, cluster, func(c *local.Config, _ *providers.ClusterSpec) { c.Nanny = tc.nanny })
			spec := tlsSpec("gw-"+cluster+"-local", cluster, cert)
			if err := p.StartWorker(ctx, spec, "worker-0", addr); err != nil {
				t.Fatal(err)
			}

			// A task run on the worker: it has registered with the
			// scheduler, so its servers have started.
			dir := t.TempDir()
			certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
			if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			script := `
import sys
from distributed import Client
from distributed.security import Security
addr, cert, key = sys.argv[1:4]
sec = Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
with Client("tls://" + addr, security=sec, timeout=60) as c:
    c.wait_for_workers(1, timeout=60)
    print("sum", c.submit(sum, [1, 2, 3]).result(timeout=60))
`
			out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", script, addr, certFile, keyFile).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "sum 6") {
				t.Fatalf("the cluster does not compute: %v\n%s", err, out)
			}

			pids := testutil.MemberPIDs(cluster)
			wantProcs := 2 // the scheduler and the worker
			if tc.nanny {
				wantProcs = 3
			}
			if len(pids) < wantProcs {
				t.Fatalf("member processes = %v, want at least %d", pids, wantProcs)
			}
			probed := 0
			for _, pid := range pids {
				socks, err := listening(pid)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range socks {
					probed++
					if answer := plainAnswer(s); answer != "" {
						t.Errorf("process %d (%s) answers plain HTTP on %s: %q", pid, cmdline(pid), s, answer)
					}
				}
			}
			// The scheduler's comm and dashboard, the worker's comm, and
			// the nanny's: a listing that found nothing proves nothing.
			if probed < wantProcs+1 {
				t.Fatalf("found %d listening sockets among %v, want at least %d", probed, pids, wantProcs+1)
			}
		})
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	s := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// listening returns the loopback addresses at which process pid's
// listening TCP sockets are reached: its socket inodes (from its
// descriptors) matched with the listening entries of /proc/<pid>/net/tcp
// and tcp6. A socket bound to another address than loopback or the
// unspecified one is an error: this test sends traffic to loopback only.
func listening(pid int) ([]string, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, "net", table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode (the tenth field)
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			host, port, ok := strings.Cut(fields[1], ":")
			raw, err := hex.DecodeString(host)
			n, perr := strconv.ParseUint(port, 16, 16)
			if !ok || err != nil || perr != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s/net/%s: unreadable line %q", dir, table, sc.Text())
			}
			// The kernel prints the address as 32-bit words in host
			// (little-endian) order.
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			ip := net.IP(raw)
			switch {
			case ip.IsLoopback():
			case ip.IsUnspecified() && len(raw) == 4:
				ip = net.IPv4(127, 0, 0, 1)
			case ip.IsUnspecified():
				ip = net.IPv6loopback
			default:
				_ = f.Close()
				return nil, fmt.Errorf("process %d listens on %s:%d, which is not loopback", pid, ip, n)
			}
			out = append(out, net.JoinHostPort(ip.String(), strconv.FormatUint(n, 10)))
		}
		_ = f.Close()
	}
	return out, nil
}

// plainAnswer asks addr for /health in plain HTTP and returns the status
// line of its answer, or "" when it answers no HTTP (a TLS port closes,
// or sends an alert).
func plainAnswer(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte("GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")); err != nil {
		return ""
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/") {
		return ""
	}
	return strings.TrimSpace(line)
}
