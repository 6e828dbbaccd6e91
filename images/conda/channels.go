// Package conda installs conda packages into image layers without conda:
// it finds a client's exact builds in the configured channels'
// repodata.json, downloads them into the package cache with their sha256
// checked, and unpacks each .conda or .tar.bz2 into a deterministic layer
// tar of its own, with the prefix rewritten the way conda does it and the
// conda-meta record conda would write.
//
// Everything read from a channel is hostile until checked: repodata and
// packages are read with size bounds, archive paths must stay inside the
// prefix, and channel credentials never appear in errors.
package conda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/pkgcache"
)

// ConfigKey is the configuration key that lists the channels; errors about
// a channel that is not configured name it.
const ConfigKey = "images.conda_channels"

// Default bounds.
const (
	DefaultMaxPackageBytes  = 512 << 20
	DefaultMaxRepodataBytes = 1 << 30
)

// Errors (wrapped; match with errors.Is).
var (
	// ErrUnknownChannel: a package's channel is not in images.conda_channels.
	ErrUnknownChannel = errors.New("conda channel not configured")
	// ErrNotFound: the channel does not have the exact build.
	ErrNotFound = errors.New("conda package not in channel")
	// ErrUnreachable: a channel could not be reached or answered an error.
	ErrUnreachable = errors.New("conda channel unreachable")
	// ErrBadPackage: a package file or its repodata entry is refused.
	ErrBadPackage = errors.New("conda package refused")
)

// Config configures Channels.
type Config struct {
	// Channels maps a channel as clients write it ("conda-forge",
	// "pkgs/main", or a URL) to its base URL, under which
	// <subdir>/repodata.json and the package files are. The URL may carry
	// credentials (https://user:password@host/...); they are sent as basic
	// authentication and never appear in errors.
	Channels map[string]string
	// Cache holds downloaded packages by sha256. Required.
	Cache *pkgcache.Cache
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
	// MaxPackageBytes bounds one package file (default 512 MiB).
	MaxPackageBytes int64
	// MaxRepodataBytes bounds one repodata.json (default 1 GiB; conda-forge's
	// linux-64 is a few hundred MB).
	MaxRepodataBytes int64
}

// Channels resolves and fetches conda packages from configured channels.
type Channels struct {
	cfg      Config
	channels map[string]*url.URL
}

// Artifact is one package file in a channel.
type Artifact struct {
	Name, Version, Build, Subdir string
	// Channel is the channel as the spec names it (the images.conda_channels
	// key).
	Channel  string
	Filename string
	// URL is the file's URL; it may carry the channel's credentials, so
	// print Redacted(URL), never URL.
	URL    string
	SHA256 string
	MD5    string
	Size   int64
}

// New checks the configuration and returns Channels.
func New(cfg Config) (*Channels, error) {
	if cfg.Cache == nil {
		return nil, errors.New("conda: a package cache is required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.MaxPackageBytes <= 0 {
		cfg.MaxPackageBytes = DefaultMaxPackageBytes
	}
	if cfg.MaxRepodataBytes <= 0 {
		cfg.MaxRepodataBytes = DefaultMaxRepodataBytes
	}
	c := &Channels{cfg: cfg, channels: make(map[string]*url.URL, len(cfg.Channels))}
	for name, raw := range cfg.Channels {
		key := strings.TrimRight(strings.TrimSpace(name), "/")
		if key == "" {
			return nil, fmt.Errorf("%s: a channel has an empty name", ConfigKey)
		}
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%s: channel %q: url %s is not an http(s) URL without query", ConfigKey, key, Redacted(raw))
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		c.channels[key] = u
	}
	return c, nil
}

// reToken is an anaconda.org token path segment.
var reToken = regexp.MustCompile(`/t/[^/]+`)

// Redacted returns a URL without its password, user or /t/<token>/ path
// segment, for errors and logs.
func Redacted(raw string) string {
	s := raw
	// By hand rather than with url.Parse, which fails on some malformed
	// user info (and a failed parse must not leak it).
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		host, path, hasPath := strings.Cut(rest, "/")
		if j := strings.LastIndex(host, "@"); j >= 0 {
			s = raw[:i+3] + host[j+1:]
			if hasPath {
				s += "/" + path
			}
		}
	}
	return reToken.ReplaceAllString(s, "/t/***")
}

// record is one repodata entry, with only the fields used.
type record struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Build   string `json:"build"`
	Subdir  string `json:"subdir"`
	SHA256  string `json:"sha256"`
	MD5     string `json:"md5"`
	Size    int64  `json:"size"`
}

var (
	reSHA256   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reFilename = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*\.(conda|tar\.bz2)$`)
)

// Resolve finds package p of the environment spec (whose platform picks the
// subdir and whose channels are tried, in priority order, when p names
// none) in <channel>/<subdir>/repodata.json ("packages" and
// "packages.conda"), trying p's subdir, or the platform's and then noarch.
// The exact build is required; a .conda file is preferred over .tar.bz2.
func (c *Channels) Resolve(ctx context.Context, spec images.Spec, p images.Package) (Artifact, error) {
	as, err := c.ResolveAll(ctx, spec, []images.Package{p})
	if err != nil {
		return Artifact{}, err
	}
	return as[0], nil
}

// ResolveAll resolves several packages of one spec, reading each
// repodata.json once. The artifacts are in the order of pkgs.
func (c *Channels) ResolveAll(ctx context.Context, spec images.Spec, pkgs []images.Package) ([]Artifact, error) {
	platSubdir := images.CondaSubdir(spec.Platform)
	if platSubdir == "" {
		return nil, fmt.Errorf("conda: platform %q has no conda subdir", spec.Platform)
	}
	type want struct {
		pkg    images.Package
		places []place
	}
	wants := make([]want, len(pkgs))
	byPlace := map[place]map[string]bool{} // names wanted from each repodata
	var order []place
	for i, p := range pkgs {
		if !p.Conda() {
			return nil, fmt.Errorf("conda: package %s %s has no conda build", p.Name, p.Version)
		}
		ch, err := images.NormalizeChannel(p.Channel)
		if err != nil {
			return nil, fmt.Errorf("conda package %s %s: %w", p.Name, p.Version, err)
		}
		chans := []string{ch}
		if ch == "" {
			chans = nil
			for _, sc := range spec.Channels {
				n, err := images.NormalizeChannel(sc)
				if err != nil {
					return nil, fmt.Errorf("conda package %s %s: %w", p.Name, p.Version, err)
				}
				chans = append(chans, n)
			}
			if len(chans) == 0 {
				return nil, fmt.Errorf("%w: conda package %s %s=%s names no channel and the environment lists none", ErrNotFound, p.Name, p.Version, p.Build)
			}
		}
		subdirs := []string{platSubdir, images.SubdirNoarch}
		if p.Subdir != "" {
			subdirs = []string{p.Subdir}
		}
		for _, ch := range chans {
			if _, ok := c.channels[ch]; !ok {
				return nil, fmt.Errorf("%w: conda package %s %s=%s comes from channel %q, which is not configured; add it to %s (name and url)",
					ErrUnknownChannel, p.Name, p.Version, p.Build, ch, ConfigKey)
			}
			for _, sd := range subdirs {
				pl := place{ch, sd}
				if byPlace[pl] == nil {
					byPlace[pl] = map[string]bool{}
					order = append(order, pl)
				}
				byPlace[pl][p.Name] = true
				wants[i].places = append(wants[i].places, pl)
			}
		}
		wants[i].pkg = p
	}
	found := map[place]map[string][]fileRecord{}
	for _, pl := range order {
		recs, err := c.repodata(ctx, pl.channel, pl.subdir, byPlace[pl])
		if err != nil {
			return nil, err
		}
		found[pl] = recs
	}
	out := make([]Artifact, len(pkgs))
	for i, w := range wants {
		p := w.pkg
		var a *Artifact
		var builds, versions []string
	places:
		// Places are in priority order (channel, then subdir), and each
		// place's files have .conda first: the first match wins.
		for _, pl := range w.places {
			for _, fr := range found[pl][p.Name] {
				if fr.rec.Version != p.Version {
					versions = appendNew(versions, fr.rec.Version)
					continue
				}
				if fr.rec.Build != p.Build {
					builds = appendNew(builds, fr.rec.Build)
					continue
				}
				art, err := c.artifact(pl.channel, pl.subdir, fr)
				if err != nil {
					return nil, err
				}
				a = &art
				break places
			}
		}
		if a == nil {
			where := describePlaces(w.places)
			switch {
			case len(builds) > 0:
				slices.Sort(builds)
				return nil, fmt.Errorf("%w: conda package %s %s build %s is not in %s; it has builds %s of that version",
					ErrNotFound, p.Name, p.Version, p.Build, where, strings.Join(builds, ", "))
			case len(versions) > 0:
				slices.Sort(versions)
				return nil, fmt.Errorf("%w: conda package %s %s (build %s) is not in %s; it has versions %s",
					ErrNotFound, p.Name, p.Version, p.Build, where, strings.Join(versions, ", "))
			}
			return nil, fmt.Errorf("%w: conda package %s %s (build %s): %s has no package %s", ErrNotFound, p.Name, p.Version, p.Build, where, p.Name)
		}
		out[i] = *a
	}
	return out, nil
}

// place is one repodata.json: a channel's subdir.
type place struct{ channel, subdir string }

func describePlaces(ps []place) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, p.channel+"/"+p.subdir)
	}
	return "channel " + strings.Join(parts, ", ")
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

type fileRecord struct {
	filename string
	rec      record
}

func (c *Channels) artifact(channel, subdir string, fr fileRecord) (Artifact, error) {
	what := fmt.Sprintf("conda package %s %s=%s (%s/%s)", fr.rec.Name, fr.rec.Version, fr.rec.Build, channel, subdir)
	if !reFilename.MatchString(fr.filename) {
		return Artifact{}, fmt.Errorf("%w: %s: repodata names file %q, which is not a package file name", ErrBadPackage, what, fr.filename)
	}
	sha := strings.ToLower(fr.rec.SHA256)
	if !reSHA256.MatchString(sha) {
		return Artifact{}, fmt.Errorf("%w: %s: repodata gives no sha256 for %s, so it cannot be checked", ErrBadPackage, what, fr.filename)
	}
	if fr.rec.Size < 0 || fr.rec.Size > c.cfg.MaxPackageBytes {
		return Artifact{}, fmt.Errorf("%w: %s: %s is %d bytes, more than the limit of %d (images.max_package_mib)", ErrBadPackage, what, fr.filename, fr.rec.Size, c.cfg.MaxPackageBytes)
	}
	u := *c.channels[channel]
	u.Path += "/" + subdir + "/" + fr.filename
	return Artifact{
		Name: fr.rec.Name, Version: fr.rec.Version, Build: fr.rec.Build, Subdir: subdir, Channel: channel,
		Filename: fr.filename, URL: u.String(), SHA256: sha, MD5: fr.rec.MD5, Size: fr.rec.Size,
	}, nil
}

// repodata streams <channel>/<subdir>/repodata.json and returns the entries
// of the wanted names, by name. Only wanted entries are kept, so a large
// channel costs time, not memory.
func (c *Channels) repodata(ctx context.Context, channel, subdir string, names map[string]bool) (map[string][]fileRecord, error) {
	u := *c.channels[channel]
	u.Path += "/" + subdir + "/repodata.json"
	body, err := c.get(ctx, &u)
	if err != nil {
		return nil, fmt.Errorf("conda channel %s (%s): %w", channel, subdir, err)
	}
	defer body.Close()
	lr := &limitReader{r: body, n: c.cfg.MaxRepodataBytes}
	out := map[string][]fileRecord{}
	if err := decodeRepodata(lr, names, out); err != nil {
		if lr.over {
			return nil, fmt.Errorf("%w: conda channel %s: %s/repodata.json is larger than %d bytes", ErrUnreachable, channel, subdir, c.cfg.MaxRepodataBytes)
		}
		return nil, fmt.Errorf("%w: conda channel %s: %s/repodata.json: %v", ErrBadPackage, channel, subdir, err)
	}
	for _, frs := range out {
		// Deterministic choice whatever the JSON order: .conda first, then
		// by file name.
		slices.SortFunc(frs, func(a, b fileRecord) int {
			ac, bc := strings.HasSuffix(a.filename, ".conda"), strings.HasSuffix(b.filename, ".conda")
			if ac != bc {
				if ac {
					return -1
				}
				return 1
			}
			return strings.Compare(a.filename, b.filename)
		})
	}
	return out, nil
}

// decodeRepodata reads the top-level object token by token, decoding only
// the entries of "packages" and "packages.conda".
func decodeRepodata(r io.Reader, names map[string]bool, out map[string][]fileRecord) error {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if key != "packages" && key != "packages.conda" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if err := expectDelim(dec, '{'); err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			fn, _ := tok.(string)
			var rec record
			if err := dec.Decode(&rec); err != nil {
				return fmt.Errorf("%q: %w", fn, err)
			}
			if names[rec.Name] && rec.Version != "" && rec.Build != "" {
				out[rec.Name] = append(out[rec.Name], fileRecord{filename: fn, rec: rec})
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("want a JSON object, found %v", tok)
	}
	return nil
}

// get issues a GET, with a URL's credentials sent as basic authentication;
// errors carry the redacted URL only.
func (c *Channels) get(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	clean := *u
	user := clean.User
	clean.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clean.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, Redacted(clean.String()), err)
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: GET %s: %v", ErrUnreachable, Redacted(clean.String()), err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: GET %s: %s", ErrUnreachable, Redacted(clean.String()), resp.Status)
	}
	return resp.Body, nil
}

// Fetch returns the path of the artifact's file in the cache, downloading it
// first if the cache lacks it; the sha256 and size are checked while it is
// written, and nothing is cached when they do not match.
func (c *Channels) Fetch(ctx context.Context, a Artifact) (string, error) {
	what := fmt.Sprintf("conda package %s %s=%s (%s)", a.Name, a.Version, a.Build, a.Filename)
	sha := strings.ToLower(a.SHA256)
	if !reSHA256.MatchString(sha) {
		return "", fmt.Errorf("%w: %s: no valid sha256 to check it against", ErrBadPackage, what)
	}
	if p, ok := c.cfg.Cache.Get(sha); ok {
		return p, nil
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return "", fmt.Errorf("%w: %s: bad URL %s", ErrBadPackage, what, Redacted(a.URL))
	}
	body, err := c.get(ctx, u)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer body.Close()
	p, err := c.cfg.Cache.Put(sha, body, c.cfg.MaxPackageBytes)
	switch {
	case errors.Is(err, pkgcache.ErrHashMismatch):
		return "", fmt.Errorf("%w: %s: the download does not have the sha256 the channel's repodata gives (%s): %v", ErrBadPackage, what, sha, err)
	case errors.Is(err, pkgcache.ErrTooLarge):
		return "", fmt.Errorf("%w: %s: larger than the limit of %d bytes (images.max_package_mib)", ErrBadPackage, what, c.cfg.MaxPackageBytes)
	case err != nil:
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return p, nil
}

// limitReader fails once more than n bytes have been read.
type limitReader struct {
	r    io.Reader
	n    int64
	over bool
}

var errTooLarge = errors.New("size limit passed")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		l.over = true
		return 0, errTooLarge
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		l.over = true
		return n, errTooLarge
	}
	return n, err
}
