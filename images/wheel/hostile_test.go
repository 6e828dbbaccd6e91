package wheel

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

const okFn = "demo-1.0-py3-none-any.whl"

var okFiles = []zent{{name: "demo/__init__.py", data: "X = 1\n"}}

func withFiles(extra ...zent) []zent { return append(append([]zent{}, okFiles...), extra...) }

// Every refusal wraps ErrBadWheel, names the wheel file, says what is wrong,
// and writes nothing.
func TestHostileWheels(t *testing.T) {
	valid := makeWheel(t, okFn, okFiles, wheelOpts{})
	cases := []struct {
		name string
		fn   string // default okFn
		data []byte
		lim  Limits
		want string
	}{
		{name: "not a zip", data: []byte("this is not a zip archive at all"), want: "not a readable zip archive"},
		{name: "truncated", data: valid[:len(valid)/2], want: "not a readable zip archive"},
		{name: "absolute entry", data: makeWheel(t, okFn, withFiles(zent{name: "/etc/passwd", data: "x"}), wheelOpts{}), want: `absolute path "/etc/passwd"`},
		{name: "dot-dot entry", data: makeWheel(t, okFn, withFiles(zent{name: "../evil.py", data: "x"}), wheelOpts{}), want: "goes up a directory"},
		{name: ".data escaping by ..", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/data/../../etc/passwd", data: "x"}), wheelOpts{}), want: "goes up a directory"},
		{name: "backslash entry", data: makeWheel(t, okFn, withFiles(zent{name: `demo\..\..\x.py`, data: "x"}), wheelOpts{}), want: "backslash"},
		{name: "dot component", data: makeWheel(t, okFn, withFiles(zent{name: "demo/./x.py", data: "x"}), wheelOpts{}), want: "empty or '.' component"},
		{name: "RECORD absolute path", data: makeWheel(t, okFn, okFiles, wheelOpts{extraRows: []string{"/etc/passwd,sha256=AAAA,1"}}), want: `RECORD line 5: absolute path "/etc/passwd"`},
		{name: "RECORD dot-dot path", data: makeWheel(t, okFn, okFiles, wheelOpts{extraRows: []string{"../../../etc/passwd,,"}}), want: "RECORD line 5: path \"../../../etc/passwd\" goes up"},
		{name: "symlink entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/link", data: "/etc/passwd", mode: 0o120777}), wheelOpts{}), want: `"demo/link" is a symbolic link`},
		{name: "whiteout entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/.wh.__init__.py", data: "x"}), wheelOpts{}), want: "image whiteout"},
		{name: "opaque whiteout entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/sub/.wh..wh..opq", data: ""}), wheelOpts{}), want: "image whiteout"},
		{name: "fifo entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/fifo", mode: 0o010644}), wheelOpts{}), want: `"demo/fifo" is not a regular file`},
		{name: "device entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/dev", mode: 0o020644}), wheelOpts{}), want: `"demo/dev" is not a regular file`},
		{name: "encrypted entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/enc.py", data: "x", flags: 1}), wheelOpts{}), want: "is encrypted"},
		{name: "duplicate entry", data: makeWheel(t, okFn, withFiles(zent{name: "demo/__init__.py", data: "X = 1\n", noRecord: true}), wheelOpts{}), want: `"demo/__init__.py" appears twice`},
		{name: "hash mismatch", data: makeWheel(t, okFn, okFiles, wheelOpts{editRecord: func(s string) string {
			return strings.Replace(s, recordHash([]byte("X = 1\n")), recordHash([]byte("X = 2\n")), 1)
		}}), want: "demo/__init__.py does not match its RECORD hash"},
		{name: "size mismatch", data: makeWheel(t, okFn, okFiles, wheelOpts{editRecord: func(s string) string {
			return strings.Replace(s, recordHash([]byte("X = 1\n"))+",6", recordHash([]byte("X = 1\n"))+",7", 1)
		}}), want: "demo/__init__.py is 6 bytes, RECORD says 7"},
		{name: "file not in RECORD", data: makeWheel(t, okFn, withFiles(zent{name: "demo/extra.py", data: "x", noRecord: true}), wheelOpts{}), want: "demo/extra.py is not listed in RECORD"},
		{name: "RECORD entry missing from archive", data: makeWheel(t, okFn, okFiles, wheelOpts{extraRows: []string{"demo/gone.py," + recordHash(nil) + ",0"}}), want: "RECORD lists demo/gone.py, which the archive does not have"},
		{name: "RECORD without hash", data: makeWheel(t, okFn, okFiles, wheelOpts{editRecord: func(s string) string {
			return strings.Replace(s, recordHash([]byte("X = 1\n")), "", 1)
		}}), want: "RECORD has no hash for demo/__init__.py"},
		{name: "RECORD with md5", data: makeWheel(t, okFn, okFiles, wheelOpts{editRecord: func(s string) string {
			return strings.Replace(s, recordHash([]byte("X = 1\n")), "md5=AAAAAAAAAAAAAAAAAAAAAA", 1)
		}}), want: "is not sha256, sha384 or sha512"},
		{name: "RECORD listed twice", data: makeWheel(t, okFn, okFiles, wheelOpts{extraRows: []string{"demo/__init__.py," + recordHash([]byte("X = 1\n")) + ",6"}}), want: "RECORD lists demo/__init__.py twice"},
		{name: "missing RECORD", data: makeWheel(t, okFn, okFiles, wheelOpts{noRecord: true}), want: "no demo-1.0.dist-info/RECORD"},
		{name: "missing WHEEL", data: makeWheel(t, okFn, okFiles, wheelOpts{wheelFile: strp("")}), want: "no demo-1.0.dist-info/WHEEL"},
		{name: "missing METADATA", data: makeWheel(t, okFn, okFiles, wheelOpts{metadata: strp("")}), want: "no demo-1.0.dist-info/METADATA"},
		{name: "Wheel-Version 2", data: makeWheel(t, okFn, okFiles, wheelOpts{wheelFile: strp("Wheel-Version: 2.0\nRoot-Is-Purelib: true\n")}), want: "Wheel-Version 2.0 is not supported"},
		{name: "no Wheel-Version", data: makeWheel(t, okFn, okFiles, wheelOpts{wheelFile: strp("Root-Is-Purelib: true\n")}), want: "WHEEL has no valid Wheel-Version"},
		{name: "dist-info of another project", data: makeWheel(t, okFn, okFiles, wheelOpts{distInfo: "other-1.0.dist-info"}), want: "it holds other-1.0.dist-info, which does not match the file name's demo 1.0"},
		{name: "dist-info of another version", data: makeWheel(t, okFn, okFiles, wheelOpts{distInfo: "demo-1.1.dist-info"}), want: "does not match the file name's demo 1.0"},
		{name: "two dist-info directories", data: makeWheel(t, okFn, withFiles(zent{name: "evil-1.0.dist-info/METADATA", data: "x"}), wheelOpts{}), want: "2 .dist-info directories"},
		{name: "METADATA of another project", data: makeWheel(t, okFn, okFiles, wheelOpts{metadata: strp("Name: other\nVersion: 1.0\n")}), want: "METADATA is for other 1.0, the file name says demo 1.0"},
		{name: "METADATA name with a slash", data: makeWheel(t, okFn, okFiles, wheelOpts{metadata: strp("Name: ../demo\nVersion: 1.0\n")}), want: "METADATA has no valid Name"},
		{name: "unknown .data scheme", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/etc/passwd", data: "x"}), wheelOpts{}), want: `uses the unknown scheme "etc"`},
		{name: "file replacing the scripts directory", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/data/bin", data: "x"}), wheelOpts{}), want: "a file would be installed at /usr/local/bin, which is a directory"},
		{name: "file replacing site-packages' parent", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/data/lib/python3.11", data: "x"}), wheelOpts{}), want: "which is a directory"},
		{name: "file replacing the interpreter", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/scripts/python3", data: "x"}), wheelOpts{}), want: "a file would replace the interpreter /usr/local/bin/python3"},
		{name: "two files at one path", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/purelib/demo/__init__.py", data: "Y"}), wheelOpts{}), want: "two files would be installed at /usr/local/lib/python3.11/site-packages/demo/__init__.py"},
		{name: "file where a directory must be", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.data/purelib/demo", data: "Y"}), wheelOpts{}), want: "which is a directory"},
		{name: "entry point and script collide", data: makeWheel(t, okFn, withFiles(
			zent{name: "demo-1.0.data/data/bin/tool", data: "x"},
			zent{name: "demo-1.0.dist-info/entry_points.txt", data: "[console_scripts]\ntool = demo:main\n"}), wheelOpts{}), want: "two files would be installed at /usr/local/bin/tool"},
		{name: "too many entries", data: makeWheel(t, okFn, withFiles(zent{name: "demo/a.py"}, zent{name: "demo/b.py"}), wheelOpts{}), lim: Limits{MaxFiles: 4}, want: "6 archive entries, more than the limit of 4"},
		{name: "too many files with entry points", data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.dist-info/entry_points.txt", data: "[console_scripts]\na = demo:a\nb = demo:b\n"}), wheelOpts{}), lim: Limits{MaxFiles: 5}, want: "8 files to install, more than the limit of 5"},
		{name: "too many bytes", data: makeWheel(t, okFn, withFiles(zent{name: "demo/big.py", data: strings.Repeat("#", 5000)}), wheelOpts{}), lim: Limits{MaxBytes: 4096}, want: "unpacks to more than the limit of 4096 bytes"},
		{name: "bad file name", fn: "demo.whl", data: valid, want: "name-version(-build)?-python-abi-platform.whl"},
		{name: "bad version in file name", fn: "demo-1.x-py3-none-any.whl", data: valid, want: `invalid version "1.x"`},
		{name: "bad name in file name", fn: "de mo-1.0-py3-none-any.whl", data: valid, want: `invalid project name "de mo"`},
	}
	for _, ep := range []struct{ name, line, want string }{
		{"slash in name", "a/b = demo:main", `invalid script name "a/b"`},
		{"dot-dot name", ".. = demo:main", `invalid script name ".."`},
		{"empty name", "= demo:main", `invalid script name ""`},
		{"no callable", "tool = demo", "has no callable"},
		{"empty callable", "tool = demo:", "has no callable"},
		{"bad module", "tool = 1demo:main", "is not module:function"},
		{"keyword attr", "tool = demo:class", "is not module:function"},
		{"code injection", "tool = demo:main();import os", "is not module:function"},
		{"newline-free injection", "tool = os:system('x')", "is not module:function"},
		{"duplicate", "tool = demo:a\ntool = demo:b", `script "tool" is defined twice`},
	} {
		cases = append(cases, struct {
			name string
			fn   string
			data []byte
			lim  Limits
			want string
		}{name: "entry point " + ep.name, data: makeWheel(t, okFn, withFiles(zent{name: "demo-1.0.dist-info/entry_points.txt", data: "[console_scripts]\n" + ep.line + "\n"}), wheelOpts{}), want: ep.want})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fn := c.fn
			if fn == "" {
				fn = okFn
			}
			out, _, err := install(t, fn, c.data, testLayout, c.lim)
			if !errors.Is(err, ErrBadWheel) {
				t.Fatalf("err = %v, want ErrBadWheel", err)
			}
			if !strings.Contains(err.Error(), fn) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %q, want the file name and %q", err, c.want)
			}
			if len(out) != 0 {
				t.Errorf("%d bytes written for a refused wheel", len(out))
			}
		})
	}
}

// A zip bomb (honest declared size) and one that lies about its size are
// both stopped at the limit, without allocating what they unpack to.
func TestZipBomb(t *testing.T) {
	// Twice the allocation bound below, so that reading it whole would fail
	// the test.
	const unpacked = 32 << 20
	// Compress the zeros once, then write the entry raw so that its declared
	// size can lie.
	var comp bytes.Buffer
	zw := zip.NewWriter(&comp)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "x", Method: zip.Deflate})
	zero := make([]byte, 1<<20)
	for i := 0; i < unpacked>>20; i++ {
		w.Write(zero)
	}
	zw.Close()
	zr, _ := zip.NewReader(bytes.NewReader(comp.Bytes()), int64(comp.Len()))
	raw, _ := zr.File[0].OpenRaw()
	compressed, _ := io.ReadAll(raw)
	bomb := func(lie bool) []byte {
		var out bytes.Buffer
		zw := zip.NewWriter(&out)
		h := zr.File[0].FileHeader
		h.Name = "demo/bomb.bin"
		h.CreatorVersion = 3 << 8
		h.ExternalAttrs = 0o100644 << 16
		if lie {
			h.UncompressedSize64 = 10
		}
		rw, err := zw.CreateRaw(&h)
		if err != nil {
			t.Fatal(err)
		}
		rw.Write(compressed)
		// RECORD claims a tiny file; the limit must stop it before the hash
		// is even compared.
		meta, wheel := "Name: demo\nVersion: 1.0\n", "Wheel-Version: 1.0\n"
		for _, e := range []zent{
			{name: "demo-1.0.dist-info/METADATA", data: meta},
			{name: "demo-1.0.dist-info/WHEEL", data: wheel},
			{name: "demo-1.0.dist-info/RECORD", data: "demo/bomb.bin,sha256=" + strings.Repeat("A", 43) + ",10\n" +
				"demo-1.0.dist-info/METADATA," + recordHash([]byte(meta)) + ",24\n" +
				"demo-1.0.dist-info/WHEEL," + recordHash([]byte(wheel)) + ",19\n"},
		} {
			w, _ := zw.Create(e.name)
			io.WriteString(w, e.data)
		}
		zw.Close()
		return out.Bytes()
	}
	for _, lie := range []bool{false, true} {
		data := bomb(lie)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, _, err := install(t, okFn, data, testLayout, Limits{MaxBytes: 1 << 20})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrBadWheel) || !strings.Contains(err.Error(), okFn) {
			t.Fatalf("lie=%v: err = %v", lie, err)
		}
		if !lie && !strings.Contains(err.Error(), "unpacks to more than the limit of 1048576 bytes") {
			t.Errorf("err = %v", err)
		}
		if len(out) != 0 {
			t.Errorf("lie=%v: %d bytes written", lie, len(out))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Errorf("lie=%v: %d bytes allocated for a %d-byte limit", lie, alloc, 1<<20)
		}
		t.Logf("lie=%v: %d-byte wheel unpacking to %d bytes refused: %v", lie, len(data), unpacked, err)
	}
}
