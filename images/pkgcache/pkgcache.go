// Package pkgcache keeps downloaded package files (wheels, conda packages) on
// disk, named by their SHA-256, with a bound on the total size.
//
// A file is stored under its hash only after its bytes were checked against
// that hash, and it reaches its name by rename from a temporary file, so a
// name in the cache always holds the bytes it names, even after a crash.
// When the total passes the bound, the least recently used files are removed;
// use is recorded in each file's mtime (touched on Get and Put), so the order
// survives a restart.
//
// One process owns a cache directory: New removes temporary files left over
// in it, which would break a second process writing to the same directory.
package pkgcache

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors returned by Put and Get (wrapped; match with errors.Is).
var (
	// ErrHashMismatch: the bytes given to Put do not have the promised hash.
	ErrHashMismatch = errors.New("sha256 mismatch")
	// ErrTooLarge: the bytes given to Put pass the size limit.
	ErrTooLarge = errors.New("file too large")
	// ErrInvalidHash: the hash argument is not 64 lower-case hex digits.
	ErrInvalidHash = errors.New("invalid sha256: want 64 lower-case hex digits")
)

// tmpPrefix names files being written; nothing else in the directory starts
// with a dot, and a hash never does.
const tmpPrefix = ".tmp-"

// Cache is a size-bounded, content-addressed directory of files. It is safe
// for concurrent use.
type Cache struct {
	dir      string
	maxBytes int64

	mu      sync.Mutex
	entries map[string]*entry
	total   int64
	// lastUse makes the recorded use times strictly increasing within the
	// process, so two uses in one clock tick still have an order.
	lastUse time.Time
}

type entry struct {
	size int64
	used time.Time
}

// New opens (creating, mode 0700) a cache in dir holding at most maxBytes;
// least recently used files are removed past it (their access recorded by
// mtime touched on Get). Temporary files left in dir by an earlier process
// are removed; files whose names are not hashes are left alone and not
// counted.
func New(dir string, maxBytes int64) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("pkgcache: no directory given")
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("pkgcache: size bound must be positive, got %d bytes", maxBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pkgcache: create %s: %w", dir, err)
	}
	c := &Cache{dir: dir, maxBytes: maxBytes, entries: map[string]*entry{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pkgcache: read %s: %w", dir, err)
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("pkgcache: remove stray temporary file: %w", err)
			}
			continue
		}
		if !validHash(name) || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("pkgcache: %w", err)
		}
		c.entries[name] = &entry{size: info.Size(), used: info.ModTime()}
		c.total += info.Size()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked("")
	return c, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Size is the total size of the cached files, in bytes.
func (c *Cache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Get returns the path of the file with this sha256 (lower-case hex) when
// cached, and records the use. The path stays valid until the file is
// evicted, which happens only when the cache has since taken in more than its
// bound of other files; use Open to hold the file regardless.
func (c *Cache) Get(sha256hex string) (path string, ok bool) {
	if !validHash(sha256hex) {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(sha256hex)
}

// Open is Get returning the opened file: an open file stays readable even if
// it is evicted meanwhile.
func (c *Cache) Open(sha256hex string) (*os.File, error) {
	if !validHash(sha256hex) {
		return nil, fmt.Errorf("pkgcache: %q: %w", sha256hex, ErrInvalidHash)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.getLocked(sha256hex)
	if !ok {
		return nil, fmt.Errorf("pkgcache: %s: %w", sha256hex, fs.ErrNotExist)
	}
	return os.Open(p)
}

func (c *Cache) getLocked(h string) (string, bool) {
	p := filepath.Join(c.dir, h)
	info, err := os.Lstat(p)
	if err != nil || !info.Mode().IsRegular() {
		c.forgetLocked(h)
		return "", false
	}
	e := c.entries[h]
	if e == nil {
		// Not seen at New (another process may have put it): count it now.
		e = &entry{size: info.Size()}
		c.entries[h] = e
		c.total += e.size
	}
	e.used = c.touchLocked(p)
	return p, true
}

// Put stores r's bytes under sha256hex, reading at most maxBytes (more: an
// error wrapping ErrTooLarge, nothing stored), checking the bytes' sha256
// while writing (mismatch: an error wrapping ErrHashMismatch, nothing
// stored). The bytes go to a temporary file in the cache's directory, synced,
// then renamed, so a crash never leaves a bad file under a good name. A
// maxBytes <= 0, or above the cache's own bound, means the cache's bound.
// If the hash is already cached, r is not read. Returns the stored path;
// older files are evicted to make room for it.
func (c *Cache) Put(sha256hex string, r io.Reader, maxBytes int64) (path string, err error) {
	if !validHash(sha256hex) {
		return "", fmt.Errorf("pkgcache: %q: %w", sha256hex, ErrInvalidHash)
	}
	if p, ok := c.Get(sha256hex); ok {
		return p, nil
	}
	if maxBytes <= 0 || maxBytes > c.maxBytes {
		maxBytes = c.maxBytes
	}
	tmp, err := os.CreateTemp(c.dir, tmpPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("pkgcache: %w", err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
		}
		if err != nil {
			_ = os.Remove(tmpName)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxBytes+1))
	if err != nil {
		return "", fmt.Errorf("pkgcache: write %s: %w", sha256hex, err)
	}
	if n > maxBytes {
		return "", fmt.Errorf("pkgcache: %s: more than %d bytes: %w", sha256hex, maxBytes, ErrTooLarge)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha256hex {
		return "", fmt.Errorf("pkgcache: expected sha256 %s, got %s: %w", sha256hex, got, ErrHashMismatch)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("pkgcache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		tmp = nil
		return "", fmt.Errorf("pkgcache: %w", err)
	}
	tmp = nil

	c.mu.Lock()
	defer c.mu.Unlock()
	final := filepath.Join(c.dir, sha256hex)
	if p, ok := c.getLocked(sha256hex); ok {
		// A concurrent Put of the same bytes won; keep its file.
		_ = os.Remove(tmpName)
		return p, nil
	}
	if err := os.Rename(tmpName, final); err != nil {
		return "", fmt.Errorf("pkgcache: %w", err)
	}
	syncDir(c.dir)
	c.forgetLocked(sha256hex)
	c.entries[sha256hex] = &entry{size: n, used: c.touchLocked(final)}
	c.total += n
	c.evictLocked(sha256hex)
	return final, nil
}

// touchLocked records a use of the file at p now and returns the time.
func (c *Cache) touchLocked(p string) time.Time {
	now := time.Now()
	if !now.After(c.lastUse) {
		now = c.lastUse.Add(time.Microsecond)
	}
	c.lastUse = now
	// A failed touch only makes the LRU order less exact.
	_ = os.Chtimes(p, now, now)
	return now
}

func (c *Cache) forgetLocked(h string) {
	if e, ok := c.entries[h]; ok {
		c.total -= e.size
		delete(c.entries, h)
	}
}

// evictLocked removes least recently used files until the total is within
// the bound, sparing keep.
func (c *Cache) evictLocked(keep string) {
	if c.total <= c.maxBytes {
		return
	}
	type cand struct {
		h    string
		used time.Time
	}
	cands := make([]cand, 0, len(c.entries))
	for h, e := range c.entries {
		if h != keep {
			cands = append(cands, cand{h, e.used})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if d := a.used.Compare(b.used); d != 0 {
			return d
		}
		return cmp.Compare(a.h, b.h)
	})
	for _, x := range cands {
		if c.total <= c.maxBytes {
			return
		}
		err := os.Remove(filepath.Join(c.dir, x.h))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // still there, still counted
		}
		c.forgetLocked(x.h)
	}
}

// syncDir makes a rename durable; best effort, as some filesystems refuse.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// validHash reports whether s is 64 lower-case hex digits, which also keeps
// it from naming anything outside the directory.
func validHash(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return true
}

// ValidHash reports whether s is a sha256 in the form the cache names files
// by (64 lower-case hex digits).
func ValidHash(s string) bool { return validHash(s) }
