package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
)

// Authenticator resolves the user of an HTTP request.
type Authenticator func(r *http.Request) (*auth.User, error)

// DashboardPrefix is the path under which cluster dashboards are served.
const DashboardPrefix = "/clusters/"

// Dashboard proxies /clusters/<name>/... to the cluster's scheduler HTTP
// server, for the cluster's owner only. Schedulers are started with this
// prefix, so paths pass through unchanged and links in their pages resolve.
type Dashboard struct {
	lookup func(string) (owner string, target string, ok bool)
	authn  Authenticator
	login  func(next string) string
	log    *slog.Logger
	rp     *httputil.ReverseProxy
}

// DashboardHandler returns the dashboard proxy.
func (s *Server) DashboardHandler(authn Authenticator) http.Handler {
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: s.cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	d := &Dashboard{authn: authn, log: s.log, login: s.loginRedirect}
	d.lookup = func(name string) (string, string, bool) {
		r, ok := s.routes.Lookup(name)
		if !ok || r.Dashboard == nil {
			return "", "", false
		}
		return r.Owner, r.Dashboard.Scheme + "://" + r.Dashboard.Host, true
	}
	d.rp = &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := pr.In.Context().Value(targetKey{}).(string)
			scheme, host, _ := strings.Cut(target, "://")
			pr.Out.URL.Scheme, pr.Out.URL.Host = scheme, host
			pr.Out.Host = host
			pr.SetXForwarded()
			// The gateway's credentials are for the gateway, not the scheduler.
			pr.Out.Header.Del("Authorization")
			removeCookie(pr.Out, auth.SessionCookie)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			d.log.Warn("dashboard proxy error", "path", r.URL.Path, "err", err)
			dashError(w, r, http.StatusBadGateway, "the cluster's dashboard did not answer")
		},
	}
	return d
}

type targetKey struct{}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, DashboardPrefix)
	name, _, _ := strings.Cut(rest, "/")
	if name == "" {
		dashError(w, r, http.StatusNotFound, "no cluster named in the path; use /clusters/<name>/status")
		return
	}
	u, err := d.authn(r)
	if err != nil {
		if d.login != nil && r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") &&
			r.Header.Get("Authorization") == "" {
			// A browser without a (valid) session: sign it in, then come back.
			http.Redirect(w, r, d.login(r.URL.RequestURI()), http.StatusFound)
			return
		}
		msg := "authentication required to view this dashboard"
		if !errors.Is(err, auth.ErrNoCredentials) {
			msg = "authentication failed"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
		dashError(w, r, http.StatusUnauthorized, msg)
		return
	}
	owner, target, ok := d.lookup(name)
	if !ok || owner != u.Owner() {
		// The same answer for "not yours" and "not running", so that
		// cluster names do not leak.
		dashError(w, r, http.StatusNotFound, "cluster "+name+" not found or not running")
		return
	}
	if u.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
		dashError(w, r, http.StatusForbidden, "this token is read-only")
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// A websocket lives past the server's request read timeout: clear
		// the deadline before the connection is handed over.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, target))
	d.rp.ServeHTTP(w, r)
}

func dashError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	code := map[int]string{401: "unauthenticated", 403: "read_only", 404: "cluster_not_found", 502: "bad_gateway"}[status]
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code, "message": msg})
}

// removeCookie drops one cookie from the request's Cookie headers and leaves
// every other byte as the browser sent it.
func removeCookie(r *http.Request, name string) {
	vals := r.Header.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var out []string
	changed := false
	for _, v := range vals {
		parts := strings.Split(v, ";")
		kept := parts[:0]
		for _, p := range parts {
			n, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			if n == name {
				changed = true
				continue
			}
			kept = append(kept, p)
		}
		if joined := strings.TrimSpace(strings.Join(kept, ";")); joined != "" {
			out = append(out, joined)
		}
	}
	if !changed {
		return
	}
	r.Header.Del("Cookie")
	for _, v := range out {
		r.Header.Add("Cookie", v)
	}
}
