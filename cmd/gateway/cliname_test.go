package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCLINameFor(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	other := filepath.Join(dir, "other")
	for _, d := range []string{bin, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "gateway"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(bin, "gateway")
	t.Chdir(dir)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"on PATH", bin, "gateway"},
		{"another gateway on PATH", other, filepath.Join("bin", "gateway")},
		{"not on PATH", "", filepath.Join("bin", "gateway")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cliNameFor(exe, tc.path); got != tc.want {
				t.Errorf("cliNameFor(%s, PATH=%q) = %q, want %q", exe, tc.path, got, tc.want)
			}
		})
	}
	t.Run("outside the working directory", func(t *testing.T) {
		t.Chdir(other)
		if got := cliNameFor(exe, ""); got != exe {
			t.Errorf("got %q, want the full path %q", got, exe)
		}
	})
}
