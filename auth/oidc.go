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

	"github.com/gatewayhq/gateway/store"
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
	// KeyRefetchInterval is the least time between two fetches of the
	// provider's keys for tokens signed with a key not seen yet
	// (DefaultKeyRefetchInterval when zero).
	KeyRefetchInterval time.Duration
	// Users, when set, records each user's claims at each login, for
	// their API tokens and browser sessions (see Access).
	Users ClaimsRecorder
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
	// recorded is, per user, an issue time the store's claims are known to
	// be at least as new as: a token issued no later needs no store call.
	recorded map[string]time.Time
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
	var meta struct {
		JWKSURL    string   `json:"jwks_uri"`
		Algorithms []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, fmt.Errorf("auth: OIDC issuer %s publishes no jwks_uri in its discovery document", cfg.Issuer)
	}
	var algs []string
	for _, a := range meta.Algorithms {
		for _, ok := range signingAlgs {
			if a == string(ok) {
				algs = append(algs, a)
			}
		}
	}
	o := &OIDC{cfg: cfg, provider: p, cache: map[[32]byte]cachedUser{}, recorded: map[string]time.Time{}}
	// Our own key set, not go-oidc's RemoteKeySet, which fetches the keys
	// again for every token it cannot verify (forged ones included).
	ks := newKeySet(meta.JWKSURL, cfg.HTTPClient, cfg.KeyRefetchInterval, cfg.Now)
	// Expiry is checked below with the configured skew, not by go-oidc.
	o.verifier = oidc.NewVerifier(cfg.Issuer, ks, &oidc.Config{ClientID: cfg.Audience, SkipExpiryCheck: true, Now: cfg.Now, SupportedSigningAlgs: algs})
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
		// Counted as a failure (not ErrEnded) although genuine: each
		// replay costs a signature check, and the CLI renews before expiry.
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
	if err := o.record(ctx, u, idt.IssuedAt); err != nil {
		return nil, err
	}
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

// record keeps u's claims for their API tokens and sessions, ordered by the
// token's issue time (when the provider asserted them), never by when this
// gateway saw the token: the store keeps the claims of the latest issued
// token, and a token issued no later than the ones recorded is not written.
// Writes are saved by that alone: each new ID token is written once, by the
// first replica that sees it, and never again.
func (o *OIDC) record(ctx context.Context, u *User, issued time.Time) error {
	if o.cfg.Users == nil {
		return nil
	}
	if issued.IsZero() {
		// Without iat (which OpenID Connect requires) there is no order: such
		// claims could undo newer ones, so they count for this token only.
		return nil
	}
	o.mu.Lock()
	last, ok := o.recorded[u.Owner()]
	o.mu.Unlock()
	if ok && !issued.After(last) {
		return nil // the store holds claims issued at least as late
	}
	if _, err := o.cfg.Users.RecordUserClaims(ctx, &store.UserClaims{ID: u.Owner(), Name: u.Name, Email: u.Email, Groups: u.Groups, ClaimsAt: issued}); err != nil {
		// Not ErrInvalid: the token is good, the store is not answering.
		return fmt.Errorf("auth: record the claims of %s: %w", u.Name, err)
	}
	// Written or not, the store now holds claims issued at least this late.
	o.mu.Lock()
	if len(o.recorded) >= maxCachedTokens {
		clear(o.recorded) // a bound; the store has the truth
	}
	if issued.After(o.recorded[u.Owner()]) {
		o.recorded[u.Owner()] = issued
	}
	o.mu.Unlock()
	return nil
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
	case strings.Contains(msg, errUnknownKey.Error()):
		return "token signature cannot be verified: it is signed with a key the issuer does not publish (if the issuer has just rotated its keys, try again in a few seconds)"
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
		// A name identifies only identities that have no ID (static
		// users): OIDC users pick or edit their names at the provider.
		if a == u.Owner() || (u.ID == "" && a == u.Name) || (u.Subject != "" && a == "sub:"+u.Subject) {
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
