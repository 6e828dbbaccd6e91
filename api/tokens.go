package api

import (
	"context"
	"errors"
	"net/http"
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

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	if !u.MayCreateTokens() {
		WriteError(w, http.StatusForbidden, "login_required", "API tokens can only be created from a login (run: gateway login), not with another token or a browser session")
		return
	}
	var req apitype.CreateTokenRequest
	if !decode(w, r, &req) {
		return
	}
	t, secret, err := auth.NewAPIToken(u, auth.TokenRequest{Name: req.Name, ExpiresIn: req.ExpiresIn, ReadOnly: req.ReadOnly}, time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
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
	s.Forget()
	s.log.Info("API token revoked", "user", u.Name, "token_id", r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

// Forget applies a revocation made in the store (of an API token, and so
// of the browser sessions its links made) at once in this process: the
// authenticator and the browser sessions forget what they remember of
// credentials; other replicas' caches last at most a second. The console
// calls it after revoking a token, as the token endpoint does.
func (s *Server) Forget() {
	if f, ok := s.auth.(forgetter); ok {
		f.Forget()
	}
	if s.sessions != nil {
		s.sessions.Forget()
	}
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
