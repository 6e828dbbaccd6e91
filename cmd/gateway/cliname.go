package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// cliName is how a person in this shell runs this binary: "gateway" when
// that name on PATH is this very file, else its path relative to the
// working directory (bin/gateway after scripts/dev.sh), else its full
// path. Hints that name the CLI use it, so that they work when pasted.
func cliName() string {
	exe, err := os.Executable()
	if err != nil {
		return "gateway"
	}
	return cliNameFor(exe, os.Getenv("PATH"))
}

func cliNameFor(exe, path string) string {
	if onPath, err := lookPathIn("gateway", path); err == nil && sameFile(onPath, exe) {
		return "gateway"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			if !strings.Contains(rel, string(filepath.Separator)) {
				rel = "." + string(filepath.Separator) + rel
			}
			return rel
		}
	}
	return exe
}

// lookPathIn is exec.LookPath with the given PATH rather than the
// process's, so that tests need not change the environment.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
