// Package bench runs benchmark suites on gateway clusters: A/B tests of
// environments on identical clusters, interleaved, with metrics read from
// each cluster's scheduler. The Python side (runner.py) runs in the
// environment's own Python as a Dask client through the gateway; this
// package decides what runs when, enforces the per-sample timeout by
// killing the runner, and stops every cluster it started.
package bench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed runner.py
var runnerScript []byte

// RunnerScript is the Python runner, for tools that ship it elsewhere.
func RunnerScript() []byte { return append([]byte(nil), runnerScript...) }

// ErrTimeout is a sample that did not finish within its timeout.
var ErrTimeout = errors.New("timed out")

// ErrRunnerDied is a runner that exited or broke the protocol: its cluster
// connection went away, or the interpreter crashed.
var ErrRunnerDied = errors.New("the benchmark runner exited")

// ErrNoDask is a runner Python without distributed (Dask's client), which
// runs the benchmarks: every sample would fail.
var ErrNoDask = errors.New("the Python that runs the benchmarks' client has no distributed (Dask's client)")

// Listing is what a suite holds.
type Listing struct {
	Benchmarks []string          `json:"benchmarks"`
	Errors     []FileError       `json:"errors"`
	Versions   map[string]string `json:"versions"`
}

// Select is the benchmarks whose id matches pattern (all for nil).
func (l Listing) Select(pattern *regexp.Regexp) []string {
	var out []string
	for _, b := range l.Benchmarks {
		if pattern == nil || pattern.MatchString(b) {
			out = append(out, b)
		}
	}
	return out
}

// FileError is a suite file that could not be imported.
type FileError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Result is one run of one benchmark, as the runner reports it.
type Result struct {
	ID      string             `json:"id"`
	OK      bool               `json:"ok"`
	WallS   float64            `json:"wall_s"`
	Metrics map[string]float64 `json:"metrics"`
	Error   string             `json:"error"`
	// Connected is false when the runner's client lost its scheduler.
	Connected *bool `json:"connected"`
}

// writeScript puts the runner in dir and returns its path.
func writeScript(dir string) (string, error) {
	p := filepath.Join(dir, "gateway_bench_runner.py")
	return p, os.WriteFile(p, runnerScript, 0o600)
}

// List imports the suite with python and lists its benchmarks. A file
// that does not import is in Errors; only a runner that cannot start at
// all is an error.
func List(ctx context.Context, python, suite string) (Listing, error) {
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return Listing{}, err
	}
	defer os.RemoveAll(dir)
	script, err := writeScript(dir)
	if err != nil {
		return Listing{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, "--suite", suite, "--list")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 16 << 10}
	out, err := cmd.Output()
	if err != nil {
		return Listing{}, fmt.Errorf("listing the suite %s with %s: %w\n%s", suite, python, err, strings.TrimSpace(stderr.String()))
	}
	var l Listing
	if err := json.Unmarshal([]byte(lastLine(string(out))), &l); err != nil {
		return Listing{}, fmt.Errorf("listing the suite %s with %s: unexpected output %q: %w", suite, python, tailString(string(out), 300), err)
	}
	// The same Python runs the benchmarks' client: without Dask's client
	// every sample would fail, after clusters were started for nothing.
	if l.Versions["distributed"] == "" {
		return Listing{}, fmt.Errorf("%w: %s", ErrNoDask, python)
	}
	return l, nil
}

// CheckPython reports the distributed version of python, or ErrNoDask
// (or why it does not run at all): the gateway checks bench.python with
// it before it accepts schedules.
func CheckPython(ctx context.Context, python string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", "import distributed; print(distributed.__version__)")
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 16 << 10}
	out, err := cmd.Output()
	switch {
	case err == nil && strings.TrimSpace(string(out)) != "":
		return strings.TrimSpace(string(out)), nil
	case strings.Contains(stderr.String(), "No module named"):
		return "", fmt.Errorf("%w: %s", ErrNoDask, python)
	case err == nil:
		return "", fmt.Errorf("%w: %s printed no version", ErrNoDask, python)
	}
	return "", fmt.Errorf("%s: %w: %s", python, err, tailString(strings.TrimSpace(stderr.String()), 300))
}

// Conn is how a runner reaches its cluster.
type Conn struct {
	Address    string // tls://host:port of the gateway's proxy
	ServerName string // daskgateway-<name>
	Cert, Key  string // PEM
}

// runner is one live Python runner connected to one cluster: a process
// here (localProc) or next to the cluster's scheduler (agentProc).
type runner struct{ p proc }

// proc is a runner's process, wherever it runs.
type proc interface {
	// send writes one line to its standard input.
	send(ctx context.Context, line []byte) error
	// closeInput ends its standard input: it closes its client and exits.
	closeInput(ctx context.Context)
	// output is its standard output, a line at a time; closed at the end.
	output() <-chan []byte
	// exited is closed once it has exited.
	exited() <-chan struct{}
	// stderr is the end of what it wrote to standard error.
	stderr() string
	// kill ends it at once, waits for it and removes its files.
	kill()
}

// localProc is a runner process on this host.
type localProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte
	dir   string
	errs  *limitedWriter
	done  chan struct{}
}

func (p *localProc) send(_ context.Context, line []byte) error {
	_, err := p.stdin.Write(line)
	return err
}
func (p *localProc) closeInput(context.Context) { _ = p.stdin.Close() }
func (p *localProc) output() <-chan []byte      { return p.lines }
func (p *localProc) exited() <-chan struct{}    { return p.done }
func (p *localProc) stderr() string             { return p.errs.String() }

func (p *localProc) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
	go func() {
		for range p.lines { // let the reader finish
		}
	}()
	os.RemoveAll(p.dir)
}

// startRunner starts python on the suite, connected to the cluster, and
// waits for it to say it is ready.
func startRunner(ctx context.Context, python, suite string, c Conn, stderrLog io.Writer) (*runner, Listing, error) {
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return nil, Listing{}, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	script, err := writeScript(dir)
	if err != nil {
		return nil, Listing{}, err
	}
	// The key stays in a private file, never on the command line.
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, []byte(c.Cert), 0o600); err != nil {
		return nil, Listing{}, err
	}
	if err := os.WriteFile(key, []byte(c.Key), 0o600); err != nil {
		return nil, Listing{}, err
	}
	cmd := exec.Command(python, script, "--suite", suite, "--address", c.Address, "--server-name", c.ServerName, "--cert", cert, "--key", key)
	cmd.Dir = dir
	// Its own process group, so that a kill takes whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &localProc{cmd: cmd, dir: dir, lines: make(chan []byte, 4), done: make(chan struct{}), errs: &limitedWriter{w: stderrLog, n: 1 << 20}}
	cmd.Stderr = p.errs
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, Listing{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, Listing{}, err
	}
	if err := cmd.Start(); err != nil {
		return nil, Listing{}, fmt.Errorf("starting the benchmark runner with %s: %w", python, err)
	}
	ok = true
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return hello(ctx, p)
}

// hello waits for a started runner to say it is connected. It says what
// it found in the suite (runners older than the listing in their hello
// give only the versions).
func hello(ctx context.Context, p proc) (*runner, Listing, error) {
	r := &runner{p: p}
	var h struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
		Listing
	}
	line, err := r.next(ctx, 2*time.Minute)
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err == nil && !h.Ready {
		err = fmt.Errorf("the benchmark runner could not connect to the cluster: %s", h.Error)
	}
	if err != nil {
		r.kill()
		return nil, Listing{}, err
	}
	return r, h.Listing, nil
}

// next waits for the runner's next line.
func (r *runner) next(ctx context.Context, timeout time.Duration) ([]byte, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-r.p.output():
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrRunnerDied, tailString(r.p.stderr(), 600))
		}
		return line, nil
	case <-t.C:
		return nil, ErrTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// do runs one benchmark once. On a timeout, a cancelled context or a
// broken runner, the runner is killed: a hung Python thread cannot be
// interrupted otherwise.
func (r *runner) do(ctx context.Context, id string, timeout time.Duration) (Result, error) {
	req, _ := json.Marshal(map[string]string{"id": id})
	if err := r.p.send(ctx, append(req, '\n')); err != nil {
		r.kill()
		return Result{}, fmt.Errorf("%w: %v", ErrRunnerDied, err)
	}
	line, err := r.next(ctx, timeout)
	if err != nil {
		r.kill()
		return Result{}, err
	}
	var res Result
	if err := json.Unmarshal(line, &res); err != nil || res.ID != id {
		r.kill()
		return Result{}, fmt.Errorf("%w: unexpected answer %q", ErrRunnerDied, tailString(string(line), 200))
	}
	return res, nil
}

// close ends the runner politely (EOF: it closes its client), then by force.
func (r *runner) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r.p.closeInput(ctx)
	select {
	case <-r.p.exited():
	case <-ctx.Done():
	}
	r.kill()
}

func (r *runner) kill() { r.p.kill() }

// limitedWriter keeps at most n bytes (the end is dropped), for logs of
// processes that may write without bound.
type limitedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	n      int
	passed int
	buf    strings.Builder
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil && l.passed < l.n {
		keep := p
		if len(keep) > l.n-l.passed {
			keep = keep[:l.n-l.passed]
		}
		l.passed += len(keep)
		_, _ = l.w.Write(keep)
	}
	// Keep the end: that is where a traceback says what went wrong.
	l.buf.Write(p)
	if l.buf.Len() > 2*l.n {
		rest := l.buf.String()[l.buf.Len()-l.n:]
		l.buf.Reset()
		l.buf.WriteString(rest)
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func tailString(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
