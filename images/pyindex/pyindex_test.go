package pyindex

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/images/pkgcache"
)

// testFile is one file a test index lists.
type testFile struct {
	name string
	data []byte
	// onCDN serves the file from the second server (absolute link);
	// otherwise from the index's host by a relative link.
	onCDN bool
	// hash overrides the listed sha256: "none" lists no hash.
	hash           string
	requiresPython string
	yanked         string // "" not yanked; "-" yanked without a reason
	rawURL         string // overrides the link entirely
}

func (f testFile) sha() string {
	s := sha256.Sum256(f.data)
	return hex.EncodeToString(s[:])
}

// testIndex is a package index on loopback (the index host) plus a second
// server on another port standing for a files CDN. Both count requests and
// record the Authorization headers they receive.
type testIndex struct {
	t        *testing.T
	format   string // "json" or "html"
	idx, cdn *httptest.Server
	user     string
	pass     string

	mu       sync.Mutex
	projects map[string][]testFile
	hits     map[string]int // "index /path" or "cdn /path" -> requests
	authIdx  []string       // Authorization headers the index saw
	authCDN  []string       // ... and the CDN
	// pageHook, when set, answers project pages instead.
	pageHook http.HandlerFunc
	// fileHook, when set, answers /files/ on the index host instead.
	fileHook http.HandlerFunc
}

func newTestIndex(t *testing.T, format string) *testIndex {
	ti := &testIndex{t: t, format: format, projects: map[string][]testFile{}, hits: map[string]int{}}
	ti.cdn = httptest.NewServer(http.HandlerFunc(ti.serveCDN))
	ti.idx = httptest.NewServer(http.HandlerFunc(ti.serveIndex))
	t.Cleanup(ti.idx.Close)
	t.Cleanup(ti.cdn.Close)
	return ti
}

func (ti *testIndex) add(project string, files ...testFile) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.projects[project] = append(ti.projects[project], files...)
}

func (ti *testIndex) requests() int {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	n := 0
	for _, c := range ti.hits {
		n += c
	}
	return n
}

// url is the index URL, with credentials when the index has them.
func (ti *testIndex) url() string {
	u := ti.idx.URL + "/simple/"
	if ti.user != "" {
		u = strings.Replace(u, "http://", "http://"+ti.user+":"+ti.pass+"@", 1)
	}
	return u
}

func (ti *testIndex) record(server string, r *http.Request) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.hits[server+" "+r.URL.Path]++
	if a := r.Header.Get("Authorization"); a != "" {
		if server == "index" {
			ti.authIdx = append(ti.authIdx, a)
		} else {
			ti.authCDN = append(ti.authCDN, a)
		}
	}
}

func (ti *testIndex) findFile(name string) (testFile, bool) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	for _, fs := range ti.projects {
		for _, f := range fs {
			if f.name == name {
				return f, true
			}
		}
	}
	return testFile{}, false
}

func (ti *testIndex) serveCDN(w http.ResponseWriter, r *http.Request) {
	ti.record("cdn", r)
	f, ok := ti.findFile(strings.TrimPrefix(r.URL.Path, "/files/"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(f.data)
}

func (ti *testIndex) serveIndex(w http.ResponseWriter, r *http.Request) {
	ti.record("index", r)
	if ti.user != "" {
		u, p, ok := r.BasicAuth()
		if !ok || u != ti.user || p != ti.pass {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		if ti.fileHook != nil {
			ti.fileHook(w, r)
			return
		}
		f, ok := ti.findFile(name)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(f.data)
		return
	}
	project, ok := strings.CutPrefix(r.URL.Path, "/simple/")
	if !ok || !strings.HasSuffix(project, "/") {
		http.NotFound(w, r)
		return
	}
	if ti.pageHook != nil {
		ti.pageHook(w, r)
		return
	}
	ti.mu.Lock()
	files, ok := ti.projects[strings.TrimSuffix(project, "/")]
	ti.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if ti.format == "json" {
		if !strings.Contains(r.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json") {
			ti.t.Errorf("JSON asked for without the PEP 691 media type: Accept %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		w.Write(ti.jsonPage(strings.TrimSuffix(project, "/"), files))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(ti.htmlPage(files))
}

// link is the URL the page gives for f: relative for files on the index
// host (the page is /simple/<p>/, the files /files/<f>).
func (ti *testIndex) link(f testFile) string {
	switch {
	case f.rawURL != "":
		return f.rawURL
	case f.onCDN:
		return ti.cdn.URL + "/files/" + f.name
	default:
		return "../../files/" + f.name
	}
}

func (ti *testIndex) jsonPage(project string, files []testFile) []byte {
	type jf struct {
		Filename       string            `json:"filename"`
		URL            string            `json:"url"`
		Hashes         map[string]string `json:"hashes"`
		RequiresPython string            `json:"requires-python,omitempty"`
		Yanked         any               `json:"yanked,omitempty"`
	}
	page := struct {
		Meta  map[string]string `json:"meta"`
		Name  string            `json:"name"`
		Files []jf              `json:"files"`
	}{Meta: map[string]string{"api-version": "1.1"}, Name: project}
	for _, f := range files {
		j := jf{Filename: f.name, URL: ti.link(f), Hashes: map[string]string{}, RequiresPython: f.requiresPython}
		switch f.hash {
		case "none":
		case "":
			j.Hashes["sha256"] = f.sha()
		default:
			j.Hashes["sha256"] = f.hash
		}
		switch f.yanked {
		case "":
		case "-":
			j.Yanked = true
		default:
			j.Yanked = f.yanked
		}
		page.Files = append(page.Files, j)
	}
	b, err := json.Marshal(page)
	if err != nil {
		ti.t.Fatal(err)
	}
	return b
}

func (ti *testIndex) htmlPage(files []testFile) []byte {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Links</title></head><body>\n")
	for _, f := range files {
		href := ti.link(f)
		switch f.hash {
		case "none":
		case "":
			href += "#sha256=" + f.sha()
		default:
			href += "#sha256=" + f.hash
		}
		fmt.Fprintf(&b, `<a href="%s"`, html.EscapeString(href))
		if f.requiresPython != "" {
			fmt.Fprintf(&b, ` data-requires-python="%s"`, html.EscapeString(f.requiresPython))
		}
		switch f.yanked {
		case "":
		case "-":
			b.WriteString(" data-yanked")
		default:
			fmt.Fprintf(&b, ` data-yanked="%s"`, html.EscapeString(f.yanked))
		}
		fmt.Fprintf(&b, ">%s</a><br/>\n", html.EscapeString(f.name))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// client makes an Index on ti with a fresh cache; cfg's zero fields are
// filled in.
func (ti *testIndex) client(cfg Config) *Index {
	ti.t.Helper()
	if cfg.URL == "" {
		cfg.URL = ti.url()
	}
	if cfg.Cache == nil {
		cfg.Cache = newCache(ti.t)
	}
	ix, err := New(cfg)
	if err != nil {
		ti.t.Fatal(err)
	}
	return ix
}

func newCache(t *testing.T) *pkgcache.Cache {
	t.Helper()
	c, err := pkgcache.New(t.TempDir(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wheelBytes stands for a wheel: the client does not look inside.
func wheelBytes(name string, size int) []byte {
	b := bytes.Repeat([]byte(name+"\n"), size/(len(name)+1)+1)
	return b[:size]
}

var formats = []string{"json", "html"}

func forFormats(t *testing.T, f func(t *testing.T, ti *testIndex)) {
	for _, format := range formats {
		t.Run(format, func(t *testing.T) { f(t, newTestIndex(t, format)) })
	}
}

func fileNames(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Filename)
	}
	slices.Sort(out)
	return out
}

func TestFiles(t *testing.T) {
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.add("my-pkg",
			testFile{name: "my_pkg-1.0-py3-none-any.whl", data: wheelBytes("a", 100), requiresPython: ">=3.8,<4"},
			testFile{name: "my_pkg-1.0.tar.gz", data: wheelBytes("b", 50), onCDN: true, yanked: "broken & bad"},
			testFile{name: "my_pkg-0.9-py3-none-any.whl", data: wheelBytes("c", 10), yanked: "-"},
		)
		ix := ti.client(Config{})
		// The name is normalised before it reaches the URL.
		files, err := ix.Files(context.Background(), "My_Pkg")
		if err != nil {
			t.Fatal(err)
		}
		if ti.hits["index /simple/my-pkg/"] != 1 {
			t.Fatalf("requests: %v", ti.hits)
		}
		byName := map[string]File{}
		for _, f := range files {
			byName[f.Filename] = f
		}
		if len(byName) != 3 {
			t.Fatalf("files %v, want 3", fileNames(files))
		}
		whl := byName["my_pkg-1.0-py3-none-any.whl"]
		if whl.URL != ti.idx.URL+"/files/my_pkg-1.0-py3-none-any.whl" {
			t.Errorf("relative link resolved to %q", whl.URL)
		}
		if whl.Hashes["sha256"] != (testFile{data: wheelBytes("a", 100)}).sha() {
			t.Errorf("hashes %v", whl.Hashes)
		}
		// HTML-escaped in the page ("&gt;=3.8,&lt;4"), plain here.
		if whl.RequiresPython != ">=3.8,<4" || whl.Yanked {
			t.Errorf("wheel: requires-python %q, yanked %v", whl.RequiresPython, whl.Yanked)
		}
		sd := byName["my_pkg-1.0.tar.gz"]
		if sd.URL != ti.cdn.URL+"/files/my_pkg-1.0.tar.gz" || !sd.Yanked || sd.YankedReason != "broken & bad" {
			t.Errorf("sdist: %+v", sd)
		}
		if old := byName["my_pkg-0.9-py3-none-any.whl"]; !old.Yanked || old.YankedReason != "" {
			t.Errorf("yanked without reason: %+v", old)
		}
		for _, f := range files {
			if strings.Contains(f.URL, "#") {
				t.Errorf("URL keeps its fragment: %s", f.URL)
			}
		}
	})
}

func TestVersion(t *testing.T) {
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.add("my-pkg",
			testFile{name: "my_pkg-1.0-py3-none-any.whl", data: []byte("1")},
			testFile{name: "my_pkg-1.0-cp312-abi3-manylinux_2_17_x86_64.whl", data: []byte("2")},
			testFile{name: "My-Pkg-1.0.0.tar.gz", data: []byte("3")},
			testFile{name: "my_pkg-1.0.1-py3-none-any.whl", data: []byte("4")},
			testFile{name: "my_pkg-1.0rc1-py3-none-any.whl", data: []byte("5")},
			testFile{name: "my_pkg-1.0+cpu-py3-none-any.whl", data: []byte("6")},
			testFile{name: "my_pkg-1.0-py3.egg", data: []byte("7")},
		)
		ix := ti.client(Config{})
		for _, tc := range []struct {
			version string
			want    []string
		}{
			{"1.0", []string{"My-Pkg-1.0.0.tar.gz", "my_pkg-1.0-cp312-abi3-manylinux_2_17_x86_64.whl", "my_pkg-1.0-py3-none-any.whl"}},
			{"1.0.0", []string{"My-Pkg-1.0.0.tar.gz", "my_pkg-1.0-cp312-abi3-manylinux_2_17_x86_64.whl", "my_pkg-1.0-py3-none-any.whl"}},
			{"1.0-RC1", []string{"my_pkg-1.0rc1-py3-none-any.whl"}},
			{"1.0+CPU", []string{"my_pkg-1.0+cpu-py3-none-any.whl"}},
			{"2.0", nil},
		} {
			got, err := ix.Version(context.Background(), "my.pkg", tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if names := fileNames(got); !slices.Equal(names, tc.want) {
				t.Errorf("Version(%q) = %v, want %v", tc.version, names, tc.want)
			}
		}
	})
}

func TestFetchAndCacheHit(t *testing.T) {
	forFormats(t, func(t *testing.T, ti *testIndex) {
		local := testFile{name: "p-1.0-py3-none-any.whl", data: wheelBytes("local", 5000)}
		remote := testFile{name: "p-1.0.tar.gz", data: wheelBytes("remote", 3000), onCDN: true}
		ti.add("p", local, remote)
		cache := newCache(t)
		ix := ti.client(Config{Cache: cache})
		ctx := context.Background()
		files, err := ix.Version(ctx, "p", "1.0")
		if err != nil || len(files) != 2 {
			t.Fatalf("Version: %v, %v", fileNames(files), err)
		}
		for _, f := range files {
			p, err := ix.Fetch(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			want, _ := ti.findFile(f.Filename)
			if err != nil || !bytes.Equal(got, want.data) {
				t.Fatalf("%s: fetched bytes differ (%v)", f.Filename, err)
			}
		}
		if ti.hits["index /files/"+local.name] != 1 || ti.hits["cdn /files/"+remote.name] != 1 {
			t.Fatalf("requests: %v", ti.hits)
		}

		// Second fetch, also from a second Index on the same cache: no
		// request at all.
		before := ti.requests()
		ix2 := ti.client(Config{Cache: cache})
		for _, x := range []*Index{ix, ix2} {
			for _, f := range files {
				if _, err := x.Fetch(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := ti.requests() - before; n != 0 {
			t.Fatalf("cached fetches made %d requests", n)
		}
	})
}

func TestFetchRefused(t *testing.T) {
	good := wheelBytes("good", 1000)
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.add("p",
			testFile{name: "p-1.0-py3-none-any.whl", data: good, hash: strings.Repeat("0", 64)},
			testFile{name: "p-1.1-py3-none-any.whl", data: good, hash: "none"},
			testFile{name: "p-1.2-py3-none-any.whl", data: good, hash: "not-hex"},
			testFile{name: "p-1.3-py3-none-any.whl", data: good, onCDN: true, hash: strings.Repeat("1", 64)},
			testFile{name: "p-2.0-py3-none-any.whl", data: wheelBytes("big", 2000)},
			testFile{name: "p-2.1-py3-none-any.whl", data: wheelBytes("big", 2000), onCDN: true},
			testFile{name: "p-3.0-py3-none-any.whl", data: good, rawURL: "file:///etc/passwd"},
			testFile{name: "p-3.1-py3-none-any.whl", data: good, rawURL: "ftp://127.0.0.1/p-3.1-py3-none-any.whl"},
		)
		cache := newCache(t)
		ix := ti.client(Config{Cache: cache, MaxFileBytes: 1500})
		ctx := context.Background()
		files, err := ix.Files(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]File{}
		for _, f := range files {
			byName[f.Filename] = f
		}
		for _, tc := range []struct {
			file     string
			want     error
			requests int // at the servers, for the fetch
		}{
			{"p-1.0-py3-none-any.whl", ErrHashMismatch, 1},
			{"p-1.1-py3-none-any.whl", ErrNoHash, 0},
			{"p-1.2-py3-none-any.whl", ErrNoHash, 0},
			{"p-1.3-py3-none-any.whl", ErrHashMismatch, 1},
			{"p-2.0-py3-none-any.whl", ErrTooLarge, 1},
			{"p-2.1-py3-none-any.whl", ErrTooLarge, 1},
			{"p-3.0-py3-none-any.whl", ErrBadURL, 0},
			{"p-3.1-py3-none-any.whl", ErrBadURL, 0},
		} {
			f, ok := byName[tc.file]
			if !ok {
				t.Fatalf("%s not listed: %v", tc.file, fileNames(files))
			}
			// Twice: a refused file is not cached, so the second try asks
			// again.
			for range 2 {
				before := ti.requests()
				p, err := ix.Fetch(ctx, f)
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: Fetch = %q, %v; want %v", tc.file, p, err, tc.want)
				} else if !strings.Contains(err.Error(), tc.file) {
					t.Errorf("%s: the error does not name the file: %v", tc.file, err)
				}
				if n := ti.requests() - before; n != tc.requests {
					t.Errorf("%s: %d requests, want %d", tc.file, n, tc.requests)
				}
			}
		}
		if cache.Size() != 0 {
			t.Fatalf("refused files were cached: %d bytes", cache.Size())
		}
	})
}

// TestTooLargeStreamed: a file sent without Content-Length is cut off at
// the bound.
func TestTooLargeStreamed(t *testing.T) {
	ti := newTestIndex(t, "json")
	big := wheelBytes("stream", 10000)
	ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: big})
	ti.fileHook = func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(big); i += 1000 {
			w.Write(big[i : i+1000])
			w.(http.Flusher).Flush() // chunked: no Content-Length
		}
	}
	cache := newCache(t)
	ix := ti.client(Config{Cache: cache, MaxFileBytes: 4000})
	files, err := ix.Files(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Fetch(context.Background(), files[0]); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Fetch: %v, want ErrTooLarge", err)
	}
	if cache.Size() != 0 {
		t.Fatal("a too-large file was cached")
	}
}

func TestCredentials(t *testing.T) {
	const user, pass = "builder", "s3cret-Pa55word"
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.user, ti.pass = user, pass
		local := testFile{name: "p-1.0-py3-none-any.whl", data: wheelBytes("l", 100)}
		remote := testFile{name: "p-1.0.tar.gz", data: wheelBytes("r", 100), onCDN: true}
		redirected := testFile{name: "p-1.0-cp312-abi3-linux_x86_64.whl", data: wheelBytes("x", 100)}
		bad := testFile{name: "p-2.0-py3-none-any.whl", data: wheelBytes("m", 100), onCDN: true, hash: strings.Repeat("2", 64)}
		ti.add("p", local, remote, redirected, bad)
		// The index redirects one file to the CDN: another port on the same
		// host name, where net/http would keep the Authorization header.
		ti.fileHook = func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, redirected.name) {
				http.Redirect(w, r, ti.cdn.URL+"/files/"+redirected.name, http.StatusFound)
				return
			}
			f, _ := ti.findFile(strings.TrimPrefix(r.URL.Path, "/files/"))
			w.Write(f.data)
		}
		var logs bytes.Buffer
		ix := ti.client(Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		ctx := context.Background()
		files, err := ix.Version(ctx, "p", "1.0")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 3 {
			t.Fatalf("files %v", fileNames(files))
		}
		for _, f := range files {
			if _, err := ix.Fetch(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		ti.mu.Lock()
		wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		// The page, the local file and the first leg of the redirect.
		if len(ti.authIdx) != 3 {
			t.Errorf("the index saw %d Authorization headers, want 3", len(ti.authIdx))
		}
		for _, a := range ti.authIdx {
			if a != wantAuth {
				t.Errorf("the index saw Authorization %q", a)
			}
		}
		if len(ti.authCDN) != 0 {
			t.Errorf("the CDN received credentials: %q", ti.authCDN)
		}
		if ti.hits["cdn /files/"+redirected.name] != 1 || ti.hits["cdn /files/"+remote.name] != 1 {
			t.Errorf("the CDN was not asked: %v", ti.hits)
		}
		ti.mu.Unlock()

		// Errors that quote URLs: none of them carries the credentials.
		var errs []error
		_, err = ix.Files(ctx, "missing")
		errs = append(errs, err)
		all, _ := ix.Files(ctx, "p")
		for _, f := range all {
			if f.Filename == bad.name {
				_, err = ix.Fetch(ctx, f)
				errs = append(errs, err)
			}
		}
		ix503 := ti.client(Config{})
		ti.pageHook = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
		_, err = ix503.Files(ctx, "p")
		errs = append(errs, err)
		// The wrong password: the index answers 401.
		wrong, err := New(Config{URL: strings.Replace(ti.url(), pass, "wrong-"+pass, 1), Cache: newCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = wrong.Files(ctx, "p")
		if !errors.Is(err, ErrDenied) {
			t.Errorf("wrong password: %v, want ErrDenied", err)
		}
		errs = append(errs, err)
		closed := closedPort(t)
		ixc, err := New(Config{URL: "http://" + user + ":" + pass + "@" + closed + "/simple/", Cache: newCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ixc.Files(ctx, "p")
		errs = append(errs, err)
		for _, err := range errs {
			if err == nil {
				t.Fatal("an expected error is nil")
			}
			if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), user) {
				t.Errorf("an error carries the credentials: %v", err)
			}
		}
		if logs.Len() == 0 {
			t.Fatal("nothing was logged; the log check below would be vacuous")
		}
		if strings.Contains(logs.String(), pass) || strings.Contains(logs.String(), user) {
			t.Errorf("the log carries the credentials:\n%s", logs.String())
		}
	})
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: []byte("x"), onCDN: true})
		ix := ti.client(Config{})
		files, err := ix.Files(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}

		// The CDN goes away: the download is unreachable, naming the CDN.
		ti.cdn.Close()
		_, err = ix.Fetch(ctx, files[0])
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), ti.cdn.Listener.Addr().String()) {
			t.Errorf("Fetch from a closed CDN: %v, want ErrUnreachable naming %s", err, ti.cdn.Listener.Addr())
		}

		for _, status := range []int{http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusTooManyRequests} {
			ti.pageHook = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }
			_, err := ix.Files(ctx, "p")
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), ti.idx.Listener.Addr().String()) {
				t.Errorf("%d: %v, want ErrUnreachable naming the host", status, err)
			}
		}
	})

	t.Run("closed port", func(t *testing.T) {
		addr := closedPort(t)
		ix, err := New(Config{URL: "http://" + addr + "/simple/", Cache: newCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ix.Files(ctx, "p")
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Files: %v, want ErrUnreachable naming %s", err, addr)
		}
	})

	t.Run("stalled", func(t *testing.T) {
		ti := newTestIndex(t, "json")
		ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: wheelBytes("s", 100)})
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		ti.fileHook = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("half"))
			w.(http.Flusher).Flush()
			select { // stall until the client gives up or the test ends
			case <-r.Context().Done():
			case <-release:
			}
		}
		ix := ti.client(Config{IdleTimeout: 300 * time.Millisecond})
		files, err := ix.Files(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		_, err = ix.Fetch(ctx, files[0])
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Fetch from a stalled server: %v, want ErrUnreachable", err)
		}
	})

	t.Run("caller cancels", func(t *testing.T) {
		ti := newTestIndex(t, "json")
		cctx, cancel := context.WithCancel(ctx)
		ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		}
		_, err := ti.client(Config{}).Files(cctx, "p")
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
			t.Fatalf("Files with a cancelled context: %v, want context.Canceled and not ErrUnreachable", err)
		}
	})
}

func TestNotFound(t *testing.T) {
	forFormats(t, func(t *testing.T, ti *testIndex) {
		ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: []byte("x"), rawURL: "/files/gone.whl"})
		ix := ti.client(Config{})
		_, err := ix.Files(context.Background(), "no-such-project")
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no-such-project") {
			t.Fatalf("Files: %v, want ErrNotFound naming the project", err)
		}
		files, err := ix.Files(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Fetch(context.Background(), files[0]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Fetch of a missing file: %v, want ErrNotFound", err)
		}
	})
}

func TestPageSizeBound(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			ti := newTestIndex(t, "html")
			ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				line := []byte(`<a href="../../files/p-1.0-py3-none-any.whl#sha256=00">p-1.0-py3-none-any.whl</a>` + "\n")
				for range 200 {
					w.Write(line)
					if chunked {
						w.(http.Flusher).Flush()
					}
				}
			}
			ix := ti.client(Config{MaxPageBytes: 4096})
			_, err := ix.Files(context.Background(), "p")
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Files: %v, want ErrTooLarge", err)
			}
			// The same page within a larger bound is read.
			ix = ti.client(Config{MaxPageBytes: 1 << 20})
			if files, err := ix.Files(context.Background(), "p"); err != nil || len(files) != 200 {
				t.Fatalf("Files under the bound: %d files, %v", len(files), err)
			}
		})
	}
}

// TestPageReadStops: past the bound the client stops reading (it does not
// read a huge page whole and then refuse it): the server cannot send all of
// a 64 MiB page.
func TestPageReadStops(t *testing.T) {
	const total = 64 << 20
	ti := newTestIndex(t, "html")
	written := make(chan int, 1)
	ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		chunk := bytes.Repeat([]byte("<p>padding</p>\n"), 4096)
		n := 0
		for n < total {
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				break
			}
		}
		written <- n
	}
	ix := ti.client(Config{MaxPageBytes: 4096})
	if _, err := ix.Files(context.Background(), "p"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Files: %v, want ErrTooLarge", err)
	}
	select {
	case n := <-written:
		if n >= total {
			t.Fatalf("the client read the whole %d-byte page", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server is still writing a minute after the client gave up")
	}
}

func TestHTMLBaseAndRelative(t *testing.T) {
	ti := newTestIndex(t, "html")
	data := wheelBytes("based", 200)
	ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: data, onCDN: true})
	sum := (testFile{data: data}).sha()
	ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><head><base href="%s/files/"><base href="http://127.0.0.1:1/ignored/"></head><body>
<a href="p-1.0-py3-none-any.whl#sha256=%s">p-1.0-py3-none-any.whl</a>
<a href="../other/p-1.1.tar.gz#SHA256=%s" data-requires-python="&gt;=3.9">p-1.1.tar.gz</a>
<a href="/abs/p-1.2.zip">p-1.2.zip</a>
<a>no href</a>
<a href="http://user:pw@127.0.0.1:9/p-1.3.tar.gz">p-1.3.tar.gz</a>
<a href="download?id=4">p-1.4.tar.gz</a>
<a href="../.." >..</a>
</body></html>`, ti.cdn.URL, sum, strings.ToUpper(sum))
	}
	ix := ti.client(Config{})
	files, err := ix.Files(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"p-1.0-py3-none-any.whl": ti.cdn.URL + "/files/p-1.0-py3-none-any.whl",
		"p-1.1.tar.gz":           ti.cdn.URL + "/other/p-1.1.tar.gz",
		"p-1.2.zip":              ti.cdn.URL + "/abs/p-1.2.zip",
		"p-1.3.tar.gz":           "http://127.0.0.1:9/p-1.3.tar.gz", // user-info dropped
		"p-1.4.tar.gz":           ti.cdn.URL + "/files/download?id=4",
	}
	got := map[string]File{}
	for _, f := range files {
		got[f.Filename] = f
	}
	if len(got) != len(want) {
		t.Errorf("files %v, want %d", fileNames(files), len(want))
	}
	for name, u := range want {
		if got[name].URL != u {
			t.Errorf("%s: URL %q, want %q", name, got[name].URL, u)
		}
	}
	if f := got["p-1.1.tar.gz"]; f.Hashes["sha256"] != sum || f.RequiresPython != ">=3.9" {
		t.Errorf("p-1.1.tar.gz: %+v", f)
	}
	// The <base>-resolved file downloads from the CDN.
	p, err := ix.Fetch(context.Background(), got["p-1.0-py3-none-any.whl"])
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, data) {
		t.Fatal("fetched bytes differ")
	}
}

func TestJSONRelativeURL(t *testing.T) {
	ti := newTestIndex(t, "json")
	ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		fmt.Fprint(w, `{"meta":{"api-version":"1.0"},"name":"p","files":[
{"filename":"p-1.0.tar.gz","url":"../../files/p-1.0.tar.gz","hashes":{"SHA256":"AB"},"yanked":false},
{"filename":"p-1.1.tar.gz","url":"/x/p-1.1.tar.gz","hashes":{},"requires-python":">=3.10","yanked":"reason"},
{"filename":"../escape.tar.gz","url":"/x/e.tar.gz","hashes":{}},
{"filename":".hidden.tar.gz","url":"/x/h.tar.gz","hashes":{}}]}`)
	}
	files, err := ti.client(Config{}).Files(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %v: the bad names are not skipped", fileNames(files))
	}
	if files[0].URL != ti.idx.URL+"/files/p-1.0.tar.gz" || files[0].Hashes["sha256"] != "ab" || files[0].Yanked {
		t.Errorf("file 0: %+v", files[0])
	}
	if files[1].URL != ti.idx.URL+"/x/p-1.1.tar.gz" || !files[1].Yanked || files[1].YankedReason != "reason" || files[1].RequiresPython != ">=3.10" {
		t.Errorf("file 1: %+v", files[1])
	}
}

func TestBadPages(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string
	}{
		{"json api 2", "application/vnd.pypi.simple.v1+json", `{"meta":{"api-version":"2.0"},"files":[]}`},
		{"bad json", "application/vnd.pypi.simple.v1+json", `{"files":[`},
		{"other type", "application/octet-stream", `whatever`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ti := newTestIndex(t, "json")
			ti.pageHook = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				fmt.Fprint(w, tc.body)
			}
			_, err := ti.client(Config{}).Files(context.Background(), "p")
			if err == nil || !strings.Contains(err.Error(), "p") {
				t.Fatalf("Files: %v, want an error naming the project", err)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	ti := newTestIndex(t, "json")
	data := wheelBytes("redir", 100)
	ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: data})
	ti.fileHook = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("to") {
		case "file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "loop":
			http.Redirect(w, r, r.URL.String(), http.StatusFound)
		default:
			w.Write(data)
		}
	}
	ix := ti.client(Config{})
	f := File{Filename: "p-1.0-py3-none-any.whl", Hashes: map[string]string{"sha256": (testFile{data: data}).sha()}}
	for _, to := range []string{"file", "loop"} {
		f.URL = ti.idx.URL + "/files/p-1.0-py3-none-any.whl?to=" + to
		before := ti.requests()
		_, err := ix.Fetch(context.Background(), f)
		if !errors.Is(err, ErrBadURL) || errors.Is(err, ErrUnreachable) {
			t.Errorf("redirect to %s: %v, want ErrBadURL", to, err)
		}
		if n := ti.requests() - before; n > maxRedirects+1 {
			t.Errorf("redirect to %s: %d requests", to, n)
		}
	}
}

func TestNewAndProjectNames(t *testing.T) {
	cache := newCache(t)
	for _, tc := range []struct{ url, want string }{
		{"https://user:s3cret@host%zz/simple/", "not a valid URL"},
		{"ftp://user:s3cret@host/simple/", "http or https"},
		{"https:///simple/", "no host"},
	} {
		_, err := New(Config{URL: tc.url, Cache: cache})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): %v, want an error saying %q without the password", tc.url, err, tc.want)
		}
	}
	if _, err := New(Config{URL: "https://x/simple/"}); err == nil {
		t.Error("New without a cache succeeded")
	}
	ix, err := New(Config{Cache: cache})
	if err != nil || ix.URL() != DefaultURL {
		t.Fatalf("default URL: %v, %v", ix, err)
	}
	ix, err = New(Config{URL: "https://u:tok@example.invalid/simple", Cache: cache})
	if err != nil || ix.URL() != "https://example.invalid/simple/" {
		t.Fatalf("URL() = %q, %v", ix.URL(), err)
	}

	ti := newTestIndex(t, "json")
	ix = ti.client(Config{})
	for _, bad := range []string{"../etc", "a/b", "p%2f", "", "-", "a b"} {
		if _, err := ix.Files(context.Background(), bad); err == nil {
			t.Errorf("Files(%q) succeeded", bad)
		}
	}
	if n := ti.requests(); n != 0 {
		t.Fatalf("invalid names made %d requests", n)
	}
}

// BenchmarkParse reads a 10,000-file project page (PyPI's largest projects
// list about that many) in each format.
func BenchmarkParse(b *testing.B) {
	ti := &testIndex{t: &testing.T{}, cdn: &httptest.Server{URL: "http://127.0.0.1:1"}}
	var files []testFile
	for i := range 10000 {
		files = append(files, testFile{name: fmt.Sprintf("p-1.%d-cp312-cp312-manylinux_2_17_x86_64.whl", i), data: []byte{byte(i)}, onCDN: true, requiresPython: ">=3.9"})
	}
	page, _ := url.Parse("http://127.0.0.1:2/simple/p/")
	for _, format := range formats {
		var body []byte
		if format == "json" {
			body = ti.jsonPage("p", files)
		} else {
			body = ti.htmlPage(files)
		}
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var got []File
				var err error
				if format == "json" {
					got, err = parseJSON(body, page)
				} else {
					got, err = parseHTML(body, page)
				}
				if err != nil || len(got) != len(files) {
					b.Fatalf("%d files, %v", len(got), err)
				}
			}
		})
	}
}

// TestConcurrentFetch: callers fetching one file at once share one download.
func TestConcurrentFetch(t *testing.T) {
	const n = 5
	ti := newTestIndex(t, "json")
	data := wheelBytes("shared", 4000)
	ti.add("p", testFile{name: "p-1.0-py3-none-any.whl", data: data})
	release := make(chan struct{})
	ti.fileHook = func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Write(data)
	}
	ix := ti.client(Config{})
	files, err := ix.Files(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	sum := files[0].Hashes["sha256"]
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := ix.Fetch(context.Background(), files[0])
			errs <- err
		}()
	}
	// Release the server once the other n-1 callers wait for the first
	// (bounded: a minute).
	deadline := time.Now().Add(time.Minute)
	for {
		ix.mu.Lock()
		fl := ix.inflight[sum]
		waiting := fl != nil && fl.waiters == n-1
		ix.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("the callers did not join one download; %d requests", ti.requests())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ti.hits["index /files/p-1.0-py3-none-any.whl"]; got != 1 {
		t.Fatalf("%d downloads, want 1", got)
	}
}
