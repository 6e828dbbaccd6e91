package pkgcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newCache(t *testing.T, max int64) *Cache {
	t.Helper()
	c, err := New(t.TempDir(), max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// names lists the directory's entries, to check nothing else was left.
func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func TestHitMiss(t *testing.T) {
	c, err := New(filepath.Join(t.TempDir(), "new", "cache"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a wheel's bytes")
	h := sum(data)
	if _, ok := c.Get(h); ok {
		t.Fatal("Get on an empty cache hit")
	}
	p, err := c.Put(h, bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != c.Dir() || filepath.Base(p) != h {
		t.Fatalf("stored at %s, want %s/%s", p, c.Dir(), h)
	}
	got, ok := c.Get(h)
	if !ok || got != p {
		t.Fatalf("Get = %q, %v; want %q, true", got, ok, p)
	}
	b, err := os.ReadFile(got)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("cached bytes %q, %v", b, err)
	}
	if c.Size() != int64(len(data)) {
		t.Fatalf("Size = %d, want %d", c.Size(), len(data))
	}
	f, err := c.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := c.Open(sum([]byte("other"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing hash: %v", err)
	}
	info, err := os.Stat(c.Dir())
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode %v, %v; want 0700", info.Mode().Perm(), err)
	}

	// A second Put of a cached hash does not read its reader.
	p2, err := c.Put(h, iotestErrReader{}, 0)
	if err != nil || p2 != p {
		t.Fatalf("Put of a cached hash = %q, %v", p2, err)
	}

	// A reopened cache finds the file.
	c2, err := New(c.Dir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c2.Get(h); !ok || c2.Size() != int64(len(data)) {
		t.Fatalf("reopened cache: hit %v, size %d", ok, c2.Size())
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }

func TestRefused(t *testing.T) {
	good := []byte(strings.Repeat("x", 100))
	for _, tc := range []struct {
		name    string
		hash    string
		data    []byte
		max     int64
		wantErr error
	}{
		{"hash mismatch", sum([]byte("something else")), good, 0, ErrHashMismatch},
		{"too large", sum(good), good, 99, ErrTooLarge},
		{"larger than the cache", sum(good), good, 0, ErrTooLarge}, // cache bound is 50 below
		{"upper-case hex", strings.ToUpper(sum(good)), good, 0, ErrInvalidHash},
		{"short", sum(good)[:63], good, 0, ErrInvalidHash},
		{"traversal", "../" + sum(good)[3:], good, 0, ErrInvalidHash},
		{"traversal, 64 chars", strings.Repeat("../", 21) + "a", good, 0, ErrInvalidHash},
		{"empty", "", good, 0, ErrInvalidHash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := int64(1 << 20)
			if tc.name == "larger than the cache" {
				max = 50
			}
			c := newCache(t, max)
			_, err := c.Put(tc.hash, bytes.NewReader(tc.data), tc.max)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Put: %v, want %v", err, tc.wantErr)
			}
			if n := names(t, c.Dir()); len(n) != 0 {
				t.Fatalf("left in the cache: %v", n)
			}
			if _, ok := c.Get(sum(good)); ok {
				t.Fatal("refused bytes are cached")
			}
			if _, ok := c.Get(tc.hash); ok {
				t.Fatal("refused hash hits")
			}
			if c.Size() != 0 {
				t.Fatalf("Size = %d after a refused Put", c.Size())
			}
		})
	}
}

func TestInvalidHashGetAndOpen(t *testing.T) {
	dir := t.TempDir()
	cdir := filepath.Join(dir, "cache")
	c, err := New(cdir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// A file outside the cache that a traversal would name.
	outside := filepath.Join(dir, strings.Repeat("a", 61))
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"../" + strings.Repeat("a", 61), "/etc/passwd", strings.Repeat("A", 64), strings.Repeat("g", 64)} {
		if p, ok := c.Get(h); ok {
			t.Errorf("Get(%q) = %q, true", h, p)
		}
		if _, err := c.Open(h); !errors.Is(err, ErrInvalidHash) {
			t.Errorf("Open(%q): %v, want ErrInvalidHash", h, err)
		}
	}
}

func TestNotRegularFileIsMiss(t *testing.T) {
	c := newCache(t, 1<<20)
	h := sum([]byte("x"))
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(c.Dir(), h)); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Get(h); ok {
		t.Fatalf("a symlink under a hash name hits: %s", p)
	}
}

func TestEvictionLRU(t *testing.T) {
	// Four 100-byte files in a 300-byte cache.
	c := newCache(t, 300)
	put := func(name string) string {
		t.Helper()
		data := bytes.Repeat([]byte(name), 100)
		h := sum(data)
		if _, err := c.Put(h, bytes.NewReader(data), 0); err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b, cc := put("a"), put("b"), put("c")
	if c.Size() != 300 {
		t.Fatalf("Size = %d, want 300", c.Size())
	}
	// a is used after b and c, so b is now the least recently used.
	if _, ok := c.Get(a); !ok {
		t.Fatal("a missing")
	}
	d := put("d")
	for h, want := range map[string]bool{a: true, b: false, cc: true, d: true} {
		if _, ok := c.Get(h); ok != want {
			t.Errorf("%s cached = %v, want %v", h[:8], ok, want)
		}
	}
	if c.Size() != 300 || len(names(t, c.Dir())) != 3 {
		t.Fatalf("Size %d, files %v; want 300 bytes in 3 files", c.Size(), names(t, c.Dir()))
	}

	// The order survives a restart (it is in the mtimes), and a smaller
	// bound at New evicts down to it. The Gets above used a, c, d in map
	// order; make it explicit: c oldest, then d, then a.
	for _, h := range []string{cc, d, a} {
		c.Get(h)
	}
	c2, err := New(c.Dir(), 200)
	if err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]bool{a: true, cc: false, d: true} {
		if _, ok := c2.Get(h); ok != want {
			t.Errorf("after reopen at 200 bytes: %s cached = %v, want %v", h[:8], ok, want)
		}
	}
}

// TestEvictionMakesRoom: a file that needs most of the cache pushes the
// older ones out, and is itself kept.
func TestEvictionMakesRoom(t *testing.T) {
	c := newCache(t, 150)
	small := bytes.Repeat([]byte("s"), 20)
	big := bytes.Repeat([]byte("b"), 140)
	hs, hb := sum(small), sum(big)
	if _, err := c.Put(hs, bytes.NewReader(small), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(hb, bytes.NewReader(big), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(hb); !ok {
		t.Fatal("the file just put was evicted")
	}
	if _, ok := c.Get(hs); ok {
		t.Fatal("the older file was kept past the bound")
	}
	if c.Size() != 140 {
		t.Fatalf("Size %d, want 140", c.Size())
	}
}

func TestConcurrentPuts(t *testing.T) {
	c := newCache(t, 1<<20)
	data := bytes.Repeat([]byte("concurrent"), 1000)
	h := sum(data)
	const n = 8
	var wg sync.WaitGroup
	paths := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = c.Put(h, bytes.NewReader(data), 0)
		}()
	}
	// Other hashes at the same time, to exercise accounting under -race.
	var others atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := []byte(fmt.Sprintf("other %d", i))
			if _, err := c.Put(sum(d), bytes.NewReader(d), 0); err == nil {
				others.Add(int64(len(d)))
			}
			c.Get(h)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || paths[i] != filepath.Join(c.Dir(), h) {
			t.Fatalf("Put %d = %q, %v", i, paths[i], errs[i])
		}
	}
	if got := len(names(t, c.Dir())); got != n+1 {
		t.Fatalf("%d files in the cache, want %d (one per hash): %v", got, n+1, names(t, c.Dir()))
	}
	if want := int64(len(data)) + others.Load(); c.Size() != want {
		t.Fatalf("Size = %d, want %d", c.Size(), want)
	}
}

func TestStrayTempFilesSwept(t *testing.T) {
	dir := t.TempDir()
	stray := filepath.Join(dir, tmpPrefix+"12345")
	if err := os.WriteFile(stray, []byte("half a download"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "README")
	if err := os.WriteFile(other, []byte("not ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray temp file still there: %v", err)
	}
	// Unknown names are neither counted nor removed.
	if _, err := os.Stat(other); err != nil || c.Size() != 0 {
		t.Fatalf("other file: %v, Size %d", err, c.Size())
	}
}

func TestReaderErrorStoresNothing(t *testing.T) {
	c := newCache(t, 1<<20)
	r := io.MultiReader(strings.NewReader("partial"), iotestErrReader{})
	if _, err := c.Put(sum([]byte("partial")), r, 0); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if n := names(t, c.Dir()); len(n) != 0 {
		t.Fatalf("left in the cache: %v", n)
	}
}

func TestNewRefusesBadArgs(t *testing.T) {
	if _, err := New("", 10); err == nil {
		t.Error("New with no dir succeeded")
	}
	if _, err := New(t.TempDir(), 0); err == nil {
		t.Error("New with a zero bound succeeded")
	}
}
