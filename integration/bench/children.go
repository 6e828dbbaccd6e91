package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// children are the processes a figure starts: each prints its address as
// its first line and ends when its stdin closes, so that none outlives the
// benchmark even if it is killed.
type children struct{ list []child }

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// self runs this program in another role (see main) and returns the line
// it prints first.
func (cs *children) self(role string, args ...string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return cs.start(exe, append([]string{role}, args...)...)
}

// start runs a program and returns the line it prints first.
func (cs *children) start(name string, args ...string) (string, error) {
	role := filepath.Base(name)
	if len(args) > 0 && strings.HasPrefix(args[0], "__") {
		role = args[0]
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s: %w", role, err)
	}
	cs.list = append(cs.list, child{cmd, stdin})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case s := <-line:
		if s == "" {
			return "", fmt.Errorf("%s exited without an address", role)
		}
		return s, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("%s printed no address within 30s", role)
	}
}

// pid is the process id of the i-th child.
func (cs *children) pid(i int) int { return cs.list[i].cmd.Process.Pid }

// close ends the children, newest first, killing any that lingers.
func (cs *children) close() {
	for _, c := range slices.Backward(cs.list) {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	cs.list = nil
}
