// Package testpypi makes Python wheels and serves them from a PEP 503
// package index on loopback, for the tests and the benchmark of the image
// builder: a real index over HTTP with real wheel files, made by the test.
package testpypi

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Wheel describes a wheel to make.
type Wheel struct {
	Name, Version string
	// Tag is the wheel's tag (default py3-none-any).
	Tag string
	// Files are the files at the wheel's root (the package), by path. A
	// nil Files gives a package Name with __init__.py holding __version__.
	Files map[string]string
	// Data are the files under <name>-<version>.data/, by path from there
	// ("scripts/tool", "data/share/x.txt").
	Data map[string]string
	// ConsoleScripts are console_scripts entry points: name -> "module:func".
	ConsoleScripts map[string]string
	// Platlib sets Root-Is-Purelib: false.
	Platlib bool
	// Executable are the paths (of Files) stored with mode 0755.
	Executable []string
	// Symlinks are symbolic links in the archive (path -> target), which
	// no installer may unpack.
	Symlinks map[string]string
}

// module is a distribution name as an importable name.
func module(name string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(name) }

// Filename is the wheel's file name.
func (w Wheel) Filename() string {
	tag := w.Tag
	if tag == "" {
		tag = "py3-none-any"
	}
	return fmt.Sprintf("%s-%s-%s.whl", module(w.Name), w.Version, tag)
}

// Build returns the wheel's file name and bytes; the same Wheel always gives
// the same bytes.
func (w Wheel) Build() (string, []byte) {
	mod := module(w.Name)
	distInfo := fmt.Sprintf("%s-%s.dist-info", mod, w.Version)
	files := map[string]string{}
	if w.Files == nil {
		files[mod+"/__init__.py"] = fmt.Sprintf("__version__ = %q\n", w.Version)
	}
	maps.Copy(files, w.Files)
	for p, d := range w.Data {
		files[fmt.Sprintf("%s-%s.data/%s", mod, w.Version, p)] = d
	}
	tag := w.Tag
	if tag == "" {
		tag = "py3-none-any"
	}
	files[distInfo+"/METADATA"] = fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: gateway test package\n", w.Name, w.Version)
	files[distInfo+"/WHEEL"] = fmt.Sprintf("Wheel-Version: 1.0\nGenerator: gateway-test\nRoot-Is-Purelib: %t\nTag: %s\n", !w.Platlib, tag)
	if len(w.ConsoleScripts) > 0 {
		var sb strings.Builder
		sb.WriteString("[console_scripts]\n")
		for _, n := range slices.Sorted(maps.Keys(w.ConsoleScripts)) {
			fmt.Fprintf(&sb, "%s = %s\n", n, w.ConsoleScripts[n])
		}
		files[distInfo+"/entry_points.txt"] = sb.String()
	}
	for p, target := range w.Symlinks {
		files[p] = target
	}
	paths := slices.Sorted(maps.Keys(files))
	var record strings.Builder
	for _, p := range paths {
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", distInfo)
	files[distInfo+"/RECORD"] = record.String()
	paths = append(paths, distInfo+"/RECORD")

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range paths {
		h := &zip.FileHeader{Name: p, Method: zip.Deflate, Modified: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
		mode := 0o644
		if slices.Contains(w.Executable, p) || strings.Contains(p, ".data/scripts/") {
			mode = 0o755
		}
		if _, ok := w.Symlinks[p]; ok {
			h.SetMode(fs.ModeSymlink | 0o777)
		} else {
			h.SetMode(fs.FileMode(mode))
		}
		fw, err := zw.CreateHeader(h)
		if err != nil {
			panic(err) // only for invalid headers, which these are not
		}
		_, _ = io.WriteString(fw, files[p])
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return w.Filename(), buf.Bytes()
}

// Index is a PEP 503 "simple" package index on 127.0.0.1, serving wheels
// with their sha256 in each link.
type Index struct {
	// URL is the index's URL (…/simple/).
	URL string

	mu        sync.Mutex
	files     map[string][]byte // file name -> bytes
	requested []string
	down      bool
	tampered  map[string][]byte
}

// NewIndex starts an index serving wheels (file name -> bytes), stopped at
// the end of the test.
func NewIndex(t testing.TB, wheels map[string][]byte) *Index {
	t.Helper()
	ix, stop := Serve(wheels)
	t.Cleanup(stop)
	return ix
}

// Serve starts an index serving wheels (file name -> bytes) until stop is
// called.
func Serve(wheels map[string][]byte) (ix *Index, stop func()) {
	ix = &Index{files: maps.Clone(wheels)}
	if ix.files == nil {
		ix.files = map[string][]byte{}
	}
	srv := httptest.NewServer(ix)
	ix.URL = srv.URL + "/simple/"
	return ix, srv.Close
}

// Add serves another file.
func (ix *Index) Add(filename string, data []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.files[filename] = data
}

// Tamper serves data as filename while the index page keeps the hash of
// what was added: a file changed after it was published.
func (ix *Index) Tamper(filename string, data []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.tampered == nil {
		ix.tampered = map[string][]byte{}
	}
	ix.tampered[filename] = data
}

// SetDown makes the index answer 503 to everything (or not).
func (ix *Index) SetDown(down bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.down = down
}

// Requests returns the paths requested so far.
func (ix *Index) Requests() []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return slices.Clone(ix.requested)
}

// Downloads counts the requests for files.
func (ix *Index) Downloads() int {
	n := 0
	for _, p := range ix.Requests() {
		if strings.HasPrefix(p, "/files/") {
			n++
		}
	}
	return n
}

// Project is a wheel file name's PEP 503 project name.
func Project(filename string) string {
	name, _, _ := strings.Cut(filename, "-")
	return normalize(name)
}

var reSeparators = regexp.MustCompile(`[-_.]+`)

func normalize(name string) string { return reSeparators.ReplaceAllString(strings.ToLower(name), "-") }

func (ix *Index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	ix.requested = append(ix.requested, r.URL.Path)
	down := ix.down
	files := maps.Clone(ix.files)
	tampered := maps.Clone(ix.tampered)
	ix.mu.Unlock()
	if down {
		http.Error(w, "index down for the test", http.StatusServiceUnavailable)
		return
	}
	if project, ok := strings.CutPrefix(r.URL.Path, "/simple/"); ok {
		project = strings.TrimSuffix(project, "/")
		var names []string
		for f := range files {
			if Project(f) == normalize(project) {
				names = append(names, f)
			}
		}
		if len(names) == 0 {
			http.NotFound(w, r)
			return
		}
		slices.Sort(names)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html>\n<html><body>\n")
		for _, f := range names {
			sum := sha256.Sum256(files[f])
			fmt.Fprintf(w, "<a href=\"/files/%s#sha256=%s\">%s</a><br>\n", f, hex.EncodeToString(sum[:]), f)
		}
		fmt.Fprint(w, "</body></html>\n")
		return
	}
	if f, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		data, ok := files[f]
		if t, bad := tampered[f]; bad {
			data = t
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
		return
	}
	http.NotFound(w, r)
}
