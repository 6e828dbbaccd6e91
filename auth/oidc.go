package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCConfig configures verification of OpenID Connect ID tokens.
type OIDCConfig struct {
	Issuer   string // discovered through /.well-known/openid-configuration
	ClientID string // the public client the CLI and the browser login use
	// Audience the tokens must carry; ClientID when empty.
	Audience string
	// UsernameClaims are tried in order; the first non-empty one names the user.
	UsernameClaims []string
	GroupsClaim    string
	AdminGroups    []string
	AdminUsers     []string
	// ClockSkew is how far exp, nbf and iat may be off.
	ClockSkew  time.Duration
	Now        func() time.Time
	HTTPClient *http.Client
}

// OIDC authenticates ID tokens issued by one OpenID Connect provider. Keys
// come from the provider's JWKS and are fetched again when a token names an
// unknown key, so key rotation needs no restart.
type OIDC struct {
	cfg      OIDCConfig
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier

	mu    sync.Mutex
	cache map[[32]byte]cachedUser // verified tokens, until they expire
}

type cachedUser struct {
	user User
	exp  time.Time
}

const maxCachedTokens = 10000

// NewOIDC discovers the provider. It fails when the issuer cannot be reached
// or its discovery document is not for that issuer.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("auth: OIDC needs auth.oidc.issuer and auth.oidc.client_id")
	}
	if cfg.Audience == "" {
		cfg.Audience = cfg.ClientID
	}
	if len(cfg.UsernameClaims) == 0 {
		cfg.UsernameClaims = []string{"preferred_username", "email", "sub"}
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	}
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: discover OIDC issuer %s: %w", cfg.Issuer, err)
	}
	o := &OIDC{cfg: cfg, provider: p, cache: map[[32]byte]cachedUser{}}
	// Expiry is checked below with the configured skew, not by go-oidc.
	o.verifier = p.Verifier(&oidc.Config{ClientID: cfg.Audience, SkipExpiryCheck: true, Now: cfg.Now})
	return o, nil
}

// Provider is the discovered provider (endpoints for the login flows).
func (o *OIDC) Provider() *oidc.Provider { return o.provider }

// Config returns the configuration in force.
func (o *OIDC) Config() OIDCConfig { return o.cfg }

// looksLikeJWT tells an ID token from the gateway's own API tokens without
// parsing it.
func looksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ")
}

// Authenticate implements Authenticator.
func (o *OIDC) Authenticate(ctx context.Context, token string) (*User, error) {
	if !looksLikeJWT(token) {
		return nil, ErrNoCredentials
	}
	key := sha256.Sum256([]byte(token))
	now := o.cfg.Now()
	o.mu.Lock()
	if c, ok := o.cache[key]; ok {
		if now.Before(c.exp.Add(o.cfg.ClockSkew)) {
			o.mu.Unlock()
			u := c.user
			return &u, nil
		}
		delete(o.cache, key)
	}
	o.mu.Unlock()

	if o.cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	idt, err := o.verifier.Verify(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describeVerifyError(err))
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: token claims are not valid JSON", ErrInvalid)
	}
	skew := o.cfg.ClockSkew
	if now.After(idt.Expiry.Add(skew)) {
		return nil, fmt.Errorf("%w: token expired at %s; run: gateway login", ErrInvalid, idt.Expiry.UTC().Format(time.RFC3339))
	}
	if nbf, ok := numericTime(claims["nbf"]); ok && now.Add(skew).Before(nbf) {
		return nil, fmt.Errorf("%w: token not valid before %s", ErrInvalid, nbf.UTC().Format(time.RFC3339))
	}
	if now.Add(skew).Before(idt.IssuedAt) {
		return nil, fmt.Errorf("%w: token issued in the future (%s); check the clocks", ErrInvalid, idt.IssuedAt.UTC().Format(time.RFC3339))
	}
	u, err := o.userFrom(claims)
	if err != nil {
		return nil, err
	}
	u.Expires = idt.Expiry
	o.mu.Lock()
	if len(o.cache) >= maxCachedTokens {
		for k := range o.cache { // evict an arbitrary entry: a bound, not an LRU
			delete(o.cache, k)
			break
		}
	}
	o.cache[key] = cachedUser{user: *u, exp: idt.Expiry}
	o.mu.Unlock()
	return u, nil
}

// VerifyLogin verifies the ID token of a browser login that this gateway
// started with nonce.
func (o *OIDC) VerifyLogin(ctx context.Context, rawIDToken, nonce string) (*User, error) {
	if o.cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	idt, err := o.verifier.Verify(ctx, rawIDToken)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describeVerifyError(err))
	}
	if nonce == "" || idt.Nonce != nonce {
		return nil, fmt.Errorf("%w: the login answer is not for this login (nonce mismatch)", ErrInvalid)
	}
	return o.Authenticate(ctx, rawIDToken)
}

func numericTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case float64:
		return time.Unix(int64(x), 0), true
	case json.Number:
		f, err := x.Float64()
		return time.Unix(int64(f), 0), err == nil
	}
	return time.Time{}, false
}

// describeVerifyError turns go-oidc's errors into a message that says what
// is wrong without echoing the token.
func describeVerifyError(err error) string {
	var exp *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &exp):
		return "token expired; run: gateway login"
	case strings.Contains(msg, "issued by a different provider"):
		return "token was issued by another issuer"
	case strings.Contains(msg, "expected audience"):
		return "token is for another audience"
	case strings.Contains(msg, "signature"), strings.Contains(msg, "key"):
		return "token signature cannot be verified"
	case strings.Contains(msg, "malformed"), strings.Contains(msg, "unmarshal"):
		return "token is malformed"
	case strings.Contains(msg, "nbf"):
		return "token is not valid yet"
	default:
		return "token rejected"
	}
}

func (o *OIDC) userFrom(claims map[string]any) (*User, error) {
	u := &User{}
	u.Subject, _ = claims["sub"].(string)
	if u.Subject == "" {
		return nil, fmt.Errorf("%w: token has no subject", ErrInvalid)
	}
	// Ownership follows the subject, which the provider never reassigns;
	// names and emails can be edited or recycled, so they only label.
	u.ID = "oidc:" + u.Subject
	for _, c := range o.cfg.UsernameClaims {
		if s, ok := claims[c].(string); ok && s != "" {
			if c == "email" && claims["email_verified"] != true {
				continue // an unverified address names nobody
			}
			u.Name = s
			break
		}
	}
	if u.Name == "" {
		return nil, fmt.Errorf("%w: token has none of the claims %s that name a user (an email must be verified)", ErrInvalid, strings.Join(o.cfg.UsernameClaims, ", "))
	}
	u.Email, _ = claims["email"].(string)
	switch g := claims[o.cfg.GroupsClaim].(type) {
	case []any:
		for _, x := range g {
			if s, ok := x.(string); ok {
				u.Groups = append(u.Groups, s)
			}
		}
	case string: // some providers send a single group as a string
		u.Groups = []string{g}
	}
	u.Admin = isAdmin(u, o.cfg.AdminUsers, o.cfg.AdminGroups)
	u.Via = "oidc"
	return u, nil
}

func isAdmin(u *User, users, groups []string) bool {
	for _, a := range users {
		if a == u.Owner() || (u.Via != "oidc" && a == u.Name) || a == "sub:"+u.Subject {
			return true
		}
	}
	for _, g := range u.Groups {
		for _, a := range groups {
			if g == a {
				return true
			}
		}
	}
	return false
}
