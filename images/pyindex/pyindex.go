// Package pyindex is a client of a Python package index (PEP 503 simple
// HTML or PEP 691 JSON), for the image builder: it lists a project's files,
// picks those of one pinned version, and downloads them, checked against
// the index's sha256, into a pkgcache.
//
// Everything the index sends is treated as hostile: pages and files are
// size-bounded, only http and https links and redirects are followed, and
// the index's credentials (user-info in the configured URL) go only to the
// index's own origin (scheme, host and port) — never to a files CDN the
// index links to, nor into a log line or an error.
package pyindex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/images/pkgcache"
)

// DefaultURL is the index used when Config.URL is empty.
const DefaultURL = "https://pypi.org/simple/"

// Defaults for the bounds in Config.
const (
	DefaultMaxFileBytes = 512 << 20
	DefaultMaxPageBytes = 20 << 20
	DefaultIdleTimeout  = 60 * time.Second
	maxRedirects        = 5
)

// Accept asks for PEP 691 JSON, with the HTML forms as fallbacks.
const accept = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"

// Errors (wrapped with context; match with errors.Is).
var (
	// ErrUnreachable: a network error, a timeout, a 5xx or 429 answer. The
	// caller answers 503; the build can be retried.
	ErrUnreachable = errors.New("package index unreachable")
	// ErrNotFound: the index has no such project (404/410), or no such file.
	ErrNotFound = errors.New("not found on the package index")
	// ErrDenied: the index answered 401 or 403 (check the credentials in
	// images.pip_index_url).
	ErrDenied = errors.New("package index refused access")
	// ErrNoHash: the index gives no sha256 for a file, so it cannot be
	// checked and is not installed.
	ErrNoHash = errors.New("the package index gives no sha256 for the file")
	// ErrBadURL: a file link or a redirect with a scheme other than http or
	// https, or too many redirects.
	ErrBadURL = errors.New("refused URL")
	// ErrHashMismatch and ErrTooLarge are pkgcache's, so either package's
	// name matches.
	ErrHashMismatch = pkgcache.ErrHashMismatch
	ErrTooLarge     = pkgcache.ErrTooLarge
)

// Config configures an Index.
type Config struct {
	// URL is the simple index URL (images.pip_index_url; empty: DefaultURL).
	// It may carry credentials as user-info (https://user:token@host/simple/),
	// sent as HTTP Basic auth only to the index's own origin.
	URL string
	// Cache stores downloaded files (required).
	Cache *pkgcache.Cache
	// HTTPClient sends the requests (nil: one with sane timeouts). Its
	// CheckRedirect is replaced by the index's redirect policy.
	HTTPClient *http.Client
	// MaxFileBytes is the largest file accepted (images.max_package_mib;
	// 0: DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxPageBytes is the largest index page read (0: DefaultMaxPageBytes).
	MaxPageBytes int64
	// IdleTimeout ends a request that receives nothing for this long (0:
	// DefaultIdleTimeout). There is no bound on a whole download that keeps
	// moving, other than the caller's context.
	IdleTimeout time.Duration
	// Logger gets one line per page and download (nil: discarded).
	Logger *slog.Logger
}

// File is one distribution file a project page lists.
type File struct {
	Filename string
	// URL is absolute, without user-info or fragment.
	URL string
	// Hashes maps a lower-case hash name to its value ("sha256" -> hex).
	Hashes         map[string]string
	RequiresPython string
	Yanked         bool
	YankedReason   string
}

// Index is a client of one package index. It is safe for concurrent use.
type Index struct {
	base      *url.URL // user-info removed; the path ends with "/"
	origin    string
	user      string
	pass      string
	auth      bool
	cache     *pkgcache.Cache
	client    *http.Client
	maxFile   int64
	maxPage   int64
	idle      time.Duration
	log       *slog.Logger
	userAgent string

	mu       sync.Mutex
	inflight map[string]*flight // by sha256
}

// New checks cfg and returns an Index. It sends nothing.
func New(cfg Config) (*Index, error) {
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" {
		raw = DefaultURL
	}
	// The URL may hold credentials: errors from here never quote it.
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("images.pip_index_url is not a valid URL (want https://host/simple/, optionally with user:token@ before the host)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("images.pip_index_url must be an http or https URL, not %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("images.pip_index_url has no host (want https://host/simple/)")
	}
	if cfg.Cache == nil {
		return nil, errors.New("pyindex: no cache given")
	}
	ix := &Index{
		cache:     cfg.Cache,
		maxFile:   cfg.MaxFileBytes,
		maxPage:   cfg.MaxPageBytes,
		idle:      cfg.IdleTimeout,
		log:       cfg.Logger,
		userAgent: "gateway-pyindex",
		inflight:  map[string]*flight{},
	}
	if u.User != nil {
		ix.user = u.User.Username()
		ix.pass, _ = u.User.Password()
		ix.auth = true
	}
	b := *u
	b.User = nil
	b.Fragment, b.RawFragment = "", ""
	b.RawQuery = ""
	if !strings.HasSuffix(b.Path, "/") {
		b.Path += "/"
		b.RawPath = ""
	}
	ix.base = &b
	ix.origin = origin(&b)
	if ix.maxFile <= 0 {
		ix.maxFile = DefaultMaxFileBytes
	}
	if ix.maxPage <= 0 {
		ix.maxPage = DefaultMaxPageBytes
	}
	if ix.idle <= 0 {
		ix.idle = DefaultIdleTimeout
	}
	if ix.log == nil {
		ix.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	} else {
		c = http.Client{Transport: defaultTransport()}
	}
	c.CheckRedirect = ix.checkRedirect
	ix.client = &c
	return ix, nil
}

func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 15 * time.Second
	t.ResponseHeaderTimeout = 60 * time.Second
	return t
}

// URL is the index URL without credentials, for messages.
func (ix *Index) URL() string { return ix.base.String() }

// Files lists a project's files (name normalised per PEP 503). It prefers
// PEP 691 JSON and reads PEP 503 HTML otherwise.
func (ix *Index) Files(ctx context.Context, project string) ([]File, error) {
	name := NormalizeName(project)
	if !reProjectName.MatchString(name) {
		return nil, fmt.Errorf("pyindex: %q is not a valid project name", project)
	}
	page := ix.base.ResolveReference(&url.URL{Path: name + "/"})
	body, final, ctype, err := ix.getPage(ctx, page, project)
	if err != nil {
		return nil, err
	}
	var files []File
	switch kind := pageKind(ctype); kind {
	case "json":
		files, err = parseJSON(body, final)
	case "html":
		files, err = parseHTML(body, final)
	default:
		err = fmt.Errorf("unexpected content type %q", ctype)
	}
	if err != nil {
		return nil, fmt.Errorf("pyindex: project page of %s at %s: %w", project, redact(final), err)
	}
	out := files[:0]
	for _, f := range files {
		if reason := badFilename(f.Filename); reason != "" {
			ix.log.Warn("package index lists a file with a bad name; skipped",
				"project", project, "filename", truncate(f.Filename, 100), "reason", reason)
			continue
		}
		out = append(out, f)
	}
	ix.log.Debug("package index page read", "project", project, "url", redact(final), "files", len(out))
	return out, nil
}

// Version returns the files of one exact version of the project (wheels
// and sdists), matched by the version in their file names under PEP 440
// normalisation. Yanked files are included (PEP 592: a pin may use them);
// File.Yanked says which. No file is not an error: the list is empty.
func (ix *Index) Version(ctx context.Context, project, version string) ([]File, error) {
	files, err := ix.Files(ctx, project)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, f := range files {
		if v, ok := FileVersion(project, f.Filename); ok && SameVersion(v, version) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Fetch downloads f into the cache (or finds it there) and returns its
// path, checking its sha256 from the index: a file the index gives no
// sha256 for is refused (ErrNoHash); a mismatch is refused
// (ErrHashMismatch) and not cached; a file past MaxFileBytes is refused
// (ErrTooLarge).
func (ix *Index) Fetch(ctx context.Context, f File) (path string, err error) {
	sum := strings.ToLower(strings.TrimSpace(f.Hashes["sha256"]))
	if !pkgcache.ValidHash(sum) {
		return "", fmt.Errorf("pyindex: %s: %w (refusing a file that cannot be checked)", f.Filename, ErrNoHash)
	}
	if p, ok := ix.cache.Get(sum); ok {
		return p, nil
	}
	// One download per file at a time: a second caller waits for the first
	// and then finds the file cached (or, if the first failed, tries itself).
	var mine *flight
	for mine == nil {
		ix.mu.Lock()
		other, busy := ix.inflight[sum]
		if !busy {
			mine = &flight{done: make(chan struct{})}
			ix.inflight[sum] = mine
			ix.mu.Unlock()
			break
		}
		other.waiters++
		ix.mu.Unlock()
		select {
		case <-other.done:
		case <-ctx.Done():
			return "", fmt.Errorf("pyindex: download %s: %w", f.Filename, context.Cause(ctx))
		}
		if p, ok := ix.cache.Get(sum); ok {
			return p, nil
		}
	}
	defer func() {
		ix.mu.Lock()
		delete(ix.inflight, sum)
		ix.mu.Unlock()
		close(mine.done)
	}()
	return ix.download(ctx, f, sum)
}

// flight is a download in progress.
type flight struct {
	done    chan struct{}
	waiters int // callers waiting for it (read by tests)
}

func (ix *Index) download(ctx context.Context, f File, sum string) (string, error) {
	u, err := url.Parse(f.URL)
	if err != nil {
		return "", fmt.Errorf("pyindex: %s: the file's URL is not valid: %w", f.Filename, ErrBadURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("pyindex: %s: URL scheme %q: %w (only http and https)", f.Filename, u.Scheme, ErrBadURL)
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""

	ctx, cancel, watch := ix.watchdog(ctx)
	defer cancel()
	resp, err := ix.do(ctx, u, "*/*", watch)
	if err != nil {
		return "", fmt.Errorf("pyindex: download %s: %w", f.Filename, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > ix.maxFile {
		return "", fmt.Errorf("pyindex: %s is %d bytes, more than the %d allowed (images.max_package_mib): %w",
			f.Filename, resp.ContentLength, ix.maxFile, ErrTooLarge)
	}
	body := &trackedReader{r: resp.Body, watch: watch}
	p, err := ix.cache.Put(sum, body, ix.maxFile)
	if err != nil {
		if body.err != nil {
			return "", fmt.Errorf("pyindex: download %s: %w", f.Filename,
				ix.netErr(ctx, resp.Request.URL, body.err))
		}
		if errors.Is(err, ErrTooLarge) {
			return "", fmt.Errorf("pyindex: %s: more than the %d bytes allowed (images.max_package_mib): %w", f.Filename, ix.maxFile, ErrTooLarge)
		}
		if errors.Is(err, ErrHashMismatch) {
			return "", fmt.Errorf("pyindex: %s from %s does not have the sha256 the index gives: %w", f.Filename, redact(resp.Request.URL), err)
		}
		return "", fmt.Errorf("pyindex: store %s: %w", f.Filename, err)
	}
	ix.log.Info("package downloaded", "file", f.Filename, "url", redact(resp.Request.URL), "bytes", body.n)
	return p, nil
}

// getPage fetches an index page, bounded by maxPage.
func (ix *Index) getPage(ctx context.Context, u *url.URL, project string) (body []byte, final *url.URL, ctype string, err error) {
	ctx, cancel, watch := ix.watchdog(ctx)
	defer cancel()
	resp, err := ix.do(ctx, u, accept, watch)
	if err != nil {
		return nil, nil, "", fmt.Errorf("pyindex: project %s: %w", project, err)
	}
	defer resp.Body.Close()
	final = resp.Request.URL
	if resp.ContentLength > ix.maxPage {
		return nil, nil, "", fmt.Errorf("pyindex: project page of %s at %s is %d bytes, more than %d: %w",
			project, redact(final), resp.ContentLength, ix.maxPage, ErrTooLarge)
	}
	tr := &trackedReader{r: resp.Body, watch: watch}
	body, err = io.ReadAll(io.LimitReader(tr, ix.maxPage+1))
	if err != nil {
		return nil, nil, "", fmt.Errorf("pyindex: project %s: %w", project, ix.netErr(ctx, final, err))
	}
	if int64(len(body)) > ix.maxPage {
		return nil, nil, "", fmt.Errorf("pyindex: project page of %s at %s is more than %d bytes: %w",
			project, redact(final), ix.maxPage, ErrTooLarge)
	}
	return body, final, resp.Header.Get("Content-Type"), nil
}

// errStalled is the cause a watchdog cancels a request with.
var errStalled = errors.New("no data received")

// watchdog returns a context cancelled when the returned function is not
// called for ix.idle, so a stalled server ends the request.
func (ix *Index) watchdog(parent context.Context) (context.Context, context.CancelFunc, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(ix.idle, func() { cancel(fmt.Errorf("%w for %s", errStalled, ix.idle)) })
	return ctx, func() { t.Stop(); cancel(nil) }, func() { t.Reset(ix.idle) }
}

// do sends a GET, with credentials only to the index's origin, and turns
// transport failures and error statuses into this package's errors. On
// success the caller closes the body.
func (ix *Index) do(ctx context.Context, u *url.URL, acceptHdr string, watch func()) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", redact(u), ErrBadURL)
	}
	req.Header.Set("Accept", acceptHdr)
	req.Header.Set("User-Agent", ix.userAgent)
	if ix.auth && origin(u) == ix.origin {
		req.SetBasicAuth(ix.user, ix.pass)
	}
	watch()
	resp, err := ix.client.Do(req)
	if err != nil {
		return nil, ix.netErr(ctx, u, err)
	}
	watch()
	final := resp.Request.URL
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	// The body of an error answer is not needed; drain a little so the
	// connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	what := fmt.Sprintf("%s answered %s for %s", final.Host, resp.Status, redact(final))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s: %w (check the credentials in images.pip_index_url)", what, ErrDenied)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("%s: %w", what, ErrUnreachable)
	default:
		return nil, fmt.Errorf("%s", what)
	}
}

// netErr describes a failed request by host, without the URL's query or
// any credentials.
func (ix *Index) netErr(ctx context.Context, u *url.URL, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if pu, perr := url.Parse(ue.URL); perr == nil {
			u = pu
		}
		err = ue.Err
	}
	if errors.Is(err, ErrBadURL) {
		return fmt.Errorf("GET %s: %w", redact(u), err)
	}
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, errStalled) {
			return fmt.Errorf("%s could not be reached (GET %s): %w: %w", u.Host, redact(u), ErrUnreachable, cause)
		}
		if errors.Is(cause, context.Canceled) {
			return fmt.Errorf("GET %s: %w", redact(u), cause)
		}
	}
	return fmt.Errorf("%s could not be reached (GET %s): %w: %w", u.Host, redact(u), ErrUnreachable, err)
}

// checkRedirect follows at most maxRedirects http(s) redirects, and sends
// the index's credentials only where the redirect stays on its origin.
func (ix *Index) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects: %w", maxRedirects, ErrBadURL)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect to scheme %q: %w (only http and https)", req.URL.Scheme, ErrBadURL)
	}
	// net/http keeps Authorization for the same host name on another port
	// or scheme; the index's origin is stricter.
	req.Header.Del("Authorization")
	req.URL.User = nil
	if ix.auth && origin(req.URL) == ix.origin {
		req.SetBasicAuth(ix.user, ix.pass)
	}
	return nil
}

// trackedReader feeds the watchdog and keeps the reader's own error apart
// from what the consumer does with the bytes.
type trackedReader struct {
	r     io.Reader
	watch func()
	n     int64
	err   error
}

func (t *trackedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n += int64(n)
	if n > 0 {
		t.watch()
	}
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// origin is scheme://host:port with the default port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redact renders u for a message: no user-info, query or fragment (a
// files CDN may sign its URLs in the query).
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// badFilename says why an index-supplied file name cannot be used as one.
func badFilename(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > 255:
		return "longer than 255 bytes"
	case name == "." || name == ".." || strings.HasPrefix(name, "."):
		return "starts with a dot"
	case strings.ContainsAny(name, "/\\\x00"):
		return "contains a path separator or NUL"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "contains a control character"
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..." + strconv.Itoa(len(s)-n) + " more bytes"
}
