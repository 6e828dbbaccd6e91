package wheel

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// zent is one entry of a test wheel.
type zent struct {
	name     string
	data     string
	mode     uint32 // Unix mode with type bits; 0 means a 0644 regular file
	noRecord bool   // leave it out of RECORD
	flags    uint16
}

// wheelOpts bends a test wheel out of shape.
type wheelOpts struct {
	distInfo   string // default from the file name
	metadata   *string
	wheelFile  *string
	noRecord   bool
	extraRows  []string            // appended to RECORD verbatim
	editRecord func(string) string // applied to the final RECORD text
	purelib    string              // Root-Is-Purelib, default "true"
}

var testLayout = Layout{
	Purelib:     "/usr/local/lib/python3.11/site-packages",
	Platlib:     "/usr/local/lib/python3.11/site-packages",
	Scripts:     "/usr/local/bin",
	Data:        "/usr/local",
	Headers:     "/usr/local/include/python3.11",
	Interpreter: "/usr/local/bin/python3",
}

func recordHash(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256=" + base64.RawURLEncoding.EncodeToString(s[:])
}

// makeWheel writes a wheel named fn holding files, with METADATA, WHEEL and
// a correct RECORD added.
func makeWheel(t testing.TB, fn string, files []zent, o wheelOpts) []byte {
	t.Helper()
	f, err := ParseFilename(fn)
	if err != nil {
		t.Fatal(err)
	}
	di := o.distInfo
	if di == "" {
		di = f.Name + "-" + f.Version + ".dist-info"
	}
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n\nA long description.\n\nName: not-a-header\n", strings.ReplaceAll(f.Name, "_", "-"), f.Version)
	if o.metadata != nil {
		meta = *o.metadata
	}
	purelib := o.purelib
	if purelib == "" {
		purelib = "true"
	}
	wf := fmt.Sprintf("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: %s\nTag: py3-none-any\n", purelib)
	if o.wheelFile != nil {
		wf = *o.wheelFile
	}
	all := append([]zent{}, files...)
	if meta != "" {
		all = append(all, zent{name: di + "/METADATA", data: meta})
	}
	if wf != "" {
		all = append(all, zent{name: di + "/WHEEL", data: wf})
	}
	if !o.noRecord {
		var rec bytes.Buffer
		cw := csv.NewWriter(&rec)
		for _, e := range all {
			if e.noRecord || strings.HasSuffix(e.name, "/") {
				continue
			}
			cw.Write([]string{e.name, recordHash([]byte(e.data)), fmt.Sprint(len(e.data))})
		}
		cw.Write([]string{di + "/RECORD", "", ""})
		cw.Flush()
		text := rec.String()
		for _, r := range o.extraRows {
			text += r + "\n"
		}
		if o.editRecord != nil {
			text = o.editRecord(text)
		}
		all = append(all, zent{name: di + "/RECORD", data: text})
	}
	return writeZip(t, all)
}

func writeZip(t testing.TB, ents []zent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		mode := e.mode
		if mode == 0 {
			mode = 0o100644
			if strings.HasSuffix(e.name, "/") {
				mode = 0o040755
			}
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, CreatorVersion: 3<<8 | 20, ExternalAttrs: mode << 16, Flags: e.flags}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tent is one entry of a layer as the tests see it.
type tent struct {
	name    string
	dir     bool
	mode    int64
	content string
}

func (e tent) String() string {
	if e.dir {
		return fmt.Sprintf("%s %o", e.name, e.mode)
	}
	return fmt.Sprintf("%s %o %d", e.name, e.mode, len(e.content))
}

func install(t testing.TB, fn string, data []byte, l Layout, lim Limits) ([]byte, Info, error) {
	t.Helper()
	var out bytes.Buffer
	info, err := WriteLayer(bytes.NewReader(data), int64(len(data)), fn, l, lim, &out)
	return out.Bytes(), info, err
}

// readLayer reads a layer and checks what every layer must be: sorted,
// parents first, owned by root, at time 0, plain modes.
func readLayer(t testing.TB, layer []byte) []tent {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	var ents []tent
	seen := map[string]bool{}
	prev := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
			t.Fatalf("unsafe name %q", h.Name)
		}
		if name <= prev {
			t.Fatalf("entries not sorted: %q after %q", name, prev)
		}
		prev = name
		if d := filepath.Dir(name); d != "." && !seen[d] {
			t.Fatalf("%q comes without its parent %q", name, d)
		}
		seen[name] = true
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 {
			t.Fatalf("%q: owner %d/%d %q/%q time %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		e := tent{name: name, mode: h.Mode}
		switch h.Typeflag {
		case tar.TypeDir:
			e.dir = true
			if h.Mode != 0o755 {
				t.Fatalf("directory %q has mode %o", h.Name, h.Mode)
			}
		case tar.TypeReg:
			if h.Mode != 0o644 && h.Mode != 0o755 {
				t.Fatalf("file %q has mode %o", h.Name, h.Mode)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			e.content = string(b)
		default:
			t.Fatalf("%q has type %c", h.Name, h.Typeflag)
		}
		ents = append(ents, e)
	}
	return ents
}

func byPath(ents []tent) map[string]tent {
	m := map[string]tent{}
	for _, e := range ents {
		m[e.name] = e
	}
	return m
}

// checkRecord recomputes every RECORD row from the layer's contents and
// checks RECORD lists exactly the layer's files below root.
func checkRecord(t testing.TB, ents []tent, root, distInfo string) []string {
	t.Helper()
	m := byPath(ents)
	rec, ok := m[root+"/"+distInfo+"/RECORD"]
	if !ok {
		t.Fatalf("no RECORD in the layer")
	}
	if !strings.HasSuffix(rec.content, "\r\n") {
		t.Errorf("RECORD lines do not end in CRLF as pip writes them")
	}
	rows, err := csv.NewReader(strings.NewReader(rec.content)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	listed := map[string]bool{}
	for _, r := range rows {
		p := filepath.Clean(filepath.Join(root, r[0]))
		listed[p] = true
		paths = append(paths, r[0])
		e, ok := m[p]
		if !ok || e.dir {
			t.Errorf("RECORD lists %s (%s), not a file of the layer", r[0], p)
			continue
		}
		if r[0] == distInfo+"/RECORD" {
			if r[1] != "" || r[2] != "" {
				t.Errorf("RECORD's own row is %v", r)
			}
			continue
		}
		if r[1] != recordHash([]byte(e.content)) || r[2] != fmt.Sprint(len(e.content)) {
			t.Errorf("RECORD row %v does not match %s (%s, %d)", r, p, recordHash([]byte(e.content)), len(e.content))
		}
	}
	if !sort.StringsAreSorted(paths) {
		t.Errorf("RECORD rows not sorted: %v", paths)
	}
	for _, e := range ents {
		if !e.dir && !listed[e.name] {
			t.Errorf("%s is in the layer but not in RECORD", e.name)
		}
	}
	return paths
}

// extract unpacks a layer into dir as an image would merge it.
func extract(t testing.TB, layer []byte, dir string) {
	t.Helper()
	for _, e := range readLayer(t, layer) {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		if e.dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(e.content), os.FileMode(e.mode)); err != nil {
			t.Fatal(err)
		}
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return fmt.Sprintf("%x", s)
}
