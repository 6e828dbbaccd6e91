package api

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/crosssite"
	"github.com/gatewayhq/gateway/internal/errpage"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// newLinkHint is what a person holding a refused sign-in link can do.
const newLinkHint = "Ask for a new link on the command line with: gateway dashboard NAME (links work once, for a few minutes)."

// pageError answers an error on the browser-facing pages (/auth/...): a
// page a person can read when a browser asked for HTML, the API's JSON
// error otherwise.
func pageError(w http.ResponseWriter, r *http.Request, status int, code, title, msg, hint string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
	}
	errpage.Write(w, r, errpage.Error{Status: status, Code: code, Title: title, Message: msg, Hint: hint})
}

// Browser sessions for dashboards: a user authenticated on the command line
// asks for a one-time sign-in link; opening it sets a session cookie that
// the dashboard proxy accepts. The API itself never accepts the cookie; it
// lists and ends the caller's sessions.

// safeNext accepts only a path on this gateway to a page for people (a
// dashboard or the console's), so the sign-in link cannot redirect
// anywhere else.
func safeNext(next string) (string, bool) {
	if next == "" {
		return "", false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "", false
	}
	// A page for people: a dashboard or the console, never the API or
	// the sign-in pages themselves.
	p := u.Path
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/./") ||
		p == "/api" || strings.HasPrefix(p, "/api/") || p == "/auth" || strings.HasPrefix(p, "/auth/") {
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
	if _, _, err := s.core.Reach(r.Context(), whoOf(r), name, sharing.View); err != nil {
		s.fail(w, r, err)
		return
	}
	next := "/clusters/" + name + "/status"
	// The ticket is the caller as authenticated, read-only flag and token
	// included: the session it starts is never more than the token (a
	// read-only token's is read-only, and ends with the token).
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
		pageError(w, r, http.StatusBadRequest, "invalid_request", "This sign-in link is damaged", "next must be a dashboard path on this gateway", newLinkHint)
		return
	}
	t := r.URL.Query().Get("t")
	u, err := s.sessions.Peek(t)
	if err != nil {
		pageError(w, r, http.StatusUnauthorized, "unauthenticated", "This sign-in link no longer works", detail(err, auth.ErrInvalid), newLinkHint)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The ticket is in this URL, so no Referer may carry the URL's path or
	// query anywhere, not even to this gateway's dashboards. But the form's
	// POST must carry an Origin: under "no-referrer" browsers send
	// "Origin: null", which cannot be told from a sandboxed page of another
	// site. strict-origin sends only the origin, in both headers.
	w.Header().Set("Referrer-Policy", "strict-origin")
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

// maxTicketForm bounds the sign-in form: a ticket, a dashboard path and
// their names, well under a kilobyte.
const maxTicketForm = 4 << 10

func (s *Server) redeemTicket(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if !s.sameOrigin(r) {
		s.log.Info("cross-site sign-in refused", "remote", remoteIP(r), "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		pageError(w, r, http.StatusForbidden, "cross_site", "Sign-in refused", "sign in from the gateway's own page", "Open the sign-in link itself (from gateway dashboard NAME) and click the button there.")
		return
	}
	// The form is a ticket and a path: anything larger is not from the
	// confirmation page, and is refused before it is read.
	if r.ContentLength > maxTicketForm {
		pageError(w, r, http.StatusRequestEntityTooLarge, "invalid_request", "Sign-in refused",
			fmt.Sprintf("the sign-in form is at most %d bytes", maxTicketForm), newLinkHint)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTicketForm)
	if err := r.ParseForm(); err != nil {
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			pageError(w, r, http.StatusRequestEntityTooLarge, "invalid_request", "Sign-in refused",
				fmt.Sprintf("the sign-in form is at most %d bytes", maxTicketForm), newLinkHint)
			return
		}
		pageError(w, r, http.StatusBadRequest, "invalid_request", "Sign-in refused", "malformed form", newLinkHint)
		return
	}
	next, ok := safeNext(r.PostForm.Get("next"))
	if !ok {
		pageError(w, r, http.StatusBadRequest, "invalid_request", "Sign-in refused", "next must be a dashboard path on this gateway", newLinkHint)
		return
	}
	u, err := s.sessions.Redeem(r.PostForm.Get("t"))
	if err != nil {
		s.log.Info("sign-in link refused", "remote", remoteIP(r))
		pageError(w, r, http.StatusUnauthorized, "unauthenticated", "This sign-in link no longer works", detail(err, auth.ErrInvalid), newLinkHint)
		return
	}
	c, err := s.sessions.Start(r.Context(), *u, "link")
	if errors.Is(err, store.ErrNotFound) {
		pageError(w, r, http.StatusUnauthorized, "unauthenticated", "This sign-in link no longer works", "the API token that made this link was revoked or expired", "Sign in again on the command line (gateway login), then run gateway dashboard NAME.")
		return
	}
	if err != nil {
		s.log.Error("browser session not started", "user", u.Name, "err", err)
		pageError(w, r, http.StatusServiceUnavailable, "unavailable", "Sign-in failed", "cannot start a session right now; try again", "")
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sameOrigin accepts requests that browsers mark as coming from the
// gateway's public origin (or from no page at all), and refuses cross-site
// ones (crosssite.Reason: scheme, host and port). Sec-Fetch-Site is
// trusted even with "Origin: null", which browsers send on a form POST
// from a page whose Referrer-Policy is no-referrer (a proxy in front of the
// gateway may add that header).
func (s *Server) sameOrigin(r *http.Request) bool { return crosssite.Reason(r, s.cfg.PublicURL) == "" }

// logout ends the browser's session in the store (so a copy of the cookie
// is worthless too) and clears the cookie. It is a POST from this origin
// only, so another site cannot sign a user out (or in) behind their back.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if !s.sameOrigin(r) {
		pageError(w, r, http.StatusForbidden, "cross_site", "Sign-out refused", "sign out from the gateway's own pages", "Open /auth/logout on the gateway and click the button there.")
		return
	}
	if err := s.sessions.End(r); err != nil {
		// The cookie stays: clearing it would look like a sign-out while
		// the session still works for anyone holding a copy.
		s.log.Error("sign-out failed", "remote", remoteIP(r), "err", err)
		pageError(w, r, http.StatusServiceUnavailable, "unavailable", "Sign-out failed", "cannot end the session right now; try again", "")
		return
	}
	http.SetCookie(w, s.sessions.ClearCookie())
	w.Header().Set("Cache-Control", "no-store")
	if errpage.WantsHTML(r) {
		// The sign-out page's form: say so, rather than leave the person
		// on a page that looks the same as before.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		_ = signedOutPage.Execute(w, nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logoutPage asks for a click to sign this browser out: the sign-out
// itself is a POST from this origin, which no other site can send.
func (s *Server) logoutPage(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "strict-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	_ = logoutForm.Execute(w, nil)
}

var logoutForm = template.Must(template.New("logout").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Sign out of the gateway</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 4em auto">
<h1>Sign out of the gateway</h1>
<p>This ends this browser's dashboard session. Your command-line login stays (<code>gateway logout</code> ends that, and all your browser sessions).</p>
<form method="post" action="/auth/logout">
<button type="submit">Sign out</button>
</form>
</body></html>
`))

var signedOutPage = template.Must(template.New("signedout").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Signed out</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 4em auto">
<h1>Signed out</h1>
<p>This browser's dashboard session has ended. Opening a dashboard signs you in again.</p>
</body></html>
`))

// SessionStore is what the session endpoints need of the store.
type SessionStore interface {
	ListSessions(ctx context.Context, owner string) ([]*store.Session, error)
	RevokeSession(ctx context.Context, owner, id string) error
	RevokeSessions(ctx context.Context, owner string) (int, error)
}

// SetSessionStore enables the endpoints that list and end the caller's
// browser sessions.
func (s *Server) SetSessionStore(st SessionStore) { s.sessionStore = st }

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	ss, err := s.sessionStore.ListSessions(r.Context(), u.Owner())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.SessionJSON, 0, len(ss))
	for _, se := range ss {
		out = append(out, apitype.SessionJSON{ID: se.ID, Via: se.Via, TokenID: se.TokenID, ReadOnly: se.ReadOnly, CreatedAt: se.CreatedAt.UTC(), ExpiresAt: se.ExpiresAt.UTC()})
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
		s.fail(w, r, err)
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
		s.fail(w, r, err)
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
