// Package integration runs the real gateway binary against real Dask
// schedulers and workers (Debian's python3-distributed), the way a user
// does: gateway dev in one process, the CLI and a Python client in others.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// python is the interpreter with Dask that the tests drive.
const python = "/usr/bin/python3"

// parallel is how many of this package's tests run at once unless
// -test.parallel says otherwise. They mostly wait (for gateways, Dask
// processes, leases and graces); each has its own data directory, gateway
// id, loopback ports and database schema. The Docker engine's tests share
// its images, but each labels its containers with its own gateway id,
// environment images are content-addressed, and image collection runs
// hourly: none in a test. Not more than 2 on CI's 2 cores: with 4 beside
// images/build, the layer builds' gzip under -race starved until their
// contexts ran out (a CI dry run: "reading base" for minutes).
const parallel = 2

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// gatewayBinary builds the gateway once per test run.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "gateway")
		cmd := exec.Command("go", "build", "-race", "-o", buildOnce.path, "../cmd/gateway")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

func requireDask(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import distributed, dask.array; print(distributed.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("these tests need Dask at %s (on Debian: apt-get install python3-distributed; scripts/test.sh installs it): %v\n%s", python, err, out)
	}
}

// env is one user's environment: its own config and data directories.
type env struct {
	t       *testing.T
	bin     string
	home    string
	vars    []string
	gateway *exec.Cmd
	gwLog   *syncBuffer
	url     string
	exited  chan struct{}
}

func newEnv(t *testing.T, extra ...string) *env {
	t.Helper()
	requireDask(t)
	home := t.TempDir()
	e := &env{t: t, bin: gatewayBinary(t), home: home}
	e.vars = append(filterEnv(os.Environ()),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
	)
	e.vars = append(e.vars, extra...)
	return e
}

// filterEnv drops the caller's gateway settings so tests see only their own.
func filterEnv(in []string) []string {
	var out []string
	for _, kv := range in {
		if !strings.HasPrefix(kv, "GATEWAY_") && !strings.HasPrefix(kv, "XDG_") {
			out = append(out, kv)
		}
	}
	return out
}

func (e *env) dataDir() string { return filepath.Join(e.home, "data", "gateway") }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGateway runs `gateway dev` on a free loopback port and waits until it
// answers.
func (e *env) startGateway(args ...string) {
	e.t.Helper()
	if err := e.launchGateway(nil, args...); err != nil {
		e.t.Fatal(err)
	}
}

// launchGateway is startGateway with extra environment variables for this
// process alone (a crash point, say); a gateway that exits before it
// answers is an error, not a failure of the test.
func (e *env) launchGateway(extraEnv []string, args ...string) error {
	t := e.t
	t.Helper()
	cmd := exec.Command(e.bin, append([]string{"dev", "--listen", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	e.gwLog = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = e.gwLog, e.gwLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.gateway = cmd
	exited := make(chan struct{}) // this process's, whatever starts next
	e.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { e.stopGateway(syscall.SIGTERM) })
	deadline := time.Now().Add(testutil.HangBound)
	for {
		if u := e.currentURL(); u != "" {
			if resp, err := http.Get(u + "/api/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					e.url = u
					return nil
				}
			}
		}
		select {
		case <-e.exited:
			return fmt.Errorf("gateway exited at start:\n%s", e.gwLog.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway did not answer within %s:\n%s", testutil.HangBound, e.gwLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// currentURL reads the URL gateway dev wrote to the credentials file; the
// file is written once the port is bound.
func (e *env) currentURL() string {
	b, err := os.ReadFile(filepath.Join(e.home, "config", "gateway", "credentials.json"))
	if err != nil {
		return ""
	}
	var c struct {
		Current  string `json:"current"`
		Gateways map[string]struct {
			Token string `json:"token"`
		} `json:"gateways"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Current
}

func (e *env) token() string {
	out, err := e.gw("print-token")
	if err != nil {
		e.t.Fatalf("print-token: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// stopGateway signals the gateway and waits for it to exit.
func (e *env) stopGateway(sig syscall.Signal) {
	if e.gateway == nil {
		return
	}
	select {
	case <-e.exited:
		return
	default:
	}
	_ = e.gateway.Process.Signal(sig)
	select {
	case <-e.exited:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-e.gateway.Process.Pid, syscall.SIGKILL)
		<-e.exited
		e.t.Errorf("gateway did not exit within 60s of %v:\n%s", sig, e.gwLog.String())
	}
}

// gw runs the CLI and returns its combined output.
func (e *env) gw(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gwOK runs the CLI and fails the test if it fails.
func (e *env) gwOK(args ...string) string {
	e.t.Helper()
	out, err := e.gw(args...)
	if err != nil {
		e.t.Fatalf("gateway %s: %v\n%s\n--- gateway log:\n%s", strings.Join(args, " "), err, out, e.gwLog.String())
	}
	return out
}

// gwStdout runs the CLI, fails the test if it fails, and returns its
// standard output alone (notes to the user go to standard error).
func (e *env) gwStdout(args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.vars
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("gateway %s: %v\n%s%s\n--- gateway log:\n%s", strings.Join(args, " "), err, out, stderr.String(), e.gwLog.String())
	}
	return string(out)
}

// gwJSON runs a CLI command with -o json and decodes its standard output.
func (e *env) gwJSON(v any, args ...string) {
	e.t.Helper()
	out := e.gwStdout(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("gateway %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runPython runs a script with Debian's Dask and returns its output.
func (e *env) runPython(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := filepath.Join(e.t.TempDir(), "script.py")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, f)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readyPython is an interpreter that has imported Dask and waits for its
// script.
type readyPython struct {
	t      *testing.T
	script string
	stdin  io.WriteCloser
	out    *syncBuffer
	done   chan error
}

// startPython starts Debian's Python, imports Dask and returns once it
// has: for a script that must run soon after something the test does.
func (e *env) startPython() *readyPython {
	e.t.Helper()
	dir := e.t.TempDir()
	p := &readyPython{t: e.t, script: filepath.Join(dir, "script.py"), out: &syncBuffer{}, done: make(chan error, 1)}
	boot := filepath.Join(dir, "boot.py")
	const bootPy = "import sys, dask, distributed\nprint('imported', flush=True)\nsys.stdin.readline()\n" +
		"exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'))\n"
	if err := os.WriteFile(boot, []byte(bootPy), 0o600); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.HangBound+2*time.Minute)
	e.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, python, boot, p.script)
	cmd.Env = e.vars
	cmd.Stdout, cmd.Stderr = p.out, p.out
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(testutil.HangBound)
	for !strings.Contains(p.out.String(), "imported\n") {
		select {
		case err := <-p.done:
			e.t.Fatalf("python exited before it imported Dask: %v\n%s", err, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("python has not imported Dask after %s:\n%s", testutil.HangBound, p.out.String())
		}
	}
	return p
}

// run has the interpreter run script and returns its output, as runPython.
func (p *readyPython) run(script string) (string, error) {
	if err := os.WriteFile(p.script, []byte(script), 0o600); err != nil {
		p.t.Fatal(err)
	}
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		p.t.Fatal(err)
	}
	p.stdin.Close()
	err := <-p.done
	return strings.TrimPrefix(p.out.String(), "imported\n"), err
}

func memberPIDs(cluster string) []int { return testutil.MemberPIDs(cluster) }

// waitNoMembers waits until no process of the cluster remains.
func waitNoMembers(t *testing.T, cluster string) {
	t.Helper()
	within := testutil.HangBound // the tests run side by side: how soon is the benchmark's
	deadline := time.Now().Add(within)
	for {
		pids := memberPIDs(cluster)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of cluster %s still running after %s: %v", cluster, within, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// figure reports one of a test's figures: in its log, and on standard
// output as a line starting "figure: ", which scripts/test.sh's log
// (internal/cmd/testlog) keeps for tests that pass.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Println("figure: " + line)
}
