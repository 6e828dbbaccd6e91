package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevScriptTerminal runs scripts/dev.sh from a fresh home in a
// pseudo-terminal (util-linux's script), as a person first sees it: the
// banner comes first, the first cluster's progress and snippet follow it,
// and no log line of the gateway lands anywhere in between: they go to the
// file the banner names.
func TestDevScriptTerminal(t *testing.T) {
	requireDask(t)
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatalf("this test runs dev.sh in a pseudo-terminal with util-linux's script (apt-get install util-linux): %v", err)
	}
	bin := gatewayBinary(t)
	home := t.TempDir()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// script -e returns the command's status; -f flushes each write, so the
	// test reads the terminal as it is drawn.
	cmd := exec.CommandContext(ctx, "script", "-qfec", "scripts/dev.sh --listen "+addr, "/dev/null")
	cmd.Dir = repo
	cmd.Env = append(filterEnv(os.Environ()), "HOME="+home, "GATEWAY_BIN="+bin, "TERM=dumb")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// Ctrl-C, as the banner says: the gateway stops its clusters.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("dev.sh did not stop within 90s of Ctrl-C")
		}
	}
	defer stop()

	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		lines = append(lines, line)
		if strings.HasPrefix(line, "The gateway keeps running") {
			break
		}
	}
	screen := strings.Join(lines, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "The gateway keeps running") {
		stop()
		rest, _ := io.ReadAll(out)
		t.Fatalf("dev.sh did not get to its first cluster; the terminal showed:\n%s%s", screen, rest)
	}
	stop()

	first := ""
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = l
			break
		}
	}
	if !strings.HasPrefix(first, "  gateway dev: FOR DEVELOPMENT ONLY") {
		t.Errorf("the banner is not the first thing on the terminal; the first line is %q in:\n%s", first, screen)
	}
	banner, requested := -1, -1
	for i, l := range lines {
		if strings.HasPrefix(l, "  gateway dev:") && banner < 0 {
			banner = i
		}
		if strings.HasPrefix(l, "Cluster ") && strings.HasSuffix(l, " requested") {
			requested = i
		}
	}
	if banner < 0 || requested < banner {
		t.Errorf("the first cluster's progress does not follow the banner (banner at line %d, request at %d):\n%s", banner, requested, screen)
	}
	logLine := regexp.MustCompile(`(^|\s)(time=|level=(DEBUG|INFO|WARN|ERROR))`)
	for i, l := range lines {
		if logLine.MatchString(l) {
			t.Errorf("line %d of the terminal is a log line: %q", i+1, l)
		}
	}
	for _, want := range []string{
		"logs:          " + filepath.Join(home, ".local", "state", "gateway", "dev.log"),
		"the CLI:       " + bin,
		"Connect from Python with dask_gateway:",
		"client = Client(",
		"In another shell: " + bin + " list",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
	}
	logged, err := os.ReadFile(filepath.Join(home, ".local", "state", "gateway", "dev.log"))
	if err != nil {
		t.Fatalf("the log file the banner names: %v", err)
	}
	if !strings.Contains(string(logged), "started member") {
		t.Errorf("the log file has not the gateway's logs:\n%s", logged)
	}
}
