package conda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/pkgcache"
)

func newCache(t *testing.T) *pkgcache.Cache {
	t.Helper()
	c, err := pkgcache.New(t.TempDir(), 64<<20)
	mustNil(t, err)
	return c
}

func newChans(t *testing.T, cfg Config) *Channels {
	t.Helper()
	c, err := New(cfg)
	mustNil(t, err)
	return c
}

// testChannels serves two channels: "conda-forge" (prefixed 2.0 as .conda
// and .tar.bz2, hello noarch) and "extra" (a package only it has).
func testChannels(t *testing.T) (*Channels, *channel, *channel, *pkgcache.Cache) {
	t.Helper()
	forge, extra := newChannel(t), newChannel(t)
	p := prefixedPkg()
	forge.add("linux-64", p.filename(".conda"), p, condaFile(t, p))
	forge.add("linux-64", p.filename(".tar.bz2"), p, tarBz2File(t, p))
	other := prefixedPkg()
	other.build = "h7654321_1"
	forge.add("linux-64", other.filename(".conda"), other, condaFile(t, other))
	older := prefixedPkg()
	older.version, older.build = "1.0", "h0_0"
	forge.add("linux-64", older.filename(".conda"), older, condaFile(t, older))
	n := noarchPkg()
	forge.add("noarch", n.filename(".conda"), n, condaFile(t, n))
	only := prefixedPkg()
	only.name = "onlyextra"
	extra.add("linux-64", only.filename(".tar.bz2"), only, tarBz2File(t, only))
	cache := newCache(t)
	c, err := New(Config{Channels: map[string]string{"conda-forge": forge.srv.URL + "/", "extra": extra.srv.URL}, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return c, forge, extra, cache
}

func spec(channels ...string) images.Spec {
	return images.Spec{Python: "3.12", Platform: "linux/amd64", Channels: channels}
}

func TestResolve(t *testing.T) {
	c, forge, extra, _ := testChannels(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		spec    images.Spec
		pkg     images.Package
		wantURL string // relative to the channel
		srv     *channel
	}{
		{"exact build, .conda preferred", spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0", Channel: "conda-forge", Subdir: "linux-64"},
			"/linux-64/prefixed-2.0-h1234567_0.conda", forge},
		{"other build of the same version", spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h7654321_1", Channel: "conda-forge"},
			"/linux-64/prefixed-2.0-h7654321_1.conda", forge},
		{"noarch after the platform's subdir", spec("conda-forge"), images.Package{Name: "hello", Version: "1.0", Build: "pyhd8ed1ab_0"},
			"/noarch/hello-1.0-pyhd8ed1ab_0.conda", forge},
		{"second channel of the spec", spec("conda-forge", "extra"), images.Package{Name: "onlyextra", Version: "2.0", Build: "h1234567_0"},
			"/linux-64/onlyextra-2.0-h1234567_0.tar.bz2", extra},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := c.Resolve(ctx, tt.spec, tt.pkg)
			if err != nil {
				t.Fatal(err)
			}
			if a.URL != tt.srv.srv.URL+tt.wantURL || a.Name != tt.pkg.Name || a.Build != tt.pkg.Build || len(a.SHA256) != 64 || a.Size <= 0 {
				t.Errorf("Resolve = %+v, want URL %s", a, tt.srv.srv.URL+tt.wantURL)
			}
		})
	}

	errTests := []struct {
		name  string
		spec  images.Spec
		pkg   images.Package
		is    error
		wants []string
	}{
		{"wrong build", spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h0000000_9", Channel: "conda-forge"}, ErrNotFound,
			[]string{"conda package prefixed 2.0 build h0000000_9 is not in channel conda-forge/linux-64, conda-forge/noarch; it has builds h1234567_0, h7654321_1 of that version"}},
		{"wrong version", spec("conda-forge"), images.Package{Name: "prefixed", Version: "3.0", Build: "h1234567_0"}, ErrNotFound,
			[]string{"conda package prefixed 3.0 (build h1234567_0) is not in channel conda-forge/linux-64, conda-forge/noarch; it has versions 1.0, 2.0"}},
		{"no such package", spec("conda-forge"), images.Package{Name: "nothere", Version: "1", Build: "0"}, ErrNotFound,
			[]string{"has no package nothere"}},
		{"subdir given", spec("conda-forge"), images.Package{Name: "hello", Version: "1.0", Build: "pyhd8ed1ab_0", Subdir: "linux-64"}, ErrNotFound,
			[]string{"channel conda-forge/linux-64 has no package hello"}},
		{"unknown channel", spec("conda-forge"), images.Package{Name: "numpy", Version: "2.0.1", Build: "py312_0", Channel: "bioconda"}, ErrUnknownChannel,
			[]string{`channel "bioconda", which is not configured; add it to images.conda_channels`}},
		{"unknown channel from the spec", spec("conda-forge", "mine"), images.Package{Name: "numpy", Version: "2.0.1", Build: "py312_0"}, ErrUnknownChannel,
			[]string{`channel "mine"`, "images.conda_channels"}},
		{"no channel at all", spec(), images.Package{Name: "numpy", Version: "2.0.1", Build: "py312_0"}, ErrNotFound,
			[]string{"names no channel and the environment lists none"}},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Resolve(ctx, tt.spec, tt.pkg)
			if !errors.Is(err, tt.is) {
				t.Fatalf("Resolve = %v, want %v", err, tt.is)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}

	// ResolveAll reads each repodata.json once.
	before := forge.hitCount("linux-64/repodata.json")
	as, err := c.ResolveAll(ctx, spec("conda-forge"), []images.Package{
		{Name: "prefixed", Version: "2.0", Build: "h1234567_0"}, {Name: "prefixed", Version: "1.0", Build: "h0_0"}, {Name: "hello", Version: "1.0", Build: "pyhd8ed1ab_0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 3 || as[1].Version != "1.0" || as[2].Subdir != "noarch" {
		t.Errorf("ResolveAll = %+v", as)
	}
	if n := forge.hitCount("linux-64/repodata.json") - before; n != 1 {
		t.Errorf("repodata.json read %d times, want 1", n)
	}
}

func TestFetchAndCache(t *testing.T) {
	c, forge, _, cache := testChannels(t)
	ctx := context.Background()
	a, err := c.Resolve(ctx, spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Fetch(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if want := forge.files["linux-64/"+a.Filename]; !bytes.Equal(got, want) {
		t.Error("fetched file differs from the channel's")
	}
	if p2, err := c.Fetch(ctx, a); err != nil || p2 != p {
		t.Errorf("second Fetch = %s, %v", p2, err)
	}
	if n := forge.hitCount("linux-64/" + a.Filename); n != 1 {
		t.Errorf("package downloaded %d times, want 1 (then from the cache)", n)
	}
	// The fetched file makes a layer.
	if _, err := WriteLayer(p, a, prefix, "", Limits{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}

	// A file that does not have the repodata's hash is refused and not
	// cached.
	bad := a
	bad.Build = "h7654321_1"
	bad.Filename = "prefixed-2.0-h7654321_1.conda"
	bad.URL = forge.srv.URL + "/linux-64/" + bad.Filename
	forge.mu.Lock()
	forge.override["linux-64/"+bad.Filename] = []byte("PK\x03\x04 tampered")
	forge.mu.Unlock()
	bad.SHA256 = sha(forge.files["linux-64/"+bad.Filename])
	_, err = c.Fetch(ctx, bad)
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "conda package prefixed 2.0=h7654321_1") || !strings.Contains(err.Error(), "does not have the sha256") {
		t.Errorf("Fetch of a tampered file = %v", err)
	}
	if _, ok := cache.Get(bad.SHA256); ok {
		t.Error("a tampered file was cached")
	}
}

func TestFetchTooLarge(t *testing.T) {
	forge := newChannel(t)
	p := prefixedPkg()
	b := condaFile(t, p)
	forge.add("linux-64", p.filename(".conda"), p, b)
	c := newChans(t, Config{Channels: map[string]string{"conda-forge": forge.srv.URL}, Cache: newCache(t), MaxPackageBytes: 100})
	ctx := context.Background()
	_, err := c.Resolve(ctx, spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0"})
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "more than the limit of 100") {
		t.Errorf("Resolve of a package over the limit = %v", err)
	}
	// A channel whose repodata understates the size: bounded while reading.
	a := Artifact{Name: p.name, Version: p.version, Build: p.build, Filename: p.filename(".conda"), URL: forge.srv.URL + "/linux-64/" + p.filename(".conda"), SHA256: sha(b), Size: 10}
	if _, err := c.Fetch(ctx, a); !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "larger than the limit of 100 bytes") {
		t.Errorf("Fetch of a file over the limit = %v", err)
	}
}

func TestRepodataBounds(t *testing.T) {
	forge := newChannel(t)
	forge.override["linux-64/repodata.json"] = []byte(`{"packages": {"x.tar.bz2": {"name": "x"` + strings.Repeat(" ", 4096) + `}}}`)
	forge.override["noarch/repodata.json"] = []byte(`{"packages": {}}`)
	c := newChans(t, Config{Channels: map[string]string{"conda-forge": forge.srv.URL}, Cache: newCache(t), MaxRepodataBytes: 1024})
	_, err := c.Resolve(context.Background(), spec("conda-forge"), images.Package{Name: "x", Version: "1", Build: "0"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "linux-64/repodata.json is larger than 1024 bytes") {
		t.Errorf("Resolve with a huge repodata = %v", err)
	}
	forge.override["linux-64/repodata.json"] = []byte(`{"packages": [1, 2]}`)
	c = newChans(t, Config{Channels: map[string]string{"conda-forge": forge.srv.URL}, Cache: newCache(t)})
	if _, err := c.Resolve(context.Background(), spec("conda-forge"), images.Package{Name: "x", Version: "1", Build: "0"}); !errors.Is(err, ErrBadPackage) {
		t.Errorf("Resolve with malformed repodata = %v", err)
	}
	// A repodata entry without a sha256 cannot be checked.
	forge.override["linux-64/repodata.json"] = []byte(`{"packages": {"x-1-0.tar.bz2": {"name": "x", "version": "1", "build": "0", "md5": "00", "size": 5}}}`)
	if _, err := c.Resolve(context.Background(), spec("conda-forge"), images.Package{Name: "x", Version: "1", Build: "0"}); !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "gives no sha256") {
		t.Errorf("Resolve without sha256 = %v", err)
	}
	// A file name that is a path.
	forge.override["linux-64/repodata.json"] = []byte(`{"packages": {"../../x-1-0.tar.bz2": {"name": "x", "version": "1", "build": "0", "sha256": "` + strings.Repeat("a", 64) + `", "size": 5}}}`)
	if _, err := c.Resolve(context.Background(), spec("conda-forge"), images.Package{Name: "x", Version: "1", Build: "0"}); !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "not a package file name") {
		t.Errorf("Resolve with a path file name = %v", err)
	}
}

func TestChannelCredentials(t *testing.T) {
	forge := newChannel(t)
	forge.auth = "alice:s3cret-pw"
	p := prefixedPkg()
	forge.add("linux-64", p.filename(".conda"), p, condaFile(t, p))
	withCreds := strings.Replace(forge.srv.URL, "http://", "http://alice:s3cret-pw@", 1)
	c := newChans(t, Config{Channels: map[string]string{"conda-forge": withCreds}, Cache: newCache(t)})
	ctx := context.Background()
	a, err := c.Resolve(ctx, spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0"})
	if err != nil {
		t.Fatalf("Resolve with credentials: %v", err)
	}
	path, err := c.Fetch(ctx, a)
	if err != nil {
		t.Fatalf("Fetch with credentials: %v", err)
	}
	var layer bytes.Buffer
	if _, err := WriteLayer(path, a, prefix, "", Limits{}, &layer); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(layer.Bytes(), []byte("s3cret-pw")) {
		t.Error("the layer (conda-meta url) carries the channel password")
	}

	// Wrong credentials, an unreachable channel: the errors say what could
	// not be reached, without the password.
	wrong := strings.Replace(forge.srv.URL, "http://", "http://alice:wrong-pw@", 1)
	c = newChans(t, Config{Channels: map[string]string{"conda-forge": wrong, "gone": "http://bob:gone-pw@127.0.0.1:1/t/tok-987/x"}, Cache: newCache(t)})
	_, err = c.Resolve(ctx, spec("conda-forge"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("Resolve with wrong credentials = %v", err)
	}
	_, err = c.Resolve(ctx, spec("gone"), images.Package{Name: "prefixed", Version: "2.0", Build: "h1234567_0"})
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "gone-pw") || strings.Contains(err.Error(), "tok-987") || strings.Contains(err.Error(), "bob") {
		t.Errorf("Resolve of an unreachable channel = %v", err)
	}
	if !strings.Contains(err.Error(), "http://127.0.0.1:1/t/***/x/linux-64/repodata.json") {
		t.Errorf("error %q does not say what could not be reached", err)
	}
	// A bad URL in the configuration is reported without its password.
	_, err = New(Config{Channels: map[string]string{"x": "ftp://carol:ftp-pw@host/c"}, Cache: newCache(t)})
	if err == nil || strings.Contains(err.Error(), "ftp-pw") || !strings.Contains(err.Error(), "images.conda_channels") {
		t.Errorf("New with an ftp URL = %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a cache succeeded")
	}
}

func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@host/c":                "https://host/c",
		"https://host/t/abc123/c/linux-64":  "https://host/t/***/c/linux-64",
		"https://u@host":                    "https://host",
		"https://host/c":                    "https://host/c",
		"https://u:p%zz@host/c/t/tok/x.bz2": "https://host/c/t/***/x.bz2",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkResolveLargeRepodata resolves one package from a 200,000-entry
// repodata.json served on loopback (conda-forge's linux-64 has about a
// million entries).
func BenchmarkResolveLargeRepodata(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"info":{"subdir":"linux-64"},"packages":{`)
	for i := 0; i < 200_000; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `"pkg%d-1.0-h%07d_0.tar.bz2":{"name":"pkg%d","version":"1.0","build":"h%07d_0","build_number":0,"depends":["libgcc-ng >=12","python >=3.10,<3.13.0a0","python_abi 3.12.* *_cp312"],"license":"MIT","md5":"0123456789abcdef0123456789abcdef","sha256":"%064d","size":12345,"subdir":"linux-64","timestamp":1700000000000}`, i%5000, i, i%5000, i, i)
	}
	buf.WriteString(`},"packages.conda":{},"repodata_version":1}`)
	body := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/repodata.json") {
			w.Write(body)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	cache, err := pkgcache.New(b.TempDir(), 1<<20)
	mustNil(b, err)
	c, err := New(Config{Channels: map[string]string{"conda-forge": srv.URL}, Cache: cache})
	mustNil(b, err)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := c.Resolve(context.Background(), spec("conda-forge"), images.Package{Name: "pkg42", Version: "1.0", Build: "h0000042_0", Subdir: "linux-64"})
		mustNil(b, err)
	}
}
