package conda

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Placeholder is a long prefix placeholder, as conda-build makes them.
const placeholder = "/home/build/_h_env_placehold_placehold_placehold_placehold_placehold_placehold_placehold"

// tm is one tar member of a test package.
type tm struct {
	name string
	body string
	mode int64
	typ  byte
	link string
	size int64 // header size, when it differs from the body (hostile cases)
}

// pkgDef describes a test package.
type pkgDef struct {
	name, version, build, subdir string
	noarch                       string
	index                        map[string]any // extra index.json fields
	members                      []tm           // payload
	paths                        []pathEntry    // info/paths.json; nil: made from the members
	noPathsJSON                  bool
	files                        string // info/files, when noPathsJSON
	hasPrefix                    string // info/has_prefix
	entryPoints                  []string
	rawIndex                     string // replaces index.json
}

func (d pkgDef) filename(ext string) string {
	return d.name + "-" + d.version + "-" + d.build + ext
}

func (d pkgDef) infoMembers(t testing.TB) []tm {
	t.Helper()
	idx := map[string]any{"name": d.name, "version": d.version, "build": d.build, "build_number": 0,
		"subdir": d.subdir, "depends": []string{"python >=3.8"}, "license": "MIT", "timestamp": 1700000000000}
	if d.noarch != "" {
		idx["noarch"] = d.noarch
	}
	for k, v := range d.index {
		idx[k] = v
	}
	ib, _ := json.Marshal(idx)
	if d.rawIndex != "" {
		ib = []byte(d.rawIndex)
	}
	out := []tm{{name: "info/index.json", body: string(ib)}}
	if !d.noPathsJSON {
		paths := d.paths
		if paths == nil {
			for _, m := range d.members {
				pe := pathEntry{Path: m.name, PathType: "hardlink"}
				switch m.typ {
				case tar.TypeSymlink:
					pe.PathType = "softlink"
				case tar.TypeDir:
					pe.PathType = "directory"
				}
				if pe.PathType == "hardlink" {
					sum := sha256.Sum256([]byte(m.body))
					pe.SHA256 = hex.EncodeToString(sum[:])
				}
				paths = append(paths, pe)
			}
		}
		pb, _ := json.Marshal(map[string]any{"paths": paths, "paths_version": 1})
		out = append(out, tm{name: "info/paths.json", body: string(pb)})
	} else {
		out = append(out, tm{name: "info/files", body: d.files})
		if d.hasPrefix != "" {
			out = append(out, tm{name: "info/has_prefix", body: d.hasPrefix})
		}
	}
	if len(d.entryPoints) > 0 {
		lb, _ := json.Marshal(map[string]any{"noarch": map[string]any{"type": "python", "entry_points": d.entryPoints}, "package_metadata_version": 1})
		out = append(out, tm{name: "info/link.json", body: string(lb)})
	}
	return out
}

func makeTar(t testing.TB, ms []tm) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Mode: m.mode, Typeflag: m.typ, Linkname: m.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(m.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(m.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstdBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// condaFile makes a .conda file: a stored zip with metadata.json and the
// info and pkg tars, zstd-compressed.
func condaFile(t testing.TB, d pkgDef) []byte {
	t.Helper()
	base := strings.TrimSuffix(d.filename(".conda"), ".conda")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	add("metadata.json", []byte(`{"conda_pkg_format_version": 2}`))
	add("pkg-"+base+".tar.zst", zstdBytes(t, makeTar(t, d.members)))
	add("info-"+base+".tar.zst", zstdBytes(t, makeTar(t, d.infoMembers(t))))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarBz2File makes a .tar.bz2 package; Go has no bzip2 writer, so the
// Python the tests use anyway compresses it.
func tarBz2File(t testing.TB, d pkgDef) []byte {
	t.Helper()
	raw := makeTar(t, append(d.infoMembers(t), d.members...))
	return bzip2Bytes(t, raw)
}

func bzip2Bytes(t testing.TB, raw []byte) []byte {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", "import bz2,sys; sys.stdout.buffer.write(bz2.compress(sys.stdin.buffer.read()))")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bzip2 with /usr/bin/python3: %v", err)
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// channel is a conda channel served on loopback.
type channel struct {
	srv *httptest.Server
	mu  sync.Mutex
	// files by "<subdir>/<filename>", repodata by subdir
	files    map[string][]byte
	repodata map[string]map[string]map[string]any // subdir -> key -> filename -> record
	hits     map[string]int
	auth     string // "user:password" required, when set
	override map[string][]byte
}

func newChannel(t *testing.T) *channel {
	c := &channel{files: map[string][]byte{}, repodata: map[string]map[string]map[string]any{}, hits: map[string]int{}, override: map[string][]byte{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

// add puts a package file into the channel and its repodata.
func (c *channel) add(subdir, filename string, d pkgDef, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[subdir+"/"+filename] = b
	key := "packages"
	if strings.HasSuffix(filename, ".conda") {
		key = "packages.conda"
	}
	if c.repodata[subdir] == nil {
		c.repodata[subdir] = map[string]map[string]any{}
	}
	if c.repodata[subdir][key] == nil {
		c.repodata[subdir][key] = map[string]any{}
	}
	c.repodata[subdir][key][filename] = map[string]any{
		"name": d.name, "version": d.version, "build": d.build, "build_number": 0, "subdir": subdir,
		"sha256": sha(b), "md5": "0123456789abcdef0123456789abcdef", "size": len(b), "depends": []string{},
	}
}

func (c *channel) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.auth != "" {
		u, p, ok := r.BasicAuth()
		if !ok || u+":"+p != c.auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	c.hits[p]++
	if b, ok := c.override[p]; ok {
		w.Write(b)
		return
	}
	if subdir, ok := strings.CutSuffix(p, "/repodata.json"); ok {
		rd := map[string]any{"info": map[string]any{"subdir": subdir}, "repodata_version": 1, "removed": []string{}}
		for k, v := range c.repodata[subdir] {
			rd[k] = v
		}
		if _, ok := rd["packages"]; !ok {
			rd["packages"] = map[string]any{}
		}
		json.NewEncoder(w).Encode(rd)
		return
	}
	if b, ok := c.files[p]; ok {
		w.Write(b)
		return
	}
	http.NotFound(w, r)
}

func (c *channel) hitCount(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[p]
}

// readLayer reads a layer tar into headers and contents, in order.
type layerEntry struct {
	hdr  *tar.Header
	body []byte
}

func readLayer(t testing.TB, b []byte) []layerEntry {
	t.Helper()
	var out []layerEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, layerEntry{h, body})
	}
}

func entryMap(es []layerEntry) map[string]layerEntry {
	m := map[string]layerEntry{}
	for _, e := range es {
		m[e.hdr.Name] = e
	}
	return m
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
