package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/auth"
)

// BrowserLogin signs browsers in for the dashboards and the console: with
// the OIDC provider (authorization code + PKCE, and the ID token's nonce),
// or with JupyterHub as its OAuth client.
type BrowserLogin struct {
	// OAuth2's RedirectURL is <public URL>/auth/callback (OIDC) or
	// <public URL>/auth/jupyterhub/callback (JupyterHub): the callback
	// answers on that path alone.
	OAuth2 *oauth2.Config
	// Verify verifies the ID token of an OIDC login started with nonce.
	Verify func(ctx context.Context, rawIDToken, nonce string) (*auth.User, error)
	// Hub, set instead of Verify, makes this JupyterHub's sign-in: it
	// returns the user of the hub token the code was exchanged for. The
	// hub issues no ID token and checks no PKCE, so neither is asked for;
	// the state, in the signed cookie, ties the answer to this browser.
	Hub func(ctx context.Context, accessToken string) (*auth.User, error)
}

// callbackPath is the path the provider sends browsers back to: the
// redirect URL's, else the kind's own.
func (b *BrowserLogin) callbackPath() string {
	if u, err := url.Parse(b.OAuth2.RedirectURL); err == nil && u.Path != "" {
		return u.Path
	}
	if b.Hub != nil {
		return "/auth/jupyterhub/callback"
	}
	return "/auth/callback"
}

// SetBrowserLogin enables /auth/login and its callback.
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
	st := loginState{State: random(), Next: next}
	if s.browser.Hub == nil {
		st.Nonce, st.Verifier = random(), oauth2.GenerateVerifier()
	}
	c, err := s.sessions.Seal(loginCookie, st, 10*time.Minute)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	u := s.browser.OAuth2.AuthCodeURL(st.State)
	if s.browser.Hub == nil {
		u = s.browser.OAuth2.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("nonce", st.Nonce))
	}
	http.Redirect(w, r, u, http.StatusFound)
}

func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request) {
	if s.browser == nil || s.sessions == nil || r.URL.Path != s.browser.callbackPath() {
		pageError(w, r, http.StatusNotFound, "not_found", "Sign-in is not enabled", "this sign-in is not enabled on this gateway", "Open dashboards with the link that gateway dashboard NAME prints.")
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
	var opts []oauth2.AuthCodeOption
	if s.browser.Hub == nil {
		opts = append(opts, oauth2.VerifierOption(st.Verifier))
	}
	tok, err := s.browser.OAuth2.Exchange(r.Context(), q.Get("code"), opts...)
	if err != nil {
		s.log.Info("browser login: code exchange failed", "remote", remoteIP(r), "err", err)
		pageError(w, r, http.StatusUnauthorized, "login_failed", "Sign-in failed", "the identity provider did not accept the login code; try again", "")
		return
	}
	u, via, err := s.loginUser(r.Context(), tok, st.Nonce)
	if errors.Is(err, auth.ErrUnavailable) {
		s.log.Warn("browser login: cannot check the user", "err", err)
		w.Header().Set("Retry-After", "5")
		pageError(w, r, http.StatusServiceUnavailable, "auth_unavailable", "Sign-in failed", "the sign-in cannot be checked right now; try again in a moment", "")
		return
	}
	if err != nil {
		pageError(w, r, http.StatusUnauthorized, "login_failed", "Sign-in failed", detail(err, auth.ErrInvalid), "")
		return
	}
	c, err := s.sessions.Start(r.Context(), *u, via)
	if err != nil {
		s.log.Error("browser session not started", "user", u.Name, "err", err)
		pageError(w, r, http.StatusServiceUnavailable, "unavailable", "Sign-in failed", "cannot start a session right now; try again", "")
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, st.Next, http.StatusSeeOther)
}

// loginUser is the user a finished login signed in, and how the session is
// marked: from the ID token (OIDC), or from the hub token (JupyterHub).
func (s *Server) loginUser(ctx context.Context, tok *oauth2.Token, nonce string) (*auth.User, string, error) {
	if s.browser.Hub != nil {
		u, err := s.browser.Hub(ctx, tok.AccessToken)
		return u, auth.SessionViaHub, err
	}
	raw, _ := tok.Extra("id_token").(string)
	u, err := s.browser.Verify(ctx, raw, nonce)
	return u, "login", err
}

// LoginURL is where an unauthenticated browser is sent for a dashboard path.
func LoginURL(next string) string { return "/auth/login?" + url.Values{"next": {next}}.Encode() }
