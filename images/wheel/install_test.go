package wheel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/testutil"
)

const sp = "usr/local/lib/python3.11/site-packages"

// layerCase is a wheel to install and the exact layer it must give.
type layerCase struct {
	name   string
	fn     string
	files  []zent
	opts   wheelOpts
	layout Layout
	// want lists every entry ("path mode" for directories, "path mode size"
	// for files, as tent.String prints them).
	want     []string
	contents map[string]string // exact contents of some files
	root     string            // the .dist-info's directory (default sp)
	info     Info
}

func TestWriteLayer(t *testing.T) {
	platlib := testLayout
	platlib.Platlib = "/usr/local/lib/python3.11/platlib"
	script := "# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
	argv := "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
	cases := []layerCase{{
		name: "pure python",
		fn:   "demo_pkg-1.0-py3-none-any.whl",
		files: []zent{
			{name: "demo_pkg/", data: ""},
			{name: "demo_pkg/__init__.py", data: "X = 1\n"},
			{name: "demo_pkg/run.py", data: "print('run')\n", mode: 0o100775},
			{name: "demo_pkg/sub/data.json", data: "{}"},
		},
		want: []string{
			"usr 755", "usr/local 755", "usr/local/lib 755", "usr/local/lib/python3.11 755", sp + " 755",
			sp + "/demo_pkg 755", sp + "/demo_pkg/__init__.py 644 6", sp + "/demo_pkg/run.py 755 13",
			sp + "/demo_pkg/sub 755", sp + "/demo_pkg/sub/data.json 644 2",
			sp + "/demo_pkg-1.0.dist-info 755", sp + "/demo_pkg-1.0.dist-info/INSTALLER 644 8",
			sp + "/demo_pkg-1.0.dist-info/METADATA 644 91", sp + "/demo_pkg-1.0.dist-info/RECORD 644 *",
			sp + "/demo_pkg-1.0.dist-info/WHEEL 644 75",
		},
		contents: map[string]string{
			sp + "/demo_pkg/__init__.py":             "X = 1\n",
			sp + "/demo_pkg-1.0.dist-info/INSTALLER": "gateway\n",
		},
		info: Info{Name: "demo-pkg", Version: "1.0", DistInfo: "demo_pkg-1.0.dist-info", Files: 7},
	}, {
		name: "console and gui scripts",
		fn:   "demo-2.0-py2.py3-none-any.whl",
		files: []zent{
			{name: "demo/__init__.py", data: ""},
			{name: "demo-2.0.dist-info/entry_points.txt", data: "# comment\n[console_scripts]\ndemo = demo.cli:main\ndemo-x=demo:App.run [fast, extra]\n\n[gui_scripts]\ndemo-gui = demo.gui:start\n[other]\nignored = not valid at all\n"},
		},
		want: []string{
			"usr 755", "usr/local 755", "usr/local/bin 755",
			"usr/local/bin/demo 755 *", "usr/local/bin/demo-gui 755 *", "usr/local/bin/demo-x 755 *",
			"usr/local/lib 755", "usr/local/lib/python3.11 755", sp + " 755",
			sp + "/demo 755", sp + "/demo/__init__.py 644 0",
			sp + "/demo-2.0.dist-info 755", sp + "/demo-2.0.dist-info/INSTALLER 644 8",
			sp + "/demo-2.0.dist-info/METADATA 644 *", sp + "/demo-2.0.dist-info/RECORD 644 *",
			sp + "/demo-2.0.dist-info/WHEEL 644 *", sp + "/demo-2.0.dist-info/entry_points.txt 644 *",
		},
		contents: map[string]string{
			"usr/local/bin/demo":     "#!/usr/local/bin/python3\n" + script + "from demo.cli import main\nif __name__ == '__main__':\n" + argv + "    sys.exit(main())\n",
			"usr/local/bin/demo-x":   "#!/usr/local/bin/python3\n" + script + "from demo import App\nif __name__ == '__main__':\n" + argv + "    sys.exit(App.run())\n",
			"usr/local/bin/demo-gui": "#!/usr/local/bin/python3\n" + script + "from demo.gui import start\nif __name__ == '__main__':\n" + argv + "    sys.exit(start())\n",
		},
		info: Info{Name: "demo", Version: "2.0", DistInfo: "demo-2.0.dist-info", Files: 9},
	}, {
		name: ".data scripts, data, headers, purelib and platlib; root in platlib",
		fn:   "tool-0.1-1-py3-none-any.whl",
		opts: wheelOpts{purelib: "false"},
		files: []zent{
			{name: "tool/__init__.py", data: "\n"},
			{name: "tool-0.1.data/scripts/tool-run", data: "#!python\nimport tool\n"},
			{name: "tool-0.1.data/scripts/tool-w", data: "#!pythonw -u\r\nprint(1)"},
			{name: "tool-0.1.data/scripts/tool-one", data: "#!python"},
			{name: "tool-0.1.data/scripts/tool.sh", data: "#!/bin/sh\necho hi\n"},
			{name: "tool-0.1.data/scripts/tool-ep", data: "setuptools wrapper, replaced"},
			{name: "tool-0.1.data/data/share/tool/readme.txt", data: "hello"},
			{name: "tool-0.1.data/headers/tool.h", data: "int x;"},
			{name: "tool-0.1.data/purelib/tool_pure.py", data: "P = 1"},
			{name: "tool-0.1.data/platlib/tool_plat.py", data: "Q = 1"},
			{name: "tool-0.1.dist-info/entry_points.txt", data: "[console_scripts]\ntool-ep = tool:main\n"},
		},
		layout: platlib,
		root:   "usr/local/lib/python3.11/platlib",
		want: []string{
			"usr 755", "usr/local 755", "usr/local/bin 755",
			"usr/local/bin/tool-ep 755 *", "usr/local/bin/tool-one 755 25", "usr/local/bin/tool-run 755 37",
			"usr/local/bin/tool-w 755 33", "usr/local/bin/tool.sh 755 18",
			"usr/local/include 755", "usr/local/include/python3.11 755", "usr/local/include/python3.11/tool 755",
			"usr/local/include/python3.11/tool/tool.h 644 6",
			"usr/local/lib 755", "usr/local/lib/python3.11 755",
			"usr/local/lib/python3.11/platlib 755",
			"usr/local/lib/python3.11/platlib/tool 755", "usr/local/lib/python3.11/platlib/tool/__init__.py 644 1",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info 755",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info/INSTALLER 644 8",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info/METADATA 644 *",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info/RECORD 644 *",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info/WHEEL 644 *",
			"usr/local/lib/python3.11/platlib/tool-0.1.dist-info/entry_points.txt 644 *",
			"usr/local/lib/python3.11/platlib/tool_plat.py 644 5",
			sp + " 755", sp + "/tool_pure.py 644 5",
			"usr/local/share 755", "usr/local/share/tool 755", "usr/local/share/tool/readme.txt 644 5",
		},
		contents: map[string]string{
			"usr/local/bin/tool-run": "#!/usr/local/bin/python3\nimport tool\n",
			"usr/local/bin/tool-w":   "#!/usr/local/bin/python3\nprint(1)",
			"usr/local/bin/tool-one": "#!/usr/local/bin/python3\n",
			"usr/local/bin/tool.sh":  "#!/bin/sh\necho hi\n",
		},
		info: Info{Name: "tool", Version: "0.1", DistInfo: "tool-0.1.dist-info", Files: 15},
	}, {
		name:  "abi3 manylinux wheel in platlib",
		fn:    "fast-2.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
		opts:  wheelOpts{purelib: "false"},
		files: []zent{{name: "fast/__init__.py", data: "from ._speed import f\n"}, {name: "fast/_speed.abi3.so", data: "\x7fELF\x00\x01", mode: 0o100755}},
		want: []string{
			"usr 755", "usr/local 755", "usr/local/lib 755", "usr/local/lib/python3.11 755", sp + " 755",
			sp + "/fast 755", sp + "/fast/__init__.py 644 22", sp + "/fast/_speed.abi3.so 755 6",
			sp + "/fast-2.0.dist-info 755", sp + "/fast-2.0.dist-info/INSTALLER 644 8", sp + "/fast-2.0.dist-info/METADATA 644 *",
			sp + "/fast-2.0.dist-info/RECORD 644 *", sp + "/fast-2.0.dist-info/WHEEL 644 *",
		},
		info: Info{Name: "fast", Version: "2.0", DistInfo: "fast-2.0.dist-info", Files: 6},
	}, {
		name: "long and non-ASCII paths (PAX)",
		fn:   "deep-1.0-py3-none-any.whl",
		files: []zent{
			{name: "deep/" + strings.Repeat("d", 120) + "/" + strings.Repeat("f", 110) + ".py", data: "x"},
			{name: "deep/données.txt", data: "é"},
		},
		want: []string{
			"usr 755", "usr/local 755", "usr/local/lib 755", "usr/local/lib/python3.11 755", sp + " 755",
			sp + "/deep 755", sp + "/deep/" + strings.Repeat("d", 120) + " 755",
			sp + "/deep/" + strings.Repeat("d", 120) + "/" + strings.Repeat("f", 110) + ".py 644 1",
			sp + "/deep/données.txt 644 2",
			sp + "/deep-1.0.dist-info 755", sp + "/deep-1.0.dist-info/INSTALLER 644 8", sp + "/deep-1.0.dist-info/METADATA 644 *",
			sp + "/deep-1.0.dist-info/RECORD 644 *", sp + "/deep-1.0.dist-info/WHEEL 644 *",
		},
		info: Info{Name: "deep", Version: "1.0", DistInfo: "deep-1.0.dist-info", Files: 6},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := c.layout
			if l == (Layout{}) {
				l = testLayout
			}
			data := makeWheel(t, c.fn, c.files, c.opts)
			layer, info, err := install(t, c.fn, data, l, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			ents := readLayer(t, layer)
			var got []string
			for _, e := range ents {
				s := e.String()
				for _, w := range c.want {
					if strings.HasSuffix(w, " *") && strings.HasPrefix(s, strings.TrimSuffix(w, "*")) {
						s = w
					}
				}
				got = append(got, s)
			}
			// readLayer checked the order; the table is written by hand.
			want := append([]string{}, c.want...)
			sort.Strings(want)
			sort.Strings(got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			m := byPath(ents)
			for p, want := range c.contents {
				if m[p].content != want {
					t.Errorf("%s = %q, want %q", p, m[p].content, want)
				}
			}
			root := c.root
			if root == "" {
				root = sp
			}
			checkRecord(t, ents, root, info.DistInfo)
			var bytes int64
			for _, e := range ents {
				bytes += int64(len(e.content))
			}
			c.info.Bytes = bytes
			if info != c.info {
				t.Errorf("info = %+v, want %+v", info, c.info)
			}
			// The same wheel and layout give the same bytes.
			again, _, err := install(t, c.fn, data, l, Limits{})
			if err != nil || sum(again) != sum(layer) {
				t.Errorf("second install differs (%v): %s vs %s", err, sum(again), sum(layer))
			}
		})
	}
}

func TestRecordPathsOutsideSitePackages(t *testing.T) {
	data := makeWheel(t, "demo-2.0-py3-none-any.whl", []zent{
		{name: "demo/__init__.py"},
		{name: "demo-2.0.data/data/share/x", data: "x"},
		{name: "demo-2.0.dist-info/entry_points.txt", data: "[console_scripts]\ndemo = demo:main\n"},
	}, wheelOpts{})
	layer, info, err := install(t, "demo-2.0-py3-none-any.whl", data, testLayout, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	paths := checkRecord(t, readLayer(t, layer), sp, info.DistInfo)
	want := []string{"../../../bin/demo", "../../../share/x", "demo-2.0.dist-info/INSTALLER", "demo-2.0.dist-info/METADATA",
		"demo-2.0.dist-info/RECORD", "demo-2.0.dist-info/WHEEL", "demo-2.0.dist-info/entry_points.txt", "demo/__init__.py"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("RECORD paths %v, want %v", paths, want)
	}
}

func python(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("no %s on this machine: %v (apt-get install python3)", py, err))
	}
	return py
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// Two wheels share the namespace package acme (no __init__.py); their layers
// merge, and both halves import.
func TestNamespacePackageSplitOverTwoWheels(t *testing.T) {
	py := python(t)
	l := testLayout
	l.Interpreter = py
	dir := t.TempDir()
	var dirsA []tent
	for i, part := range []string{"a", "b"} {
		fn := fmt.Sprintf("acme_%s-1.0-py3-none-any.whl", part)
		data := makeWheel(t, fn, []zent{{name: "acme/" + part + "/__init__.py", data: fmt.Sprintf("NAME = %q\n", part)}}, wheelOpts{})
		layer, _, err := install(t, fn, data, l, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var dirs []tent
		for _, e := range readLayer(t, layer) {
			if e.dir && (e.name == sp+"/acme" || !strings.HasPrefix(e.name, sp+"/")) {
				dirs = append(dirs, e)
			}
		}
		if i == 0 {
			dirsA = dirs
		} else if !reflect.DeepEqual(dirs, dirsA) {
			t.Errorf("shared directories differ between the layers: %v vs %v", dirs, dirsA)
		}
		extract(t, layer, dir)
	}
	out := run(t, []string{"PYTHONPATH=" + filepath.Join(dir, sp)}, py, "-c", "import acme.a, acme.b; print(acme.a.NAME + acme.b.NAME)")
	if strings.TrimSpace(out) != "ab" {
		t.Errorf("got %q", out)
	}
}

// A .pth file lands in site-packages, where site processes it.
func TestPthFile(t *testing.T) {
	py := python(t)
	fn := "pthdemo-1.0-py3-none-any.whl"
	data := makeWheel(t, fn, []zent{
		{name: "pthdemo.pth", data: "pthdemo_extra\nimport sys; sys.pthdemo = 'loaded'\n"},
		{name: "pthdemo_extra/hidden_mod.py", data: "V = 42\n"},
	}, wheelOpts{})
	layer, _, err := install(t, fn, data, testLayout, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	extract(t, layer, dir)
	site := filepath.Join(dir, sp)
	out := run(t, nil, py, "-c", fmt.Sprintf("import site, sys; site.addsitedir(%q); import hidden_mod; print(sys.pthdemo, hidden_mod.V)", site))
	if strings.TrimSpace(out) != "loaded 42" {
		t.Errorf("got %q", out)
	}
}

// Scripts from .data/scripts with #!python run with the layout's interpreter.
func TestDataScriptRuns(t *testing.T) {
	py := python(t)
	l := testLayout
	l.Interpreter = py
	fn := "hello-1.0-py3-none-any.whl"
	data := makeWheel(t, fn, []zent{
		{name: "hello/__init__.py", data: "def main():\n    print('hello from main')\n"},
		{name: "hello-1.0.data/scripts/hello-raw", data: "#!python\nimport hello\nhello.main()\n"},
		{name: "hello-1.0.dist-info/entry_points.txt", data: "[console_scripts]\nhello = hello:main\n"},
	}, wheelOpts{})
	layer, _, err := install(t, fn, data, l, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	extract(t, layer, dir)
	env := []string{"PYTHONPATH=" + filepath.Join(dir, sp)}
	for _, s := range []string{"hello-raw", "hello"} {
		if out := run(t, env, filepath.Join(dir, "usr/local/bin", s)); strings.TrimSpace(out) != "hello from main" {
			t.Errorf("%s printed %q", s, out)
		}
	}
}

// repack makes a wheel of installed files below base (skipping caches).
func repack(t *testing.T, fn string, base string, paths []string, entryPoints string) []byte {
	t.Helper()
	f, _ := ParseFilename(fn)
	var files []zent
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(base, p), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(base, path)
			files = append(files, zent{name: filepath.ToSlash(rel), data: string(b)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if entryPoints != "" {
		files = append(files, zent{name: f.Name + "-" + f.Version + ".dist-info/entry_points.txt", data: entryPoints})
	}
	return makeWheel(t, fn, files, wheelOpts{})
}

// Real pure-Python packages Debian installed, repacked as wheels: they import
// from the layer, and distro's console script runs.
func TestRealPackagesRepacked(t *testing.T) {
	py := python(t)
	const dist = "/usr/lib/python3/dist-packages"
	for _, p := range []string{"six.py", "distro/distro.py"} {
		if _, err := os.Stat(filepath.Join(dist, p)); err != nil {
			testutil.Missing(t, testutil.EnvRequirePython, fmt.Sprintf("Debian's %s is not installed: %v (apt-get install python3-six python3-distro)", p, err))
		}
	}
	l := testLayout
	l.Interpreter = py
	dir := t.TempDir()
	for _, w := range []struct {
		fn, ep string
		paths  []string
	}{
		{"six-1.16.0-py2.py3-none-any.whl", "", []string{"six.py"}},
		{"distro-1.8.0-py3-none-any.whl", "[console_scripts]\ndistro = distro.distro:main\n", []string{"distro"}},
	} {
		data := repack(t, w.fn, dist, w.paths, w.ep)
		layer, info, err := install(t, w.fn, data, l, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkRecord(t, readLayer(t, layer), sp, info.DistInfo)
		extract(t, layer, dir)
	}
	site := filepath.Join(dir, sp)
	env := []string{"PYTHONPATH=" + site}
	out := run(t, env, py, "-c", "import six, distro; print(six.__file__); print(distro.__file__); print(six.moves.range(3)[2])")
	lines := strings.Fields(out)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], site) || !strings.HasPrefix(lines[1], site) || lines[2] != "2" {
		t.Errorf("imports did not come from the layer:\n%s", out)
	}
	out = run(t, env, filepath.Join(dir, "usr/local/bin/distro"), "--json")
	if !strings.Contains(out, `"id"`) {
		t.Errorf("distro --json printed %q", out)
	}
	// The installed metadata is readable by importlib, with our INSTALLER.
	out = run(t, env, py, "-c", "import importlib.metadata as m; d = m.distribution('distro'); print(d.read_text('INSTALLER').strip(), len(d.files), [str(e.name) for e in d.entry_points])")
	if !strings.HasPrefix(strings.TrimSpace(out), "gateway ") || !strings.Contains(out, "'distro'") {
		t.Errorf("importlib.metadata says %q", out)
	}
}

func TestLayoutValidation(t *testing.T) {
	data := makeWheel(t, "demo-1.0-py3-none-any.whl", []zent{{name: "demo.py"}}, wheelOpts{})
	for _, bad := range []func(*Layout){
		func(l *Layout) { l.Purelib = "usr/lib" },
		func(l *Layout) { l.Scripts = "/usr/local/../bin" },
		func(l *Layout) { l.Data = "/" },
		func(l *Layout) { l.Interpreter = "/opt/my python/bin/python" },
		func(l *Layout) { l.Interpreter = "/" + strings.Repeat("p", 130) },
	} {
		l := testLayout
		bad(&l)
		_, _, err := install(t, "demo-1.0-py3-none-any.whl", data, l, Limits{})
		if err == nil || errors.Is(err, ErrBadWheel) || !strings.Contains(err.Error(), "wheel layout") {
			t.Errorf("layout %+v: err = %v", l, err)
		}
	}
}
