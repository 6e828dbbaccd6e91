package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// gatewayKeys reads what dask would take from the file's gateway section.
func gatewayKeys(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not YAML: %v\n%s", path, err, b)
	}
	return doc["gateway"]
}

// TestWriteDaskConfig: where the file goes and with which modes, and what
// happens to what was there: nothing, dask_gateway's commented template,
// a file of ours (replaced), a file of the user's own (left alone unless
// merged, then kept as .bak), a link (replaced, not followed).
func TestWriteDaskConfig(t *testing.T) {
	c := DaskConfig{Gateway: "https://gw.example", User: "ann", Token: "gw_secret", TokenID: "tok_1"}
	for _, tc := range []struct {
		name    string
		before  string // the file's text; "" none
		dirMode os.FileMode
		merge   bool
		state   DaskFileState
		err     error
		keep    []string // keys of the user's kept after a merge
	}{
		{name: "no file, no directory", state: DaskFileAbsent},
		{name: "a group-readable directory", dirMode: 0o755, state: DaskFileAbsent},
		{name: "dask_gateway's template", before: "# gateway:\n#   address: null\n\n#   auth:\n#     type: basic\n", state: DaskFileTemplate},
		{name: "ours", before: "# gateway-managed: https://old.example token tok_0\ngateway:\n  address: https://old.example\n", state: DaskFileOurs},
		{name: "the user's own", before: "gateway:\n  address: https://mine.example\n", state: DaskFileForeign, err: ErrForeignDaskConfig},
		{name: "the user's own, merged", before: "gateway:\n  address: https://mine.example\n  proxy_address: 8786\n  cluster:\n    options:\n      env: mine\ndistributed:\n  comm:\n    timeouts:\n      connect: 60s\n",
			merge: true, state: DaskFileForeign, keep: []string{"cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dask")
			t.Setenv("DASK_CONFIG", dir)
			_, path, err := DaskConfigPath()
			if err != nil || path != filepath.Join(dir, "gateway.yaml") {
				t.Fatalf("path %s %v", path, err)
			}
			if tc.dirMode != 0 || tc.before != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			state, notes, err := WriteDaskConfig(path, c, tc.merge)
			if state != tc.state || !errors.Is(err, tc.err) {
				t.Fatalf("state %d, err %v; want %d, %v", state, err, tc.state, tc.err)
			}
			if tc.err != nil {
				if b, _ := os.ReadFile(path); string(b) != tc.before {
					t.Fatalf("the user's file was changed:\n%s", b)
				}
				return
			}
			if m := mode(t, path); m != 0o600 {
				t.Errorf("file mode %v, want -rw-------", m)
			}
			if m := mode(t, dir).Perm(); m != 0o700 {
				t.Errorf("directory mode %v, want 0700", m)
			}
			if tc.dirMode != 0 && (len(notes) == 0 || !strings.Contains(notes[0], "made "+dir+" private")) {
				t.Errorf("making the directory private is not said: %v", notes)
			}
			gw := gatewayKeys(t, path)
			auth, _ := gw["auth"].(map[string]any)
			kwargs, _ := auth["kwargs"].(map[string]any)
			if gw["address"] != "https://gw.example" || gw["proxy-address"] != "tls://gw.example:443" || auth["type"] != "basic" ||
				kwargs["password"] != "gw_secret" || kwargs["username"] != "ann" {
				t.Errorf("gateway section: %v", gw)
			}
			if _, ok := gw["proxy_address"]; ok {
				t.Errorf("the user's proxy_address (the same key to dask) is left over: %v", gw)
			}
			for _, k := range tc.keep {
				if _, ok := gw[k]; !ok {
					t.Errorf("the merge lost the user's gateway.%s: %v", k, gw)
				}
			}
			st, back, err := ReadDaskConfig(path)
			if err != nil || st != DaskFileOurs || back.TokenID != "tok_1" || back.Gateway != c.Gateway {
				t.Errorf("read back: %d %+v %v", st, back, err)
			}
			if tc.merge {
				if b, err := os.ReadFile(path + ".bak"); err != nil || string(b) != tc.before || mode(t, path+".bak") != 0o600 {
					t.Errorf("the user's file is not kept as .bak (mode 0600): %q %v", b, err)
				}
				if b, _ := os.ReadFile(path); !strings.Contains(string(b), "connect: 60s") {
					t.Errorf("the merge lost the user's other settings:\n%s", b)
				}
			}
		})
	}
}

// TestWriteDaskConfigReplacesLinks: a link where the file goes is replaced
// by the file, and whatever it pointed at is left alone.
func TestWriteDaskConfigReplacesLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere.yaml")
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteDaskConfig(path, DaskConfig{Gateway: "http://127.0.0.1:8000", Token: "gw_x", TokenID: "tok_x"}, false); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode %v: want a regular file of mode 0600", m)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was written: %v", err)
	}
}

// TestRemoveDaskConfig: only a file this package wrote for that gateway
// is removed, returning its token.
func TestRemoveDaskConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	if _, _, err := WriteDaskConfig(path, DaskConfig{Gateway: "http://127.0.0.1:8000", Token: "gw_x", TokenID: "tok_x"}, false); err != nil {
		t.Fatal(err)
	}
	if id, err := RemoveDaskConfig(path, "http://other:8000"); id != "" || err != nil {
		t.Fatalf("another gateway's removal: %q %v", id, err)
	}
	if id, err := RemoveDaskConfig(path, "http://127.0.0.1:8000/"); id != "tok_x" || err != nil {
		t.Fatalf("removal: %q %v", id, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file is still there: %v", err)
	}
	if err := os.WriteFile(path, []byte("gateway:\n  address: mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if id, err := RemoveDaskConfig(path, "http://127.0.0.1:8000"); id != "" || err != nil {
		t.Fatalf("the user's own file: %q %v", id, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the user's own file was removed: %v", err)
	}
}

// TestDaskOverrides: what would override the file in dask's view.
func TestDaskOverrides(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DASK_GATEWAY__ADDRESS", "http://elsewhere")
	for name, text := range map[string]string{
		"zz-team.yaml": "gateway:\n  address: http://team\n",  // read after gateway.yaml
		"aa.yaml":      "gateway:\n  address: http://early\n", // read before: ours wins
		"other.yml":    "distributed:\n  x: 1\n",
		"gateway.yaml": "gateway: {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(DaskOverrides(dir), "; ")
	if !strings.Contains(got, "DASK_GATEWAY__ADDRESS") || !strings.Contains(got, "zz-team.yaml") || strings.Contains(got, "aa.yaml") || strings.Contains(got, "other.yml") {
		t.Errorf("overrides: %s", got)
	}
}
