package api

import (
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
	if _, err := s.core.Get(r.Context(), u.Name, name); err != nil {
		s.coreError(w, r, err)
		return
	}
	next := "/clusters/" + name + "/status"
	t := s.sessions.NewTicket(*u)
	link := strings.TrimRight(s.cfg.PublicURL, "/") + "/auth/ticket?" + url.Values{"t": {t}, "next": {next}}.Encode()
	writeJSON(w, http.StatusOK, map[string]string{"url": link, "expires_in": auth.TicketTTL.String()})
}

func (s *Server) redeemTicket(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	next, ok := safeNext(r.URL.Query().Get("next"))
	if !ok {
		WriteError(w, http.StatusBadRequest, "invalid_request", "next must be a dashboard path on this gateway")
		return
	}
	u, err := s.sessions.Redeem(r.URL.Query().Get("t"))
	if err != nil {
		s.log.Info("sign-in link refused", "remote", remoteIP(r))
		WriteError(w, http.StatusUnauthorized, "unauthenticated", strings.TrimPrefix(err.Error(), auth.ErrInvalid.Error()+": "))
		return
	}
	http.SetCookie(w, s.sessions.Cookie(*u))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the ticket is in this URL
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout clears the session. It is a POST from this origin only, so another
// site cannot sign a user out (or in) behind their back.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		http.NotFound(w, r)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		WriteError(w, http.StatusForbidden, "cross_site", "sign out from the gateway's own pages")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if o, err := url.Parse(origin); err != nil || o.Host != r.Host {
			WriteError(w, http.StatusForbidden, "cross_site", "sign out from the gateway's own pages")
			return
		}
	}
	http.SetCookie(w, s.sessions.ClearCookie())
	w.WriteHeader(http.StatusNoContent)
}
