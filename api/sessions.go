package api

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatewayhq/gateway/auth"
)

// Browser sessions for dashboards: a user authenticated on the command line
// asks for a one-time sign-in link; opening it sets a session cookie that
// the dashboard proxy accepts. The API itself never accepts the cookie.

// safeNext accepts only a path on this gateway under the dashboards, so the
// sign-in link cannot redirect anywhere else.
func safeNext(next string) (string, bool) {
	if next == "" {
		return "", false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "", false
	}
	if !strings.HasPrefix(u.Path, "/clusters/") || strings.Contains(u.Path, "/../") {
		return "", false
	}
	return u.RequestURI(), true
}

func (s *Server) dashboardLink(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		WriteError(w, http.StatusNotImplemented, "not_implemented", "browser sessions are not enabled on this gateway")
		return
	}
	u := UserFrom(r.Context())
	name := r.PathValue("name")
	if _, err := s.core.Get(r.Context(), u.Owner(), name); err != nil {
		s.coreError(w, r, err)
		return
	}
	next := "/clusters/" + name + "/status"
	t := s.sessions.NewTicket(*u)
	link := strings.TrimRight(s.cfg.PublicURL, "/") + "/auth/ticket?" + url.Values{"t": {t}, "next": {next}}.Encode()
	writeJSON(w, http.StatusOK, map[string]string{"url": link, "expires_in": auth.TicketTTL.String()})
}

// confirmTicket shows who the sign-in link signs in as, and asks for a
// click: a link someone else sent must not silently sign a browser in as
// them (login CSRF).
func (s *Server) confirmTicket(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	next, ok := safeNext(r.URL.Query().Get("next"))
	if !ok {
		WriteError(w, http.StatusBadRequest, "invalid_request", "next must be a dashboard path on this gateway")
		return
	}
	t := r.URL.Query().Get("t")
	u, err := s.sessions.Peek(t)
	if err != nil {
		WriteError(w, http.StatusUnauthorized, "unauthenticated", detail(err, auth.ErrInvalid))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the ticket is in this URL
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	_ = confirmPage.Execute(w, map[string]string{"User": u.Name, "Ticket": t, "Next": next})
}

var confirmPage = template.Must(template.New("confirm").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in to the gateway</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 4em auto">
<h1>Sign in to the gateway</h1>
<p>This link signs this browser in as <strong>{{.User}}</strong> and opens <code>{{.Next}}</code>.</p>
<p>Continue only if you asked for it (with <code>gateway dashboard</code>).</p>
<form method="post" action="/auth/ticket">
<input type="hidden" name="t" value="{{.Ticket}}">
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Sign in as {{.User}}</button>
</form>
</body></html>
`))

func (s *Server) redeemTicket(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if !sameOrigin(r) {
		WriteError(w, http.StatusForbidden, "cross_site", "sign in from the gateway's own page")
		return
	}
	if err := r.ParseForm(); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", "malformed form")
		return
	}
	next, ok := safeNext(r.PostForm.Get("next"))
	if !ok {
		WriteError(w, http.StatusBadRequest, "invalid_request", "next must be a dashboard path on this gateway")
		return
	}
	u, err := s.sessions.Redeem(r.PostForm.Get("t"))
	if err != nil {
		s.log.Info("sign-in link refused", "remote", remoteIP(r))
		WriteError(w, http.StatusUnauthorized, "unauthenticated", detail(err, auth.ErrInvalid))
		return
	}
	http.SetCookie(w, s.sessions.Cookie(*u))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sameOrigin accepts requests that browsers mark as coming from this
// origin (or from no page at all), and refuses cross-site ones.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		if o, err := url.Parse(origin); err != nil || o.Host != r.Host {
			return false
		}
	} else if origin == "null" {
		return false
	}
	return true
}

// logout clears the session. It is a POST from this origin only, so another
// site cannot sign a user out (or in) behind their back.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if !sameOrigin(r) {
		WriteError(w, http.StatusForbidden, "cross_site", "sign out from the gateway's own pages")
		return
	}
	http.SetCookie(w, s.sessions.ClearCookie())
	w.WriteHeader(http.StatusNoContent)
}
