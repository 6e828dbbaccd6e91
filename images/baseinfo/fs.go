package baseinfo

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The image's file tree after all layers, with whiteouts applied. Only
// headers are kept; file contents are read on demand (or while the first
// pass streams past a file that is likely to be needed) within a byte
// budget, so that a large base costs one decompression of each layer.

type nodeType uint8

const (
	typeDir nodeType = iota + 1
	typeFile
	typeSymlink
	typeOther
)

type node struct {
	typ      nodeType
	mode     int64
	size     int64
	link     string // symlink target
	layer    int    // the layer whose entry this is
	tarName  string // where its content is in that layer's tar (a hard link's target)
	children map[string]*node
}

func newDir() *node { return &node{typ: typeDir, mode: 0o755, children: map[string]*node{}} }

// readKind says how much of a file is read and what is kept.
type readKind uint8

const (
	kindHeaders readKind = iota + 1 // RFC 822 headers up to the first blank line (METADATA, PKG-INFO)
	kindSmall                       // the whole file, bounded (pyvenv.cfg)
	kindScheme                      // which distribution patches sysconfig carries
	kindGlibc                       // the glibc release in libc.so.6
)

const (
	maxHeaderBytes = 64 << 10
	maxSmallBytes  = 64 << 10
	maxSchemeBytes = 1 << 20
	maxGlibcBytes  = 16 << 20
	maxNameLen     = 4096
	maxSymlinkHops = 40 // Linux's MAXSYMLINKS
)

type contentKey struct {
	layer int
	name  string
	kind  readKind
}

// Errors a caller can match with errors.Is.
var (
	ErrLimit       = errors.New("base image exceeds a reading limit")
	ErrSymlinkLoop = errors.New("too many levels of symbolic links")
	errNotExist    = errors.New("no such file in the image")
)

type fsys struct {
	root    *node
	layers  []v1.Layer
	lim     Limits
	entries int   // tar entries and implied directories, bounded by lim.MaxEntries
	read    int64 // content bytes read, bounded by lim.MaxReadBytes
	opened  int   // layer streams opened (one per layer unless a second pass is needed)
	cache   map[contentKey][]byte
}

// ctxReader stops a layer's stream when the context ends, also in the
// middle of a large file that the tar reader skips.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (f *fsys) open(ctx context.Context, idx int) (io.ReadCloser, *tar.Reader, error) {
	rc, err := f.layers[idx].Uncompressed()
	if err != nil {
		return nil, nil, fmt.Errorf("opening: %w", err)
	}
	f.opened++
	return rc, tar.NewReader(ctxReader{ctx, rc}), nil
}

// Files worth reading while the first pass streams past them: every
// candidate for what Inspect asks later, so that the common image needs a
// single pass. Anything else is read in a second pass of just its layer.
var (
	specMetadata = regexp.MustCompile(`(^|/)(site|dist)-packages/[^/]+\.(dist-info/METADATA|egg-info/PKG-INFO)$`)
	specEggFile  = regexp.MustCompile(`(^|/)(site|dist)-packages/[^/]+\.egg-info$`)
	specSysconf  = regexp.MustCompile(`(^|/)lib/python3\.\d+/(sysconfig\.py|sysconfig/__init__\.py)$`)
	specLibc     = regexp.MustCompile(`^(usr/)?lib(64)?/([^/]+-linux-gnu[^/]*/)?(libc\.so\.6|libc-\d+\.\d+\.so)$`)
)

func speculate(name string) readKind {
	switch {
	case path.Base(name) == "pyvenv.cfg":
		return kindSmall
	case specMetadata.MatchString(name), specEggFile.MatchString(name):
		return kindHeaders
	case specSysconf.MatchString(name):
		return kindScheme
	case specLibc.MatchString(name):
		return kindGlibc
	}
	return 0
}

// cleanName turns a tar entry name into a path relative to the root with no
// "..", or "" for the root itself.
func cleanName(name string) string {
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/")
}

type pending struct {
	name string
	n    *node
	hard string // hard link target (cleaned), when the entry is one
}

func loadFS(ctx context.Context, layers []v1.Layer, lim Limits) (*fsys, error) {
	f := &fsys{root: newDir(), layers: layers, lim: lim, cache: map[contentKey][]byte{}}
	for i := range layers {
		if err := f.loadLayer(ctx, i); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i+1, err)
		}
	}
	return f, nil
}

func (f *fsys) loadLayer(ctx context.Context, idx int) error {
	rc, tr, err := f.open(ctx, idx)
	if err != nil {
		return err
	}
	defer rc.Close()
	var entries []pending
	var whiteouts, opaques []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if err := f.count(); err != nil {
			return err
		}
		if f.entries%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(hdr.Name) > maxNameLen || len(hdr.Linkname) > maxNameLen {
			return fmt.Errorf("%w: an entry's name or link is longer than %d bytes", ErrLimit, maxNameLen)
		}
		name := cleanName(hdr.Name)
		if name == "" {
			continue
		}
		dir, base := path.Split(name)
		if strings.HasPrefix(base, ".wh.") {
			switch {
			case base == ".wh..wh..opq":
				opaques = append(opaques, strings.TrimSuffix(dir, "/"))
			case strings.HasPrefix(base, ".wh..wh."):
				// aufs bookkeeping, not a file
			default:
				whiteouts = append(whiteouts, dir+strings.TrimPrefix(base, ".wh."))
			}
			continue
		}
		n := &node{mode: hdr.Mode, size: hdr.Size, layer: idx, tarName: name}
		p := pending{name: name, n: n}
		switch hdr.Typeflag {
		case tar.TypeDir:
			n.typ = typeDir
			n.children = map[string]*node{}
		case tar.TypeReg, tar.TypeRegA:
			n.typ = typeFile
			if k := speculate(name); k != 0 {
				if err := f.capture(contentKey{idx, name, k}, tr, hdr.Size); err != nil {
					return err
				}
			}
		case tar.TypeSymlink:
			n.typ = typeSymlink
			n.link = hdr.Linkname
		case tar.TypeLink:
			n.typ = typeFile
			p.hard = cleanName(hdr.Linkname)
			n.tarName = p.hard
		default:
			n.typ = typeOther
		}
		entries = append(entries, p)
	}
	// Whiteouts hide what lower layers had; this layer's own entries are
	// applied after them whatever their order in the tar.
	for _, d := range opaques {
		if n := f.lookupLexical(d); n != nil && n.typ == typeDir {
			n.children = map[string]*node{}
		}
	}
	for _, w := range whiteouts {
		f.remove(w)
	}
	for _, p := range entries {
		if p.hard != "" {
			if t := f.lookupLexical(p.hard); t != nil && t.typ == typeFile {
				p.n.size, p.n.mode = t.size, t.mode
			}
		}
		if err := f.put(p.name, p.n); err != nil {
			return err
		}
	}
	return nil
}

func (f *fsys) count() error {
	f.entries++
	if f.entries > f.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d files", ErrLimit, f.lim.MaxEntries)
	}
	return nil
}

// lookupLexical finds a path without following symlinks (for whiteouts and
// hard links, which name tar paths).
func (f *fsys) lookupLexical(name string) *node {
	n := f.root
	if name == "" {
		return n
	}
	for _, c := range strings.Split(name, "/") {
		if n.typ != typeDir {
			return nil
		}
		if n = n.children[c]; n == nil {
			return nil
		}
	}
	return n
}

func (f *fsys) remove(name string) {
	dir, base := path.Split(name)
	if parent := f.lookupLexical(strings.TrimSuffix(dir, "/")); parent != nil && parent.typ == typeDir {
		delete(parent.children, base)
	}
}

// put adds an entry the way an overlay mount shows it: a directory over a
// directory merges, anything else replaces what was there (a file over a
// directory hides its whole subtree). Missing parents are made, and a
// parent that was a non-directory is replaced by a directory. Implied
// directories count as entries, so deep names cannot grow the tree past
// the limit.
func (f *fsys) put(name string, n *node) error {
	parts := strings.Split(name, "/")
	cur := f.root
	for _, c := range parts[:len(parts)-1] {
		next := cur.children[c]
		if next == nil || next.typ != typeDir {
			if err := f.count(); err != nil {
				return err
			}
			next = newDir()
			cur.children[c] = next
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if old := cur.children[last]; old != nil && old.typ == typeDir && n.typ == typeDir {
		old.mode, old.layer = n.mode, n.layer
		return nil
	}
	cur.children[last] = n
	return nil
}

// resolve follows a path inside the image, symlinks included (absolute ones
// from the image's root, ".." never above it), and returns the canonical
// path and its node. followLast says whether a symlink in the last
// component is followed.
func (f *fsys) resolve(p string, followLast bool) (string, *node, error) {
	comps := splitPath(p)
	stack := []*node{f.root}
	var names []string
	hops := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(names) > 0 {
				names = names[:len(names)-1]
				stack = stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		if cur.typ != typeDir {
			return "", nil, fmt.Errorf("%s: %w", p, errNotExist)
		}
		child := cur.children[c]
		if child == nil {
			return "", nil, fmt.Errorf("%s: %w", p, errNotExist)
		}
		if child.typ == typeSymlink && (len(comps) > 0 || followLast) {
			hops++
			if hops > maxSymlinkHops {
				return "", nil, fmt.Errorf("%s: %w", p, ErrSymlinkLoop)
			}
			if child.link == "" {
				return "", nil, fmt.Errorf("%s: %w", p, errNotExist)
			}
			if strings.HasPrefix(child.link, "/") {
				stack, names = stack[:1], names[:0]
			}
			comps = append(splitPath(child.link), comps...)
			continue
		}
		stack = append(stack, child)
		names = append(names, c)
	}
	return "/" + strings.Join(names, "/"), stack[len(stack)-1], nil
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

// stat resolves p fully; a missing file gives (nil, "", nil) so that
// callers only handle real errors (loops).
func (f *fsys) stat(p string) (string, *node, error) {
	real, n, err := f.resolve(p, true)
	if errors.Is(err, errNotExist) {
		return "", nil, nil
	}
	return real, n, err
}

func (f *fsys) isDir(p string) (string, bool, error) {
	real, n, err := f.stat(p)
	return real, n != nil && n.typ == typeDir, err
}

func (f *fsys) isFile(p string) (string, bool, error) {
	real, n, err := f.stat(p)
	return real, n != nil && n.typ == typeFile, err
}

// readDir lists a directory's entries (following symlinks to it), sorted.
func (f *fsys) readDir(p string) (string, []string, error) {
	real, n, err := f.stat(p)
	if err != nil || n == nil || n.typ != typeDir {
		return real, nil, err
	}
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	sort.Strings(names)
	return real, names, nil
}

// link returns the target of the symlink at p (its parents resolved), or
// ok=false when p is not a symlink.
func (f *fsys) link(p string) (dir, target string, ok bool, err error) {
	real, n, err := f.resolve(p, false)
	if err != nil || n.typ != typeSymlink {
		return "", "", false, err
	}
	return path.Dir(real), n.link, true, nil
}

// want is a file's content wanted in a given form.
type want struct {
	n    *node
	kind readKind
}

func (w want) key() contentKey { return contentKey{w.n.layer, w.n.tarName, w.kind} }

// fetch makes sure the wanted contents are in the cache, reading the layers
// that hold the ones the first pass did not capture (each stops once it has
// given all that is wanted from it).
func (f *fsys) fetch(ctx context.Context, wants []want) error {
	missing := map[int]map[string][]readKind{}
	count := map[int]int{}
	for _, w := range wants {
		k := w.key()
		if _, ok := f.cache[k]; ok {
			continue
		}
		if missing[k.layer] == nil {
			missing[k.layer] = map[string][]readKind{}
		}
		if !contains(missing[k.layer][k.name], k.kind) {
			missing[k.layer][k.name] = append(missing[k.layer][k.name], k.kind)
			count[k.layer]++
		}
	}
	layers := make([]int, 0, len(missing))
	for l := range missing {
		layers = append(layers, l)
	}
	sort.Ints(layers)
	for _, l := range layers {
		if err := f.fetchLayer(ctx, l, missing[l], count[l]); err != nil {
			return fmt.Errorf("layer %d: %w", l+1, err)
		}
	}
	return nil
}

func contains(ks []readKind, k readKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func (f *fsys) fetchLayer(ctx context.Context, idx int, names map[string][]readKind, left int) error {
	rc, tr, err := f.open(ctx, idx)
	if err != nil {
		return err
	}
	defer rc.Close()
	for left > 0 {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA {
			continue
		}
		name := cleanName(hdr.Name)
		kinds := names[name]
		if len(kinds) == 0 {
			continue
		}
		delete(names, name)
		// Each kind needs its own read; more than one kind for one file
		// does not happen with the files Inspect asks for, so the second
		// would see what the first left.
		for _, k := range kinds {
			if err := f.capture(contentKey{idx, name, k}, tr, hdr.Size); err != nil {
				return err
			}
			left--
		}
	}
	// A file listed in the tree is in its layer, so anything left is a
	// hard link whose target the layer did not have: leave it empty.
	for name, kinds := range names {
		for _, k := range kinds {
			f.cache[contentKey{idx, name, k}] = nil
		}
	}
	return nil
}

// countingReader counts what is pulled from the layer.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// capture reads one file in the given form and charges the bytes read to
// the budget.
func (f *fsys) capture(k contentKey, r io.Reader, size int64) error {
	var max int64
	switch k.kind {
	case kindHeaders:
		max = maxHeaderBytes
	case kindSmall:
		max = maxSmallBytes
	case kindScheme:
		max = maxSchemeBytes
	case kindGlibc:
		max = maxGlibcBytes
	}
	max = min(max, size)
	left := f.lim.MaxReadBytes - f.read
	if max > left {
		return fmt.Errorf("%w: more than %d bytes of file contents to read (at /%s)", ErrLimit, f.lim.MaxReadBytes, k.name)
	}
	cr := &countingReader{r: io.LimitReader(r, max)}
	var out []byte
	var err error
	switch k.kind {
	case kindHeaders:
		out, err = readHeaders(cr)
	case kindSmall:
		out, err = io.ReadAll(cr)
	case kindScheme:
		out, err = scanScheme(cr)
	case kindGlibc:
		out, err = scanGlibc(cr)
	}
	f.read += cr.n
	if err != nil {
		return fmt.Errorf("reading /%s: %w", k.name, err)
	}
	f.cache[k] = out
	return nil
}

// content returns what fetch cached for a wanted file.
func (f *fsys) content(w want) []byte { return f.cache[w.key()] }

// readHeaders keeps the header block of a metadata file: Name and Version
// are there, the long description after it is not needed.
func readHeaders(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, 4096)
	var out bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimRight(line, "\r\n")) == 0 && (len(line) > 0 || err != nil) {
			return out.Bytes(), nilEOF(err)
		}
		out.Write(line)
		if err != nil {
			return out.Bytes(), nilEOF(err)
		}
	}
}

func nilEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// Markers of distributions' patched sysconfig: Debian's posix_local scheme
// (pip outside a venv installs under /usr/local, in dist-packages) and
// Fedora's rpm_prefix (purelib and platlib differ). They appear in the
// source and, as string constants, in the compiled .pyc alike.
var schemeMarkers = []string{"posix_local", "rpm_prefix"}

func scanScheme(r io.Reader) ([]byte, error) {
	found := map[string]bool{}
	err := scan(r, 64, func(chunk []byte) bool {
		for _, m := range schemeMarkers {
			if bytes.Contains(chunk, []byte(m)) {
				found[m] = true
			}
		}
		return false
	})
	var out []string
	for _, m := range schemeMarkers {
		if found[m] {
			out = append(out, m)
		}
	}
	return []byte("scanned:" + strings.Join(out, ",")), err
}

var glibcRe = regexp.MustCompile(`GNU C Library [^\x00\n]{0,200}?release version (\d+\.\d+)`)

func scanGlibc(r io.Reader) ([]byte, error) {
	var version []byte
	err := scan(r, 512, func(chunk []byte) bool {
		if m := glibcRe.FindSubmatch(chunk); m != nil {
			version = append([]byte(nil), m[1]...)
			return true
		}
		return false
	})
	return version, err
}

// scan calls fn on overlapping windows of r (each ends with the last
// overlap bytes of the one before), so a string of up to overlap bytes is
// seen whole even when it straddles two reads. fn returns true to stop.
func scan(r io.Reader, overlap int, fn func([]byte) bool) error {
	buf := make([]byte, 0, 64<<10+overlap)
	chunk := make([]byte, 64<<10)
	for {
		n, err := io.ReadFull(r, chunk)
		if n > 0 {
			buf = append(buf, chunk[:n]...)
			if fn(buf) {
				return nil
			}
			if len(buf) > overlap {
				buf = append(buf[:0], buf[len(buf)-overlap:]...)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
