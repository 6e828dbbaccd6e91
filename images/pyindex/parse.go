package pyindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path"
	"strings"

	"golang.org/x/net/html"
)

// pageKind tells a project page's format from its Content-Type: "json"
// (PEP 691), "html" (PEP 503, or PEP 691's HTML form), or "" for neither.
func pageKind(contentType string) string {
	if strings.TrimSpace(contentType) == "" {
		return "html" // plain static servers may send none
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	switch {
	case mt == "application/json" || strings.HasPrefix(mt, "application/vnd.pypi.simple.") && strings.HasSuffix(mt, "+json"):
		return "json"
	case mt == "text/html" || mt == "application/xhtml+xml" || strings.HasPrefix(mt, "application/vnd.pypi.simple.") && strings.HasSuffix(mt, "+html"):
		return "html"
	}
	return ""
}

// jsonPage is a PEP 691 project page (the parts used).
type jsonPage struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Files []struct {
		Filename       string            `json:"filename"`
		URL            string            `json:"url"`
		Hashes         map[string]string `json:"hashes"`
		RequiresPython *string           `json:"requires-python"`
		Yanked         json.RawMessage   `json:"yanked"`
	} `json:"files"`
}

func parseJSON(body []byte, page *url.URL) ([]File, error) {
	var p jsonPage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("not valid PEP 691 JSON: %w", err)
	}
	if v := p.Meta.APIVersion; v != "" {
		major, _, _ := strings.Cut(v, ".")
		if major != "1" {
			return nil, fmt.Errorf("PEP 691 api-version %q is not supported (want 1.x)", v)
		}
	}
	out := make([]File, 0, len(p.Files))
	for _, jf := range p.Files {
		u, err := fileURL(page, jf.URL)
		if err != nil {
			continue // a link no installer could follow either
		}
		f := File{Filename: jf.Filename, URL: u.String(), Hashes: map[string]string{}}
		for k, v := range jf.Hashes {
			f.Hashes[strings.ToLower(k)] = strings.ToLower(strings.TrimSpace(v))
		}
		if jf.RequiresPython != nil {
			f.RequiresPython = *jf.RequiresPython
		}
		if len(jf.Yanked) > 0 {
			var b bool
			var s string
			switch {
			case json.Unmarshal(jf.Yanked, &b) == nil:
				f.Yanked = b
			case json.Unmarshal(jf.Yanked, &s) == nil:
				f.Yanked, f.YankedReason = true, s
			default: // malformed: the cautious reading
				f.Yanked = true
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// anchor is an <a> of a PEP 503 page, before URLs are resolved (a <base>
// later in the page still applies to it).
type anchor struct {
	href, text     string
	requiresPython string
	yanked         bool
	yankedReason   string
}

func parseHTML(body []byte, page *url.URL) ([]File, error) {
	z := html.NewTokenizer(bytes.NewReader(body))
	base := page
	baseSeen := false
	var anchors []anchor
	var cur *anchor
	var text strings.Builder
	finish := func() {
		if cur != nil {
			cur.text = strings.TrimSpace(text.String())
			anchors = append(anchors, *cur)
			cur = nil
		}
		text.Reset()
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if err := z.Err(); !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("not readable HTML: %w", err)
			}
			finish()
			return resolveAnchors(anchors, base)
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			attrs := map[string]string{}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if _, dup := attrs[string(k)]; !dup { // the first of a repeated attribute counts, as in a browser
					attrs[string(k)] = string(v)
				}
			}
			switch string(name) {
			case "base":
				// Only the first <base href> counts (HTML spec).
				if href, ok := attrs["href"]; ok && !baseSeen {
					baseSeen = true
					b, err := page.Parse(strings.TrimSpace(href))
					if err != nil {
						return nil, fmt.Errorf("<base href> is not a valid URL")
					}
					base = b
				}
			case "a":
				finish()
				href, ok := attrs["href"]
				if !ok {
					continue
				}
				a := anchor{href: strings.TrimSpace(href), requiresPython: attrs["data-requires-python"]}
				if r, ok := attrs["data-yanked"]; ok {
					a.yanked, a.yankedReason = true, r
				}
				cur = &a
				if tt == html.SelfClosingTagToken {
					finish()
				}
			}
		case html.TextToken:
			if cur != nil && text.Len() < 4096 {
				text.Write(z.Text())
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "a" {
				finish()
			}
		}
	}
}

func resolveAnchors(anchors []anchor, base *url.URL) ([]File, error) {
	out := make([]File, 0, len(anchors))
	for _, a := range anchors {
		u, err := url.Parse(a.href)
		if err != nil {
			continue // a link no installer could follow either
		}
		f := File{RequiresPython: a.requiresPython, Yanked: a.yanked, YankedReason: a.yankedReason, Hashes: map[string]string{}}
		// PEP 503: the fragment is <hashname>=<hashvalue>.
		if k, v, ok := strings.Cut(u.Fragment, "="); ok && k != "" {
			f.Hashes[strings.ToLower(k)] = strings.ToLower(strings.TrimSpace(v))
		}
		fu, err := fileURL(base, a.href)
		if err != nil {
			continue
		}
		f.URL = fu.String()
		// The file name is the URL's last path segment, as pip takes it; the
		// anchor's text when the URL has no usable one.
		f.Filename = path.Base(fu.Path)
		if _, isDist := distKind(f.Filename); !isDist {
			if _, textIsDist := distKind(a.text); textIsDist {
				f.Filename = a.text
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// fileURL resolves a file link against the page it is on, without
// user-info or fragment. A scheme other than http(s) is kept here and
// refused by Fetch, so that the caller can say why a file was not used.
func fileURL(base *url.URL, href string) (*url.URL, error) {
	u, err := base.Parse(href)
	if err != nil {
		return nil, errors.New("URL is not valid")
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// distKind says whether a file name is a wheel or an sdist.
func distKind(filename string) (string, bool) {
	if strings.HasSuffix(filename, ".whl") {
		return "wheel", true
	}
	for _, ext := range sdistExts {
		if strings.HasSuffix(filename, ext) {
			return "sdist", true
		}
	}
	return "", false
}
