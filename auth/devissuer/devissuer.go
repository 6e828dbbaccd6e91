// Package devissuer is the OpenID Connect provider that `gateway dev` embeds,
// so that development runs through the very same OIDC code path (discovery,
// authorization code + PKCE, device authorization, refresh, JWKS rotation) as
// production, against a real OpenID Provider.
//
// It is built on github.com/zitadel/oidc/v3/pkg/op with an in-memory storage.
// There are no passwords: the issuer is meant for loopback use only, and a
// person signs in by picking one of the configured identities on a plain HTML
// page (no JavaScript, no external assets).
//
// Routes served by [Issuer.Handler], relative to the issuer URL:
//
//	GET  /.well-known/openid-configuration  discovery
//	GET  /keys                              JWKS
//	GET  /authorize                         authorization endpoint (code flow, PKCE S256 required)
//	GET  /authorize/callback?id=ID          library callback that issues the code after login
//	POST /oauth/token                       token endpoint (authorization_code, refresh_token, device_code)
//	POST /device_authorization              device authorization endpoint (RFC 8628)
//	GET  /userinfo                          userinfo
//	POST /revoke                            token revocation (RFC 7009)
//	GET  /end_session                       RP-initiated logout
//	GET  /login?id=ID                       identity picker for an authorization request
//	POST /login      id=ID&username=NAME    completes the authorization request as NAME
//	GET  /device[?user_code=CODE]           device verification page
//	POST /device     user_code=CODE&username=NAME[&action=deny]
//	GET  /logged-out                        default page after end_session
package devissuer

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is one identity offered on the login pages.
type User struct {
	Subject  string   // stable id, e.g. "dev-user-1"
	Username string   // preferred_username claim
	Email    string   // email claim (email_verified is always true)
	Name     string   // name claim
	Groups   []string // "groups" claim, in ID tokens and userinfo
}

// Config configures an [Issuer].
type Config struct {
	// Issuer is the absolute URL where Handler is served, e.g.
	// "http://127.0.0.1:8001". http is only accepted for loopback hosts
	// (127.0.0.0/8, ::1, localhost). If it has a path, Handler expects the
	// full request path (it strips the issuer path itself).
	Issuer string
	// ClientID is the one public client (no secret, PKCE S256 required for
	// the code flow) with the grant types authorization_code, refresh_token
	// and urn:ietf:params:oauth:grant-type:device_code.
	ClientID string
	// RedirectURIs are the redirect URIs allowed for the code flow (the
	// gateway's browser callback, e.g. http://127.0.0.1:8000/auth/callback).
	// Loopback redirects http://127.0.0.1:<any port>/callback are always
	// accepted as well (RFC 8252 native-app rule, for `gateway login
	// --browser`); as with any native client, a loopback redirect URI
	// matches on any port.
	RedirectURIs []string
	// Users are the identities one can sign in as. At least one.
	Users []User

	IDTokenLifetime      time.Duration    // default 10m
	AccessTokenLifetime  time.Duration    // default 10m
	RefreshTokenLifetime time.Duration    // default 24h
	Now                  func() time.Time // clock for tokens; default time.Now
	Logger               *slog.Logger     // default slog.Default(); tokens and codes are never logged
}

const (
	defaultIDTokenLifetime      = 10 * time.Minute
	defaultAccessTokenLifetime  = 10 * time.Minute
	defaultRefreshTokenLifetime = 24 * time.Hour

	// authRequestLifetime bounds how long a started authorization request
	// (and the code issued for it) stays usable.
	authRequestLifetime = 15 * time.Minute
	// deviceLifetime is how long a device/user code pair stays valid.
	deviceLifetime = 10 * time.Minute
	// devicePollInterval is the polling interval announced to device clients.
	devicePollInterval = time.Second

	// loopbackCallback is registered so that the library's native-client rule
	// (loopback redirect URIs match on any port, RFC 8252 section 7.3) accepts
	// http://127.0.0.1:<port>/callback for the CLI.
	loopbackCallback = "http://127.0.0.1/callback"

	scopeGroups = "groups"
	claimGroups = "groups"
)

// supportedScopes are the scopes the dev issuer knows; others are dropped.
var supportedScopes = []string{
	oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail, scopeGroups, oidc.ScopeOfflineAccess,
}

// Issuer is an in-memory OpenID Provider for development.
type Issuer struct {
	cfg      Config // normalised copy
	basePath string // path of the issuer URL without trailing slash, "" for none
	log      *slog.Logger
	store    *storage
	server   *server
	handler  http.Handler
}

// New validates cfg and builds an Issuer with a fresh RS256 signing key.
func New(cfg Config) (*Issuer, error) {
	cfg, issuerURL, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	key, err := newSigningKey()
	if err != nil {
		return nil, fmt.Errorf("devissuer: generating signing key: %w", err)
	}
	i := &Issuer{
		cfg:      cfg,
		basePath: strings.TrimSuffix(issuerURL.Path, "/"),
		log:      cfg.Logger,
	}
	i.store = newStorage(i, key)

	// Authorization codes and opaque access tokens are AES-256-GCM encrypted
	// by the library with this key (op.Config.CryptoKey); a fresh one per
	// Issuer makes them worthless across restarts.
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		return nil, fmt.Errorf("devissuer: generating crypto key: %w", err)
	}
	opConfig := &op.Config{
		CryptoKey:                cryptoKey,
		CryptoKeyId:              "devissuer",
		DefaultLogoutRedirectURI: cfg.Issuer + "/logged-out",
		CodeMethodS256:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
		SupportedClaims:          append(slices.Clone(op.DefaultSupportedClaims), claimGroups),
		SupportedScopes:          slices.Clone(supportedScopes),
		DeviceAuthorization: op.DeviceAuthorizationConfig{
			Lifetime:     deviceLifetime,
			PollInterval: devicePollInterval,
			UserFormPath: i.basePath + "/device",
			UserCode:     op.UserCodeBase20, // 8 chars of BCDFGHJKLMNPQRSTVWXZ, XXXX-XXXX
		},
	}
	var opts []op.Option
	if issuerURL.Scheme == "http" {
		// op.StaticIssuer refuses a non-https issuer unless the provider
		// allows insecure issuers; New only lets http through for loopback.
		opts = append(opts, op.WithAllowInsecure())
	}
	provider, err := op.NewProvider(opConfig, i.store, op.StaticIssuer(cfg.Issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("devissuer: creating OpenID provider: %w", err)
	}

	// The provider's own router is not used: the legacy server wrapper lets
	// the token grants be overridden to stamp ID tokens with Config.Now (see
	// server.go). Introspection is left out: there is no confidential client.
	endpoints := op.Endpoints{
		Authorization:       op.NewEndpoint("authorize"),
		Token:               op.NewEndpoint("oauth/token"),
		Userinfo:            op.NewEndpoint("userinfo"),
		Revocation:          op.NewEndpoint("revoke"),
		EndSession:          op.NewEndpoint("end_session"),
		JwksURI:             op.NewEndpoint("keys"),
		DeviceAuthorization: op.NewEndpoint("device_authorization"),
	}
	i.server = &server{LegacyServer: op.NewLegacyServer(provider, endpoints), iss: i}
	oidcHandler := op.RegisterLegacyServer(i.server, op.AuthorizeCallbackHandler(provider))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", i.loginPage)
	mux.HandleFunc("POST /login", i.loginSubmit)
	mux.HandleFunc("GET /device", i.devicePage)
	mux.HandleFunc("POST /device", i.deviceSubmit)
	mux.HandleFunc("GET /logged-out", i.loggedOutPage)
	mux.Handle("/", oidcHandler)
	i.handler = mux
	if i.basePath != "" {
		i.handler = stripIssuerPath(i.basePath, mux)
	}
	// It signs anyone in: only requests addressed to the issuer's own
	// address are served, never a rebound name's.
	i.handler = RequireHost(i.handler, issuerHosts(issuerURL.Scheme, issuerURL.Hostname(), issuerURL.Port()), refuseHost)
	return i, nil
}

// Handler serves every endpoint of the issuer: discovery, JWKS, authorize,
// token, device_authorization, userinfo, revoke, end_session and the login
// and device pages. It answers 421 to requests whose Host is not the
// issuer's (for a loopback issuer: 127.0.0.1, localhost or [::1] with the
// issuer's port), which shuts out DNS-rebinding pages.
func (i *Issuer) Handler() http.Handler { return i.handler }

// RotateKey makes a new RS256 signing key (new kid) current. The keys it
// replaces stay published in the JWKS until DropOldKeys.
func (i *Issuer) RotateKey() error {
	key, err := newSigningKey()
	if err != nil {
		return fmt.Errorf("devissuer: generating signing key: %w", err)
	}
	old := i.store.rotateKey(key)
	i.log.Info("devissuer: signing key rotated", "kid", key.id, "previous_kid", old)
	return nil
}

// DropOldKeys unpublishes every key but the current one.
func (i *Issuer) DropOldKeys() {
	n := i.store.dropOldKeys()
	i.log.Info("devissuer: old signing keys dropped", "dropped", n)
}

// Users returns a copy of the configured identities.
func (i *Issuer) Users() []User {
	users := make([]User, len(i.cfg.Users))
	for n, u := range i.cfg.Users {
		u.Groups = slices.Clone(u.Groups)
		users[n] = u
	}
	return users
}

func (i *Issuer) now() time.Time { return i.cfg.Now() }

// realTime converts t, read on Config.Now, to the wall clock. The library
// compares some instants with time.Now (device code expiry, expires_in);
// handing it converted instants keeps those comparisons on Config.Now.
func (i *Issuer) realTime(t time.Time) time.Time {
	return time.Now().Add(t.Sub(i.now()))
}

func (i *Issuer) userByName(username string) (User, bool) {
	for _, u := range i.cfg.Users {
		if u.Username == username {
			return u, true
		}
	}
	return User{}, false
}

func (i *Issuer) userBySubject(subject string) (User, bool) {
	for _, u := range i.cfg.Users {
		if u.Subject == subject {
			return u, true
		}
	}
	return User{}, false
}

func stripIssuerPath(prefix string, next http.Handler) http.Handler {
	strip := http.StripPrefix(prefix, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != prefix && !strings.HasPrefix(r.URL.Path, prefix+"/") {
			http.NotFound(w, r)
			return
		}
		strip.ServeHTTP(w, r)
	})
}

// normalize validates cfg and fills in defaults. The returned Config owns its
// slices.
func normalize(cfg Config) (Config, *url.URL, error) {
	issuerURL, err := validateIssuer(cfg.Issuer)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.ClientID == "" {
		return cfg, nil, errors.New("devissuer: ClientID is required")
	}
	if strings.ContainsFunc(cfg.ClientID, isSpaceOrControl) {
		return cfg, nil, fmt.Errorf("devissuer: ClientID %q must not contain spaces or control characters", cfg.ClientID)
	}

	redirects := make([]string, 0, len(cfg.RedirectURIs))
	for _, raw := range cfg.RedirectURIs {
		if err := validateRedirectURI(raw); err != nil {
			return cfg, nil, err
		}
		if !slices.Contains(redirects, raw) {
			redirects = append(redirects, raw)
		}
	}
	cfg.RedirectURIs = redirects

	if len(cfg.Users) == 0 {
		return cfg, nil, errors.New("devissuer: at least one user is required")
	}
	users := make([]User, len(cfg.Users))
	usernames := make(map[string]bool, len(cfg.Users))
	subjects := make(map[string]bool, len(cfg.Users))
	for n, u := range cfg.Users {
		if strings.TrimSpace(u.Username) == "" {
			return cfg, nil, fmt.Errorf("devissuer: user %d: Username is required", n)
		}
		if strings.TrimSpace(u.Subject) == "" {
			return cfg, nil, fmt.Errorf("devissuer: user %q: Subject is required", u.Username)
		}
		if usernames[u.Username] {
			return cfg, nil, fmt.Errorf("devissuer: duplicate username %q", u.Username)
		}
		if subjects[u.Subject] {
			return cfg, nil, fmt.Errorf("devissuer: duplicate subject %q (user %q)", u.Subject, u.Username)
		}
		usernames[u.Username] = true
		subjects[u.Subject] = true
		u.Groups = slices.Clone(u.Groups)
		users[n] = u
	}
	cfg.Users = users

	for _, d := range []struct {
		name string
		val  *time.Duration
		def  time.Duration
	}{
		{"IDTokenLifetime", &cfg.IDTokenLifetime, defaultIDTokenLifetime},
		{"AccessTokenLifetime", &cfg.AccessTokenLifetime, defaultAccessTokenLifetime},
		{"RefreshTokenLifetime", &cfg.RefreshTokenLifetime, defaultRefreshTokenLifetime},
	} {
		switch {
		case *d.val < 0:
			return cfg, nil, fmt.Errorf("devissuer: %s must not be negative (got %s)", d.name, *d.val)
		case *d.val == 0:
			*d.val = d.def
		case *d.val < time.Second:
			return cfg, nil, fmt.Errorf("devissuer: %s must be at least 1s (got %s); token lifetimes have second resolution", d.name, *d.val)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, issuerURL, nil
}

func validateIssuer(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("devissuer: Issuer is required (e.g. http://127.0.0.1:8001)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("devissuer: Issuer %q is not a valid URL: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("devissuer: Issuer %q must be an absolute http or https URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("devissuer: Issuer %q has no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("devissuer: Issuer %q must not contain user info", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("devissuer: Issuer %q must not have a query or fragment", raw)
	case strings.HasSuffix(raw, "/"):
		return nil, fmt.Errorf("devissuer: Issuer %q must not end with a slash (OIDC issuers are compared byte for byte)", raw)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		return nil, fmt.Errorf("devissuer: Issuer %q uses http on a non-loopback host; the development issuer is loopback-only (use 127.0.0.1, ::1 or localhost)", raw)
	}
	return u, nil
}

func validateRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("devissuer: redirect URI %q is not a valid URL: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("devissuer: redirect URI %q must be an absolute http or https URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("devissuer: redirect URI %q has no host", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("devissuer: redirect URI %q must not have a fragment", raw)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		return fmt.Errorf("devissuer: redirect URI %q uses http on a non-loopback host", raw)
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f
}
