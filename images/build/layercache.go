package build

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gatewayhq/gateway/images/pyindex"
	"github.com/gatewayhq/gateway/images/wheel"
)

// layerFormat is part of every layer cache key: bump it when the layers
// made from wheels change for the same wheel and layout.
const layerFormat = "package-layer-2"

// layerCache keeps the layers made from wheels, gzip-compressed, on disk
// by wheel and layout, with their digests: a wheel's layer is made once per
// layout, and the same wheel always gives the same layer, which a
// registry then stores once for every environment that has it. Files past
// maxBytes are removed, least recently used first.
type layerCache struct {
	dir      string
	maxBytes int64

	mu       sync.Mutex
	inflight map[string]*layerCall
}

type layerCall struct {
	done  chan struct{}
	layer v1.Layer
	info  json.RawMessage
	err   error
}

// layerMeta is what the cache keeps beside a layer's file.
type layerMeta struct {
	Digest string          `json:"digest"`
	DiffID string          `json:"diff_id"`
	Size   int64           `json:"size"`
	Info   json.RawMessage `json:"info"` // what the layer holds (wheel.Info, conda.Info)
}

func newLayerCache(dir string, maxBytes int64) (*layerCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer cache: %w", err)
	}
	// Files a crash left half-written.
	if tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp-*")); err == nil {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	return &layerCache{dir: dir, maxBytes: maxBytes, inflight: map[string]*layerCall{}}, nil
}

// layerKey names the layer of a package file (by its content) installed
// the way where says (a wheel.Layout; a conda prefix and Python).
func layerKey(fileSHA256 string, where any) string {
	doc, _ := json.Marshal(where) // structs of strings always encode
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", layerFormat, fileSHA256, doc)
	return hex.EncodeToString(h.Sum(nil))
}

// wheel returns the layer of the wheel at path, from the cache or made now
// (once, however many builds ask at the same time).
func (c *layerCache) wheel(path string, f pyindex.File, layout wheel.Layout, mt types.MediaType, lim wheel.Limits) (v1.Layer, wheel.Info, error) {
	sum := strings.ToLower(f.Hashes["sha256"])
	if len(sum) != 64 {
		s, err := fileSHA256(path)
		if err != nil {
			return nil, wheel.Info{}, err
		}
		sum = s
	}
	var info wheel.Info
	l, raw, err := c.layer(layerKey(sum, layout), mt, func(w io.Writer) (any, error) {
		in, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return nil, err
		}
		return wheel.WriteLayer(in, st.Size(), f.Filename, layout, lim, w)
	})
	if err != nil {
		return nil, wheel.Info{}, err
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, wheel.Info{}, fmt.Errorf("layer cache: %w", err)
	}
	return l, info, nil
}

// layer returns the layer of key, from the cache, or made now by write
// (once, however many builds ask at the same time); info is what write
// returned, as JSON.
func (c *layerCache) layer(key string, mt types.MediaType, write func(w io.Writer) (any, error)) (v1.Layer, json.RawMessage, error) {
	c.mu.Lock()
	if call, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-call.done
		return withMediaType(call.layer, mt), call.info, call.err
	}
	call := &layerCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(call.done)
	}()
	if l, meta, ok := c.get(key); ok {
		call.layer, call.info = l, meta.Info
		return withMediaType(l, mt), meta.Info, nil
	}
	l, meta, err := c.make(key, write)
	if err != nil {
		call.err = err
		return nil, nil, err
	}
	call.layer, call.info = l, meta.Info
	c.evict()
	return withMediaType(l, mt), meta.Info, nil
}

func (c *layerCache) paths(key string) (data, meta string) {
	return filepath.Join(c.dir, key+".tar.gz"), filepath.Join(c.dir, key+".json")
}

func (c *layerCache) get(key string) (*fileLayer, layerMeta, bool) {
	dataPath, metaPath := c.paths(key)
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, layerMeta{}, false
	}
	var m layerMeta
	if json.Unmarshal(raw, &m) != nil || len(m.Info) == 0 {
		return nil, layerMeta{}, false
	}
	st, err := os.Stat(dataPath)
	if err != nil || st.Size() != m.Size {
		return nil, layerMeta{}, false
	}
	l, err := newFileLayer(dataPath, m)
	if err != nil {
		return nil, layerMeta{}, false
	}
	now := time.Now()
	_ = os.Chtimes(dataPath, now, now)
	return l, m, true
}

// make writes the layer, compressed, to a temporary file, and renames it
// (and then its digests) into place: a crash or a refused package leaves
// nothing under the key.
func (c *layerCache) make(key string, write func(w io.Writer) (any, error)) (*fileLayer, layerMeta, error) {
	dataPath, metaPath := c.paths(key)
	out, err := os.CreateTemp(c.dir, key+".tmp-*")
	if err != nil {
		return nil, layerMeta{}, err
	}
	tmp := out.Name()
	keep := false
	defer func() {
		if !keep {
			out.Close()
			_ = os.Remove(tmp)
		}
	}()
	digest, diffID := sha256.New(), sha256.New()
	counter := &countWriter{w: io.MultiWriter(out, digest)}
	zw, err := gzip.NewWriterLevel(counter, gzip.BestSpeed)
	if err != nil {
		return nil, layerMeta{}, err
	}
	info, err := write(io.MultiWriter(zw, diffID))
	if err != nil {
		return nil, layerMeta{}, err
	}
	rawInfo, err := json.Marshal(info)
	if err != nil {
		return nil, layerMeta{}, err
	}
	if err := zw.Close(); err != nil {
		return nil, layerMeta{}, err
	}
	if err := out.Close(); err != nil {
		return nil, layerMeta{}, err
	}
	m := layerMeta{Digest: "sha256:" + hexSum(digest), DiffID: "sha256:" + hexSum(diffID), Size: counter.n, Info: rawInfo}
	if err := os.Rename(tmp, dataPath); err != nil {
		return nil, layerMeta{}, err
	}
	keep = true
	raw, _ := json.Marshal(m)
	if err := writeFileAtomic(metaPath, raw); err != nil {
		return nil, layerMeta{}, err
	}
	l, err := newFileLayer(dataPath, m)
	return l, m, err
}

// evict removes the least recently used layers past maxBytes.
func (c *layerCache) evict() {
	if c.maxBytes <= 0 {
		return
	}
	ents, err := filepath.Glob(filepath.Join(c.dir, "*.tar.gz"))
	if err != nil {
		return
	}
	type ent struct {
		path string
		size int64
		at   time.Time
	}
	var all []ent
	var total int64
	for _, p := range ents {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		all = append(all, ent{p, st.Size(), st.ModTime()})
		total += st.Size()
	}
	slices.SortFunc(all, func(a, b ent) int { return a.at.Compare(b.at) })
	for _, e := range all {
		if total <= c.maxBytes {
			return
		}
		_ = os.Remove(strings.TrimSuffix(e.path, ".tar.gz") + ".json")
		_ = os.Remove(e.path)
		total -= e.size
	}
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hexSum(h), nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileLayer is a gzip-compressed layer in a file whose digests are known,
// so that nothing is hashed again to append or push it.
type fileLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
	mt             types.MediaType
}

func newFileLayer(path string, m layerMeta) (*fileLayer, error) {
	d, err := v1.NewHash(m.Digest)
	if err != nil {
		return nil, err
	}
	di, err := v1.NewHash(m.DiffID)
	if err != nil {
		return nil, err
	}
	return &fileLayer{path: path, digest: d, diffID: di, size: m.Size, mt: types.DockerLayer}, nil
}

func withMediaType(l v1.Layer, mt types.MediaType) v1.Layer {
	fl, ok := l.(*fileLayer)
	if !ok || fl == nil {
		return l
	}
	c := *fl
	c.mt = mt
	return &c
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("layer %s: %w", l.digest, err)
	}
	return &gzipFile{Reader: zr, f: f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g *gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }
