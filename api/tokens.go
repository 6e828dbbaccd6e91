package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/store"
)

// TokenStore is what the token endpoints need of the store.
type TokenStore interface {
	CreateToken(ctx context.Context, t *store.APIToken) error
	ListTokens(ctx context.Context, owner string) ([]*store.APIToken, error)
	RevokeToken(ctx context.Context, owner, id string) error
}

// SetTokenStore enables the API token endpoints.
func (s *Server) SetTokenStore(ts TokenStore) { s.tokens = ts }

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func tokenJSON(t *store.APIToken) apitype.TokenJSON {
	return apitype.TokenJSON{ID: t.ID, Name: t.Name, ReadOnly: t.ReadOnly, CreatedAt: t.CreatedAt.UTC(),
		ExpiresAt: optTime(t.ExpiresAt), LastUsed: optTime(t.LastUsed), Revoked: !t.RevokedAt.IsZero()}
}

// ParseTTL reads durations like 30d, 12h or 90m.
func ParseTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("expiry %q: use a positive number of days (30d) or a duration (12h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("expiry %q: use a positive number of days (30d) or a duration (12h)", s)
	}
	return d, nil
}

const maxTokenTTL = 366 * 24 * time.Hour

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	if u.Via != "oidc" {
		// A token must not mint tokens: a short-lived or stolen credential
		// could otherwise renew itself forever.
		WriteError(w, http.StatusForbidden, "login_required", "API tokens can only be created from a login (run: gateway login), not with another token or a browser session")
		return
	}
	var req apitype.CreateTokenRequest
	if !decode(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 64 {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "name the token (1 to 64 characters), e.g. \"ci\"")
		return
	}
	if req.ExpiresIn == "" {
		req.ExpiresIn = "30d"
	}
	ttl, err := ParseTTL(req.ExpiresIn)
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	if ttl > maxTokenTTL {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "tokens may last at most 366d")
		return
	}
	secret := auth.NewToken(auth.APITokenPrefix)
	now := time.Now()
	t := &store.APIToken{ID: "tok_" + auth.NewToken("")[:16], Owner: u.Owner(), OwnerName: u.Name, Name: req.Name, Hash: auth.HashToken(secret),
		Groups: u.Groups, ReadOnly: req.ReadOnly || u.ReadOnly, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.tokens.CreateToken(r.Context(), t); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("API token created", "user", u.Name, "token_id", t.ID, "name", t.Name, "read_only", t.ReadOnly)
	out := tokenJSON(t)
	out.Token = secret
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	ts, err := s.tokens.ListTokens(r.Context(), u.Owner())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.TokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	err := s.tokens.RevokeToken(r.Context(), u.Owner(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "token_not_found", "no token "+r.PathValue("id")+" of yours")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Apply the revocation here at once; other replicas' caches last at
	// most a second.
	if f, ok := s.auth.(forgetter); ok {
		f.Forget()
	}
	if s.sessions != nil {
		s.sessions.Forget() // the store ended the token's sessions: apply it here at once
	}
	s.log.Info("API token revoked", "user", u.Name, "token_id", r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

// forgetter is an authenticator that remembers credentials for a while
// (auth.APITokens, auth.Chain).
type forgetter interface{ Forget() }

func (s *Server) tokensEnabled(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.tokens == nil {
			WriteError(w, http.StatusNotFound, "not_found", "API tokens are not enabled on this gateway")
			return
		}
		h(w, r)
	}
}
