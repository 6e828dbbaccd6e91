package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// The account pages: the user's API tokens (/tokens), browser sessions
// (/sessions) and this month's usage against their limits (/usage). They
// make the same store calls as the API's token, session, quota and usage
// endpoints, and check a new token with the API's own function
// (auth.NewAPIToken).

// TokenStore is what the tokens page needs of the store.
type TokenStore interface {
	CreateToken(ctx context.Context, t *store.APIToken) error
	ListTokens(ctx context.Context, owner string) ([]*store.APIToken, error)
	RevokeToken(ctx context.Context, owner, id string) error
}

// SessionStore is what the sessions page needs of the store.
type SessionStore interface {
	ListSessions(ctx context.Context, owner string) ([]*store.Session, error)
	RevokeSession(ctx context.Context, owner, id string) error
}

// UsageQuotas is what the usage page needs of the quota service.
type UsageQuotas interface {
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
}

// UsageRecords is what the usage page reads of the usage ledger and of
// what the user's live clusters hold.
type UsageRecords interface {
	Intervals(ctx context.Context, f store.LedgerFilter) ([]store.Interval, error)
	OwnerUsage(ctx context.Context, owner string) (store.Usage, error)
}

// Account is what the account pages need of the rest of the gateway: the
// objects the API's endpoints use. A page whose dependencies are nil is
// not served.
type Account struct {
	Tokens   TokenStore
	Sessions SessionStore
	Quotas   UsageQuotas
	Records  UsageRecords
	// Forget applies a revocation made in the store at once in this
	// process (api.Server.Forget: the API's token cache and the browser
	// sessions'); others apply it within a second.
	Forget func()
	// OnExceed is what a scale beyond a limit does (quota.Clamp or
	// quota.Refuse), as gateway quota says.
	OnExceed string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// accountDeps are the account section's dependencies (Server.account).
type accountDeps = Account

// SetAccount adds the account pages and their links.
func (s *Server) SetAccount(a Account) {
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Forget == nil {
		a.Forget = func() {}
	}
	s.account = a
	if a.Quotas != nil && a.Records != nil {
		s.section(navItem{Key: "usage", Title: "Usage", Path: "/usage"}, func(m *http.ServeMux) {
			m.HandleFunc("GET /usage", s.page(s.usagePage))
		})
	}
	if a.Tokens != nil {
		s.section(navItem{Key: "tokens", Title: "Tokens", Path: "/tokens"}, func(m *http.ServeMux) {
			m.HandleFunc("GET /tokens", s.page(s.tokensPage))
			m.HandleFunc("POST /tokens", s.action(s.createToken))
			m.HandleFunc("POST /tokens/{id}/revoke", s.action(s.revokeToken))
		})
	}
	if a.Sessions != nil {
		s.section(navItem{Key: "sessions", Title: "Sessions", Path: "/sessions"}, func(m *http.ServeMux) {
			m.HandleFunc("GET /sessions", s.page(s.sessionsPage))
			m.HandleFunc("POST /sessions/{id}/end", s.action(s.endSession))
			m.HandleFunc("POST /sessions/end-others", s.action(s.endOtherSessions))
		})
	}
}

// tokenRow is one API token as the list shows it.
type tokenRow struct {
	ID, Name, State           string // State: active, expired or revoked
	ReadOnly, Active          bool
	Created, Expires, LastUse time.Time
	hash                      string // of the secret, to check one shown once
}

// tokenForm is what the create form holds: its defaults, or what was
// sent, when it comes back with an error.
type tokenForm struct {
	Name, ExpiresIn string
	ReadOnly        bool
	Error           string
}

type tokensData struct {
	Tokens   []tokenRow
	ReadOnly bool
	// CanCreate is false for a session a token's dashboard link started:
	// a token must not mint tokens (auth.User.MayCreateTokens).
	CanCreate bool
	Form      tokenForm
	// Created is the token just made, with its secret: on the answer to
	// the form's POST only, never in a URL, never again.
	Created *createdToken
}

type createdToken struct {
	tokenRow
	Secret string
}

func rowOfToken(t *store.APIToken, now time.Time) tokenRow {
	r := tokenRow{ID: t.ID, Name: t.Name, ReadOnly: t.ReadOnly, Created: t.CreatedAt, Expires: t.ExpiresAt, LastUse: t.LastUsed, State: "active", hash: t.Hash}
	switch {
	case !t.RevokedAt.IsZero():
		r.State = "revoked"
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		r.State = "expired"
	}
	r.Active = r.State == "active"
	return r
}

func (s *Server) tokensData(ctx context.Context, u *auth.User) (tokensData, error) {
	ts, err := s.account.Tokens.ListTokens(ctx, u.Owner())
	if err != nil {
		return tokensData{}, err
	}
	d := tokensData{ReadOnly: u.ReadOnly, CanCreate: u.MayCreateTokens(), Form: tokenForm{ExpiresIn: auth.DefaultTokenTTL}}
	now := s.account.Now()
	for _, t := range ts {
		if t.Owner == u.Owner() { // never another user's, whatever the store returned
			d.Tokens = append(d.Tokens, rowOfToken(t, now))
		}
	}
	return d, nil
}

func (s *Server) tokensPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	s.renderTokens(w, r, u, http.StatusOK, func(d *tokensData) { s.takeCreated(w, r, d) })
}

// renderTokens renders the tokens page, with change applied to its data
// (a form sent back with its error, a token just made).
func (s *Server) renderTokens(w http.ResponseWriter, r *http.Request, u *auth.User, status int, change func(*tokensData)) {
	d, err := s.tokensData(r.Context(), u)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	change(&d)
	s.render(w, r, status, "tokens", view{Title: "API tokens", User: u, Nav: "tokens", Data: d})
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, u *auth.User) {
	if !u.MayCreateTokens() {
		s.errorPage(w, r, u, http.StatusForbidden, "Cannot create tokens here",
			"This browser session was started by a dashboard link made with an API token, and a token may not make tokens. Sign out, then sign in with your organisation's account to create one.")
		return
	}
	form := tokenForm{Name: r.PostFormValue("name"), ExpiresIn: r.PostFormValue("expires_in"), ReadOnly: r.PostFormValue("read_only") != ""}
	t, secret, err := auth.NewAPIToken(u, auth.TokenRequest{Name: form.Name, ExpiresIn: form.ExpiresIn, ReadOnly: form.ReadOnly}, s.account.Now())
	if err == nil {
		err = s.account.Tokens.CreateToken(r.Context(), t)
	}
	if errors.Is(err, auth.ErrTokenRequest) {
		status, msg, ok := s.cfg.Explain(r, err)
		if !ok {
			return
		}
		form.Error = msg
		s.renderTokens(w, r, u, status, func(d *tokensData) { d.Form = form })
		return
	}
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	// The secret goes to the list's next answer in a cookie of its own
	// (POST, redirect, GET: a reload then asks for no second token),
	// which that answer clears: shown once, not in the log, not in a URL,
	// not cached (Cache-Control: no-store, as every page).
	s.log.Info("API token created", "user", u.Name, "token_id", t.ID, "name", t.Name, "read_only", t.ReadOnly, "from", "console")
	http.SetCookie(w, &http.Cookie{Name: createdCookie, Value: t.ID + "." + secret, Path: "/tokens", MaxAge: 300, HttpOnly: true,
		Secure: strings.HasPrefix(s.cfg.PublicURL, "https://"), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
}

// createdCookie carries a token just made, as "ID.SECRET", from the form's
// POST to the one list that shows it.
const createdCookie = "gateway_console_new_token"

// takeCreated is the token just made that the request's cookie carries,
// if it is one of d's (the user's own, active) and the secret is its; the
// cookie is cleared either way.
func (s *Server) takeCreated(w http.ResponseWriter, r *http.Request, d *tokensData) {
	c, err := r.Cookie(createdCookie)
	if err != nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: createdCookie, Path: "/tokens", MaxAge: -1, HttpOnly: true,
		Secure: strings.HasPrefix(s.cfg.PublicURL, "https://"), SameSite: http.SameSiteStrictMode})
	id, secret, ok := strings.Cut(c.Value, ".")
	if !ok {
		return
	}
	for _, t := range d.Tokens {
		if t.ID == id && t.Active && t.hash == auth.HashToken(secret) {
			d.Created = &createdToken{tokenRow: t, Secret: secret}
			return
		}
	}
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, u *auth.User) {
	id := r.PathValue("id")
	err := s.account.Tokens.RevokeToken(r.Context(), u.Owner(), id)
	if errors.Is(err, store.ErrNotFound) {
		s.errorPage(w, r, u, http.StatusNotFound, "Not found", "You have no token "+id+".")
		return
	}
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	s.account.Forget()
	s.log.Info("API token revoked", "user", u.Name, "token_id", id, "from", "console")
	redirect(w, r, "/tokens", "Revoked token "+id+": it no longer works, nor do the browser sessions its links started.")
}

// sessionRow is one browser session as the list shows it.
type sessionRow struct {
	ID, How           string
	ReadOnly, Current bool
	Created, Expires  time.Time
}

type sessionsData struct {
	Sessions []sessionRow
	Others   int // sessions other than this one
	ReadOnly bool
}

// how says in words how a session began.
func how(se *store.Session) string {
	switch {
	case se.Via == "login":
		return "signed in with your organisation's account"
	case se.Via == auth.SessionViaHub:
		return "signed in with JupyterHub"
	case se.Via == auth.SessionViaHubLink:
		return "dashboard link made with a JupyterHub token"
	case se.TokenID != "":
		return "dashboard link made with API token " + se.TokenID
	case se.Via == "link":
		return "dashboard link from your command-line login"
	}
	return se.Via
}

func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ss, err := s.account.Sessions.ListSessions(r.Context(), u.Owner())
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d := sessionsData{ReadOnly: u.ReadOnly}
	for _, se := range ss {
		if se.Owner != u.Owner() {
			continue
		}
		row := sessionRow{ID: se.ID, How: how(se), ReadOnly: se.ReadOnly, Current: se.ID == u.SessionID, Created: se.CreatedAt, Expires: se.ExpiresAt}
		if !row.Current {
			d.Others++
		}
		d.Sessions = append(d.Sessions, row)
	}
	s.render(w, r, http.StatusOK, "sessions", view{Title: "Browser sessions", User: u, Nav: "sessions", Data: d})
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request, u *auth.User) {
	id := r.PathValue("id")
	err := s.account.Sessions.RevokeSession(r.Context(), u.Owner(), id)
	if errors.Is(err, store.ErrNotFound) {
		s.errorPage(w, r, u, http.StatusNotFound, "Not found", "You have no active session "+id+".")
		return
	}
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	s.account.Forget()
	s.log.Info("browser session revoked", "user", u.Name, "session_id", id, "from", "console")
	if id == u.SessionID {
		redirect(w, r, "/", "") // this browser is signed out: the sign-in page
		return
	}
	redirect(w, r, "/sessions", "Ended session "+id+".")
}

// endOtherSessions ends every session of the user but this one, as listed
// now (one that ended meanwhile is no matter).
func (s *Server) endOtherSessions(w http.ResponseWriter, r *http.Request, u *auth.User) {
	ss, err := s.account.Sessions.ListSessions(r.Context(), u.Owner())
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	n := 0
	for _, se := range ss {
		if se.ID == u.SessionID || se.Owner != u.Owner() {
			continue
		}
		err := s.account.Sessions.RevokeSession(r.Context(), u.Owner(), se.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			s.account.Forget() // those ended so far
			s.fail(w, r, u, err)
			return
		}
		n++
	}
	s.account.Forget()
	s.log.Info("browser sessions revoked", "user", u.Name, "count", n, "from", "console")
	redirect(w, r, "/sessions", fmt.Sprintf("Ended %s; this one stays.", plural(n, "other session")))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
