package conda

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const prefix = "/opt/conda"

func noarchPkg() pkgDef {
	return pkgDef{
		name: "hello", version: "1.0", build: "pyhd8ed1ab_0", subdir: "noarch", noarch: "python",
		members: []tm{
			{name: "site-packages/hello/__init__.py", body: "def main():\n    print('hello from conda')\n"},
			{name: "site-packages/hello-1.0.dist-info/METADATA", body: "Metadata-Version: 2.1\nName: hello\nVersion: 1.0\n"},
			{name: "python-scripts/hello-tool", body: "#!/usr/bin/env python\nprint('tool')\n", mode: 0o755},
		},
		entryPoints: []string{"hello = hello:main"},
	}
}

func binaryBody() string {
	return "\x7fELF\x01\x02" + placeholder + "/lib:" + placeholder + "/lib64\x00rest" + placeholder + "\x00tail " + placeholder
}

func prefixedPkg() pkgDef {
	text := "#!/bin/sh\nexec " + placeholder + "/bin/real \"$@\" # " + placeholder + "\n"
	return pkgDef{
		name: "prefixed", version: "2.0", build: "h1234567_0", subdir: "linux-64",
		members: []tm{
			{name: "bin/tool", body: text, mode: 0o755},
			{name: "lib/libx.so", body: binaryBody(), mode: 0o755},
			{name: "lib/libx.so.1", typ: tar.TypeSymlink, link: "libx.so"},
			{name: "share/prefixed/plain.txt", body: "no placeholder here\n"},
		},
		paths: []pathEntry{
			{Path: "bin/tool", PathType: "hardlink", PrefixPlaceholder: placeholder, FileMode: "text"},
			{Path: "lib/libx.so", PathType: "hardlink", PrefixPlaceholder: placeholder, FileMode: "binary"},
			{Path: "lib/libx.so.1", PathType: "softlink"},
			{Path: "share/prefixed/plain.txt", PathType: "hardlink"},
		},
	}
}

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pkg")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func artifactOf(d pkgDef, ext string) Artifact {
	return Artifact{Name: d.name, Version: d.version, Build: d.build, Subdir: d.subdir, Channel: "conda-forge",
		Filename: d.filename(ext), URL: "https://user:pw@conda.example.org/t/tok123/forge/" + d.subdir + "/" + d.filename(ext), SHA256: strings.Repeat("a", 64), Size: 1}
}

func layerOf(t *testing.T, file []byte, a Artifact, python string) ([]byte, Info) {
	t.Helper()
	var buf bytes.Buffer
	info, err := WriteLayer(writeFile(t, file), a, prefix, python, Limits{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), info
}

func TestWriteLayerPrefixReplacement(t *testing.T) {
	d := prefixedPkg()
	layer, info := layerOf(t, condaFile(t, d), artifactOf(d, ".conda"), "")
	es := readLayer(t, layer)
	m := entryMap(es)

	// Sorted, relative, owner 0, fixed time, with every parent directory.
	var names []string
	for _, e := range es {
		names = append(names, e.hdr.Name)
		if e.hdr.Uid != 0 || e.hdr.Gid != 0 || !e.hdr.ModTime.Equal(layerEpoch) || strings.HasPrefix(e.hdr.Name, "/") {
			t.Errorf("%s: uid %d gid %d mtime %v", e.hdr.Name, e.hdr.Uid, e.hdr.Gid, e.hdr.ModTime)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
	wantNames := []string{"opt/", "opt/conda/", "opt/conda/bin/", "opt/conda/bin/tool", "opt/conda/conda-meta/",
		"opt/conda/conda-meta/prefixed-2.0-h1234567_0.json", "opt/conda/lib/", "opt/conda/lib/libx.so", "opt/conda/lib/libx.so.1",
		"opt/conda/share/", "opt/conda/share/prefixed/", "opt/conda/share/prefixed/plain.txt"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("entries\n%q\nwant\n%q", names, wantNames)
	}

	wantText := "#!/bin/sh\nexec /opt/conda/bin/real \"$@\" # /opt/conda\n"
	if got := string(m["opt/conda/bin/tool"].body); got != wantText {
		t.Errorf("text file = %q, want %q", got, wantText)
	}
	if m["opt/conda/bin/tool"].hdr.Mode != 0o755 {
		t.Errorf("bin/tool mode %o", m["opt/conda/bin/tool"].hdr.Mode)
	}
	pad := len(placeholder) - len(prefix)
	wantBin := "\x7fELF\x01\x02" + prefix + "/lib:" + prefix + "/lib64\x00" + strings.Repeat("\x00", 2*pad) +
		"rest" + prefix + "\x00" + strings.Repeat("\x00", pad) + "tail " + placeholder
	gotBin := string(m["opt/conda/lib/libx.so"].body)
	if gotBin != wantBin {
		t.Errorf("binary file =\n%q\nwant\n%q", gotBin, wantBin)
	}
	if len(gotBin) != len(binaryBody()) {
		t.Errorf("binary file changed length: %d, was %d", len(gotBin), len(binaryBody()))
	}
	if l := m["opt/conda/lib/libx.so.1"]; l.hdr.Typeflag != tar.TypeSymlink || l.hdr.Linkname != "libx.so" {
		t.Errorf("symlink = %+v", l.hdr)
	}
	if got := string(m["opt/conda/share/prefixed/plain.txt"].body); got != "no placeholder here\n" {
		t.Errorf("plain file = %q", got)
	}

	var meta map[string]any
	if err := json.Unmarshal(m["opt/conda/conda-meta/prefixed-2.0-h1234567_0.json"].body, &meta); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"name": "prefixed", "version": "2.0", "build": "h1234567_0", "channel": "conda-forge",
		"subdir": "linux-64", "fn": "prefixed-2.0-h1234567_0.conda", "license": "MIT",
		"url": "https://conda.example.org/t/***/forge/linux-64/prefixed-2.0-h1234567_0.conda"} {
		if meta[k] != want {
			t.Errorf("conda-meta %s = %v, want %v", k, meta[k], want)
		}
	}
	wantFiles := []any{"bin/tool", "lib/libx.so", "lib/libx.so.1", "share/prefixed/plain.txt"}
	if !reflect.DeepEqual(meta["files"], wantFiles) {
		t.Errorf("conda-meta files = %v, want %v", meta["files"], wantFiles)
	}
	pd := meta["paths_data"].(map[string]any)["paths"].([]any)
	if len(pd) != 4 || pd[1].(map[string]any)["file_mode"] != "binary" || pd[1].(map[string]any)["prefix_placeholder"] != placeholder ||
		pd[2].(map[string]any)["path_type"] != "softlink" {
		t.Errorf("conda-meta paths_data = %v", pd)
	}
	if !reflect.DeepEqual(info.Files, []string{"bin/tool", "lib/libx.so", "lib/libx.so.1", "share/prefixed/plain.txt"}) || info.Noarch != "" || info.Name != "prefixed" {
		t.Errorf("Info = %+v", info)
	}

	// Deterministic, and the same from a .tar.bz2 of the same package but
	// for the file name in conda-meta.
	again, _ := layerOf(t, condaFile(t, d), artifactOf(d, ".conda"), "")
	if !bytes.Equal(layer, again) {
		t.Error("two layers of the same package differ")
	}
	a := artifactOf(d, ".conda") // same record, so the same conda-meta
	fromBz2, _ := layerOf(t, tarBz2File(t, d), a, "")
	if !bytes.Equal(layer, fromBz2) {
		t.Error("the .tar.bz2 and .conda of one package give different layers")
	}
}

func TestWriteLayerNoarchPython(t *testing.T) {
	d := noarchPkg()
	layer, info := layerOf(t, condaFile(t, d), artifactOf(d, ".conda"), "3.11")
	m := entryMap(readLayer(t, layer))
	for _, n := range []string{
		"opt/conda/lib/python3.11/site-packages/hello/__init__.py",
		"opt/conda/lib/python3.11/site-packages/hello-1.0.dist-info/METADATA",
		"opt/conda/bin/hello-tool",
		"opt/conda/bin/hello",
		"opt/conda/conda-meta/hello-1.0-pyhd8ed1ab_0.json",
	} {
		if _, ok := m[n]; !ok {
			t.Errorf("layer lacks %s", n)
		}
	}
	for n := range m {
		if strings.Contains(n, "site-packages/") && !strings.Contains(n, "lib/python3.11/") || strings.Contains(n, "python-scripts") {
			t.Errorf("noarch path not moved: %s", n)
		}
	}
	ep := m["opt/conda/bin/hello"]
	if ep.hdr.Mode != 0o755 || !strings.HasPrefix(string(ep.body), "#!/opt/conda/bin/python3.11\n") || !strings.Contains(string(ep.body), "from hello import main") {
		t.Errorf("entry point %o:\n%s", ep.hdr.Mode, ep.body)
	}
	if !reflect.DeepEqual(info.Dists, []string{"hello"}) || info.Noarch != "python" {
		t.Errorf("Info = %+v", info)
	}
	var meta map[string]any
	mustNil(t, json.Unmarshal(m["opt/conda/conda-meta/hello-1.0-pyhd8ed1ab_0.json"].body, &meta))
	if files := meta["files"].([]any); !slices.Contains(files, any("bin/hello")) || !slices.Contains(files, any("lib/python3.11/site-packages/hello/__init__.py")) {
		t.Errorf("conda-meta files = %v", files)
	}

	// The unpacked layer works: the entry point runs the module with a real
	// Python (its shebang names the image's interpreter, so it is run by
	// hand here).
	root := t.TempDir()
	untar(t, layer, root)
	cmd := exec.Command("/usr/bin/python3", filepath.Join(root, "opt/conda/bin/hello"))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "opt/conda/lib/python3.11/site-packages"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello from conda" {
		t.Errorf("entry point: %v: %s", err, out)
	}
}

// untar unpacks a layer made by WriteLayer (trusted here: the test made it).
func untar(t *testing.T, layer []byte, root string) {
	t.Helper()
	for _, e := range readLayer(t, layer) {
		p := filepath.Join(root, e.hdr.Name)
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			mustNil(t, os.MkdirAll(p, 0o755))
		case tar.TypeSymlink:
			mustNil(t, os.Symlink(e.hdr.Linkname, p))
		default:
			mustNil(t, os.WriteFile(p, e.body, os.FileMode(e.hdr.Mode)))
		}
	}
}

func TestWriteLayerHasPrefixFallback(t *testing.T) {
	// An old package: info/files and info/has_prefix, no paths.json.
	d := pkgDef{
		name: "oldpkg", version: "0.1", build: "0", subdir: "linux-64", noPathsJSON: true,
		members: []tm{
			{name: "etc/oldpkg.conf", body: "root=" + DefaultPlaceholder + "\n"},
			{name: "lib/my lib.so", body: "x" + placeholder + "\x00y"},
			{name: "share/doc.txt", body: "doc " + DefaultPlaceholder},
		},
		files:     "etc/oldpkg.conf\nlib/my lib.so\nshare/doc.txt\n",
		hasPrefix: "etc/oldpkg.conf\n" + placeholder + " binary \"lib/my lib.so\"\n",
	}
	layer, _ := layerOf(t, tarBz2File(t, d), artifactOf(d, ".tar.bz2"), "")
	m := entryMap(readLayer(t, layer))
	if got := string(m["opt/conda/etc/oldpkg.conf"].body); got != "root=/opt/conda\n" {
		t.Errorf("has_prefix text file = %q", got)
	}
	want := "x" + prefix + "\x00" + strings.Repeat("\x00", len(placeholder)-len(prefix)) + "y"
	if got := string(m["opt/conda/lib/my lib.so"].body); got != want {
		t.Errorf("has_prefix binary file = %q, want %q", got, want)
	}
	if got := string(m["opt/conda/share/doc.txt"].body); got != "doc "+DefaultPlaceholder {
		t.Errorf("file not in has_prefix was changed: %q", got)
	}
}

func TestWriteLayerRefusesHostilePackages(t *testing.T) {
	good := prefixedPkg
	tests := []struct {
		name   string
		def    func() pkgDef
		bz2    bool
		lim    Limits
		prefix string
		python string
		want   string
	}{
		{name: "member with ..", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "../../etc/passwd", body: "x"})
			return d
		}, want: `path "../../etc/passwd" leaves the package`},
		{name: "absolute member", bz2: true, def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "/etc/passwd", body: "x"})
			return d
		}, want: `path "/etc/passwd" is empty or absolute`},
		{name: "paths.json with ..", def: func() pkgDef {
			d := good()
			d.paths = append(d.paths, pathEntry{Path: "lib/../../../etc/shadow", PathType: "hardlink"})
			return d
		}, want: `info/paths.json: path "lib/../../../etc/shadow" leaves the package`},
		{name: "paths.json absolute", def: func() pkgDef {
			d := good()
			d.paths = append(d.paths, pathEntry{Path: "/etc/shadow", PathType: "hardlink"})
			return d
		}, want: `info/paths.json: path "/etc/shadow" is empty or absolute`},
		{name: "symlink escaping the prefix", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "lib/evil", typ: tar.TypeSymlink, link: "../../../etc"})
			d.paths = append(d.paths, pathEntry{Path: "lib/evil", PathType: "softlink"})
			return d
		}, want: "symlink lib/evil points to ../../../etc, outside the prefix"},
		{name: "absolute symlink", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "lib/evil", typ: tar.TypeSymlink, link: "/etc/shadow"})
			d.paths = append(d.paths, pathEntry{Path: "lib/evil", PathType: "softlink"})
			return d
		}, want: "symlink lib/evil points to /etc/shadow, outside the prefix (absolute)"},
		{name: "file written through a symlink", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "lib64", typ: tar.TypeSymlink, link: "lib"}, tm{name: "lib64/x", body: "x"})
			d.paths = append(d.paths, pathEntry{Path: "lib64", PathType: "softlink"}, pathEntry{Path: "lib64/x", PathType: "hardlink"})
			return d
		}, want: "lib64/x is inside lib64, which is not a directory"},
		{name: "hardlink outside the package", bz2: true, def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "lib/hl", typ: tar.TypeLink, link: "../../etc/passwd"})
			return d
		}, want: `lib/hl is a hard link to "../../etc/passwd", which is not a file earlier in the package`},
		{name: "character device", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "dev/null", typ: tar.TypeChar})
			return d
		}, want: "dev/null is a device, FIFO or other special file"},
		{name: "fifo", bz2: true, def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "fifo", typ: tar.TypeFifo})
			return d
		}, want: "fifo is a device, FIFO or other special file"},
		{name: "too large (zstd bomb)", lim: Limits{MaxUnpackedBytes: 1 << 20}, def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "share/zeros", body: strings.Repeat("\x00", 8<<20)})
			return d
		}, want: "unpacks to more than 1048576 bytes"},
		{name: "too large (bzip2 bomb)", bz2: true, lim: Limits{MaxUnpackedBytes: 1 << 20}, def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "share/zeros", body: strings.Repeat("\x00", 8<<20)})
			return d
		}, want: "unpacks to more than 1048576 bytes"},
		{name: "too many files", lim: Limits{MaxFiles: 3}, def: good, want: "more than 3 archive members"},
		{name: "prefix longer than the binary placeholder", prefix: "/" + strings.Repeat("p", len(placeholder)), def: good,
			want: "lib/libx.so: binary file: the prefix"},
		{name: "index.json says another package", def: func() pkgDef {
			d := good()
			d.index = map[string]any{"name": "other"}
			return d
		}, want: "its info/index.json says other 2.0=h1234567_0"},
		{name: "listed file missing", def: func() pkgDef {
			d := good()
			d.paths = append(d.paths, pathEntry{Path: "lib/missing.so", PathType: "hardlink"})
			return d
		}, want: "info/paths.json lists file lib/missing.so, which the archive lacks"},
		{name: "conda-meta overwritten", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "conda-meta/history", body: "x"})
			d.paths = append(d.paths, pathEntry{Path: "conda-meta/history", PathType: "hardlink"})
			return d
		}, want: "conda-meta/history would overwrite conda's records"},
		{name: "whiteout file", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "lib/.wh.libc.so.6", body: ""})
			d.paths = append(d.paths, pathEntry{Path: "lib/.wh.libc.so.6", PathType: "hardlink"})
			return d
		}, want: "lib/.wh.libc.so.6 is named like a layer whiteout"},
		{name: "opaque whiteout directory", def: func() pkgDef {
			d := good()
			d.members = append(d.members, tm{name: "share/.wh..wh..opq/x", body: ""})
			d.paths = append(d.paths, pathEntry{Path: "share/.wh..wh..opq/x", PathType: "hardlink"})
			return d
		}, want: "is named like a layer whiteout"},
		{name: "noarch python without a python version", def: noarchPkg, want: "needs the environment's Python version"},
		{name: "entry point injection", python: "3.12", def: func() pkgDef {
			d := noarchPkg()
			d.entryPoints = []string{"x = os;import evil:f"}
			return d
		}, want: `entry point "x = os;import evil:f" is not "name = module:function"`},
		{name: "entry point path", python: "3.12", def: func() pkgDef {
			d := noarchPkg()
			d.entryPoints = []string{"../../x = hello:main"}
			return d
		}, want: `entry point "../../x = hello:main" is not`},
		{name: "no index.json", def: func() pkgDef {
			d := good()
			d.rawIndex = "not json"
			return d
		}, want: "info/index.json:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.def()
			var file []byte
			ext := ".conda"
			if tt.bz2 {
				file, ext = tarBz2File(t, d), ".tar.bz2"
			} else {
				file = condaFile(t, d)
			}
			p := tt.prefix
			if p == "" {
				p = prefix
			}
			var buf bytes.Buffer
			a := artifactOf(d, ext)
			if d.index["name"] != nil {
				a.Name = d.name
			}
			_, err := WriteLayer(writeFile(t, file), a, p, tt.python, tt.lim, &buf)
			if err == nil {
				t.Fatalf("WriteLayer succeeded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "conda package "+d.name+" "+d.version+"="+d.build) {
				t.Errorf("error %q does not name the package", err)
			}
			if !errors.Is(err, ErrBadPackage) && !strings.Contains(tt.want, "Python version") {
				t.Errorf("error %v is not ErrBadPackage", err)
			}
			if strings.Contains(err.Error(), "tok123") || strings.Contains(err.Error(), ":pw@") {
				t.Errorf("error %q carries channel credentials", err)
			}
		})
	}
}

func TestWriteLayerRefusesNonPackages(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":     {},
		"text":      []byte("hello world"),
		"bad zip":   []byte("PK\x03\x04garbage"),
		"bad bzip2": []byte("BZh9garbage"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := WriteLayer(writeFile(t, b), Artifact{Name: "x", Version: "1", Build: "0"}, prefix, "", Limits{}, &bytes.Buffer{})
			if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "conda package x 1=0") {
				t.Errorf("WriteLayer(%s) = %v, want ErrBadPackage naming the package", name, err)
			}
		})
	}
}

func TestReplacePrefixBinaryMatchesConda(t *testing.T) {
	// Expected values printed by conda's binary_replace (conda/core/portability.py)
	// run with Python: the placeholder inside
	// a NUL-terminated string is replaced and the string padded at its end.
	tests := []struct{ in, want string }{
		{"AAAA\x00", "BB\x00\x00\x00"},
		{"xAAAAyAAAA\x00z", "xByB\x00\x00\x00\x00\x00\x00\x00z"},
		{"AAAA", "AAAA"},
		{"AAAA\x00AAAA", "B\x00\x00\x00\x00AAAA"},
	}
	for _, tt := range tests {
		a, b := "AAAA", "B"
		if strings.Contains(tt.want, "BB") {
			b = "BB"
		}
		got, err := replacePrefix([]byte(tt.in), a, b, "binary")
		if err != nil || string(got) != tt.want {
			t.Errorf("replacePrefix(%q, %q->%q) = %q, %v; want %q", tt.in, a, b, got, err, tt.want)
		}
	}
}

// BenchmarkWriteLayer unpacks a 16 MiB, 1,000-file .conda package (a tenth
// of its files with the placeholder) into a layer.
func BenchmarkWriteLayer(b *testing.B) {
	d := pkgDef{name: "big", version: "1.0", build: "h0_0", subdir: "linux-64"}
	body := strings.Repeat("0123456789abcdef", 1024)
	for i := 0; i < 1000; i++ {
		name := "lib/big/f" + strings.Repeat("x", i%7) + "-" + string(rune('a'+i%26)) + "/" + strconv.Itoa(i)
		m := tm{name: name, body: body}
		pe := pathEntry{Path: name, PathType: "hardlink"}
		if i%10 == 0 {
			m.body = placeholder + "\n" + body
			pe.PrefixPlaceholder, pe.FileMode = placeholder, "text"
		}
		d.members = append(d.members, m)
		d.paths = append(d.paths, pe)
	}
	file := condaFile(b, d)
	p := filepath.Join(b.TempDir(), "big.conda")
	if err := os.WriteFile(p, file, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(1000 * len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := WriteLayer(p, Artifact{Name: "big", Version: "1.0", Build: "h0_0"}, prefix, "", Limits{TempDir: b.TempDir()}, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func TestWriteRemovalLayer(t *testing.T) {
	rec := `{"name":"openssl","version":"3.0.0","build":"h0_0","files":["lib/libssl.so.3","bin/openssl","lib/libcrypto.so.3"]}`
	var buf bytes.Buffer
	if err := WriteRemovalLayer([]byte(rec), prefix, 0, &buf); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range readLayer(t, buf.Bytes()) {
		names = append(names, e.hdr.Name)
	}
	want := []string{"opt/", "opt/conda/", "opt/conda/bin/", "opt/conda/bin/.wh.openssl", "opt/conda/conda-meta/",
		"opt/conda/conda-meta/.wh.openssl-3.0.0-h0_0.json", "opt/conda/lib/", "opt/conda/lib/.wh.libcrypto.so.3", "opt/conda/lib/.wh.libssl.so.3"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("removal layer\n%q\nwant\n%q", names, want)
	}
	for _, bad := range []string{
		`{"name":"x","version":"1","build":"0","files":["../../etc/passwd"]}`,
		`{"name":"x","version":"1","build":"0","files":["/etc/passwd"]}`,
		`{"name":"../x","version":"1","build":"0","files":[]}`,
		`not json`,
	} {
		if err := WriteRemovalLayer([]byte(bad), prefix, 0, &bytes.Buffer{}); err == nil {
			t.Errorf("WriteRemovalLayer(%s) succeeded", bad)
		}
	}
}
