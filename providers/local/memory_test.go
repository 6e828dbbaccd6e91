package local_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
)

// Local members are bounded in memory by the OS (issue 32, finding 5):
// the scheduler by SchedulerMemory, a worker by the cluster's worker
// memory, each with the provider's headroom, as RLIMIT_DATA; a task that
// asks for more gets MemoryError in its worker (real Dask), which serves
// on, instead of taking the host's memory.
func TestMemberMemoryBounded(t *testing.T) {
	const (
		cluster   = "memcap"
		python    = "/usr/bin/python3" // as startTLSScheduler's
		schedMem  = 1 << 30
		workerMem = 512 << 20
		headroom  = 512 << 20
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var spec providers.ClusterSpec
	p, cert, _, addr := startTLSScheduler(ctx, t, cluster, func(cfg *local.Config, s *providers.ClusterSpec) {
		cfg.Dir, cfg.SchedulerMemory = dir, schedMem
		s.WorkerMemory = workerMem
		spec = *s
	})
	if err := p.StartWorker(ctx, spec, "w0", addr); err != nil {
		t.Fatal(err)
	}

	for member, want := range map[string]int64{"scheduler": schedMem + headroom, "w0": workerMem + headroom} {
		soft, hard := dataLimit(t, filepath.Join(dir, cluster, member+".proc"))
		if soft != strconv.FormatInt(want, 10) || hard != soft {
			t.Errorf("%s: max data size %s (hard %s), want %d for both", member, soft, hard, want)
		}
	}

	script := `
import sys
from distributed import Client
from distributed.security import Security
addr, cert, key = sys.argv[1:4]
sec = Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
with Client("tls://" + addr, security=sec, timeout=60) as c:
    c.wait_for_workers(1, timeout=60)
    def grab(n):
        b = bytearray(n)
        return len(b)
    print("small", c.submit(grab, 64 << 20, pure=False).result(timeout=60))
    try:
        print("big", c.submit(grab, 4 << 30, pure=False).result(timeout=60))
    except MemoryError:
        print("big MemoryError")
    print("after", c.submit(grab, 1 << 20, pure=False).result(timeout=60))
`
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, python, "-c", script, addr, certFile, keyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("Dask client: %v\n%s", err, out)
	}
	for _, want := range []string{"small 67108864", "big MemoryError", "after 1048576"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("client output lacks %q:\n%s", want, out)
		}
	}
}

// dataLimit reads the RLIMIT_DATA of the member whose state file is at
// path, from /proc.
func dataLimit(t *testing.T, path string) (soft, hard string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(limits), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Max data size")); strings.HasPrefix(line, "Max data size") && len(f) >= 2 {
			return f[0], f[1]
		}
	}
	t.Fatalf("no max data size in /proc/%d/limits:\n%s", st.Pid, limits)
	return "", ""
}
