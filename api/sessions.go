package api

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// Browser sessions for dashboards: a user authenticated on the command line
// asks for a one-time sign-in link; opening it sets a session cookie that
// the dashboard proxy accepts. The API itself never accepts the cookie; it
// lists and ends the caller's sessions.

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
	c, err := s.sessions.Start(r.Context(), *u, "link")
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusUnauthorized, "unauthenticated", "the API token that made this link was revoked or expired")
		return
	}
	if err != nil {
		s.log.Error("browser session not started", "user", u.Name, "err", err)
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "cannot start a session right now; try again")
		return
	}
	http.SetCookie(w, c)
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

// logout ends the browser's session in the store (so a copy of the cookie
// is worthless too) and clears the cookie. It is a POST from this origin
// only, so another site cannot sign a user out (or in) behind their back.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if !sameOrigin(r) {
		WriteError(w, http.StatusForbidden, "cross_site", "sign out from the gateway's own pages")
		return
	}
	if err := s.sessions.End(r); err != nil {
		// The cookie stays: clearing it would look like a sign-out while
		// the session still works for anyone holding a copy.
		s.log.Error("sign-out failed", "remote", remoteIP(r), "err", err)
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "cannot end the session right now; try again")
		return
	}
	http.SetCookie(w, s.sessions.ClearCookie())
	w.WriteHeader(http.StatusNoContent)
}

// SessionStore is what the session endpoints need of the store.
type SessionStore interface {
	ListSessions(ctx context.Context, owner string) ([]*store.Session, error)
	RevokeSession(ctx context.Context, owner, id string) error
	RevokeSessions(ctx context.Context, owner string) (int, error)
}

// SetSessionStore enables the endpoints that list and end the caller's
// browser sessions.
func (s *Server) SetSessionStore(st SessionStore) { s.sessionStore = st }

// SessionJSON describes a browser session; never its cookie.
type SessionJSON struct {
	ID        string    `json:"id"`
	Via       string    `json:"via"` // "login" or "link"
	TokenID   string    `json:"token_id,omitempty"`
	ReadOnly  bool      `json:"read_only"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	ss, err := s.sessionStore.ListSessions(r.Context(), u.Owner())
	if err != nil {
		s.coreError(w, r, err)
		return
	}
	out := make([]SessionJSON, 0, len(ss))
	for _, se := range ss {
		out = append(out, SessionJSON{ID: se.ID, Via: se.Via, TokenID: se.TokenID, ReadOnly: se.ReadOnly, CreatedAt: se.CreatedAt.UTC(), ExpiresAt: se.ExpiresAt.UTC()})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeSession(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	id := r.PathValue("id")
	err := s.sessionStore.RevokeSession(r.Context(), u.Owner(), id)
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "session_not_found", "no active session "+id+" of yours")
		return
	}
	if err != nil {
		s.coreError(w, r, err)
		return
	}
	s.sessions.Forget()
	s.log.Info("browser session revoked", "user", u.Name, "session_id", id)
	w.WriteHeader(http.StatusNoContent)
}

// revokeSessions ends all the caller's browser sessions (gateway logout).
func (s *Server) revokeSessions(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	n, err := s.sessionStore.RevokeSessions(r.Context(), u.Owner())
	if err != nil {
		s.coreError(w, r, err)
		return
	}
	s.sessions.Forget()
	s.log.Info("browser sessions revoked", "user", u.Name, "count", n)
	writeJSON(w, http.StatusOK, map[string]int{"revoked": n})
}

func (s *Server) sessionsEnabled(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.sessionStore == nil || s.sessions == nil {
			WriteError(w, http.StatusNotFound, "not_found", "browser sessions are not kept on this gateway")
			return
		}
		h(w, r)
	}
}
