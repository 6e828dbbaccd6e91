// Package testconda makes conda packages (.conda files) and serves them
// from a conda channel on loopback, for the image builder's tests: a real
// channel over HTTP (repodata.json with sha256 and sizes) with real package
// files, made by the test.
package testconda

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Placeholder is the prefix placeholder of the files listed in
// Package.Prefixed, as conda-build writes it.
const Placeholder = "/opt/anaconda1anaconda2anaconda3"

// Package describes a conda package to make.
type Package struct {
	Name, Version, Build, Subdir string
	// Noarch is "" or "python" (files under site-packages/ then go to
	// the prefix's lib/pythonX.Y/site-packages).
	Noarch string
	// Files are the package's files by path in the prefix.
	Files map[string]string
	// Prefixed are the Files (text) holding Placeholder, which an
	// installer replaces with the prefix.
	Prefixed []string
}

// Filename is the package's file name.
func (p Package) Filename() string { return fmt.Sprintf("%s-%s-%s.conda", p.Name, p.Version, p.Build) }

// Bytes returns the .conda file: a stored zip with metadata.json and the
// info and pkg tars, zstd-compressed.
func (p Package) Bytes() []byte {
	paths := slices.Sorted(maps.Keys(p.Files))
	var entries []map[string]any
	for _, f := range paths {
		sum := sha256.Sum256([]byte(p.Files[f]))
		e := map[string]any{"_path": f, "path_type": "hardlink", "sha256": hex.EncodeToString(sum[:]), "size_in_bytes": len(p.Files[f])}
		if slices.Contains(p.Prefixed, f) {
			e["prefix_placeholder"], e["file_mode"] = Placeholder, "text"
		}
		entries = append(entries, e)
	}
	index := map[string]any{"name": p.Name, "version": p.Version, "build": p.Build, "build_number": 0, "subdir": p.Subdir, "depends": []string{}}
	if p.Noarch != "" {
		index["noarch"] = p.Noarch
	}
	ib, _ := json.Marshal(index)
	pb, _ := json.Marshal(map[string]any{"paths": entries, "paths_version": 1})
	info := map[string]string{"info/index.json": string(ib), "info/paths.json": string(pb)}
	base := strings.TrimSuffix(p.Filename(), ".conda")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			panic(err) // only for invalid headers
		}
		_, _ = w.Write(b)
	}
	add("metadata.json", []byte(`{"conda_pkg_format_version": 2}`))
	add("pkg-"+base+".tar.zst", zstdTar(p.Files))
	add("info-"+base+".tar.zst", zstdTar(info))
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func zstdTar(files map[string]string) []byte {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(files[name]))})
		_, _ = tw.Write([]byte(files[name]))
	}
	_ = tw.Close()
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out)
	if err != nil {
		panic(err)
	}
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	return out.Bytes()
}

// Channel is a conda channel on 127.0.0.1.
type Channel struct {
	URL string

	mu       sync.Mutex
	files    map[string][]byte         // "<subdir>/<file>" -> bytes
	records  map[string]map[string]any // subdir -> file -> record
	requests []string
}

// NewChannel starts an empty channel, stopped at the end of the test.
func NewChannel(t testing.TB) *Channel {
	t.Helper()
	c := &Channel{files: map[string][]byte{}, records: map[string]map[string]any{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Add publishes a package in its subdir.
func (c *Channel) Add(p Package) {
	b := p.Bytes()
	sum := sha256.Sum256(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[p.Subdir+"/"+p.Filename()] = b
	if c.records[p.Subdir] == nil {
		c.records[p.Subdir] = map[string]any{}
	}
	c.records[p.Subdir][p.Filename()] = map[string]any{"name": p.Name, "version": p.Version, "build": p.Build, "build_number": 0,
		"subdir": p.Subdir, "sha256": hex.EncodeToString(sum[:]), "size": len(b), "depends": []string{}}
}

// Requests returns the paths asked for so far.
func (c *Channel) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

func (c *Channel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/")
	c.requests = append(c.requests, p)
	if subdir, ok := strings.CutSuffix(p, "/repodata.json"); ok {
		recs := c.records[subdir]
		if recs == nil {
			recs = map[string]any{}
		}
		doc := map[string]any{"info": map[string]any{"subdir": subdir}, "repodata_version": 1, "packages": map[string]any{}, "packages.conda": recs}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	if b, ok := c.files[p]; ok {
		_, _ = w.Write(b)
		return
	}
	http.NotFound(w, r)
}
