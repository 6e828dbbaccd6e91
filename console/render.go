package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
)

// view is what every page's template gets: the layout's parts and the
// page's own data.
type view struct {
	Title   string
	User    *auth.User
	Nav     string // the layout's current section
	Message string // what an action just did (?msg=)
	Version string
	Data    any

	nav []navItem
}

// Links are the navigation's links for the page's user.
func (v view) Links() []navItem {
	var out []navItem
	for _, n := range v.nav {
		if n.Admin && (v.User == nil || !v.User.Admin) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// parsePages parses each page under templates/ with the layout: one
// template set per page, so that pages may each define "content". Files
// named _NAME.html are not pages but fragments every page may use (a
// section's own navigation).
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if parts, _ := fs.Glob(templateFS, "templates/_*.html"); len(parts) > 0 {
		if layout, err = layout.ParseFS(templateFS, parts...); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: %s: %w", n, err)
		}
		pages[name] = t
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"duration": humanDuration,
	"since": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return humanDuration(time.Since(t))
	},
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"lower": strings.ToLower,
}

// humanDuration is d rounded for people: 45s, 12m, 3h05m, 2d04h.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// render writes a page whole, or a 500 page if its template fails (never
// half a page).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	s.renderTemplate(w, r, status, name, "layout", v)
}

// renderTemplate executes one named template of a page's set (the whole
// page, or a fragment the event stream sends).
func (s *Server) renderTemplate(w http.ResponseWriter, r *http.Request, status int, page, tmpl string, v view) {
	t := s.pages[page]
	if t == nil {
		s.log.Error("console: no such page template", "page", page)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if v.Message == "" && r != nil {
		v.Message = r.URL.Query().Get("msg")
	}
	v.Version = s.cfg.Version
	v.nav = s.nav
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, v); err != nil {
		s.log.Error("console: rendering a page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
