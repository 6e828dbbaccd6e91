package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/local"
)

// TestOwnerEnvReachesDask: the owner's variables (the environ option)
// are in the real Dask scheduler's and worker's environment, and a Dask
// config value given as DASK_ variable is the config each of them runs
// with; the gateway's own settings still win over the owner's.
func TestOwnerEnvReachesDask(t *testing.T) {
	const python = "/usr/bin/python3" // as startTLSScheduler's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var spec providers.ClusterSpec
	p, cert, _, addr := startTLSScheduler(ctx, t, "ownerenv", func(cfg *local.Config, s *providers.ClusterSpec) {
		cfg.Dir = dir
		s.Env = map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.123", "OWNER_FLAG": `it's "x" $y`}
		spec = *s
	})
	if err := p.StartWorker(ctx, spec, "w0", addr); err != nil {
		t.Fatal(err)
	}
	script := `
import os, sys, dask
from distributed import Client
from distributed.security import Security
addr, cert, key = sys.argv[1:4]
sec = Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
def seen(dask_scheduler=None):
    return (dask.config.get("distributed.worker.memory.target"), os.environ.get("OWNER_FLAG"), os.environ.get("PYTHONUNBUFFERED"))
with Client("tls://" + addr, security=sec, timeout=60) as c:
    c.wait_for_workers(1, timeout=60)
    print("scheduler", c.run_on_scheduler(seen))
    print("worker", list(c.run(seen).values())[0])
`
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, "-c", script, addr, certFile, keyFile)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir} // the client's own config is Dask's default
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("Dask client: %v\n%s", err, out)
	}
	for _, want := range []string{`scheduler (0.123, 'it\'s "x" $y', '1')`, `worker (0.123, 'it\'s "x" $y', '1')`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the members saw\n%s\nwant a line %s", out, want)
		}
	}
}
