// Package auth turns a request's credentials into a user.
//
// Credentials travel as "Authorization: Bearer <token>" (or dask-gateway's
// "token <token>" and "jupyterhub <token>" forms, or HTTP Basic). Authenticators are tried in order; the first that
// recognises the credential decides. The scheme's name decides nothing: a
// JupyterHub token is told from the gateway's own tokens by its form.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Errors callers match with errors.Is.
var (
	ErrNoCredentials = errors.New("no credentials")
	ErrInvalid       = errors.New("invalid credentials")
	// ErrEnded also matches ErrInvalid: a genuine credential (its secret
	// or signature checks out) that expired or was revoked. It is no guess,
	// so failure limits need not count it: a script or a dashboard tab
	// still polling with one must not get its whole address blocked.
	ErrEnded = errors.New("credential ended")
)

// endedError is ErrInvalid and ErrEnded, with ErrInvalid's message form.
type endedError struct{ msg string }

func (e endedError) Error() string { return ErrInvalid.Error() + ": " + e.msg }

func (e endedError) Is(target error) bool { return target == ErrInvalid || target == ErrEnded }

func ended(format string, args ...any) error { return endedError{fmt.Sprintf(format, args...)} }

// User is an authenticated identity.
type User struct {
	// ID is the stable identity that owns clusters and tokens: for OIDC
	// users the issuer's subject, which unlike names and emails is never
	// reassigned. Empty means Name is the identity (static users).
	ID      string
	Name    string // for display
	Subject string
	Email   string
	Groups  []string
	Admin   bool
	// Expires is when the credential that proved the identity expires.
	Expires time.Time
	// Via says how: "oidc", "token" (an API token), "jupyterhub" (a
	// JupyterHub token), "session" or "static".
	Via string
	// ReadOnly credentials may only read.
	ReadOnly bool
	// TokenID is the API token that authenticated the request ("token"),
	// or that made the browser session ("session"), if any.
	TokenID string
	// SessionID is the browser session that authenticated the request.
	SessionID string
	// SessionVia is how that session began (store.Session.Via).
	SessionVia string
}

// Owner is the key under which the user's clusters and tokens are kept.
func (u *User) Owner() string {
	if u.ID != "" {
		return u.ID
	}
	return u.Name
}

// Authenticator recognises one kind of credential.
type Authenticator interface {
	// Authenticate returns ErrNoCredentials when the request carries none of
	// its kind, and an error wrapping ErrInvalid when it carries a bad one.
	Authenticate(ctx context.Context, token string) (*User, error)
}

// BearerToken extracts the token from the Authorization header.
func BearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", ErrNoCredentials
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || strings.TrimSpace(tok) == "" {
		return "", fmt.Errorf("%w: malformed Authorization header; use \"Bearer <token>\"", ErrInvalid)
	}
	switch strings.ToLower(scheme) {
	case "bearer", "token", "jupyterhub":
		// "jupyterhub" is what dask_gateway.auth.JupyterHubAuth sends; the
		// token is checked like any other, whatever the scheme's name.
		return strings.TrimSpace(tok), nil
	case "basic":
		// dask-gateway's default client auth is HTTP Basic: the token goes
		// in the password, the user name is ignored (the token names the user).
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(tok))
		if err != nil {
			return "", fmt.Errorf("%w: malformed Basic credentials", ErrInvalid)
		}
		_, pw, ok := strings.Cut(string(raw), ":")
		if !ok || pw == "" {
			return "", fmt.Errorf("%w: Basic credentials need the API token as the password", ErrInvalid)
		}
		return pw, nil
	default:
		return "", fmt.Errorf("%w: unsupported Authorization scheme %q; use \"Bearer <token>\"", ErrInvalid, scheme)
	}
}

// StaticTokens authenticates fixed tokens, each standing for one user. Only
// the tokens' hashes are kept, and lookups go by hash, so comparisons take
// the same time whatever the token.
type StaticTokens struct {
	users map[[32]byte]User
}

// NewStaticTokens maps tokens to users.
func NewStaticTokens(tokens map[string]User) *StaticTokens {
	s := &StaticTokens{users: make(map[[32]byte]User, len(tokens))}
	for tok, u := range tokens {
		s.users[sha256.Sum256([]byte(tok))] = u
	}
	return s
}

// Authenticate implements Authenticator.
func (s *StaticTokens) Authenticate(_ context.Context, token string) (*User, error) {
	u, ok := s.users[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, fmt.Errorf("%w: unknown or expired token; run: gateway login", ErrInvalid)
	}
	return &u, nil
}

// Chain tries authenticators in order.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (*User, error) {
	var last error
	for _, a := range c {
		u, err := a.Authenticate(ctx, token)
		if err == nil {
			return u, nil
		}
		if !errors.Is(err, ErrNoCredentials) {
			last = err
		}
	}
	if last == nil {
		// Made only here: formatting it on every call cost more than
		// a cached token's whole check.
		last = fmt.Errorf("%w: unknown token", ErrInvalid)
	}
	return nil, last
}

// Forget makes every authenticator in c that remembers credentials (as
// APITokens does) drop them, after a revocation made in the store.
func (c Chain) Forget() {
	for _, a := range c {
		if f, ok := a.(interface{ Forget() }); ok {
			f.Forget()
		}
	}
}

// NewToken makes a random token with a recognisable prefix.
func NewToken(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// LoadOrCreateToken reads a token from path, or makes one and stores it
// there with mode 0600.
func LoadOrCreateToken(path, prefix string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("auth: read %s: %w", path, err)
	}
	tok := NewToken(prefix)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("auth: write %s: %w", path, err)
	}
	return tok, nil
}
