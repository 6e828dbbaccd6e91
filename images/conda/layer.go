package conda

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Default limits of WriteLayer.
const (
	DefaultMaxUnpackedBytes = 4 << 30
	DefaultMaxFiles         = 200_000
	DefaultMaxMetadataBytes = 64 << 20
)

// DefaultPlaceholder is the prefix placeholder of info/has_prefix lines that
// name only a path.
const DefaultPlaceholder = "/opt/anaconda1anaconda2anaconda3"

// Limits bound what WriteLayer reads from one package.
type Limits struct {
	// MaxUnpackedBytes bounds the package's unpacked content (default 4 GiB).
	MaxUnpackedBytes int64
	// MaxFiles bounds the number of archive members (default 200,000).
	MaxFiles int
	// MaxMetadataBytes bounds each info/ file read (default 64 MiB).
	MaxMetadataBytes int64
	// TempDir is where file contents wait, in one file, while the layer is
	// put together (default os.TempDir()).
	TempDir string
}

func (l Limits) withDefaults() Limits {
	if l.MaxUnpackedBytes <= 0 {
		l.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxMetadataBytes <= 0 {
		l.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	return l
}

// Info describes the layer WriteLayer wrote.
type Info struct {
	Name, Version, Build, Subdir string
	// Noarch is "", "python" or "generic".
	Noarch string
	// Files are the installed paths, relative to the prefix, sorted
	// (conda-meta's "files").
	Files []string
	// Dists are the Python distributions the package installs (the names
	// of its *.dist-info and *.egg-info directories, PEP 503 normalised), so
	// that a builder does not install them again from wheels.
	Dists []string
	// Bytes is the size of the file contents written.
	Bytes int64
}

// layerEpoch is every entry's modification time.
var layerEpoch = time.Unix(0, 0).UTC()

const (
	kindFile = iota
	kindDir
	kindSymlink
)

type member struct {
	kind int
	mode int64
	link string // symlink target
	off  int64  // file content: offset in the spool file
	size int64
}

type unpacked struct {
	// spool holds every payload file's content, one after another: one
	// temporary file per package, since creating a file per member costs
	// more than the unpacking.
	spool    *os.File
	spoolEnd int64
	files    map[string]*member // payload, by path relative to the package root
	info     map[string][]byte  // the info/ files used
	n        int
	total    int64
	lim      Limits
	what     string
}

// infoFiles are the info/ files WriteLayer reads.
var infoFiles = map[string]bool{
	"info/index.json": true, "info/paths.json": true, "info/files": true,
	"info/has_prefix": true, "info/link.json": true,
}

// WriteLayer unpacks the package file at path (a .conda or a .tar.bz2,
// told by its first bytes) into prefix, an absolute directory such as
// /opt/conda, and writes the result to w as an uncompressed, deterministic
// tar (sorted entries, fixed times, owner 0, paths relative to /): the
// package's files and symlinks per info/paths.json (or info/files and
// info/has_prefix), with the prefix placeholder replaced (text files: every
// occurrence; binary files: inside each NUL-terminated string, padded with
// NULs to keep its length, as conda does), noarch: python files moved to
// lib/python<python>/site-packages and bin with the entry points made, and
// conda-meta/<name>-<version>-<build>.json as conda writes it. a is the
// package's channel entry (from Resolve); it is checked against the
// package's own info/index.json. python ("3.12") is needed for noarch:
// python packages only.
//
// A package is refused, with an error naming it, for paths that leave the
// package (absolute, ".."), symlinks that point outside the prefix,
// hardlinks to outside the package, device files, content beyond the
// limits, or a prefix longer than a binary file's placeholder.
func WriteLayer(path string, a Artifact, prefix, python string, lim Limits, w io.Writer) (Info, error) {
	what := fmt.Sprintf("conda package %s %s=%s", a.Name, a.Version, a.Build)
	if a.Filename != "" {
		what += " (" + a.Filename + ")"
	}
	info, err := writeLayer(path, a, prefix, python, lim.withDefaults(), w, what)
	if err != nil {
		return Info{}, fmt.Errorf("%s: %w", what, err)
	}
	return info, nil
}

var rePython = regexp.MustCompile(`^3\.[0-9]{1,2}$`)

func writeLayer(file string, a Artifact, prefix, python string, lim Limits, w io.Writer, what string) (Info, error) {
	if !path.IsAbs(prefix) || path.Clean(prefix) != prefix || prefix == "/" || strings.ContainsAny(prefix, "\x00\n") {
		return Info{}, fmt.Errorf("prefix %q is not a clean absolute directory", prefix)
	}
	f, err := os.Open(file)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	spool, err := os.CreateTemp(lim.TempDir, "conda-layer-")
	if err != nil {
		return Info{}, err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	u := &unpacked{spool: spool, files: map[string]*member{}, info: map[string][]byte{}, lim: lim, what: what}

	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return Info{}, fmt.Errorf("%w: not a .conda or .tar.bz2 file", ErrBadPackage)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, err
	}
	switch {
	case string(magic[:]) == "PK\x03\x04":
		st, err := f.Stat()
		if err != nil {
			return Info{}, err
		}
		if err := u.readConda(f, st.Size()); err != nil {
			return Info{}, err
		}
	case string(magic[:3]) == "BZh":
		if err := u.readTar(bzip2.NewReader(bufio.NewReader(f))); err != nil {
			return Info{}, err
		}
	default:
		return Info{}, fmt.Errorf("%w: not a .conda (zip) or .tar.bz2 file", ErrBadPackage)
	}
	return u.layer(a, prefix, python, w)
}

// readConda reads a .conda file: a zip holding info-*.tar.zst and
// pkg-*.tar.zst.
func (u *unpacked) readConda(r io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return fmt.Errorf("%w: .conda file is not a valid zip: %v", ErrBadPackage, err)
	}
	if len(zr.File) > 16 {
		return fmt.Errorf("%w: .conda file has %d members; want metadata.json, info-*.tar.zst and pkg-*.tar.zst", ErrBadPackage, len(zr.File))
	}
	var infoTar, pkgTar *zip.File
	for _, zf := range zr.File {
		switch {
		case strings.HasPrefix(zf.Name, "info-") && strings.HasSuffix(zf.Name, ".tar.zst") && !strings.Contains(zf.Name, "/"):
			infoTar = zf
		case strings.HasPrefix(zf.Name, "pkg-") && strings.HasSuffix(zf.Name, ".tar.zst") && !strings.Contains(zf.Name, "/"):
			pkgTar = zf
		}
	}
	if infoTar == nil || pkgTar == nil {
		return fmt.Errorf("%w: .conda file lacks info-*.tar.zst or pkg-*.tar.zst", ErrBadPackage)
	}
	for _, zf := range []*zip.File{infoTar, pkgTar} {
		if err := u.readZstdTar(zf); err != nil {
			return fmt.Errorf("%s: %w", zf.Name, err)
		}
	}
	return nil
}

func (u *unpacked) readZstdTar(zf *zip.File) error {
	rc, err := zf.Open()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadPackage, err)
	}
	defer rc.Close()
	// The zip member (which may itself be deflated) and the zstd output
	// (readTar) are both bounded; the window bound keeps a hostile frame
	// from asking for a huge buffer.
	if zf.UncompressedSize64 > uint64(u.lim.MaxUnpackedBytes) {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadPackage, zf.UncompressedSize64, u.lim.MaxUnpackedBytes)
	}
	zr, err := zstd.NewReader(&limitReader{r: rc, n: u.lim.MaxUnpackedBytes}, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27), zstd.WithDecoderMaxMemory(1<<28))
	if err != nil {
		return err
	}
	defer zr.Close()
	return u.readTar(zr)
}

// readTar reads one tar stream, keeping the info/ files used and putting
// payload file contents in the temporary directory.
func (u *unpacked) readTar(r io.Reader) error {
	// Tar headers and padding come on top of the content.
	lr := &limitReader{r: r, n: u.lim.MaxUnpackedBytes + int64(u.lim.MaxFiles)*3*1024 + 1<<20}
	tr := tar.NewReader(lr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if lr.over {
				return fmt.Errorf("%w: the archive unpacks to more than %d bytes", ErrBadPackage, u.lim.MaxUnpackedBytes)
			}
			return fmt.Errorf("%w: reading the archive: %v", ErrBadPackage, err)
		}
		if u.n++; u.n > u.lim.MaxFiles {
			return fmt.Errorf("%w: more than %d archive members", ErrBadPackage, u.lim.MaxFiles)
		}
		name, err := cleanPath(h.Name)
		if err != nil {
			return fmt.Errorf("%w: archive member: %v", ErrBadPackage, err)
		}
		if h.Size < 0 || h.Size > u.lim.MaxUnpackedBytes-u.total {
			return fmt.Errorf("%w: the archive unpacks to more than %d bytes (member %s)", ErrBadPackage, u.lim.MaxUnpackedBytes, name)
		}
		u.total += h.Size
		if strings.HasPrefix(name, "info/") || name == "info" {
			if h.Typeflag == tar.TypeReg && infoFiles[name] {
				if h.Size > u.lim.MaxMetadataBytes {
					return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrBadPackage, name, h.Size, u.lim.MaxMetadataBytes)
				}
				b, err := io.ReadAll(tr)
				if err != nil {
					return fmt.Errorf("%w: %s: %v", ErrBadPackage, name, err)
				}
				u.info[name] = b
			}
			continue
		}
		if _, dup := u.files[name]; dup {
			return fmt.Errorf("%w: archive member %s appears twice", ErrBadPackage, name)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			n, err := io.Copy(u.spool, tr)
			if err != nil {
				if lr.over {
					return fmt.Errorf("%w: the archive unpacks to more than %d bytes", ErrBadPackage, u.lim.MaxUnpackedBytes)
				}
				return fmt.Errorf("%w: %s: %v", ErrBadPackage, name, err)
			}
			u.files[name] = &member{kind: kindFile, mode: h.Mode, off: u.spoolEnd, size: n}
			u.spoolEnd += n
		case tar.TypeDir:
			u.files[name] = &member{kind: kindDir, mode: h.Mode}
		case tar.TypeSymlink:
			u.files[name] = &member{kind: kindSymlink, link: h.Linkname}
		case tar.TypeLink:
			target, err := cleanPath(h.Linkname)
			t, ok := u.files[target]
			if err != nil || !ok || t.kind != kindFile {
				return fmt.Errorf("%w: %s is a hard link to %q, which is not a file earlier in the package", ErrBadPackage, name, h.Linkname)
			}
			u.files[name] = &member{kind: kindFile, mode: h.Mode, off: t.off, size: t.size}
		default:
			return fmt.Errorf("%w: %s is a device, FIFO or other special file (tar type %q); conda packages hold files, directories and symlinks only", ErrBadPackage, name, h.Typeflag)
		}
	}
}

// cleanPath checks an archive or paths.json path: relative, no "..", no
// NUL; "./" and trailing "/" are dropped.
func cleanPath(p string) (string, error) {
	q := strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
	if q == "" || strings.ContainsAny(q, "\x00") || strings.HasPrefix(q, "/") {
		return "", fmt.Errorf("path %q is empty or absolute", p)
	}
	for _, el := range strings.Split(q, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q leaves the package (..)", p)
		}
	}
	c := path.Clean(q)
	if c == "." {
		return "", fmt.Errorf("path %q is empty", p)
	}
	return c, nil
}

// pathEntry is one info/paths.json entry.
type pathEntry struct {
	Path              string `json:"_path"`
	PathType          string `json:"path_type"`
	SHA256            string `json:"sha256,omitempty"`
	SizeInBytes       *int64 `json:"size_in_bytes,omitempty"`
	FileMode          string `json:"file_mode,omitempty"`
	PrefixPlaceholder string `json:"prefix_placeholder,omitempty"`
	NoLink            bool   `json:"no_link,omitempty"`
}

// indexJSON is info/index.json, with the fields used.
type indexJSON struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Build   string          `json:"build"`
	Subdir  string          `json:"subdir"`
	Noarch  json.RawMessage `json:"noarch"`
}

// outEntry is one entry of the layer, by path relative to the prefix.
type outEntry struct {
	kind int
	mode int64
	link string
	src  io.Reader // content from the spool file, or
	data []byte    // content in memory
	size int64
}

var (
	reEntryName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`)
	reDotted    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	reDistDir   = regexp.MustCompile(`^lib/python3\.[0-9]+/site-packages/([^/]+)\.(dist-info|egg-info)(/|$)`)
)

func (u *unpacked) layer(a Artifact, prefix, python string, w io.Writer) (Info, error) {
	rawIndex, ok := u.info["info/index.json"]
	if !ok {
		return Info{}, fmt.Errorf("%w: no info/index.json", ErrBadPackage)
	}
	var idx indexJSON
	if err := json.Unmarshal(rawIndex, &idx); err != nil {
		return Info{}, fmt.Errorf("%w: info/index.json: %v", ErrBadPackage, err)
	}
	if a.Name != "" && (idx.Name != a.Name || idx.Version != a.Version || idx.Build != a.Build) {
		return Info{}, fmt.Errorf("%w: its info/index.json says %s %s=%s", ErrBadPackage, idx.Name, idx.Version, idx.Build)
	}
	info := Info{Name: idx.Name, Version: idx.Version, Build: idx.Build, Subdir: idx.Subdir}
	if info.Subdir == "" {
		info.Subdir = a.Subdir
	}
	switch n := strings.Trim(string(idx.Noarch), `"`); n {
	case "", "null", "false":
	case "python", "generic":
		info.Noarch = n
	case "true":
		info.Noarch = "generic"
	default:
		return Info{}, fmt.Errorf("%w: info/index.json has noarch %s; want python or generic", ErrBadPackage, idx.Noarch)
	}
	sitePackages := ""
	if info.Noarch == "python" {
		if !rePython.MatchString(python) {
			return Info{}, fmt.Errorf("a noarch: python package needs the environment's Python version (like 3.12), got %q", python)
		}
		sitePackages = "lib/python" + python + "/site-packages"
	}

	entries, err := u.pathEntries()
	if err != nil {
		return Info{}, err
	}
	out := map[string]*outEntry{}
	var pathsData []map[string]any
	for _, pe := range entries {
		src, err := cleanPath(pe.Path)
		if err != nil {
			return Info{}, fmt.Errorf("%w: info/paths.json: %v", ErrBadPackage, err)
		}
		dest := src
		if sitePackages != "" {
			switch {
			case strings.HasPrefix(src, "site-packages/"):
				dest = sitePackages + strings.TrimPrefix(src, "site-packages")
			case strings.HasPrefix(src, "python-scripts/"):
				dest = "bin" + strings.TrimPrefix(src, "python-scripts")
			}
		}
		if strings.HasPrefix(path.Base(dest), ".wh.") || strings.Contains(dest, "/.wh.") || strings.HasPrefix(dest, ".wh.") {
			// An OCI whiteout would delete the base image's files.
			return Info{}, fmt.Errorf("%w: %s is named like a layer whiteout (.wh.), which would delete files of the image below", ErrBadPackage, src)
		}
		if dest == "conda-meta" || strings.HasPrefix(dest, "conda-meta/") {
			return Info{}, fmt.Errorf("%w: %s would overwrite conda's records (conda-meta/)", ErrBadPackage, src)
		}
		if _, dup := out[dest]; dup {
			return Info{}, fmt.Errorf("%w: %s is installed twice", ErrBadPackage, dest)
		}
		m := u.files[src]
		pd := map[string]any{"_path": dest, "path_type": pe.PathType}
		switch pe.PathType {
		case "hardlink", "":
			if m == nil || m.kind != kindFile {
				return Info{}, fmt.Errorf("%w: info/paths.json lists file %s, which the archive lacks", ErrBadPackage, src)
			}
			pd["path_type"] = "hardlink"
			e := &outEntry{kind: kindFile, mode: fileMode(m.mode), src: io.NewSectionReader(u.spool, m.off, m.size), size: m.size}
			if pe.PrefixPlaceholder != "" {
				data := make([]byte, m.size)
				if _, err := u.spool.ReadAt(data, m.off); err != nil {
					return Info{}, err
				}
				if pe.SHA256 != "" {
					pd["sha256"] = pe.SHA256
				}
				replaced, err := replacePrefix(data, pe.PrefixPlaceholder, prefix, pe.FileMode)
				if err != nil {
					return Info{}, fmt.Errorf("%w: %s: %v", ErrBadPackage, src, err)
				}
				e.src, e.data, e.size = nil, replaced, int64(len(replaced))
				pd["prefix_placeholder"] = pe.PrefixPlaceholder
				pd["file_mode"] = fileModeName(pe.FileMode)
				sum := sha256.Sum256(replaced)
				pd["sha256_in_prefix"] = hex.EncodeToString(sum[:])
			} else if pe.SHA256 != "" {
				pd["sha256"] = pe.SHA256
			}
			pd["size_in_bytes"] = e.size
			out[dest] = e
		case "softlink":
			if m == nil || m.kind != kindSymlink {
				return Info{}, fmt.Errorf("%w: info/paths.json lists symlink %s, which the archive lacks", ErrBadPackage, src)
			}
			if err := checkLink(dest, m.link); err != nil {
				return Info{}, fmt.Errorf("%w: %v", ErrBadPackage, err)
			}
			out[dest] = &outEntry{kind: kindSymlink, link: m.link}
		case "directory":
			if m != nil && m.kind != kindDir {
				return Info{}, fmt.Errorf("%w: info/paths.json lists directory %s, which is not a directory in the archive", ErrBadPackage, src)
			}
			out[dest] = &outEntry{kind: kindDir, mode: 0o755}
		default:
			return Info{}, fmt.Errorf("%w: %s has path_type %q; want hardlink, softlink or directory", ErrBadPackage, src, pe.PathType)
		}
		pathsData = append(pathsData, pd)
	}

	if info.Noarch == "python" {
		eps, err := u.entryPoints()
		if err != nil {
			return Info{}, err
		}
		for _, ep := range eps {
			dest := "bin/" + ep.name
			if _, dup := out[dest]; dup {
				return Info{}, fmt.Errorf("%w: entry point %s would overwrite a file of the package", ErrBadPackage, dest)
			}
			script := entryPointScript(prefix, python, ep.module, ep.fn)
			out[dest] = &outEntry{kind: kindFile, mode: 0o755, data: script, size: int64(len(script))}
			pathsData = append(pathsData, map[string]any{"_path": dest, "path_type": "unix_python_entry_point"})
		}
	}

	// A path under a symlink of the layer would be written through it.
	for p := range out {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if e, ok := out[d]; ok && e.kind != kindDir {
				return Info{}, fmt.Errorf("%w: %s is inside %s, which is not a directory", ErrBadPackage, p, d)
			}
		}
	}

	for p, e := range out {
		info.Files = append(info.Files, p)
		info.Bytes += e.size
		if m := reDistDir.FindStringSubmatch(p); m != nil {
			name, _, _ := strings.Cut(m[1], "-")
			info.Dists = appendNew(info.Dists, normalizeDist(name))
		}
	}
	slices.Sort(info.Files)
	slices.Sort(info.Dists)
	slices.SortFunc(pathsData, func(x, y map[string]any) int { return strings.Compare(x["_path"].(string), y["_path"].(string)) })

	meta, err := condaMeta(rawIndex, a, info, pathsData)
	if err != nil {
		return Info{}, err
	}
	metaName := "conda-meta/" + info.Name + "-" + info.Version + "-" + info.Build + ".json"
	if _, err := cleanPath(metaName); err != nil || strings.Count(metaName, "/") != 1 {
		return Info{}, fmt.Errorf("%w: name, version or build makes a bad file name %q", ErrBadPackage, metaName)
	}
	out[metaName] = &outEntry{kind: kindFile, mode: 0o644, data: meta, size: int64(len(meta))}
	if err := writeTar(w, strings.TrimPrefix(prefix, "/"), out); err != nil {
		return Info{}, err
	}
	return info, nil
}

var reDistSep = regexp.MustCompile(`[-_.]+`)

func normalizeDist(n string) string { return reDistSep.ReplaceAllString(strings.ToLower(n), "-") }

func fileMode(m int64) int64 {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func fileModeName(m string) string {
	if m == "binary" {
		return "binary"
	}
	return "text"
}

// checkLink refuses a symlink whose target is absolute or leaves the
// prefix, judged from the link's own directory.
func checkLink(dest, target string) error {
	if target == "" || strings.Contains(target, "\x00") {
		return fmt.Errorf("symlink %s has an empty target", dest)
	}
	if path.IsAbs(target) {
		return fmt.Errorf("symlink %s points to %s, outside the prefix (absolute)", dest, target)
	}
	j := path.Join(path.Dir(dest), target)
	if j == ".." || strings.HasPrefix(j, "../") {
		return fmt.Errorf("symlink %s points to %s, outside the prefix", dest, target)
	}
	return nil
}

// pathEntries returns info/paths.json's entries, or, for old packages, the
// ones info/files and info/has_prefix make.
func (u *unpacked) pathEntries() ([]pathEntry, error) {
	if raw, ok := u.info["info/paths.json"]; ok {
		var pj struct {
			Paths        []pathEntry `json:"paths"`
			PathsVersion int         `json:"paths_version"`
		}
		if err := json.Unmarshal(raw, &pj); err != nil {
			return nil, fmt.Errorf("%w: info/paths.json: %v", ErrBadPackage, err)
		}
		return pj.Paths, nil
	}
	raw, ok := u.info["info/files"]
	if !ok {
		return nil, fmt.Errorf("%w: neither info/paths.json nor info/files", ErrBadPackage)
	}
	prefixed := map[string]pathEntry{}
	for i, line := range strings.Split(string(u.info["info/has_prefix"]), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f, err := splitQuoted(line)
		if err != nil {
			return nil, fmt.Errorf("%w: info/has_prefix line %d: %v", ErrBadPackage, i+1, err)
		}
		switch len(f) {
		case 1:
			prefixed[f[0]] = pathEntry{Path: f[0], PrefixPlaceholder: DefaultPlaceholder, FileMode: "text"}
		case 3:
			if f[1] != "text" && f[1] != "binary" {
				return nil, fmt.Errorf("%w: info/has_prefix line %d: mode %q; want text or binary", ErrBadPackage, i+1, f[1])
			}
			prefixed[f[2]] = pathEntry{Path: f[2], PrefixPlaceholder: f[0], FileMode: f[1]}
		default:
			return nil, fmt.Errorf("%w: info/has_prefix line %d: want \"placeholder mode path\" or a path", ErrBadPackage, i+1)
		}
	}
	var out []pathEntry
	for _, line := range strings.Split(string(raw), "\n") {
		p := strings.TrimSpace(line)
		if p == "" {
			continue
		}
		pe := pathEntry{Path: p, PathType: "hardlink"}
		if hp, ok := prefixed[p]; ok {
			pe.PrefixPlaceholder, pe.FileMode = hp.PrefixPlaceholder, hp.FileMode
		}
		if c, err := cleanPath(p); err == nil {
			if m := u.files[c]; m != nil && m.kind == kindSymlink {
				pe.PathType = "softlink"
			}
		}
		out = append(out, pe)
	}
	return out, nil
}

// splitQuoted splits a has_prefix line on spaces, honouring double quotes.
func splitQuoted(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, errors.New("unterminated quote")
			}
			out = append(out, s[1:1+end])
			s = s[end+2:]
			continue
		}
		f, rest, _ := strings.Cut(s, " ")
		out = append(out, f)
		s = rest
	}
	return out, nil
}

// replacePrefix replaces placeholder with prefix as conda does: in text
// mode every occurrence; in binary mode inside each NUL-terminated string
// that holds it, padding the string with NULs to keep its length (conda's
// binary_replace). A prefix longer than the placeholder cannot be padded.
func replacePrefix(data []byte, placeholder, prefix, mode string) ([]byte, error) {
	a, b := []byte(placeholder), []byte(prefix)
	if mode != "binary" {
		return bytes.ReplaceAll(data, a, b), nil
	}
	if len(b) > len(a) {
		return nil, fmt.Errorf("binary file: the prefix %s (%d bytes) is longer than the package's placeholder (%d bytes), so it cannot be patched in place; use a shorter prefix", prefix, len(b), len(a))
	}
	out := make([]byte, 0, len(data))
	i := 0
	for {
		j := bytes.Index(data[i:], a)
		if j < 0 {
			break
		}
		start := i + j
		nul := bytes.IndexByte(data[start:], 0)
		if nul < 0 {
			break // no terminating NUL: conda leaves the rest alone
		}
		end := start + nul + 1 // the string with its NUL
		seg := data[start:end]
		out = append(out, data[i:start]...)
		out = append(out, bytes.ReplaceAll(seg, a, b)...)
		out = append(out, make([]byte, bytes.Count(seg, a)*(len(a)-len(b)))...)
		i = end
	}
	return append(out, data[i:]...), nil
}

type entryPoint struct{ name, module, fn string }

// entryPoints reads info/link.json's noarch entry points ("name =
// module:func").
func (u *unpacked) entryPoints() ([]entryPoint, error) {
	raw, ok := u.info["info/link.json"]
	if !ok {
		return nil, nil
	}
	var lj struct {
		Noarch struct {
			EntryPoints []string `json:"entry_points"`
		} `json:"noarch"`
	}
	if err := json.Unmarshal(raw, &lj); err != nil {
		return nil, fmt.Errorf("%w: info/link.json: %v", ErrBadPackage, err)
	}
	var out []entryPoint
	for _, s := range lj.Noarch.EntryPoints {
		name, target, ok := strings.Cut(s, "=")
		module, fn, ok2 := strings.Cut(strings.TrimSpace(target), ":")
		name, module, fn = strings.TrimSpace(name), strings.TrimSpace(module), strings.TrimSpace(fn)
		if !ok || !ok2 || !reEntryName.MatchString(name) || !reDotted.MatchString(module) || !reDotted.MatchString(fn) {
			return nil, fmt.Errorf("%w: info/link.json entry point %q is not \"name = module:function\"", ErrBadPackage, s)
		}
		out = append(out, entryPoint{name, module, fn})
	}
	return out, nil
}

// entryPointScript is conda's python entry point script.
func entryPointScript(prefix, python, module, fn string) []byte {
	importName, _, _ := strings.Cut(fn, ".")
	return []byte(fmt.Sprintf(`#!%s/bin/python%s
# -*- coding: utf-8 -*-
import re
import sys

from %s import %s

if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw?|\.exe)?$', '', sys.argv[0])
    sys.exit(%s())
`, prefix, python, module, importName, fn))
}

// condaMeta returns conda-meta/<name>-<version>-<build>.json: the package's
// index.json fields, and the record of what was installed and from where.
func condaMeta(rawIndex []byte, a Artifact, info Info, pathsData []map[string]any) ([]byte, error) {
	m := map[string]any{}
	if err := json.Unmarshal(rawIndex, &m); err != nil {
		return nil, fmt.Errorf("%w: info/index.json: %v", ErrBadPackage, err)
	}
	if a.Channel != "" {
		m["channel"] = a.Channel
	}
	if a.URL != "" {
		m["url"] = Redacted(a.URL)
	}
	if a.Filename != "" {
		m["fn"] = a.Filename
	}
	if a.SHA256 != "" {
		m["sha256"] = a.SHA256
	}
	if a.MD5 != "" {
		m["md5"] = a.MD5
	}
	if a.Size > 0 {
		m["size"] = a.Size
	}
	m["subdir"] = info.Subdir
	m["files"] = info.Files
	if pathsData == nil {
		pathsData = []map[string]any{}
	}
	m["paths_data"] = map[string]any{"paths": pathsData, "paths_version": 1}
	m["link"] = map[string]any{"source": "", "type": 1}
	m["requested_spec"] = info.Name + "==" + info.Version + "=" + info.Build
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar writes the entries (by path relative to the prefix) under root
// (the prefix without its leading "/"), with every parent directory, sorted.
func writeTar(w io.Writer, root string, out map[string]*outEntry) error {
	all := map[string]*outEntry{}
	dir := &outEntry{kind: kindDir, mode: 0o755}
	for d := root; d != "."; d = path.Dir(d) {
		all[d] = dir
	}
	for p, e := range out {
		full := root + "/" + p
		all[full] = e
		for d := path.Dir(full); d != "." && all[d] == nil; d = path.Dir(d) {
			all[d] = dir
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, ModTime: layerEpoch, Format: tar.FormatPAX}
		switch e.kind {
		case kindDir:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
		case kindSymlink:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, e.mode, e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.kind != kindFile {
			continue
		}
		if e.src == nil {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		if _, err := io.Copy(tw, e.src); err != nil {
			return err
		}
	}
	return tw.Close()
}
