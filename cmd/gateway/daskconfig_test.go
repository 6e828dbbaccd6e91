package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/sharing"
)

// TestDaskConfigCommand: gateway dask-config writes dask_gateway's
// configuration with a token made for it, replaces it (revoking the old
// token) when run again, leaves a file of the user's own alone unless
// --merge, prints it with --print, and warns about what overrides it.
func TestDaskConfigCommand(t *testing.T) {
	tg := newSharingGateway(t, sharing.Groups)
	dir := filepath.Join(t.TempDir(), "dask")
	t.Setenv("DASK_CONFIG", dir)
	path := filepath.Join(dir, "gateway.yaml")
	liveTokens := func() []string {
		t.Helper()
		ts, err := tg.db.ListTokens(context.Background(), "oidc:ann")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range ts {
			if tk.Name == "dask-config" && tk.RevokedAt.IsZero() {
				out = append(out, tk.ID)
			}
		}
		return out
	}

	out := tg.mustRun(t, "ann", "dask-config")
	if !strings.Contains(out, "Wrote "+path+" (mode 0600): dask_gateway's Gateway() now reaches "+tg.url+" as ann") {
		t.Errorf("dask-config:\n%s", out)
	}
	first := liveTokens()
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 || len(first) != 1 {
		t.Fatalf("after dask-config: %v %v, tokens %v", fi, err, first)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "token "+first[0]) || !strings.Contains(string(b), "password: gw_") {
		t.Errorf("the file:\n%s", b)
	}
	tg.mustRun(t, "ann", "dask-config")
	if again := liveTokens(); len(again) != 1 || again[0] == first[0] {
		t.Errorf("tokens after writing again: %v (before %v): want one new, the old revoked", again, first)
	}

	// A file of the user's own.
	mine := "gateway:\n  address: https://mine.example\n"
	if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	before := liveTokens()
	if out, err := tg.run(t, "ann", "dask-config"); err == nil || !strings.Contains(err.Error(), "settings of your own: left unchanged") ||
		!strings.Contains(err.Error(), "gateway dask-config --merge") {
		t.Errorf("dask-config over the user's file: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != mine || len(liveTokens()) != len(before) {
		t.Errorf("the user's file was changed, or a token made for nothing:\n%s", b)
	}
	// After a login, the same is a note, not a failure of the login.
	c, err := client.New(tg.url, "ann", nil)
	if err != nil {
		t.Fatal(err)
	}
	var note strings.Builder
	if err := writeDaskConfig(context.Background(), &note, c, false, false); err != nil || !strings.Contains(note.String(), "Note: your dask configuration "+path+" has settings of your own: left unchanged") {
		t.Errorf("after a login, over the user's file: %v %q", err, note.String())
	}
	if out, err := tg.run(t, "ann", "dask-config", "--merge", "--print"); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("--merge --print: %v\n%s", err, out)
	}
	out, stderr, err := tg.runStderr(t, "ann", "dask-config", "--print")
	if err != nil || !strings.HasPrefix(out, "# gateway-managed: "+tg.url) || !strings.Contains(out, "password: gw_") || !strings.Contains(stderr, "keep what follows private") {
		t.Errorf("--print: %v\n%s%s", err, out, stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != mine {
		t.Errorf("--print wrote the file:\n%s", b)
	}
	t.Setenv("DASK_GATEWAY__ADDRESS", "https://elsewhere.example")
	out = tg.mustRun(t, "ann", "dask-config", "--merge")
	for _, want := range []string{"your file as it was is in " + path + ".bak", "warning: the environment variable DASK_GATEWAY__ADDRESS sets dask_gateway's settings over this file"} {
		if !strings.Contains(out, want) {
			t.Errorf("dask-config --merge does not say %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(path + ".bak"); string(b) != mine {
		t.Errorf(".bak: %q", b)
	}
}
