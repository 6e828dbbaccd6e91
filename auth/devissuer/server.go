package devissuer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// server is the library's LegacyServer (which drives op.Storage exactly as
// the classic op.Provider router does) with a few methods overridden:
//
//   - the token grants re-stamp the ID token's iat/exp on Config.Now: the
//     library's op.CreateIDToken reads time.Now directly, and Config.Now is
//     the issuer's clock;
//   - Authorize requires PKCE S256 and answers prompt=none with
//     login_required (the dev issuer keeps no browser session);
//   - Discovery advertises what this issuer actually supports;
//   - the JWT profile grant, which the library always enables, is refused.
type server struct {
	*op.LegacyServer
	iss *Issuer
}

var _ op.ExtendedLegacyServer = (*server)(nil)

func (s *server) Discovery(ctx context.Context, r *op.Request[struct{}]) (*op.Response, error) {
	resp, err := s.LegacyServer.Discovery(ctx, r)
	if err != nil {
		return nil, err
	}
	if d, ok := resp.Data.(*oidc.DiscoveryConfiguration); ok {
		d.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
		d.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeDeviceCode}
		d.CodeChallengeMethodsSupported = []oidc.CodeChallengeMethod{oidc.CodeChallengeMethodS256}
		d.TokenEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone}
		d.TokenEndpointAuthSigningAlgValuesSupported = nil
		d.RevocationEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone}
		d.RevocationEndpointAuthSigningAlgValuesSupported = nil
		d.IntrospectionEndpoint = ""
		d.IntrospectionEndpointAuthMethodsSupported = nil
		d.IntrospectionEndpointAuthSigningAlgValuesSupported = nil
	}
	return resp, nil
}

func (s *server) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	// Errors returned here reach the client's (already validated) redirect_uri.
	if r.Data.CodeChallenge == "" || r.Data.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE is required: send code_challenge with code_challenge_method=S256")
	}
	if slices.Contains(r.Data.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired().WithDescription("the development issuer keeps no session; an identity must be picked")
	}
	return s.LegacyServer.Authorize(ctx, r)
}

func (s *server) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	return s.restamp(s.LegacyServer.CodeExchange(ctx, r))
}

func (s *server) RefreshToken(ctx context.Context, r *op.ClientRequest[oidc.RefreshTokenRequest]) (*op.Response, error) {
	return s.restamp(s.LegacyServer.RefreshToken(ctx, r))
}

func (s *server) DeviceToken(ctx context.Context, r *op.ClientRequest[oidc.DeviceAccessTokenRequest]) (*op.Response, error) {
	return s.restamp(s.LegacyServer.DeviceToken(ctx, r))
}

func (s *server) JWTProfile(context.Context, *op.Request[oidc.JWTProfileGrantRequest]) (*op.Response, error) {
	return nil, oidc.ErrUnsupportedGrantType().WithDescription("%s is not supported", oidc.GrantTypeBearer)
}

// restamp replaces the ID token of a token response by one whose iat and
// exp (and nbf, should the library ever set it) are read on Config.Now;
// every other claim, at_hash and c_hash included, is kept as the library
// made it. It is signed with the current key.
func (s *server) restamp(resp *op.Response, err error) (*op.Response, error) {
	if err != nil {
		return nil, err
	}
	tokens, ok := resp.Data.(*oidc.AccessTokenResponse)
	if !ok || tokens.IDToken == "" {
		return resp, nil
	}
	idToken, err := s.iss.restampIDToken(tokens.IDToken)
	if err != nil {
		return nil, oidc.ErrServerError().WithDescription("could not sign ID token").WithParent(err)
	}
	tokens.IDToken = idToken
	return resp, nil
}

func (i *Issuer) restampIDToken(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("ID token is not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("decoding ID token payload: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		return "", fmt.Errorf("decoding ID token claims: %w", err)
	}
	now := i.now()
	claims["iat"] = now.Unix()
	claims["exp"] = now.Add(i.cfg.IDTokenLifetime).Unix()
	if _, ok := claims["nbf"]; ok {
		claims["nbf"] = now.Unix()
	}
	payload, err = json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signer, err := i.store.currentKey().signer()
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
