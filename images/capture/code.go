package capture

import (
	"archive/zip"
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/images"
)

// zipTime is the modification time of every zip entry (the earliest a zip
// file can record).
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// partSource is the content of one code part, before zipping.
type partSource struct {
	name  string
	what  string     // for messages: "editable package mylib", "local modules of /dir"
	files []codeFile // unique zip names
	roots []string   // the top-level packages and modules added
}

// codeFile is one file of a code part: its source and its name in the zip.
type codeFile struct {
	src  string
	name string
	size int64
}

// excludedDirs are never code (unless, for build and dist, they are Python
// packages themselves).
var excludedDirs = map[string]bool{"__pycache__": true, "node_modules": true, "build": true, "dist": true, "site-packages": true}

// flatExcluded are the project-root directories and modules that are not
// part of a flat-layout distribution (as setuptools' automatic discovery
// has it) when the distribution does not list its top-level names.
var flatExcluded = map[string]bool{
	"test": true, "tests": true, "doc": true, "docs": true, "example": true, "examples": true,
	"benchmark": true, "benchmarks": true,
	"setup.py": true, "conftest.py": true, "noxfile.py": true,
}

// walker collects the files of packages and modules, with what it skipped.
type walker struct {
	files    []codeFile
	seen     map[string]bool // zip names
	compiled []string        // compiled extensions, which zipimport cannot load
	links    []string        // symbolic links to directories
	roots    []string        // the top-level packages and modules added
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// isPackage reports whether dir is a Python package (has __init__.py).
func isPackage(dir string) bool { return isFile(filepath.Join(dir, "__init__.py")) }

// skipDir reports whether a directory is not code: hidden, a virtualenv,
// __pycache__, node_modules, and build, dist or site-packages unless they
// are Python packages.
func skipDir(dir string) bool {
	base := filepath.Base(dir)
	if strings.HasPrefix(base, ".") || base == "__pycache__" || isFile(filepath.Join(dir, "pyvenv.cfg")) {
		return true
	}
	return excludedDirs[base] && !isPackage(dir)
}

// skipFile reports whether a file is not code: hidden files and compiled
// bytecode.
func skipFile(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".pyc") || strings.HasSuffix(name, ".pyo")
}

func isCompiled(name string) bool {
	return strings.HasSuffix(name, ".so") || strings.HasSuffix(name, ".pyd") || strings.HasSuffix(name, ".dylib")
}

// addFile adds one file as zipName.
func (w *walker) addFile(src, zipName string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || w.seen[zipName] {
		return nil
	}
	w.seen[zipName] = true
	w.files = append(w.files, codeFile{src: src, name: zipName, size: fi.Size()})
	return nil
}

// addTree adds every file of the package directory root as prefix/...
func (w *walker) addTree(root, prefix string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		zipName := path.Join(prefix, filepath.ToSlash(rel))
		switch t := d.Type(); {
		case d.IsDir():
			if p != root && skipDir(p) {
				return filepath.SkipDir
			}
			return nil
		case t&fs.ModeSymlink != 0:
			fi, err := os.Stat(p)
			if err != nil {
				return nil // a dangling link
			}
			if fi.IsDir() {
				w.links = append(w.links, p)
				return nil
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		case !t.IsRegular():
			return nil // sockets, pipes, devices
		}
		if skipFile(d.Name()) {
			return nil
		}
		if isCompiled(d.Name()) {
			w.compiled = append(w.compiled, p)
			return nil
		}
		return w.addFile(p, zipName)
	})
}

// add adds a top-level package directory or module file (following a
// symbolic link to it).
func (w *walker) add(p string) error {
	w.roots = append(w.roots, p)
	if isDir(p) {
		return w.addTree(realPath(p), filepath.Base(p))
	}
	return w.addFile(p, filepath.Base(p))
}

func (w *walker) notes(what string) []string {
	var notes []string
	if len(w.compiled) > 0 {
		notes = append(notes, fmt.Sprintf("%s: skipped %d compiled extension file(s), which cannot be imported from a zip (%s)", what, len(w.compiled), shortList(w.compiled)))
	}
	if len(w.links) > 0 {
		notes = append(notes, fmt.Sprintf("%s: skipped symbolic links to directories (%s)", what, shortList(w.links)))
	}
	return notes
}

func shortList(items []string) string {
	if len(items) > 3 {
		return strings.Join(items[:3], ", ") + fmt.Sprintf(" and %d more", len(items)-3)
	}
	return strings.Join(items, ", ")
}

// topLevel lists the importable packages (directories with __init__.py) and
// modules (*.py) directly in dir, by name, minus skipped ones.
func topLevel(dir string, skip map[string]bool) (found, skipped []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		var ok bool
		if isDir(p) {
			ok = !skipDir(p) && isPackage(p) && !strings.Contains(name, ".")
		} else {
			ok = strings.HasSuffix(name, ".py") && !skipFile(name) && isFile(p)
		}
		switch {
		case !ok:
		case skip[name]:
			skipped = append(skipped, name)
		default:
			found = append(found, name)
		}
	}
	return found, skipped, nil
}

// partName is the code part name of a distribution.
func partName(dist string) string {
	return strings.TrimLeft(images.NormalizeName(dist), "-._")
}

// editableLocation returns the source directory of an editable install
// (the probe gives the file:// URL's path, which may be percent-encoded).
func editableLocation(loc string) string {
	if isDir(loc) {
		return loc
	}
	if u, err := url.PathUnescape(loc); err == nil && isDir(u) {
		return u
	}
	return ""
}

// editableSource returns the code part of an editable install, or nil with
// a note saying why there is none.
func editableSource(pkg images.ProbePackage) (*partSource, []string) {
	name := partName(pkg.Name)
	what := fmt.Sprintf("editable package %s %s", pkg.Name, pkg.Version)
	if name == "" {
		return nil, []string{what + ": no usable name; skipped"}
	}
	if pkg.Location == "" {
		return nil, []string{what + ": the installation records no source directory; not included"}
	}
	loc := editableLocation(pkg.Location)
	if loc == "" {
		return nil, []string{fmt.Sprintf("%s: its source directory %s does not exist; not included", what, pkg.Location)}
	}
	w := &walker{seen: map[string]bool{}}
	var notes, included []string
	if len(pkg.TopLevel) > 0 {
		var missing []string
		for _, t := range pkg.TopLevel {
			if t == "" || strings.ContainsAny(t, `/\`) || strings.HasPrefix(t, ".") {
				continue
			}
			p := findTop(loc, t)
			if p == "" {
				missing = append(missing, t)
				continue
			}
			if err := w.add(p); err != nil {
				return nil, []string{fmt.Sprintf("%s: reading %s: %v; not included", what, p, err)}
			}
			included = append(included, displayName(p))
		}
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("%s: did not find %s under %s or %s (compiled extensions or another layout); not included",
				what, strings.Join(missing, ", "), loc, filepath.Join(loc, "src")))
		}
	} else {
		base := filepath.Join(loc, "src")
		found, skipped, err := []string(nil), []string(nil), error(nil)
		if isDir(base) {
			found, skipped, err = topLevel(base, nil)
		}
		if err == nil && len(found) == 0 {
			base = loc
			found, skipped, err = topLevel(base, flatExcluded)
		}
		if err != nil {
			return nil, []string{fmt.Sprintf("%s: reading %s: %v; not included", what, base, err)}
		}
		for _, f := range found {
			p := filepath.Join(base, f)
			if err := w.add(p); err != nil {
				return nil, []string{fmt.Sprintf("%s: reading %s: %v; not included", what, p, err)}
			}
			included = append(included, displayName(p))
		}
		if len(skipped) > 0 {
			notes = append(notes, fmt.Sprintf("%s: not code: %s in %s", what, strings.Join(skipped, ", "), base))
		}
	}
	notes = append(notes, w.notes(what)...)
	if len(w.files) == 0 {
		return nil, append(notes, fmt.Sprintf("%s: found no Python packages or modules in %s; not included", what, loc))
	}
	notes = append([]string{fmt.Sprintf("%s: code part %q from %s (%s)", what, name, loc, strings.Join(included, ", "))}, notes...)
	return &partSource{name: name, what: what, files: w.files, roots: w.roots}, notes
}

// findTop finds the package directory or module of a top-level import name
// in a src layout or a flat layout.
func findTop(loc, name string) string {
	for _, base := range []string{filepath.Join(loc, "src"), loc} {
		if p := filepath.Join(base, name); isDir(p) && !skipDir(p) {
			return p
		}
		if p := filepath.Join(base, name+".py"); isFile(p) {
			return p
		}
	}
	return ""
}

func displayName(p string) string {
	if isDir(p) {
		return filepath.Base(p) + "/"
	}
	return filepath.Base(p)
}

// localSource returns the code part of dir's plain local modules, leaving
// out those the editable parts already hold.
func localSource(dir string, editable []partSource) (*partSource, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("code directory %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, nil, fmt.Errorf("code directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("code directory %s is not a directory", dir)
	}
	// The top-level packages and modules already in editable parts.
	taken := map[string]string{}
	for _, s := range editable {
		for _, r := range s.roots {
			taken[realPath(r)] = s.name
		}
	}
	found, skipped, err := topLevel(abs, map[string]bool{"setup.py": true})
	if err != nil {
		return nil, nil, fmt.Errorf("code directory %s: %w", dir, err)
	}
	what := "local modules of " + abs
	w := &walker{seen: map[string]bool{}}
	var notes, included, dups []string
	for _, f := range found {
		p := filepath.Join(abs, f)
		if part, ok := taken[realPath(p)]; ok {
			dups = append(dups, fmt.Sprintf("%s (in code part %q)", f, part))
			continue
		}
		if err := w.add(p); err != nil {
			return nil, nil, fmt.Errorf("code directory %s: %w", dir, err)
		}
		included = append(included, displayName(p))
	}
	if len(dups) > 0 {
		notes = append(notes, fmt.Sprintf("%s: already code of an editable package: %s", what, strings.Join(dups, ", ")))
	}
	if len(skipped) > 0 {
		notes = append(notes, fmt.Sprintf("%s: not code: %s", what, strings.Join(skipped, ", ")))
	}
	notes = append(notes, w.notes(what)...)
	if len(w.files) == 0 {
		return nil, append(notes, fmt.Sprintf("%s: no Python modules or packages; no code part %q", what, LocalPart)), nil
	}
	notes = append([]string{fmt.Sprintf("%s: code part %q (%s)", what, LocalPart, strings.Join(included, ", "))}, notes...)
	return &partSource{name: LocalPart, what: what, files: w.files, roots: w.roots}, notes, nil
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// zipParts zips every source within the size limit for all of them together.
func zipParts(sources []partSource, maxBytes int64) (map[string][]byte, []images.CodePart, error) {
	byName := map[string]string{}
	var total int64
	for _, s := range sources {
		if prev, dup := byName[s.name]; dup {
			return nil, nil, fmt.Errorf("two code parts are named %q: %s and %s; rename one of them", s.name, prev, s.what)
		}
		byName[s.name] = s.what
		for _, f := range s.files {
			total += f.size
		}
	}
	if total > maxBytes {
		return nil, nil, tooLarge(sources, total, maxBytes)
	}
	code := make(map[string][]byte, len(sources))
	var parts []images.CodePart
	var zipped int64
	for _, s := range sources {
		b, err := zipFiles(s.files)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.what, err)
		}
		zipped += int64(len(b))
		if zipped > maxBytes {
			return nil, nil, tooLarge(sources, zipped, maxBytes)
		}
		code[s.name] = b
		parts = append(parts, images.CodePart{Name: s.name, Digest: images.DigestOf(b)})
	}
	return code, parts, nil
}

// tooLarge is the error for code over the limit: the size, the limit, the
// largest files and what to do.
func tooLarge(sources []partSource, size, limit int64) error {
	var all []codeFile
	for _, s := range sources {
		all = append(all, s.files...)
	}
	slices.SortFunc(all, func(a, b codeFile) int {
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return strings.Compare(a.src, b.src)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "the user code is too large: %s in %d files, over the limit of %s; the largest files:", FormatBytes(size), len(all), FormatBytes(limit))
	for _, f := range all[:min(len(all), 5)] {
		fmt.Fprintf(&b, "\n  %s (%s)", f.src, FormatBytes(f.size))
	}
	b.WriteString("\nmove data files out of the code directories (and read them from shared storage on the cluster), or run from another directory or pass a smaller --code-dir")
	return fmt.Errorf("%s", b.String())
}

// FormatBytes shows a size in bytes, KiB, MiB or GiB.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// zipFiles returns a deterministic zip of the files: entries sorted by name,
// each directory (so that zipimport finds namespace packages) before its
// contents, every entry stored (not compressed: the image layer is
// compressed anyway, and stored bytes do not depend on a compressor's
// version) with modification time 1980-01-01 and mode 0644 (directories
// 0755).
func zipFiles(files []codeFile) ([]byte, error) {
	entries := map[string]*codeFile{}
	for i := range files {
		f := &files[i]
		entries[f.name] = f
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			if _, ok := entries[d+"/"]; ok {
				break
			}
			entries[d+"/"] = nil
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		h := &zip.FileHeader{Name: n, Method: zip.Store, Modified: zipTime}
		f := entries[n]
		if f == nil {
			h.SetMode(fs.ModeDir | 0o755)
		} else {
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue
		}
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
