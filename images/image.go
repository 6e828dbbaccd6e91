package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image labels.
const (
	// LabelSpec holds the environment's canonical JSON document.
	LabelSpec = "io.gateway.env.spec"
	// LabelHash holds the hex SHA-256 of LabelSpec's value.
	LabelHash = "io.gateway.env.hash"
)

// CodeDir is the directory of the user's code in an image. It is on
// PYTHONPATH, and so is each code part's zip file, CodePath(name).
const CodeDir = "/opt/gateway/code"

// CodePath returns where a code part's zip file is in an image.
func CodePath(name string) string { return path.Join(CodeDir, name+".zip") }

// Entrypoint is the image's entrypoint: providers run "<image> scheduler ..."
// or "<image> worker ...". The base image's Cmd is cleared.
var Entrypoint = []string{"dask"}

// ErrNotFound is wrapped by Lookup's error when the image does not exist.
var ErrNotFound = errors.New("image not found")

// ErrNoSpec is wrapped by Lookup's error when the image exists but has no
// valid environment labels.
var ErrNoSpec = errors.New("image has no environment spec")

// File is one file of a Layer. Mode is its permission bits (0644 if zero).
type File struct {
	Data []byte
	// Src, when set, is the file's content instead of Data: read when the
	// tar is written, so that a large file (user code the API spooled to
	// disk) need not be held in memory.
	Src  *io.SectionReader
	Mode int64
}

// size is the length of the file's content.
func (f File) size() int64 {
	if f.Src != nil {
		return f.Src.Size()
	}
	return int64(len(f.Data))
}

// Code is the content of an environment's code parts by name. Each is
// read through a SectionReader, so that it may be a file on disk (an
// upload the API spooled) as well as bytes in memory (CodeFromBytes).
type Code map[string]*io.SectionReader

// CodeFromBytes is Code over parts held in memory.
func CodeFromBytes(parts map[string][]byte) Code {
	if parts == nil {
		return nil
	}
	c := make(Code, len(parts))
	for name, b := range parts {
		c[name] = io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b)))
	}
	return c
}

// Size is the code's total length in bytes.
func (c Code) Size() int64 {
	var n int64
	for _, r := range c {
		n += r.Size()
	}
	return n
}

// Layer is the content of one image layer: files by absolute or relative
// path (both mean the same: relative to the image's root). Parent
// directories are added with mode 0755.
type Layer struct {
	// Name describes the layer in the image's history ("packages", "code").
	Name  string
	Files map[string]File
	// Spooled, when set, is the layer's tar as WriteTar wrote it, read
	// from where it was spooled (a file that a queued build keeps instead
	// of the files in memory); Files is then not used.
	Spooled *io.SectionReader
}

// CodeLayer returns the layer holding the spec's code parts, given their
// bytes by name: each at CodePath(name). Every code part of the spec must be
// given, with bytes matching its digest, and no others. The layer's files
// read the parts when its tar is written: they must stay readable until
// then.
func CodeLayer(spec Spec, parts Code) (Layer, error) {
	n, err := spec.Normalize()
	if err != nil {
		return Layer{}, err
	}
	l := Layer{Name: "code", Files: make(map[string]File, len(n.Code))}
	for _, cp := range n.Code {
		r, ok := parts[cp.Name]
		if !ok || r == nil {
			return Layer{}, fmt.Errorf("%w: code part %q: no content given", ErrInvalidSpec, cp.Name)
		}
		d, err := DigestOfReader(io.NewSectionReader(r, 0, r.Size()))
		if err != nil {
			return Layer{}, fmt.Errorf("code part %q: %w", cp.Name, err)
		}
		if d != cp.Digest {
			return Layer{}, fmt.Errorf("%w: code part %q: content has digest %s, spec says %s", ErrInvalidSpec, cp.Name, d, cp.Digest)
		}
		l.Files[CodePath(cp.Name)] = File{Src: r, Mode: 0o644}
	}
	if len(parts) != len(n.Code) {
		for name := range parts {
			if !slices.ContainsFunc(n.Code, func(cp CodePart) bool { return cp.Name == name }) {
				return Layer{}, fmt.Errorf("%w: code part %q is not in the spec", ErrInvalidSpec, name)
			}
		}
	}
	return l, nil
}

// epoch is the modification time of every tar entry.
var epoch = time.Unix(0, 0).UTC()

// Tar returns the layer as a deterministic tar archive: entries sorted by
// path (so each directory comes before its contents), mtime 0, uid and gid 0,
// no user or group names.
func (l Layer) Tar() ([]byte, error) {
	var buf bytes.Buffer
	if err := l.WriteTar(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTar writes the layer's tar (see Tar) to w.
func (l Layer) WriteTar(w io.Writer) error {
	if l.Spooled != nil {
		_, err := io.Copy(w, io.NewSectionReader(l.Spooled, 0, l.Spooled.Size()))
		return err
	}
	type entry struct {
		dir  bool
		file File
	}
	entries := map[string]entry{}
	for p, f := range l.Files {
		clean, err := cleanPath(p)
		if err != nil {
			return err
		}
		if e, dup := entries[clean]; dup {
			if e.dir {
				return fmt.Errorf("layer %q: %q is both a file and a directory", l.Name, p)
			}
			return fmt.Errorf("layer %q: %q is given twice", l.Name, p)
		}
		if f.Mode&^0o7777 != 0 {
			return fmt.Errorf("layer %q: %q has mode %o, want permission bits only", l.Name, p, f.Mode)
		}
		entries[clean] = entry{file: f}
		for d := path.Dir(clean); d != "."; d = path.Dir(d) {
			if e, ok := entries[d]; ok && !e.dir {
				return fmt.Errorf("layer %q: %q is both a file and a directory", l.Name, d)
			}
			entries[d] = entry{dir: true}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)

	tw := tar.NewWriter(w)
	for _, n := range names {
		e := entries[n]
		h := &tar.Header{Name: n, ModTime: epoch, Uid: 0, Gid: 0}
		if e.dir {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, e.file.Mode, e.file.size()
			if h.Mode == 0 {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer %q: %s: %w", l.Name, n, err)
		}
		if !e.dir {
			if err := e.file.write(tw); err != nil {
				return fmt.Errorf("layer %q: %s: %w", l.Name, n, err)
			}
		}
	}
	return tw.Close()
}

func (f File) write(w io.Writer) error {
	if f.Src == nil {
		_, err := w.Write(f.Data)
		return err
	}
	_, err := io.Copy(w, io.NewSectionReader(f.Src, 0, f.Src.Size()))
	return err
}

func cleanPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("invalid path %q in layer", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q in layer leaves the root", p)
		}
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "", fmt.Errorf("invalid path %q in layer (the root)", p)
	}
	return c, nil
}

// Assemble returns base (empty.Image if nil, as an OCI image) with one layer
// per element of layers, in order, and a config that records the spec:
// labels LabelSpec (the canonical JSON) and LabelHash, PYTHONPATH with
// CodeDir and each code part's zip before the base's PYTHONPATH, the
// Entrypoint (and no Cmd), and the spec's platform (an error if the base is
// for another one). Timestamps are zero and layer tars deterministic, so the
// same inputs always give the same digest.
func Assemble(base v1.Image, spec Spec, layers []Layer) (v1.Image, error) {
	n, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	doc, err := n.Canonical()
	if err != nil {
		return nil, err
	}
	hash, err := n.Hash()
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	baseMT, err := base.MediaType()
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	layerMT := types.DockerLayer
	if baseMT == types.OCIManifestSchema1 {
		layerMT = types.OCILayer
	}

	adds := make([]mutate.Addendum, 0, len(layers))
	for i, l := range layers {
		var open tarball.Opener
		if l.Spooled != nil {
			sr := l.Spooled
			open = func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(sr, 0, sr.Size())), nil }
		} else {
			b, err := l.Tar()
			if err != nil {
				return nil, err
			}
			open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
		layer, err := tarball.LayerFromOpener(open, tarball.WithMediaType(layerMT), tarball.WithCompressedCaching)
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, l.Name, err)
		}
		desc := l.Name
		if desc == "" {
			desc = fmt.Sprintf("layer %d", i)
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: layerMT,
			History:   v1.History{CreatedBy: "gateway images: " + desc, Comment: "env " + hash[:16]},
		})
	}
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, err
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("base image config: %w", err)
	}
	cf = cf.DeepCopy()
	osName, arch, _ := strings.Cut(n.Platform, "/")
	if cf.OS == "" && cf.Architecture == "" {
		cf.OS, cf.Architecture = osName, arch
	} else if cf.OS != osName || cf.Architecture != arch {
		return nil, fmt.Errorf("base image is for %s/%s, spec for %s", cf.OS, cf.Architecture, n.Platform)
	}

	pythonPath := []string{CodeDir}
	for _, cp := range n.Code {
		pythonPath = append(pythonPath, CodePath(cp.Name))
	}
	env := make([]string, 0, len(cf.Config.Env)+1)
	for _, kv := range cf.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if v != "" {
				pythonPath = append(pythonPath, v)
			}
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PYTHONPATH="+strings.Join(pythonPath, ":"))
	cf.Config.Env = env
	cf.Config.Entrypoint = slices.Clone(Entrypoint)
	cf.Config.Cmd = nil
	labels := make(map[string]string, len(cf.Config.Labels)+2)
	for k, v := range cf.Config.Labels {
		labels[k] = v
	}
	labels[LabelSpec] = string(doc)
	labels[LabelHash] = hash
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}

// Push writes img to ref (a tag, such as "registry.example/envs:env-…"),
// authenticating with auth (anonymous if nil). opts are added to the
// remote options (a transport, for example).
func Push(ctx context.Context, img v1.Image, ref string, auth authn.Authenticator, opts ...remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	o := append([]remote.Option{remote.WithContext(ctx), remote.WithAuth(auth)}, opts...)
	if err := remote.Write(r, img, o...); err != nil {
		return fmt.Errorf("push %s: %w", r, err)
	}
	return nil
}

// Lookup returns the environment recorded in the image at ref. Its error
// wraps ErrNotFound when there is no such image (one manifest request), and
// ErrNoSpec when the image has no valid environment labels. opts are added
// to the remote options (remote.WithAuth, for example; anonymous otherwise).
func Lookup(ctx context.Context, ref string, opts ...remote.Option) (Spec, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Spec{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	o := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	img, err := remote.Image(r, o...)
	if err != nil {
		if IsNotFound(err) {
			return Spec{}, fmt.Errorf("%s: %w", r, ErrNotFound)
		}
		return Spec{}, fmt.Errorf("look up %s: %w", r, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Spec{}, fmt.Errorf("look up %s: config: %w", r, err)
	}
	doc, ok := cf.Config.Labels[LabelSpec]
	if !ok {
		return Spec{}, fmt.Errorf("%s: %w: no %s label", r, ErrNoSpec, LabelSpec)
	}
	spec, err := ParseCanonical([]byte(doc))
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w: %v", r, ErrNoSpec, err)
	}
	hash, err := spec.Hash()
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w: %v", r, ErrNoSpec, err)
	}
	if got := cf.Config.Labels[LabelHash]; got != hash {
		return Spec{}, fmt.Errorf("%s: %w: %s label is %q, the spec's hash is %q", r, ErrNoSpec, LabelHash, got, hash)
	}
	return spec, nil
}

// IsNotFound is whether a registry error says the image does not exist.
func IsNotFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return true
		}
	}
	return false
}
