// Package console serves the gateway's web console at the root (/): each
// user's clusters, environments, usage, tokens, sessions and benchmarks,
// and the admin's view of the whole gateway, as pages rendered on the
// server (html/template) that work without script; a small script of the
// gateway's own (static/console.js) adds live updates through one event
// stream per page.
//
// The console signs people in with the browser session the dashboards
// use (auth.Sessions: OIDC sign-in, the same cookie and revocation), so
// signing out ends both. It reaches the rest of the gateway through the
// interfaces below, declared here, as the API does through its own; it
// never imports the API or the control loop.
//
// Every answer carries a Content-Security-Policy that allows scripts and
// styles from the gateway only (no inline ones) and no framing; every
// state-changing request must come from the gateway's own pages
// (crosssite), and a read-only session is refused (403) and shown no
// controls. Another user's cluster is not found (404), as in the API.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/crosssite"
	"github.com/gatewayhq/gateway/internal/reqbound"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// Clusters is what the console needs of the control loop.
type Clusters interface {
	List(ctx context.Context, owner string, statuses []store.Status) ([]*store.Cluster, error)
	Get(ctx context.Context, owner, name string) (*store.Cluster, error)
	Events(ctx context.Context, owner, name string) ([]store.Event, error)
	Logs(ctx context.Context, owner, name string, tail int, w io.Writer) error
	Scale(ctx context.Context, who quota.Who, name string, count int) (string, error)
	Stop(ctx context.Context, owner, name, why string) error
	// ClustersGeneration moves whenever one of the owner's clusters
	// changes, on any replica: the event stream watches it.
	ClustersGeneration(ctx context.Context, owner string) (int64, error)
}

// Sessions is what the console needs of the browser sessions.
type Sessions interface {
	FromRequest(r *http.Request) (*auth.User, error)
}

// Config configures the console.
type Config struct {
	// PublicURL is the gateway's origin as browsers reach it; the
	// cross-site check compares requests with it.
	PublicURL string
	Version   string
	// SignIn says whether browsers can sign in here (OIDC browser
	// login): without it the console says how to get a session.
	SignIn bool
	// SignInAtOnce sends a browser without a session that asks for a page
	// straight to LoginURL, rather than to the sign-in page and its
	// button: with JupyterHub's sign-in, someone signed in to the hub then
	// comes back signed in after one redirect, with nothing to click.
	SignInAtOnce bool
	// LoginURL is where a browser is sent to sign in, given the page to
	// come back to.
	LoginURL func(next string) string
	// Explain is the answer to a domain error (status and message), the
	// API's own mapping (api.Explain); ok false: the client went away.
	Explain func(r *http.Request, err error) (status int, message string, ok bool)
	// Generations is how often the event stream reads the generation of
	// each user with an open page (one read per user, whatever the number
	// of pages open); default time.Second.
	Generations time.Duration
}

// Server serves the console.
type Server struct {
	cfg      Config
	clusters Clusters
	sessions Sessions
	log      *slog.Logger
	mux      *http.ServeMux
	pages    map[string]*template.Template
	static   fs.FS
	hub      *hub
	frags    fragments
	now      func() time.Time // the clock the kept tables are dated by
	nav      []navItem

	// Each section's own dependencies, set by its Set method (in its
	// file); a section whose dependencies are not set serves nothing.
	create  createDeps  // new.go: the new-cluster form
	account accountDeps // account.go: tokens, sessions, usage
	admin   adminDeps   // admin.go: every cluster, users, quotas, audit
	envs    envDeps     // envs.go: environments and their builds
	bench   benchDeps   // bench.go: benchmark runs, reports, schedules
	shared  sharedDeps  // shared.go: clusters shared with the user
}

// navItem is one link of the layout's navigation.
type navItem struct {
	Key, Title, Path string
	Admin            bool // shown to admins only
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the console.
func New(cfg Config, clusters Clusters, sessions Sessions, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.LoginURL == nil {
		cfg.LoginURL = func(next string) string { return "/auth/login?" + url.Values{"next": {next}}.Encode() }
	}
	if cfg.Explain == nil {
		return nil, errors.New("console: Config.Explain is required")
	}
	if cfg.Generations <= 0 {
		cfg.Generations = time.Second
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	s := &Server{cfg: cfg, clusters: clusters, sessions: sessions, log: log, mux: http.NewServeMux(), pages: pages, static: static, now: time.Now}
	s.hub = newHub(s.listGeneration, cfg.Generations, log)
	s.nav = []navItem{{Key: "clusters", Title: "Clusters", Path: "/"}}
	s.routes()
	return s, nil
}

// section adds a section's pages: its routes, and its link in the
// navigation. Sections are added by their Set methods, after New, and
// before the console serves.
func (s *Server) section(item navItem, routes func(m *http.ServeMux)) {
	s.nav = append(s.nav, item)
	routes(s.mux)
}

// Patterns are the paths the console serves, for the composition root's
// mux: everything the API, the sign-in pages and the dashboards do not.
func Patterns() []string { return []string{"/"} }

func (s *Server) routes() {
	m := s.mux
	m.Handle("GET /static/", http.StripPrefix("/static/", s.staticHandler()))
	m.HandleFunc("GET /{$}", s.page(s.clustersPage))
	m.HandleFunc("GET /c/{name}", s.page(s.clusterPage))
	m.HandleFunc("POST /c/{name}/stop", s.action(s.stopCluster))
	m.HandleFunc("POST /c/{name}/scale", s.action(s.scaleCluster))
	m.HandleFunc("GET /events", s.page(s.events))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.notFound(w, r, "There is no page "+r.URL.Path+" on this gateway.")
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	s.mux.ServeHTTP(w, r)
}

// Close ends the event streams' watches.
func (s *Server) Close() {
	s.hub.close()
	if s.envs.builds != nil {
		s.envs.builds.close()
		s.envs.lists.close()
	}
}

// csp allows the gateway's own scripts, styles, images and event stream,
// nothing inline, no framing, and forms that post back here only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// handler is a console page or action given who asks.
type handler func(w http.ResponseWriter, r *http.Request, u *auth.User)

// user is the browser session's user, or nil with the reason.
func (s *Server) user(r *http.Request) (*auth.User, error) {
	if s.sessions == nil {
		return nil, auth.ErrNoCredentials
	}
	return s.sessions.FromRequest(r)
}

// page serves a page to a signed-in browser; a browser without a session
// gets the sign-in page, with the way back to this one.
func (s *Server) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		u, err := s.user(r)
		if err != nil {
			s.signedOut(w, r, err)
			return
		}
		reqbound.Authenticated(r)
		h(w, r, u)
	}
}

// action serves a form's POST: signed in, from this gateway's own pages,
// and not read-only; it answers by going back to the page (303) with a
// message, or with an error page.
func (s *Server) action(h handler) http.HandlerFunc {
	return s.page(func(w http.ResponseWriter, r *http.Request, u *auth.User) {
		if s.actionAllowed(w, r, u) {
			h(w, r, u)
		}
	})
}

// actionAllowed checks a form's POST as action does, and parses the form;
// false: it has answered.
func (s *Server) actionAllowed(w http.ResponseWriter, r *http.Request, u *auth.User) bool {
	if !s.actionChecked(w, r, u) {
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, u, http.StatusBadRequest, "Bad form", "The form could not be read: "+err.Error())
		return false
	}
	return true
}

// actionChecked checks a form's POST as action does, before a byte of its
// body is read; false: it has answered.
func (s *Server) actionChecked(w http.ResponseWriter, r *http.Request, u *auth.User) bool {
	if reason := crosssite.Reason(r, s.cfg.PublicURL); reason != "" {
		s.log.Info("console: cross-site request refused", "path", r.URL.Path, "reason", reason)
		s.errorPage(w, r, u, http.StatusForbidden, "Refused", "This request did not come from the gateway's own pages ("+reason+"). Use the controls on the gateway's pages.")
		return false
	}
	if u.ReadOnly {
		s.errorPage(w, r, u, http.StatusForbidden, "Read-only session", "This browser session was started with a read-only token: it can look, not change anything.")
		return false
	}
	return true
}

// maxForm bounds a console form: a few short fields.
const maxForm = 64 << 10

func (s *Server) signedOut(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, auth.ErrNoCredentials) && !errors.Is(err, auth.ErrInvalid) && !errors.Is(err, auth.ErrEnded) {
		s.log.Error("console: cannot check the session", "err", err)
		s.render(w, r, http.StatusServiceUnavailable, "error", view{Title: "Unavailable",
			Data: errorData{Message: "The gateway cannot check your session right now; try again in a moment."}})
		return
	}
	if r.Method != http.MethodGet || r.URL.Path == "/events" {
		s.render(w, r, http.StatusUnauthorized, "error", view{Title: "Signed out", Data: errorData{Message: "Your session has ended: sign in again."}})
		return
	}
	if s.cfg.SignIn && s.cfg.SignInAtOnce {
		http.Redirect(w, r, s.cfg.LoginURL(r.URL.RequestURI()), http.StatusFound)
		return
	}
	s.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Data: signinData{
		SignIn: s.cfg.SignIn, LoginURL: s.cfg.LoginURL(r.URL.RequestURI()), PublicURL: s.cfg.PublicURL}})
}

type signinData struct {
	SignIn    bool
	LoginURL  string
	PublicURL string
}

type errorData struct{ Message string }

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, u *auth.User, status int, title, msg string) {
	s.render(w, r, status, "error", view{Title: title, User: u, Data: errorData{Message: msg}})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	u, _ := s.user(r)
	s.errorPage(w, r, u, http.StatusNotFound, "Not found", msg)
}

// redirect answers an action by going back to a page, with a message the
// page shows once (in the URL: it is the action's own words, never a
// secret).
func redirect(w http.ResponseWriter, r *http.Request, path, msg string) {
	if msg != "" {
		path += "?" + url.Values{"msg": {msg}}.Encode()
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// staticHandler serves the embedded scripts, styles and their licenses;
// they change only with the binary, which names them by version.
func (s *Server) staticHandler() http.Handler {
	files := http.FileServerFS(s.static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
