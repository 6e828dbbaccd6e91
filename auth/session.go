package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SessionCookie is the browser session cookie. It is only ever accepted by
// the dashboard proxy: the API takes bearer tokens alone, so it needs no
// CSRF defence.
const SessionCookie = "gateway_session"

// Sessions signs browser sessions and hands out one-time tickets that turn
// into a session, so that a user authenticated on the command line can open
// a dashboard in a browser without pasting a token.
type Sessions struct {
	key    []byte
	ttl    time.Duration
	secure bool
	now    func() time.Time

	mu      sync.Mutex
	tickets map[[32]byte]ticket
}

type ticket struct {
	user    User
	expires time.Time
}

type sessionClaims struct {
	ID     string   `json:"i,omitempty"`
	Name   string   `json:"n"`
	Groups []string `json:"g,omitempty"`
	Admin  bool     `json:"a,omitempty"`
	Exp    int64    `json:"e"`
}

// TicketTTL is how long a ticket may wait before it is redeemed.
const TicketTTL = 2 * time.Minute

// NewSessions makes sessions signed with key (at least 32 bytes), lasting
// ttl, with cookies marked Secure when secure is set (HTTPS).
func NewSessions(key []byte, ttl time.Duration, secure bool) (*Sessions, error) {
	if len(key) < 32 {
		return nil, errors.New("auth: session key must be at least 32 bytes")
	}
	return &Sessions{key: key, ttl: ttl, secure: secure, now: time.Now, tickets: map[[32]byte]ticket{}}, nil
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

// Cookie returns a session cookie for u, sealed like every other cookie
// of the gateway.
func (s *Sessions) Cookie(u User) *http.Cookie {
	claims := sessionClaims{ID: u.ID, Name: u.Name, Groups: u.Groups, Admin: u.Admin, Exp: s.now().Add(s.ttl).Unix()}
	c, _ := s.Seal(SessionCookie, claims, s.ttl) // claims always marshal
	return c
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

// FromRequest returns the user of a request's session cookie:
// ErrNoCredentials without one, ErrInvalid for a forged or expired one.
func (s *Sessions) FromRequest(r *http.Request) (*User, error) {
	var cl sessionClaims
	if err := s.Open(r, SessionCookie, &cl); err != nil {
		return nil, err
	}
	if cl.Name == "" {
		return nil, fmt.Errorf("%w: session cookie is not valid", ErrInvalid)
	}
	return &User{ID: cl.ID, Name: cl.Name, Groups: cl.Groups, Admin: cl.Admin, Via: "session", Expires: time.Unix(cl.Exp, 0)}, nil
}
