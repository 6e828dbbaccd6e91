package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clientScript is a Dask client kept running with distributed imported, so
// that Python's start-up is not in any measurement: for each request on
// stdin it connects (retrying until the scheduler answers), waits for the
// workers and prints the wall-clock time it saw them.
const clientScript = `
import json, sys, time
from distributed import Client
from distributed.security import Security
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    sec = None
    if req.get("cert"):
        class GatewaySecurity(Security):
            def get_connection_args(self, role):
                args = super().get_connection_args(role)
                args["server_hostname"] = req["server_name"]
                return args
        sec = GatewaySecurity(tls_ca_file=req["cert"], tls_client_cert=req["cert"], tls_client_key=req["key"], require_encryption=True)
    deadline = time.time() + 120
    while True:
        try:
            c = Client(req["address"], security=sec, timeout=5)
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.01)
    c.wait_for_workers(req["workers"], timeout=120)
    print(json.dumps({"t": time.time(), "workers": len(c.scheduler_info()["workers"])}), flush=True)
    c.close()
`

const python = "/usr/bin/python3"

// daskClient drives clientScript.
type daskClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startDaskClient() (*daskClient, error) {
	cmd := exec.Command(python, "-c", clientScript)
	// Closing clients log connection noise; failures show in what the
	// script prints (or does not).
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s (Debian's python3-distributed): %w", python, err)
	}
	c := &daskClient{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if line, err := c.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		c.close()
		return nil, fmt.Errorf("the Dask client did not start (is python3-distributed installed?): %q %v", line, err)
	}
	return c, nil
}

// seen asks the client to connect and returns when it saw the workers.
func (c *daskClient) seen(req map[string]any) (time.Time, error) {
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return time.Time{}, err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("the Dask client failed: %w", err)
	}
	var r struct {
		T       float64 `json:"t"`
		Workers int     `json:"workers"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return time.Time{}, fmt.Errorf("the Dask client said %q", line)
	}
	return time.Unix(0, int64(r.T*1e9)), nil
}

func (c *daskClient) close() {
	c.in.Close()
	_ = c.cmd.Wait()
}

// benchReady is figure 6: `gateway new-cluster --workers 2` on the local
// provider until a Dask client sees 2 workers, against a script that starts
// `dask scheduler` and 2 `dask worker` processes itself until the same
// client sees them. Both clocks start when the command starts; the client
// has Dask imported already in both.
func benchReady(ctx context.Context, o Options) ([]Result, error) {
	reps := 5
	if o.Quick {
		reps = 2
	}
	bin := filepath.Join(o.Dir, "gateway")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the gateway (run the benchmark from the repository's root): %v\n%s", err, out)
	}
	home := filepath.Join(o.Dir, "home")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
	env = withoutGatewayVars(env)
	gw, url, err := startDev(ctx, bin, env, home)
	if err != nil {
		return nil, err
	}
	defer stopProcess(gw)
	client, err := startDaskClient()
	if err != nil {
		return nil, err
	}
	defer client.close()
	// One cluster first, untimed: Python's first import of Dask from disk
	// in the gateway's scheduler and workers.
	if _, err := gatewayReady(ctx, bin, env, url, client); err != nil {
		return nil, err
	}
	if _, err := directReady(ctx, o.Dir, client); err != nil {
		return nil, err
	}
	var gws, dirs []float64
	for range reps {
		d, err := directReady(ctx, o.Dir, client)
		if err != nil {
			return nil, err
		}
		g, err := gatewayReady(ctx, bin, env, url, client)
		if err != nil {
			return nil, err
		}
		dirs, gws = append(dirs, d.Seconds()), append(gws, g.Seconds())
	}
	g, d := median(gws), median(dirs)
	added := g - d
	allowed := max(0.10*d, 0.150)
	return []Result{{Figure: "6 time to ready", Case: "2 workers, local provider", Unit: "s", Value: g, Baseline: d, Ratio: g / d,
		Target: "adds < 10% or 150 ms", Met: added < allowed,
		Note:    fmt.Sprintf("added %.0f ms (allowed %.0f ms); medians of %d", added*1000, allowed*1000, reps),
		Samples: gws, BaselineSamples: dirs}}, nil
}

func withoutGatewayVars(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GATEWAY_") {
			out = append(out, kv)
		}
	}
	return out
}

// startDev runs `gateway dev` on a free loopback port and returns its URL.
func startDev(ctx context.Context, bin string, env []string, home string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "dev", "--listen", "127.0.0.1:0", "--log-level", "warn")
	cmd.Env = env
	logf, err := os.Create(filepath.Join(home + "-gateway.log"))
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := os.ReadFile(filepath.Join(home, "config", "gateway", "credentials.json"))
		var c struct {
			Current string `json:"current"`
		}
		if err == nil && json.Unmarshal(b, &c) == nil && c.Current != "" {
			if resp, err := http.Get(c.Current + "/api/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return cmd, c.Current, nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopProcess(cmd)
	log, _ := os.ReadFile(logf.Name())
	return nil, "", fmt.Errorf("gateway dev did not answer within 30s:\n%s", log)
}

func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// gatewayReady times new-cluster until the client sees 2 workers, then
// stops the cluster (untimed).
func gatewayReady(ctx context.Context, bin string, env []string, url string, client *daskClient) (time.Duration, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, "new-cluster", "--workers", "2", "-o", "json", "--gateway", url)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return 0, fmt.Errorf("gateway new-cluster: %v\n%s", err, ee.Stderr)
		}
		return 0, fmt.Errorf("gateway new-cluster: %w", err)
	}
	var info struct {
		Name           string `json:"name"`
		Address        string `json:"scheduler_address"`
		ServerName     string `json:"tls_server_name"`
		TLSCertFile    string `json:"tls_cert_file"`
		TLSKeyFile     string `json:"tls_key_file"`
		GatewayAddress string `json:"gateway_address"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Address == "" {
		return 0, fmt.Errorf("gateway new-cluster -o json printed %q: %v", out, err)
	}
	seen, err := client.seen(map[string]any{"address": info.Address, "server_name": info.ServerName,
		"cert": info.TLSCertFile, "key": info.TLSKeyFile, "workers": 2})
	took := seen.Sub(start)
	stop := exec.Command(bin, "stop", info.Name, "--gateway", url)
	stop.Env = env
	if out, serr := stop.CombinedOutput(); serr != nil && err == nil {
		err = fmt.Errorf("gateway stop: %v\n%s", serr, out)
	}
	return took, err
}

// directReady is the baseline: the processes a script would start, on a
// free port, until the client sees 2 workers; then they are stopped.
func directReady(ctx context.Context, dir string, client *daskClient) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	addr := "tcp://127.0.0.1:" + strconv.Itoa(port)
	start := time.Now()
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			stopProcess(p)
		}
	}()
	spawn := func(args ...string) error {
		cmd := exec.CommandContext(ctx, python, append([]string{"-m", "dask"}, args...)...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		return nil
	}
	// The local provider's command lines, without TLS (which only makes
	// the baseline faster).
	if err := spawn("scheduler", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--dashboard-address", "127.0.0.1:0", "--no-show"); err != nil {
		return 0, err
	}
	// As a script (and the gateway) would: start the workers and connect
	// once the scheduler listens, rather than leave it to their retry
	// backoff.
	for ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "tcp://"), time.Second); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			return 0, errors.New("dask scheduler did not listen within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 2 {
		if err := spawn("worker", addr, "--host", "127.0.0.1", "--name", fmt.Sprintf("w%d", i), "--nthreads", "1", "--no-dashboard", "--no-nanny", "--death-timeout", "60"); err != nil {
			return 0, err
		}
	}
	seen, err := client.seen(map[string]any{"address": addr, "workers": 2})
	return seen.Sub(start), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
