package capture

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/testutil"
)

// systemPython is Debian's interpreter, which has python3-distributed.
const systemPython = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("%s: %v (apt-get install python3-distributed)", systemPython, err))
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// writeFiles creates files (by slash-separated path under root) with their
// contents; a path ending in "/" is an empty directory.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// editable records an editable install of project in site the way pip
// does: a dist-info directory with METADATA, direct_url.json (with
// dir_info.editable) and, when topLevel is given, top_level.txt, and a .pth
// file with the project's import path.
func editable(t *testing.T, site, name, version, project string, topLevel ...string) {
	t.Helper()
	di := strings.ReplaceAll(name, "-", "_") + "-" + version + ".dist-info"
	files := map[string]string{
		di + "/METADATA":        fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		di + "/direct_url.json": fmt.Sprintf(`{"url": "file://%s", "dir_info": {"editable": true}}`, project),
		di + "/RECORD":          "",
		"__editable__." + strings.ReplaceAll(name, "-", "_") + "-" + version + ".pth": project + "\n",
	}
	if len(topLevel) > 0 {
		files[di+"/top_level.txt"] = strings.Join(topLevel, "\n") + "\n"
	}
	writeFiles(t, site, files)
}

func zipNames(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if !f.Modified.Equal(zipTime) && !f.Modified.UTC().Equal(zipTime) {
			t.Errorf("%s: modified %v, want %v", f.Name, f.Modified, zipTime)
		}
		want := os.FileMode(0o644)
		if strings.HasSuffix(f.Name, "/") {
			want = os.ModeDir | 0o755
		}
		if f.Mode() != want {
			t.Errorf("%s: mode %v, want %v", f.Name, f.Mode(), want)
		}
	}
	return names
}

// fixture is a client environment: a site directory with editable installs
// (a src layout and a flat layout, both without top_level.txt, one with
// top_level.txt, and one whose source is gone), and a directory of local
// modules.
type fixture struct {
	site, lib, flat, named, dir string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{
		site:  filepath.Join(root, "site"),
		lib:   filepath.Join(root, "my lib"), // a space: percent-encoded in real file:// URLs
		flat:  filepath.Join(root, "flat"),
		named: filepath.Join(root, "named"),
		dir:   filepath.Join(root, "work"),
	}
	writeFiles(t, f.lib, map[string]string{
		"pyproject.toml":                                 "[project]\nname = \"my-lib\"\n",
		"README.md":                                      "readme",
		"src/mylib/__init__.py":                          "X = 42\n",
		"src/mylib/sub/__init__.py":                      "",
		"src/mylib/sub/mod.py":                           "Y = 'sub'\n",
		"src/mylib/data.json":                            `{"k": 1}`,
		"src/mylib/__pycache__/x.cpython-311.pyc":        "bytecode",
		"src/mylib/stale.pyc":                            "bytecode",
		"src/mylib/.hidden":                              "secret",
		"src/mylib/.cache/x":                             "cache",
		"src/mylib/node_modules/x.js":                    "js",
		"src/mylib/build/out.txt":                        "build output",
		"src/mylib/dist/__init__.py":                     "# a subpackage named dist is code\n",
		"src/mylib/fast.cpython-311-x86_64-linux-gnu.so": "ELF",
		"tests/__init__.py":                              "",
		"tests/test_x.py":                                "",
	})
	writeFiles(t, f.flat, map[string]string{
		"setup.py":          "raise SystemExit('not code')\n",
		"flatmod.py":        "Z = 'flat'\n",
		"other.py":          "",
		"tests/__init__.py": "",
		"docs/__init__.py":  "",
	})
	writeFiles(t, f.named, map[string]string{
		"src/named/mod.py": "N = 'namespace'\n", // a namespace package
		"named.py":         "# shadowed by src/named\n",
		"unlisted.py":      "",
	})
	writeFiles(t, f.dir, map[string]string{
		"helpers.py":              "H = 7\n",
		"pkg/__init__.py":         "P = 'pkg'\n",
		"pkg/util.py":             "",
		"pkg/templates/a.html":    "<p>",
		"notes.txt":               "not a module",
		"setup.py":                "",
		"data/big.csv":            "1,2,3\n",
		".venv/pyvenv.cfg":        "home = /usr/bin\n",
		".venv/lib/x.py":          "",
		"venv/pyvenv.cfg":         "home = /usr/bin\n",
		"venv/__init__.py":        "",
		".hidden.py":              "",
		"__pycache__/__init__.py": "",
		"build/__init__.py":       "# a package named build is code\n",
		"node_modules/x.py":       "",
	})
	editable(t, f.site, "My_Lib", "1.0", strings.ReplaceAll(f.lib, " ", "%20"))
	editable(t, f.site, "flat-proj", "2.0", f.flat)
	editable(t, f.site, "Named.Proj", "3.0", f.named, "named", "_named_ext")
	editable(t, f.site, "gone", "0.1", filepath.Join(root, "nowhere"))
	return f
}

func (f fixture) opts() Options {
	return Options{Python: systemPython, Dir: f.dir, Env: []string{"PYTHONPATH=" + f.site}}
}

func TestCapture(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	fx := newFixture(t)

	wantZips := map[string][]string{
		"my-lib": {"mylib/", "mylib/__init__.py", "mylib/data.json", "mylib/dist/", "mylib/dist/__init__.py",
			"mylib/sub/", "mylib/sub/__init__.py", "mylib/sub/mod.py"},
		"flat-proj":  {"flatmod.py", "other.py"},
		"named-proj": {"named/", "named/mod.py"},
		"local":      {"build/", "build/__init__.py", "helpers.py", "pkg/", "pkg/__init__.py", "pkg/templates/", "pkg/templates/a.html", "pkg/util.py"},
	}

	tests := []struct {
		name     string
		opts     func(Options) Options
		gpu      bool
		platform string
		parts    []string
		local    []string // the local part's entries, if not wantZips'
	}{
		{"defaults", func(o Options) Options { return o }, false, "linux/amd64", []string{"flat-proj", "local", "my-lib", "named-proj"}, nil},
		{"code directory is an editable project", func(o Options) Options { o.Dir = fx.flat; return o }, false, "linux/amd64",
			[]string{"flat-proj", "local", "my-lib", "named-proj"}, []string{"docs/", "docs/__init__.py", "tests/", "tests/__init__.py"}},
		{"no code directory", func(o Options) Options { o.Dir = ""; return o }, false, "linux/amd64", []string{"flat-proj", "my-lib", "named-proj"}, nil},
		{"GPU forced, another platform", func(o Options) Options { o.GPU = "yes"; o.Platform = "aarch64"; return o }, true, "linux/arm64", []string{"flat-proj", "local", "my-lib", "named-proj"}, nil},
		{"GPU off", func(o Options) Options { o.GPU = "No"; return o }, false, "linux/amd64", []string{"flat-proj", "local", "my-lib", "named-proj"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, err := Capture(ctx, tt.opts(fx.opts()))
			if err != nil {
				t.Fatal(err)
			}
			s := env.Spec
			if s.Python != "3.11" || s.Platform != tt.platform || s.GPU != tt.gpu {
				t.Errorf("python %q platform %q gpu %v, want 3.11 %s %v", s.Python, s.Platform, s.GPU, tt.platform, tt.gpu)
			}
			if env.Interpreter != systemPython {
				t.Errorf("interpreter %q", env.Interpreter)
			}
			names := map[string]string{}
			for _, p := range s.Packages {
				names[p.Name] = p.Version
			}
			for _, want := range []string{"distributed", "dask", "cloudpickle"} {
				if names[want] == "" {
					t.Errorf("package %s missing", want)
				}
			}
			for _, editable := range []string{"my-lib", "flat-proj", "named-proj", "gone"} {
				if _, ok := names[editable]; ok {
					t.Errorf("editable %s is among the packages", editable)
				}
			}
			var parts []string
			for _, cp := range s.Code {
				parts = append(parts, cp.Name)
				if d := images.DigestOf(env.Code[cp.Name]); d != cp.Digest {
					t.Errorf("part %s: digest %s, content %s", cp.Name, cp.Digest, d)
				}
				want := wantZips[cp.Name]
				if cp.Name == LocalPart && tt.local != nil {
					want = tt.local
				}
				if got := zipNames(t, env.Code[cp.Name]); !reflect.DeepEqual(got, want) {
					t.Errorf("part %s: entries\n%q\nwant\n%q", cp.Name, got, want)
				}
			}
			if !reflect.DeepEqual(parts, tt.parts) || len(env.Code) != len(tt.parts) {
				t.Errorf("code parts %q (%d zips), want %q", parts, len(env.Code), tt.parts)
			}
			if _, err := images.CodeLayer(s, images.CodeFromBytes(env.Code)); err != nil {
				t.Errorf("CodeLayer: %v", err)
			}
			notes := strings.Join(env.Notes, "\n")
			for _, want := range []string{
				`editable package My_Lib 1.0: code part "my-lib" from ` + fx.lib + " (mylib/)",
				"skipped 1 compiled extension file(s), which cannot be imported from a zip (" + filepath.Join(fx.lib, "src/mylib/fast.cpython-311-x86_64-linux-gnu.so)"),
				`editable package flat-proj 2.0: code part "flat-proj" from ` + fx.flat + " (flatmod.py, other.py)",
				"editable package flat-proj 2.0: not code: docs, setup.py, tests in " + fx.flat,
				`editable package Named.Proj 3.0: code part "named-proj" from ` + fx.named + " (named/)",
				"editable package Named.Proj 3.0: did not find _named_ext under " + fx.named,
				"editable package gone 0.1: its source directory",
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("notes do not mention %q:\n%s", want, notes)
				}
			}
			if tt.local != nil {
				if want := "local modules of " + fx.flat + `: already code of an editable package: flatmod.py (in code part "flat-proj"), other.py (in code part "flat-proj")`; !strings.Contains(notes, want) {
					t.Errorf("notes do not mention %q:\n%s", want, notes)
				}
			} else if tt.opts(fx.opts()).Dir != "" && (!strings.Contains(notes, `local modules of `+fx.dir+`: code part "local" (build/, helpers.py, pkg/)`) ||
				!strings.Contains(notes, "local modules of "+fx.dir+": not code: setup.py")) {
				t.Errorf("notes do not list the local modules:\n%s", notes)
			}
		})
	}
}

func TestCaptureDeterministic(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	fx := newFixture(t)
	first, err := Capture(ctx, fx.opts())
	if err != nil {
		t.Fatal(err)
	}
	// Other modification times and another creation order of the same
	// code give the same zips.
	later := time.Now().Add(time.Hour)
	for _, dir := range []string{fx.lib, fx.dir} {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, later, later) })
	}
	helpers := filepath.Join(fx.dir, "helpers.py")
	data, _ := os.ReadFile(helpers)
	os.Remove(helpers)
	os.WriteFile(helpers, data, 0o600)
	second, err := Capture(ctx, fx.opts())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.Spec, second.Spec) || !reflect.DeepEqual(first.Code, second.Code) {
		t.Errorf("same code, different captures:\n%+v\n%+v", first.Spec.Code, second.Spec.Code)
	}
	h1, _ := first.Spec.Hash()
	h2, _ := second.Spec.Hash()
	if h1 != h2 || h1 == "" {
		t.Errorf("hashes %q and %q", h1, h2)
	}

	// Changed code changes its part's digest and the hash.
	os.WriteFile(helpers, []byte("H = 8\n"), 0o644)
	third, err := Capture(ctx, fx.opts())
	if err != nil {
		t.Fatal(err)
	}
	if h3, _ := third.Spec.Hash(); h3 == h1 {
		t.Error("changed code, same hash")
	}
	if bytes.Equal(third.Code["local"], first.Code["local"]) || !bytes.Equal(third.Code["my-lib"], first.Code["my-lib"]) {
		t.Error("a change to a local module must change the local part and only it")
	}
}

// TestCodeImportable puts the code zips on PYTHONPATH, as images do, and
// imports from them.
func TestCodeImportable(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	fx := newFixture(t)
	env, err := Capture(ctx, fx.opts())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var path []string
	for name, b := range env.Code {
		p := filepath.Join(out, name+".zip")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		path = append(path, p)
	}
	script := `
import mylib, mylib.sub.mod, mylib.dist, flatmod, named.mod, helpers, pkg, pkg.util, importlib.resources as r
assert ".zip" in mylib.__file__ and ".zip" in helpers.__file__, (mylib.__file__, helpers.__file__)
print(mylib.X, mylib.sub.mod.Y, flatmod.Z, named.mod.N, helpers.H, pkg.P, r.files("mylib").joinpath("data.json").read_text())
`
	cmd := exec.CommandContext(ctx, systemPython, "-c", script)
	cmd.Dir = out
	cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(path, ":"), "PYTHONDONTWRITEBYTECODE=1")
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if want := `42 sub flat namespace 7 pkg {"k": 1}`; strings.TrimSpace(string(got)) != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// script writes an executable shell script.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCaptureErrors(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx := testContext(t)
	tmp := t.TempDir()

	venv := filepath.Join(tmp, "venv")
	if out, err := exec.CommandContext(ctx, systemPython, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v: %s", err, out)
	}
	venvPython := filepath.Join(venv, "bin", "python")

	big := filepath.Join(tmp, "big")
	writeFiles(t, big, map[string]string{
		"small.py":         "S = 1\n",
		"data/__init__.py": "",
		"data/huge.csv":    strings.Repeat("x", 3000),
		"model.py":         strings.Repeat("#", 2000) + "\n",
	})
	failing := script(t, tmp, "failing", `echo "Fatal Python error: broken" >&2; exit 3`)
	garbage := script(t, tmp, "garbage", `echo hello`)
	slow := script(t, tmp, "slow", `exec sleep 30`)
	notExec := filepath.Join(tmp, "notexec")
	os.WriteFile(notExec, []byte("x"), 0o644)

	tests := []struct {
		name string
		opts Options
		ctx  func() (context.Context, context.CancelFunc)
		want []string
	}{
		{"missing interpreter", Options{Python: filepath.Join(tmp, "nope", "python3")}, nil,
			[]string{"no Python interpreter", "nope/python3 does not exist", "pass --python"}},
		{"interpreter not on PATH", Options{Python: "python2.1-nonexistent"}, nil,
			[]string{`"python2.1-nonexistent" is not on PATH`, "pass --python"}},
		{"not executable", Options{Python: notExec}, nil, []string{"not an executable file", "pass --python"}},
		{"no distributed", Options{Python: venvPython}, nil,
			[]string{"the Python at " + venvPython + " has no Dask distributed installed; pass --python with the interpreter your Dask client runs"}},
		{"interpreter fails", Options{Python: failing}, nil, []string{"inspecting the Python at " + failing, "exit status 3", "Fatal Python error: broken"}},
		{"not a Python", Options{Python: garbage}, nil, []string{"inspecting the Python at " + garbage, "no JSON document"}},
		{"timeout", Options{Python: slow}, func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) },
			[]string{"inspecting the Python at " + slow + ": timed out"}},
		{"code too large", Options{Python: systemPython, Dir: big, MaxCodeBytes: 4000}, nil,
			[]string{"the user code is too large: 4.9 KiB in 4 files, over the limit of 3.9 KiB", "largest files:\n  " + filepath.Join(big, "data", "huge.csv") + " (2.9 KiB)\n  " + filepath.Join(big, "model.py") + " (2.0 KiB)", "move data files out", "--code-dir"}},
		{"code directory missing", Options{Python: systemPython, Dir: filepath.Join(tmp, "absent")}, nil, []string{"code directory " + filepath.Join(tmp, "absent") + " does not exist"}},
		{"code directory is a file", Options{Python: systemPython, Dir: notExec}, nil, []string{"code directory " + notExec + " is not a directory"}},
		{"bad GPU", Options{Python: systemPython, GPU: "maybe"}, nil, []string{`GPU setting "maybe" is not one of auto, yes, no`}},
		{"negative limit", Options{Python: systemPython, MaxCodeBytes: -1}, nil, []string{"negative"}},
		{"bad platform", Options{Python: systemPython, Platform: "windows/amd64"}, nil, []string{`platform "windows/amd64" is not one of linux/amd64, linux/arm64`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ctx
			if tt.ctx != nil {
				var cancel context.CancelFunc
				c, cancel = tt.ctx()
				defer cancel()
			}
			var err error
			testutil.Returns(t, "Capture with bad options", func() { _, err = Capture(c, tt.opts) })
			if err == nil {
				t.Fatal("Capture() succeeded")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

// TestCaptureDefaultInterpreter looks python3, then python, up on PATH.
func TestCaptureDefaultInterpreter(t *testing.T) {
	needPython(t)
	ctx := testContext(t)
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	_, err := Capture(ctx, Options{})
	if err == nil || !errors.Is(err, ErrNoInterpreter) || !strings.Contains(err.Error(), "neither python3 nor python is on PATH; pass --python") {
		t.Errorf("Capture() with no Python on PATH: %v", err)
	}

	// "python" when there is no "python3".
	if err := os.Symlink(systemPython, filepath.Join(empty, "python")); err != nil {
		t.Fatal(err)
	}
	env, err := Capture(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if env.Spec.Python != "3.11" || !filepath.IsAbs(env.Interpreter) {
		t.Errorf("python %q interpreter %q", env.Spec.Python, env.Interpreter)
	}
}

// TestCaptureShadowing runs the probe from a directory whose modules would
// shadow the standard library and whose dist-info would look installed.
func TestCaptureShadowing(t *testing.T) {
	needPython(t)
	ctx := testContext(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"json.py":                      "raise SystemExit('shadowed')\n",
		"stray-9.9.dist-info/METADATA": "Metadata-Version: 2.1\nName: stray\nVersion: 9.9\n",
	})
	t.Chdir(dir)
	env, err := Capture(ctx, Options{Python: systemPython})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(env.Spec.Packages, func(p images.Package) bool { return p.Name == "stray" }) {
		t.Error("a dist-info in the current directory counts as installed")
	}
}
