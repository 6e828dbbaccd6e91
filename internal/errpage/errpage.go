// Package errpage answers the gateway's own errors in the form the client
// asked for: a short HTML page for a browser, JSON for everything else.
// The sign-in pages and the dashboard proxy are opened by people in
// browsers; the same URLs are also used by API clients and scripts.
package errpage

import (
	"encoding/json"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// WantsHTML reports whether the request's Accept header lists text/html
// (browsers' navigations do; API clients and fetch() calls do not), with a
// non-zero quality.
func WantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "text/html" {
			continue
		}
		if q, ok := params["q"]; ok {
			f, err := strconv.ParseFloat(q, 64)
			return err == nil && f > 0
		}
		return true
	}
	return false
}

// Error is one answer: the JSON fields every API error has, plus the
// page's heading and a hint that says what to do next.
type Error struct {
	Status  int
	Code    string
	Message string
	Title   string // page heading; defaults to the status text
	Hint    string // what the person can do about it; optional
	// Command is a command to run (shown apart, to copy); optional.
	Command string
	// Links are pages that do work, under LinksTitle; optional.
	Links      []Link
	LinksTitle string
}

// Link is one link of an error page.
type Link struct{ Text, Href string }

// Write answers e as HTML if the request asked for it, else as the API's
// JSON error ({"error", "code", "message"}). Either way it is not cached.
func Write(w http.ResponseWriter, r *http.Request, e Error) {
	w.Header().Set("Cache-Control", "no-store")
	if !WantsHTML(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		m := map[string]string{"error": e.Message, "code": e.Code, "message": e.Message}
		if e.Command != "" {
			m["fix"] = e.Command
		}
		_ = enc.Encode(m)
		return
	}
	if e.Title == "" {
		e.Title = http.StatusText(e.Status)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page has no scripts, images or forms of its own.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_ = page.Execute(w, e)
}

var page = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - gateway</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
<h1>{{.Title}}</h1>
<p id="message">{{.Message}}</p>
{{if .Hint}}<p id="hint">{{.Hint}}</p>{{end}}
{{if .Command}}<pre style="background: #eee; padding: .5em; white-space: pre-wrap"><code id="command">{{.Command}}</code></pre>{{end}}
{{if .Links}}<p>{{.LinksTitle}}</p><ul id="links">{{range .Links}}<li><a href="{{.Href}}">{{.Text}}</a></li>{{end}}</ul>{{end}}
<p style="color: #666; font-size: small">HTTP {{.Status}} &middot; <code id="code">{{.Code}}</code></p>
</body></html>
`))
