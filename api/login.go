package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/auth"
)

// BrowserLogin signs browsers in with the identity provider (authorization
// code + PKCE) for the dashboards.
type BrowserLogin struct {
	OAuth2 *oauth2.Config // RedirectURL is <public URL>/auth/callback
	Verify func(ctx context.Context, rawIDToken, nonce string) (*auth.User, error)
}

// SetBrowserLogin enables /auth/login and /auth/callback.
func (s *Server) SetBrowserLogin(b *BrowserLogin) { s.browser = b }

const loginCookie = "gateway_login"

type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

func random() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// startLogin sends the browser to the identity provider, remembering in a
// signed, short-lived cookie what must come back (state, nonce, PKCE
// verifier) and where to go afterwards.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request) {
	if s.browser == nil || s.sessions == nil {
		pageError(w, r, http.StatusNotFound, "not_found", "Sign-in is not enabled", "browser login is not enabled on this gateway", "Open dashboards with the link that gateway dashboard NAME prints.")
		return
	}
	next, ok := safeNext(r.URL.Query().Get("next"))
	if !ok {
		next = "/"
	}
	st := loginState{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
	c, err := s.sessions.Seal(loginCookie, st, 10*time.Minute)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	u := s.browser.OAuth2.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("nonce", st.Nonce))
	http.Redirect(w, r, u, http.StatusFound)
}

func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request) {
	if s.browser == nil || s.sessions == nil {
		pageError(w, r, http.StatusNotFound, "not_found", "Sign-in is not enabled", "browser login is not enabled on this gateway", "Open dashboards with the link that gateway dashboard NAME prints.")
		return
	}
	var st loginState
	if err := s.sessions.Open(r, loginCookie, &st); err != nil {
		pageError(w, r, http.StatusBadRequest, "login_expired", "Sign-in expired", "this login was not started here or took too long; open the dashboard link again", "")
		return
	}
	http.SetCookie(w, s.sessions.Clear(loginCookie))
	q := r.URL.Query()
	if q.Get("state") == "" || q.Get("state") != st.State {
		pageError(w, r, http.StatusBadRequest, "login_mismatch", "Sign-in failed", "the login answer does not belong to this login; open the dashboard link again", "")
		return
	}
	if e := q.Get("error"); e != "" {
		pageError(w, r, http.StatusUnauthorized, "login_refused", "Sign-in refused", "the identity provider refused the login: "+e+" "+q.Get("error_description"), "")
		return
	}
	tok, err := s.browser.OAuth2.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		s.log.Info("browser login: code exchange failed", "remote", remoteIP(r), "err", err)
		pageError(w, r, http.StatusUnauthorized, "login_failed", "Sign-in failed", "the identity provider did not accept the login code; try again", "")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	u, err := s.browser.Verify(r.Context(), raw, st.Nonce)
	if err != nil {
		pageError(w, r, http.StatusUnauthorized, "login_failed", "Sign-in failed", detail(err, auth.ErrInvalid), "")
		return
	}
	c, err := s.sessions.Start(r.Context(), *u, "login")
	if err != nil {
		s.log.Error("browser session not started", "user", u.Name, "err", err)
		pageError(w, r, http.StatusServiceUnavailable, "unavailable", "Sign-in failed", "cannot start a session right now; try again", "")
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, st.Next, http.StatusSeeOther)
}

// LoginURL is where an unauthenticated browser is sent for a dashboard path.
func LoginURL(next string) string { return "/auth/login?" + url.Values{"next": {next}}.Encode() }
