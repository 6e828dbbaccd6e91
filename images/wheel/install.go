package wheel

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/textproto"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Layout says where things go in the image, all absolute paths inside the
// image.
type Layout struct {
	Purelib, Platlib string // site-packages (usually the same dir)
	Scripts          string // e.g. /usr/local/bin
	Data             string // the prefix, e.g. /usr/local
	Headers          string // e.g. /usr/local/include/python3.11 (the package's headers go into Headers/<name>)
	Interpreter      string // absolute path of python in the image, for shebangs and entry-point scripts
}

// Limits bounds a wheel: entries in the archive and total unpacked bytes
// (0 = defaults 100000 / 2 GiB).
type Limits struct {
	MaxFiles int
	MaxBytes int64
}

// Info describes an installed wheel. Files and Bytes count the regular files
// in the layer and their contents (generated scripts, RECORD and INSTALLER
// included).
type Info struct {
	Name, Version, DistInfo string
	Files                   int
	Bytes                   int64
}

const (
	defaultMaxFiles = 100000
	defaultMaxBytes = 2 << 30
	// Metadata files are read into memory; these bound them.
	maxRecordBytes   = 64 << 20
	maxMetadataBytes = 16 << 20
	// INSTALLER's content (PEP 376).
	installerName = "gateway\n"
)

// epoch is every entry's modification time, so that a layer depends on
// nothing but the wheel and the layout.
var epoch = time.Unix(0, 0)

// file is one regular file of the layer.
type file struct {
	zf   *zip.File // nil for generated files
	gen  []byte    // generated content
	dest string    // absolute path in the image
	mode int64
	size int64 // installed size
	// record is the RECORD hash field of the installed content.
	record string
	// For a verified zip file: its RECORD algorithm, digest and size, checked
	// again while copying.
	algo    string
	digest  []byte
	srcSize int64
	// shebang, when set, replaces the first skip bytes (pip's fix_script).
	shebang []byte
	skip    int64
	// recordSelf marks RECORD, whose content is known only after every
	// other row.
	recordSelf bool
}

type recordRow struct {
	algo   string
	digest []byte
	field  string
	size   int64 // -1 when RECORD leaves it empty
	used   bool
}

// WriteLayer installs the wheel read from r (size bytes; file name fn, used
// for name/version and errors) into layout l, writing the layer as an
// uncompressed deterministic tar to w. On error, w holds a partial tar that
// the caller must discard; every refusal of the wheel wraps ErrBadWheel.
func WriteLayer(r io.ReaderAt, size int64, fn string, l Layout, lim Limits, w io.Writer) (Info, error) {
	if err := l.validate(); err != nil {
		return Info{}, err
	}
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = defaultMaxFiles
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = defaultMaxBytes
	}
	in := &installer{fn: fn, l: l, lim: lim}
	files, info, err := in.plan(r, size)
	if err != nil {
		return Info{}, err
	}
	if err := in.write(files, w); err != nil {
		return Info{}, err
	}
	return info, nil
}

type installer struct {
	fn   string
	l    Layout
	lim  Limits
	used int64  // bytes read from the archive so far
	buf  []byte // copy buffer, reused for every file
}

func (in *installer) copy(dst io.Writer, src io.Reader) (int64, error) {
	if in.buf == nil {
		in.buf = make([]byte, 64<<10)
	}
	return io.CopyBuffer(dst, src, in.buf)
}

func (in *installer) bad(format string, a ...any) error {
	return fmt.Errorf("%w %s: %s", ErrBadWheel, in.fn, fmt.Sprintf(format, a...))
}

func (l Layout) validate() error {
	for _, d := range []struct{ what, p string }{
		{"Purelib", l.Purelib}, {"Platlib", l.Platlib}, {"Scripts", l.Scripts},
		{"Data", l.Data}, {"Headers", l.Headers}, {"Interpreter", l.Interpreter},
	} {
		if !path.IsAbs(d.p) || path.Clean(d.p) != d.p || d.p == "/" {
			return fmt.Errorf("wheel layout: %s %q is not a clean absolute path below /", d.what, d.p)
		}
		if strings.IndexFunc(d.p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) >= 0 {
			return fmt.Errorf("wheel layout: %s %q holds spaces or control characters", d.what, d.p)
		}
	}
	// distlib falls back to a /bin/sh trampoline above 127 bytes; keep the
	// simple shebang the kernel reads.
	if len(l.Interpreter)+3 > 127 {
		return fmt.Errorf("wheel layout: interpreter path %q is too long for a shebang", l.Interpreter)
	}
	return nil
}

// safeRel checks a path inside the archive or RECORD: relative, '/'
// separated, no empty, "." or ".." components, no backslashes or control
// characters.
func safeRel(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute path %q", p)
	case strings.ContainsRune(p, '\\'):
		return fmt.Errorf("path %q holds a backslash", p)
	case strings.IndexFunc(p, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return fmt.Errorf("path %q holds control characters or invalid UTF-8", p)
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "..":
			return fmt.Errorf("path %q goes up a directory (..)", p)
		case "", ".":
			return fmt.Errorf("path %q has an empty or '.' component", p)
		}
		// In an image layer, .wh.<name> deletes <name> from the layers
		// below: a wheel must not remove the base's files.
		if strings.HasPrefix(c, ".wh.") {
			return fmt.Errorf("path %q is an image whiteout (.wh.)", p)
		}
	}
	return nil
}

func within(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// Unix mode bits in a zip entry's external attributes.
const (
	sIFMT  = 0o170000
	sIFREG = 0o100000
	sIFDIR = 0o040000
	sIFLNK = 0o120000
)

// plan reads and verifies the whole wheel and decides every file of the
// layer, before anything is written.
func (in *installer) plan(r io.ReaderAt, size int64) ([]*file, Info, error) {
	var info Info
	fnp, err := ParseFilename(in.fn)
	if err != nil {
		return nil, info, err
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, info, in.bad("not a readable zip archive: %v", err)
	}
	if len(zr.File) > in.lim.MaxFiles {
		return nil, info, in.bad("%d archive entries, more than the limit of %d", len(zr.File), in.lim.MaxFiles)
	}

	// Names, types and the one .dist-info directory.
	byName := map[string]*zip.File{}
	var names []string
	distInfos := map[string]bool{}
	for _, zf := range zr.File {
		name := zf.Name
		isDir := strings.HasSuffix(name, "/")
		clean := strings.TrimSuffix(name, "/")
		if err := safeRel(clean); err != nil {
			return nil, info, in.bad("archive entry: %v", err)
		}
		if zf.Flags&0x1 != 0 {
			return nil, info, in.bad("archive entry %q is encrypted", name)
		}
		mode := zf.ExternalAttrs >> 16
		switch mode & sIFMT {
		case 0, sIFREG:
		case sIFDIR:
			if !isDir {
				return nil, info, in.bad("archive entry %q is a directory without a trailing slash", name)
			}
		case sIFLNK:
			return nil, info, in.bad("archive entry %q is a symbolic link", name)
		default:
			return nil, info, in.bad("archive entry %q is not a regular file (mode %o)", name, mode)
		}
		if zf.Mode().Type()&^fs.ModeDir != 0 {
			// Go's view of non-Unix creators' attributes.
			return nil, info, in.bad("archive entry %q is not a regular file (%v)", name, zf.Mode())
		}
		if isDir {
			if zf.UncompressedSize64 != 0 {
				return nil, info, in.bad("directory entry %q has contents", name)
			}
			continue
		}
		if _, dup := byName[clean]; dup {
			return nil, info, in.bad("archive entry %q appears twice", name)
		}
		byName[clean] = zf
		names = append(names, clean)
		if first, rest, ok := strings.Cut(clean, "/"); ok && rest != "" && strings.HasSuffix(first, ".dist-info") {
			distInfos[first] = true
		}
	}
	if len(distInfos) != 1 {
		return nil, info, in.bad("%d .dist-info directories at the top, a wheel has exactly one", len(distInfos))
	}
	var distInfo string
	for d := range distInfos {
		distInfo = d
	}
	stem := strings.TrimSuffix(distInfo, ".dist-info")
	i := strings.LastIndexByte(stem, '-')
	if i <= 0 {
		return nil, info, in.bad("%s is not <name>-<version>.dist-info", distInfo)
	}
	if canonicalName(stem[:i]) != canonicalName(fnp.Name) || !sameVersion(stem[i+1:], fnp.Version) {
		return nil, info, in.bad("it holds %s, which does not match the file name's %s %s", distInfo, fnp.Name, fnp.Version)
	}
	dataDir := stem + ".data"

	// RECORD first: every other file is checked against it.
	recordName := distInfo + "/RECORD"
	recZF := byName[recordName]
	if recZF == nil {
		return nil, info, in.bad("no %s", recordName)
	}
	recData, err := in.readSmall(recZF, maxRecordBytes)
	if err != nil {
		return nil, info, err
	}
	rows, err := in.parseRecord(recData)
	if err != nil {
		return nil, info, err
	}

	// Verify every file against RECORD, keeping the few we need to read.
	keep := map[string][]byte{
		distInfo + "/WHEEL": nil, distInfo + "/METADATA": nil, distInfo + "/entry_points.txt": nil,
	}
	sort.Strings(names)
	verified := map[string]*recordRow{}
	for _, name := range names {
		if name == recordName || name == distInfo+"/RECORD.jws" || name == distInfo+"/RECORD.p7s" {
			continue
		}
		row := rows[name]
		if row == nil {
			return nil, info, in.bad("%s is not listed in RECORD", name)
		}
		row.used = true
		if row.algo == "" {
			return nil, info, in.bad("RECORD has no hash for %s", name)
		}
		_, wantKeep := keep[name]
		n, sum, content, err := in.digest(byName[name], row.algo, wantKeep)
		if err != nil {
			return nil, info, err
		}
		if !bytes.Equal(sum, row.digest) {
			return nil, info, in.bad("%s does not match its RECORD hash", name)
		}
		if row.size >= 0 && row.size != n {
			return nil, info, in.bad("%s is %d bytes, RECORD says %d", name, n, row.size)
		}
		row.size = n
		if wantKeep {
			keep[name] = content
		}
		verified[name] = row
	}
	for p, row := range rows {
		if !row.used && p != recordName {
			return nil, info, in.bad("RECORD lists %s, which the archive does not have", p)
		}
	}

	// WHEEL and METADATA.
	wheelHdr, err := in.headers(distInfo+"/WHEEL", keep[distInfo+"/WHEEL"], byName)
	if err != nil {
		return nil, info, err
	}
	wv := wheelHdr.Get("Wheel-Version")
	major, _, ok := strings.Cut(strings.TrimSpace(wv), ".")
	if wv == "" || !ok {
		return nil, info, in.bad("WHEEL has no valid Wheel-Version (%q)", wv)
	}
	if major != "1" {
		return nil, info, in.bad("Wheel-Version %s is not supported (only 1.x)", wv)
	}
	rootIsPurelib := strings.EqualFold(strings.TrimSpace(wheelHdr.Get("Root-Is-Purelib")), "true")
	meta, err := in.headers(distInfo+"/METADATA", keep[distInfo+"/METADATA"], byName)
	if err != nil {
		return nil, info, err
	}
	name, version := strings.TrimSpace(meta.Get("Name")), strings.TrimSpace(meta.Get("Version"))
	if !projectNameRe.MatchString(name) {
		return nil, info, in.bad("METADATA has no valid Name (%q)", name)
	}
	if canonicalName(name) != canonicalName(fnp.Name) || !sameVersion(version, fnp.Version) {
		return nil, info, in.bad("METADATA is for %s %s, the file name says %s %s", name, version, fnp.Name, fnp.Version)
	}
	var eps []entryPoint
	if data := keep[distInfo+"/entry_points.txt"]; data != nil {
		if eps, err = parseEntryPoints(data); err != nil {
			return nil, info, in.bad("%v", err)
		}
	}
	epNames := map[string]bool{}
	for _, ep := range eps {
		epNames[ep.Name] = true
	}

	root := in.l.Platlib
	if rootIsPurelib {
		root = in.l.Purelib
	}
	newShebang := []byte("#!" + in.l.Interpreter + "\n")

	// Where each file goes.
	var files []*file
	for _, src := range names {
		switch src {
		case recordName, distInfo + "/RECORD.jws", distInfo + "/RECORD.p7s", distInfo + "/INSTALLER":
			// Replaced by ours (the signatures sign the archive's RECORD).
			continue
		}
		zf, row := byName[src], verified[src]
		f := &file{zf: zf, mode: 0o644, size: row.size, record: row.field,
			algo: row.algo, digest: row.digest, srcSize: row.size}
		if m := zf.ExternalAttrs >> 16; m&sIFMT == sIFREG && m&0o111 != 0 {
			f.mode = 0o755
		}
		base := root
		rel := src
		if first, rest, ok := strings.Cut(src, "/"); ok && first == dataDir {
			key, sub, ok := strings.Cut(rest, "/")
			if !ok {
				return nil, info, in.bad("%s is not in a scheme directory of %s", src, dataDir)
			}
			rel = sub
			switch key {
			case "scripts":
				base = in.l.Scripts
				if epNames[wrapperName(path.Base(sub))] {
					// setuptools' wrapper for an entry point, replaced by ours as pip does.
					continue
				}
				f.mode = 0o755
				if err := in.sniffShebang(f, newShebang); err != nil {
					return nil, info, err
				}
			case "data":
				base = in.l.Data
			case "headers":
				base = path.Join(in.l.Headers, name)
			case "purelib":
				base = in.l.Purelib
			case "platlib":
				base = in.l.Platlib
			default:
				return nil, info, in.bad("%s uses the unknown scheme %q (scripts, data, headers, purelib, platlib)", src, key)
			}
		}
		f.dest = path.Join(base, rel)
		if !within(f.dest, base) {
			return nil, info, in.bad("%s would be installed outside %s", src, base)
		}
		files = append(files, f)
	}
	for _, ep := range eps {
		text := scriptText(in.l.Interpreter, ep)
		files = append(files, &file{gen: text, dest: path.Join(in.l.Scripts, ep.Name), mode: 0o755,
			size: int64(len(text)), record: sha256Field(text)})
	}
	inst := []byte(installerName)
	files = append(files, &file{gen: inst, dest: path.Join(root, distInfo, "INSTALLER"),
		mode: 0o644, size: int64(len(inst)), record: sha256Field(inst)})
	recordFile := &file{dest: path.Join(root, distInfo, "RECORD"), mode: 0o644, recordSelf: true}
	files = append(files, recordFile)
	if len(files) > in.lim.MaxFiles {
		return nil, info, in.bad("%d files to install, more than the limit of %d", len(files), in.lim.MaxFiles)
	}
	if err := in.checkCollisions(files); err != nil {
		return nil, info, err
	}

	// The installed RECORD, paths relative to the directory holding the
	// .dist-info, sorted as pip writes it.
	var out [][]string
	for _, f := range files {
		rel := relPath(root, f.dest)
		if f.recordSelf {
			out = append(out, []string{rel, "", ""})
			continue
		}
		out = append(out, []string{rel, f.record, strconv.FormatInt(f.size, 10)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	cw.UseCRLF = true // Python's csv module, as pip uses it
	if err := cw.WriteAll(out); err != nil {
		return nil, info, fmt.Errorf("wheel %s: writing RECORD: %w", in.fn, err)
	}
	recordFile.gen = buf.Bytes()
	recordFile.size = int64(buf.Len())

	info = Info{Name: name, Version: version, DistInfo: distInfo, Files: len(files)}
	for _, f := range files {
		info.Bytes += f.size
	}
	return files, info, nil
}

// wrapperName is the entry point a setuptools-made script stands for (pip's
// is_entrypoint_wrapper): EP, EP.exe, EP-script.py, EP.pya.
func wrapperName(base string) string {
	l := strings.ToLower(base)
	for _, suf := range []string{".exe", "-script.py", ".pya"} {
		if strings.HasSuffix(l, suf) {
			return base[:len(base)-len(suf)]
		}
	}
	return base
}

func sameVersion(a, b string) bool {
	return strings.EqualFold(strings.ReplaceAll(a, "-", "_"), strings.ReplaceAll(b, "-", "_"))
}

// checkCollisions refuses two files at one path, a file where another needs
// a directory, and files that would replace a layout directory, one of its
// parents, or the interpreter.
func (in *installer) checkCollisions(files []*file) error {
	dirs := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range []string{in.l.Purelib, in.l.Platlib, in.l.Scripts, in.l.Data, in.l.Headers} {
		dirs[d] = true
		addParents(d)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.dest] {
			return in.bad("two files would be installed at %s", f.dest)
		}
		seen[f.dest] = true
		addParents(f.dest)
	}
	for _, f := range files {
		if dirs[f.dest] {
			return in.bad("a file would be installed at %s, which is a directory", f.dest)
		}
		if f.dest == in.l.Interpreter {
			return in.bad("a file would replace the interpreter %s", f.dest)
		}
	}
	return nil
}

// relPath is target relative to base (both clean and absolute), as pip
// writes RECORD paths outside site-packages (../../../bin/foo).
func relPath(base, target string) string {
	b := strings.Split(strings.TrimPrefix(base, "/"), "/")
	t := strings.Split(strings.TrimPrefix(target, "/"), "/")
	i := 0
	for i < len(b) && i < len(t)-1 && b[i] == t[i] {
		i++
	}
	var parts []string
	for range b[i:] {
		parts = append(parts, "..")
	}
	return strings.Join(append(parts, t[i:]...), "/")
}

func sha256Field(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256=" + base64.RawURLEncoding.EncodeToString(s[:])
}

func newHash(algo string) hash.Hash {
	switch algo {
	case "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return nil
}

func (in *installer) parseRecord(data []byte) (map[string]*recordRow, error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, in.bad("RECORD is not valid CSV: %v", err)
	}
	rows := map[string]*recordRow{}
	for i, rec := range recs {
		if len(rec) != 3 {
			return nil, in.bad("RECORD line %d has %d fields, not path,hash,size", i+1, len(rec))
		}
		p := rec[0]
		if err := safeRel(p); err != nil {
			return nil, in.bad("RECORD line %d: %v", i+1, err)
		}
		if rows[p] != nil {
			return nil, in.bad("RECORD lists %s twice", p)
		}
		row := &recordRow{size: -1, field: rec[1]}
		if rec[1] != "" {
			algo, enc, ok := strings.Cut(rec[1], "=")
			if !ok || newHash(algo) == nil {
				return nil, in.bad("RECORD line %d: hash %q is not sha256, sha384 or sha512", i+1, rec[1])
			}
			d, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
			if err != nil || len(d) != newHash(algo).Size() {
				return nil, in.bad("RECORD line %d: hash %q is not urlsafe base64 of a %s digest", i+1, rec[1], algo)
			}
			row.algo, row.digest = algo, d
		}
		if rec[2] != "" {
			n, err := strconv.ParseInt(rec[2], 10, 64)
			if err != nil || n < 0 {
				return nil, in.bad("RECORD line %d: size %q is not a number", i+1, rec[2])
			}
			row.size = n
		}
		rows[p] = row
	}
	return rows, nil
}

// budget is how many more bytes may be read from the archive.
func (in *installer) budget() int64 { return in.lim.MaxBytes - in.used }

func (in *installer) open(zf *zip.File) (io.ReadCloser, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, in.bad("cannot read %s: %v", zf.Name, err)
	}
	return rc, nil
}

// readSmall reads one file fully, bounded by max and by the byte budget.
func (in *installer) readSmall(zf *zip.File, max int64) ([]byte, error) {
	rc, err := in.open(zf)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	limit := min(max, in.budget())
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	in.used += int64(len(b))
	if err != nil {
		return nil, in.bad("cannot read %s: %v", zf.Name, err)
	}
	if int64(len(b)) > limit {
		if limit == max {
			return nil, in.bad("%s is larger than %d bytes", zf.Name, max)
		}
		return nil, in.bad("unpacks to more than the limit of %d bytes", in.lim.MaxBytes)
	}
	return b, nil
}

// digest reads one file within the byte budget and returns its size and
// digest (and its content when keep is set, bounded by maxMetadataBytes).
func (in *installer) digest(zf *zip.File, algo string, keep bool) (int64, []byte, []byte, error) {
	rc, err := in.open(zf)
	if err != nil {
		return 0, nil, nil, err
	}
	defer rc.Close()
	h := newHash(algo)
	var dst io.Writer = h
	var content bytes.Buffer
	if keep {
		dst = io.MultiWriter(h, &limitedBuffer{b: &content, max: maxMetadataBytes})
	}
	limit := in.budget()
	n, err := in.copy(dst, io.LimitReader(rc, limit+1))
	in.used += n
	if errors.Is(err, errTooBig) {
		return 0, nil, nil, in.bad("%s is larger than %d bytes", zf.Name, maxMetadataBytes)
	}
	if err != nil {
		return 0, nil, nil, in.bad("cannot read %s: %v", zf.Name, err)
	}
	if n > limit {
		return 0, nil, nil, in.bad("unpacks to more than the limit of %d bytes", in.lim.MaxBytes)
	}
	return n, h.Sum(nil), content.Bytes(), nil
}

var errTooBig = errors.New("too big")

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.b.Len()+len(p) > l.max {
		return 0, errTooBig
	}
	return l.b.Write(p)
}

// headers parses an email-header file (WHEEL, METADATA); only the header
// block matters.
func (in *installer) headers(name string, data []byte, byName map[string]*zip.File) (textproto.MIMEHeader, error) {
	if byName[name] == nil {
		return nil, in.bad("no %s", name)
	}
	// METADATA's body (the long description) follows a blank line.
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	if i := bytes.Index(data, []byte("\n\n")); i >= 0 {
		data = data[:i+1]
	}
	h, err := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(data), strings.NewReader("\n")))).ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, in.bad("%s is not a header file: %v", name, err)
	}
	return h, nil
}

// sniffShebang reads a script's first line; one starting with #!python gets
// the interpreter's shebang instead, as pip's fix_script does.
func (in *installer) sniffShebang(f *file, shebang []byte) error {
	rc, err := in.open(f.zf)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(io.LimitReader(rc, f.srcSize), 4096)
	head, _ := br.Peek(len("#!python"))
	if !bytes.Equal(head, []byte("#!python")) {
		return nil
	}
	// The first line's length, however long, without holding it.
	var first int64
	for {
		chunk, err := br.ReadSlice('\n')
		first += int64(len(chunk))
		if err == nil || errors.Is(err, io.EOF) {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return in.bad("cannot read %s: %v", f.zf.Name, err)
		}
	}
	h := sha256.New()
	h.Write(shebang)
	if _, err := in.copy(h, br); err != nil {
		return in.bad("cannot read %s: %v", f.zf.Name, err)
	}
	f.shebang, f.skip = shebang, first
	f.size = f.srcSize - first + int64(len(shebang))
	f.record = "sha256=" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	return nil
}

// write emits the layer: entries sorted by path, every parent directory,
// fixed times and owners.
func (in *installer) write(files []*file, w io.Writer) error {
	type ent struct {
		name string // without the leading '/'
		f    *file  // nil for a directory
	}
	dirs := map[string]bool{}
	var ents []ent
	for _, f := range files {
		for d := path.Dir(f.dest); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			ents = append(ents, ent{name: d[1:]})
		}
		ents = append(ents, ent{name: f.dest[1:], f: f})
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	tw := tar.NewWriter(w)
	for _, e := range ents {
		// Format left unset: archive/tar then picks USTAR when the entry
		// fits it and PAX otherwise, which depends on the name alone.
		hdr := &tar.Header{Name: e.name + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}
		if e.f != nil {
			hdr = &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: e.f.mode, Size: e.f.size, ModTime: epoch}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("wheel %s: writing the layer: %w", in.fn, err)
		}
		if e.f == nil {
			continue
		}
		if err := in.copyFile(tw, e.f); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("wheel %s: writing the layer: %w", in.fn, err)
	}
	return nil
}

func (in *installer) copyFile(w io.Writer, f *file) error {
	if f.zf == nil {
		_, err := w.Write(f.gen)
		if err != nil {
			return fmt.Errorf("wheel %s: writing the layer: %w", in.fn, err)
		}
		return nil
	}
	rc, err := in.open(f.zf)
	if err != nil {
		return err
	}
	defer rc.Close()
	if f.shebang != nil {
		if _, err := w.Write(f.shebang); err != nil {
			return fmt.Errorf("wheel %s: writing the layer: %w", in.fn, err)
		}
	}
	// The archive is read again: check it still says what was verified.
	h := newHash(f.algo)
	sw := &skipWriter{w: w, skip: f.skip}
	n, err := in.copy(io.MultiWriter(h, sw), io.LimitReader(rc, f.srcSize+1))
	if sw.err != nil {
		return fmt.Errorf("wheel %s: writing the layer: %w", in.fn, sw.err)
	}
	if err != nil {
		return in.bad("cannot read %s: %v", f.zf.Name, err)
	}
	if n != f.srcSize || !bytes.Equal(h.Sum(nil), f.digest) {
		return in.bad("%s changed while it was read", f.zf.Name)
	}
	return nil
}

// skipWriter drops the first skip bytes and remembers the underlying
// writer's error apart from the reader's.
type skipWriter struct {
	w    io.Writer
	skip int64
	err  error
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip > 0 {
		d := min(s.skip, int64(len(p)))
		s.skip -= d
		p = p[d:]
	}
	if len(p) > 0 {
		if _, err := s.w.Write(p); err != nil {
			s.err = err
			return 0, err
		}
	}
	return n, nil
}
