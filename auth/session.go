package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// SessionCookie is the browser session cookie. It is only ever accepted by
// the dashboard proxy: the API takes bearer tokens alone, so it needs no
// CSRF defence.
const SessionCookie = "gateway_session"

// sessionPrefix starts every session cookie's secret.
const sessionPrefix = "gws_"

// SessionStore is what browser sessions need of the store.
type SessionStore interface {
	CreateSession(ctx context.Context, se *store.Session) error
	SessionByHash(ctx context.Context, hash string) (*store.Session, error)
	RevokeSessionByHash(ctx context.Context, hash string) error
}

// Sessions keeps browser sessions and hands out one-time tickets that turn
// into a session, so that a user authenticated on the command line can open
// a dashboard in a browser without pasting a token.
//
// A session is a record in the store; its cookie holds only a random
// secret, of which the store keeps the hash. So a session ends for every
// replica at once when it is revoked, at logout, or with the API token that
// made it. Lookups are cached for at most sessionCacheTTL.
type Sessions struct {
	key    []byte // signs the short-lived cookies of Seal (the login flow's state)
	ttl    time.Duration
	secure bool
	now    func() time.Time
	store  SessionStore
	access Access

	mu      sync.Mutex
	tickets map[[32]byte]ticket

	cmu   sync.Mutex
	cache map[[32]byte]cachedSession
}

type ticket struct {
	user    User
	expires time.Time
}

type cachedSession struct {
	user  User
	until time.Time
}

// sessionCacheTTL bounds how long a revocation made through another
// replica (or straight in the store) may take to apply here.
const sessionCacheTTL = time.Second

const maxCachedSessions = 10000

// TicketTTL is how long a ticket may wait before it is redeemed.
const TicketTTL = 2 * time.Minute

// NewSessions makes sessions lasting ttl, with cookies marked Secure when
// secure is set (HTTPS), and signs the gateway's other cookies with key (at
// least 32 bytes). Sessions themselves need SetStore.
func NewSessions(key []byte, ttl time.Duration, secure bool) (*Sessions, error) {
	if len(key) < 32 {
		return nil, errors.New("auth: session key must be at least 32 bytes")
	}
	return &Sessions{key: key, ttl: ttl, secure: secure, now: time.Now, tickets: map[[32]byte]ticket{}, cache: map[[32]byte]cachedSession{}}, nil
}

// SetStore keeps sessions in st, and decides what they grant with a: until
// it is called, no browser session can begin or be used.
func (s *Sessions) SetStore(st SessionStore, a Access) {
	s.store, s.access = st, a
}

// SetClock replaces the clock (tests).
func (s *Sessions) SetClock(now func() time.Time) { s.now = now }

// NewTicket returns a one-time ticket for u, valid for TicketTTL.
func (s *Sessions) NewTicket(u User) string {
	t := NewToken("gwt_")
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.tickets { // tickets are few and short-lived: sweep as we go
		if now.After(v.expires) {
			delete(s.tickets, k)
		}
	}
	s.tickets[sha256.Sum256([]byte(t))] = ticket{user: u, expires: now.Add(TicketTTL)}
	return t
}

// Peek returns the user a ticket stands for without consuming it.
func (s *Sessions) Peek(t string) (*User, error) { return s.lookup(t, false) }

// Redeem consumes a ticket.
func (s *Sessions) Redeem(t string) (*User, error) { return s.lookup(t, true) }

func (s *Sessions) lookup(t string, consume bool) (*User, error) {
	k := sha256.Sum256([]byte(t))
	s.mu.Lock()
	v, ok := s.tickets[k]
	if consume {
		delete(s.tickets, k)
	}
	s.mu.Unlock()
	if !ok || s.now().After(v.expires) {
		return nil, fmt.Errorf("%w: the sign-in link is unknown, used or expired; ask for a new one with: gateway dashboard NAME", ErrInvalid)
	}
	return &v.user, nil
}

// How a session began (store.Session.Via) beyond "login" (with the
// identity provider) and "link" (a dashboard link).
const (
	// SessionViaHub is a sign-in with JupyterHub.
	SessionViaHub = "jupyterhub"
	// SessionViaHubLink is a dashboard link made with a JupyterHub token:
	// a token's, so it may not create API tokens.
	SessionViaHubLink = "jupyterhub-link"
)

// Start begins a session for u, who signed in by via ("login": with the
// identity provider; "link": with a dashboard link; SessionViaHub: with
// JupyterHub), and returns its cookie. A session made by an API token's
// link ends with the token, and never outlives it.
func (s *Sessions) Start(ctx context.Context, u User, via string) (*http.Cookie, error) {
	if s.store == nil {
		return nil, errors.New("auth: browser sessions are not enabled (no store)")
	}
	if via == "link" && u.Via == "jupyterhub" {
		via = SessionViaHubLink
	}
	now := s.now()
	exp := now.Add(s.ttl)
	if u.TokenID != "" && !u.Expires.IsZero() && u.Expires.Before(exp) {
		exp = u.Expires
	}
	secret := NewToken(sessionPrefix)
	se := &store.Session{ID: "ses_" + NewToken("")[:16], Hash: HashToken(secret), Owner: u.Owner(), OwnerName: u.Name, Via: via,
		TokenID: u.TokenID, ReadOnly: u.ReadOnly, CreatedAt: now, ExpiresAt: exp}
	if err := s.store.CreateSession(ctx, se); err != nil {
		return nil, fmt.Errorf("auth: start session: %w", err)
	}
	return &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", MaxAge: int(exp.Sub(now).Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}, nil
}

// Seal returns a cookie named name holding v, signed, for ttl. Cookies are
// signed, not encrypted: put nothing in them that the browser's user may not
// read.
func (s *Sessions) Seal(name string, v any, ttl time.Duration) (*http.Cookie, error) {
	payload, err := json.Marshal(struct {
		V   any   `json:"v"`
		Exp int64 `json:"e"`
	}{v, s.now().Add(ttl).Unix()})
	if err != nil {
		return nil, err
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	return &http.Cookie{Name: name, Value: body + "." + s.sign(name+"|"+body), Path: "/", MaxAge: int(ttl.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}, nil
}

// Open reads a cookie made by Seal into v.
func (s *Sessions) Open(r *http.Request, name string, v any) error {
	c, err := r.Cookie(name)
	if err != nil || c.Value == "" {
		return ErrNoCredentials
	}
	body, sig, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign(name+"|"+body))) {
		return fmt.Errorf("%w: cookie %s is not valid", ErrInvalid, name)
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return fmt.Errorf("%w: cookie %s is not valid", ErrInvalid, name)
	}
	var env struct {
		V   json.RawMessage `json:"v"`
		Exp int64           `json:"e"`
	}
	if err := json.Unmarshal(payload, &env); err != nil || json.Unmarshal(env.V, v) != nil {
		return fmt.Errorf("%w: cookie %s is not valid", ErrInvalid, name)
	}
	if s.now().Unix() > env.Exp {
		return fmt.Errorf("%w: cookie %s expired", ErrInvalid, name)
	}
	return nil
}

// Clear returns a cookie that deletes the named cookie.
func (s *Sessions) Clear(name string) *http.Cookie {
	return &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}
}

// ClearCookie returns a cookie that deletes the session.
func (s *Sessions) ClearCookie() *http.Cookie { return s.Clear(SessionCookie) }

func (s *Sessions) sign(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionSecret is the session cookie's secret: ErrNoCredentials without
// one, ErrInvalid for one that cannot be a session's.
func sessionSecret(r *http.Request) (string, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return "", ErrNoCredentials
	}
	if !strings.HasPrefix(c.Value, sessionPrefix) {
		return "", fmt.Errorf("%w: session cookie is not valid; sign in again", ErrInvalid)
	}
	return c.Value, nil
}

// FromRequest returns the user of a request's session cookie:
// ErrNoCredentials without one, ErrInvalid for an unknown, ended or expired
// session.
func (s *Sessions) FromRequest(r *http.Request) (*User, error) {
	secret, err := sessionSecret(r)
	if err != nil {
		return nil, err
	}
	if s.store == nil {
		return nil, fmt.Errorf("%w: browser sessions are not enabled on this gateway", ErrInvalid)
	}
	k := sha256.Sum256([]byte(secret))
	now := s.now()
	s.cmu.Lock()
	c, ok := s.cache[k]
	if ok && now.Before(c.until) && now.Before(c.user.Expires) {
		s.cmu.Unlock()
		u := c.user
		return &u, nil
	}
	delete(s.cache, k)
	s.cmu.Unlock()

	se, err := s.store.SessionByHash(r.Context(), hex.EncodeToString(k[:]))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown session; sign in again", ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up session: %w", err)
	}
	if !se.RevokedAt.IsZero() {
		return nil, ended("this session has ended (signed out or revoked); sign in again")
	}
	if !now.Before(se.ExpiresAt) {
		return nil, ended("this session expired; sign in again")
	}
	u := &User{ID: se.Owner, Name: se.OwnerName, Via: "session", ReadOnly: se.ReadOnly, Expires: se.ExpiresAt, TokenID: se.TokenID, SessionID: se.ID, SessionVia: se.Via}
	if u.Name == "" {
		u.Name = se.Owner
	}
	s.access.apply(u, se.Claims, now)
	s.cmu.Lock()
	if len(s.cache) >= maxCachedSessions {
		clear(s.cache) // a bound; the store has the truth
	}
	s.cache[k] = cachedSession{user: *u, until: now.Add(sessionCacheTTL)}
	s.cmu.Unlock()
	return u, nil
}

// End ends the session of a request's cookie (logout), if it has one.
func (s *Sessions) End(r *http.Request) error {
	secret, err := sessionSecret(r)
	if err != nil || s.store == nil {
		return nil // no session to end
	}
	k := sha256.Sum256([]byte(secret))
	s.cmu.Lock()
	delete(s.cache, k)
	s.cmu.Unlock()
	if err := s.store.RevokeSessionByHash(r.Context(), hex.EncodeToString(k[:])); err != nil {
		return fmt.Errorf("auth: end session: %w", err)
	}
	return nil
}

// Forget drops what this process remembers of sessions, after a revocation
// made in the store (of a session, or of the token that made sessions), so
// that it applies at once here and within sessionCacheTTL elsewhere.
func (s *Sessions) Forget() {
	s.cmu.Lock()
	clear(s.cache)
	s.cmu.Unlock()
}
