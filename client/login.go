package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// AuthConfig is what the gateway says about its identity provider.
type AuthConfig struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
}

// AuthConfig asks the gateway which identity provider it trusts.
func (c *Client) AuthConfig(ctx context.Context) (*AuthConfig, error) {
	var v AuthConfig
	if err := c.do(ctx, http.MethodGet, "/api/v1/auth/config", nil, &v); err != nil {
		return nil, err
	}
	if v.Issuer == "" || v.ClientID == "" {
		return nil, errors.New("the gateway did not say which identity provider to log in with")
	}
	return &v, nil
}

// Discover asks the gateway (through c, which needs no credentials) which
// issuer it trusts, and discovers that issuer.
func Discover(ctx context.Context, c *Client) (*AuthConfig, *oauth2.Config, error) {
	ac, err := c.AuthConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	oc, err := OAuth2(ctx, ac)
	if err != nil {
		return nil, nil, err
	}
	return ac, oc, nil
}

// OAuth2 discovers the issuer and returns the OAuth 2.0 configuration of the
// gateway's public client.
func OAuth2(ctx context.Context, ac *AuthConfig) (*oauth2.Config, error) {
	p, err := oidc.NewProvider(ctx, ac.Issuer)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the identity provider %s: %w", ac.Issuer, err)
	}
	scopes := ac.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "profile", "email", "groups", oidc.ScopeOfflineAccess}
	}
	return &oauth2.Config{ClientID: ac.ClientID, Endpoint: p.Endpoint(), Scopes: scopes}, nil
}

// DeviceLogin runs the OAuth 2.0 Device Authorization Grant (RFC 8628):
// prompt tells the user where to approve, then it polls until they do.
func DeviceLogin(ctx context.Context, oc *oauth2.Config, prompt func(*oauth2.DeviceAuthResponse) error) (*oauth2.Token, error) {
	if oc.Endpoint.DeviceAuthURL == "" {
		return nil, errors.New("the identity provider has no device authorization endpoint: use gateway login --browser")
	}
	resp, err := oc.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	if err := prompt(resp); err != nil {
		return nil, err
	}
	tok, err := oc.DeviceAccessToken(ctx, resp)
	if err != nil {
		return nil, fmt.Errorf("login did not complete: %w", err)
	}
	return tok, nil
}

// BrowserLogin runs the authorization code flow with PKCE and a loopback
// redirect (RFC 8252): open is given the URL to visit.
func BrowserLogin(ctx context.Context, oc *oauth2.Config, open func(url string)) (*oauth2.Token, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	cfg := *oc
	cfg.RedirectURL = fmt.Sprintf("http://%s/callback", ln.Addr())
	verifier := oauth2.GenerateVerifier()
	state := randomString()
	type result struct {
		code string
		err  error
	}
	done := make(chan result, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var res result
		switch {
		case q.Get("state") != state:
			res.err = errors.New("the login answer did not match this login (state mismatch)")
		case q.Get("error") != "":
			res.err = fmt.Errorf("login refused: %s %s", q.Get("error"), q.Get("error_description"))
		default:
			res.code = q.Get("code")
		}
		if res.err != nil {
			http.Error(w, res.err.Error(), http.StatusBadRequest)
		} else {
			fmt.Fprintln(w, "Logged in to the gateway. You can close this window.")
		}
		select {
		case done <- res:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	open(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		tok, err := cfg.Exchange(ctx, res.code, oauth2.VerifierOption(verifier))
		if err != nil {
			return nil, fmt.Errorf("exchange the login code: %w", err)
		}
		return tok, nil
	}
}

func randomString() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// EntryFromToken records a login's tokens for one gateway. The ID token is
// what the gateway verifies; the refresh token renews it.
func EntryFromToken(ac *AuthConfig, oc *oauth2.Config, tok *oauth2.Token) (Entry, error) {
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return Entry{}, errors.New("the identity provider returned no ID token (is the openid scope allowed for this client?)")
	}
	exp, err := jwtExpiry(id)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Token: id, RefreshToken: tok.RefreshToken, Expiry: exp, Issuer: ac.Issuer, ClientID: ac.ClientID, TokenURL: oc.Endpoint.TokenURL}, nil
}

// jwtExpiry reads exp from a JWT without verifying it: the gateway verifies;
// the CLI only needs to know when to refresh.
func jwtExpiry(tok string) (time.Time, error) {
	exp, err := jwtClaim(tok, "exp")
	if err != nil {
		return time.Time{}, err
	}
	if exp == 0 {
		return time.Time{}, errors.New("the ID token has no expiry")
	}
	return time.Unix(exp, 0), nil
}

// jwtClaim reads a numeric claim (0 when absent) of an unverified JWT.
func jwtClaim(tok, name string) (int64, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return 0, errNotJWT
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0, errNotJWT
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, errNotJWT
	}
	v, _ := c[name].(float64)
	return int64(v), nil
}

// ErrSessionExpired means the stored login can no longer be renewed.
var ErrSessionExpired = errors.New("your gateway session has expired: run: gateway login")

// Fresh returns the entry with a valid ID token, renewing it with the
// refresh token when it expires within a minute (a quarter of its
// lifetime when that is shorter). The second result reports whether it
// changed (and should be saved).
func (e Entry) Fresh(ctx context.Context, now time.Time) (Entry, bool, error) {
	if e.Expiry.IsZero() || now.Add(renewMargin(e)).Before(e.Expiry) {
		return e, false, nil // a static/API token, or still fresh
	}
	if e.RefreshToken == "" || e.TokenURL == "" {
		return e, false, ErrSessionExpired
	}
	oc := &oauth2.Config{ClientID: e.ClientID, Endpoint: oauth2.Endpoint{TokenURL: e.TokenURL}}
	tok, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: e.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return e, false, fmt.Errorf("%w (renewal failed: %v)", ErrSessionExpired, err)
	}
	n, err := EntryFromToken(&AuthConfig{Issuer: e.Issuer, ClientID: e.ClientID}, oc, tok)
	if err != nil {
		return e, false, err
	}
	if n.RefreshToken == "" {
		n.RefreshToken = e.RefreshToken // providers may keep the old one valid
	}
	n.CAFile = e.CAFile
	return n, true, nil
}
