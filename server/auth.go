package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/devissuer"
	"github.com/gatewayhq/gateway/internal/config"
)

// DevUsers are the identities of the development issuer: two ordinary users
// (to see that neither reaches the other's clusters) and an admin.
func DevUsers() []devissuer.User {
	return []devissuer.User{
		{Subject: "dev-user-1", Username: "dev", Email: "dev@localhost", Name: "Dev User", Groups: []string{"gateway-users"}},
		{Subject: "dev-user-2", Username: "dev2", Email: "dev2@localhost", Name: "Second Dev User", Groups: []string{"gateway-users"}},
		{Subject: "dev-admin-1", Username: "admin", Email: "admin@localhost", Name: "Dev Admin", Groups: []string{"gateway-users", "gateway-admins"}},
	}
}

// DevAdminGroup is the dev issuer's admin group, made an admin group in dev.
const DevAdminGroup = "gateway-admins"

// startDevIssuer serves the development OIDC issuer on its own loopback
// listener, so that it is never reachable from other machines whatever the
// gateway's own listen address.
func (g *Gateway) startDevIssuer() (string, error) {
	ln, err := net.Listen("tcp", g.cfg.Auth.DevIssuerListen)
	if err != nil {
		return "", fmt.Errorf("gateway: development issuer: listen on %s: %w", g.cfg.Auth.DevIssuerListen, err)
	}
	issuer := "http://" + ln.Addr().String()
	di, err := devissuer.New(devissuer.Config{
		Issuer: issuer, ClientID: g.cfg.Auth.OIDC.ClientID,
		RedirectURIs: []string{strings.TrimRight(g.PublicURL, "/") + "/auth/callback"},
		Users:        DevUsers(), Logger: g.log.With("component", "dev-issuer"),
		IDTokenLifetime: g.cfg.Auth.DevTokenLifetime, AccessTokenLifetime: g.cfg.Auth.DevTokenLifetime,
	})
	if err != nil {
		ln.Close()
		return "", err
	}
	g.devIssuer = di
	g.devServer = &http.Server{Handler: di.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.devServer.Serve(ln) }()
	return issuer, nil
}

// authSetup is what setupAuth builds.
type authSetup struct {
	authn  auth.Authenticator
	oidc   *auth.OIDC       // nil: no OIDC provider (a JupyterHub alone)
	hub    *auth.JupyterHub // nil: no JupyterHub
	access auth.Access      // what stored credentials (tokens, sessions) grant
}

// setupAuth builds the authenticators: the gateway's API tokens, then OIDC
// ID tokens from the configured (or, in dev, embedded) issuer, then the
// tokens of the configured JupyterHub; and what stored credentials
// (tokens, browser sessions) grant.
func (g *Gateway) setupAuth(ctx context.Context) (authSetup, error) {
	cfg := g.cfg
	issuer := cfg.Auth.OIDC.Issuer
	adminGroups := cfg.Auth.AdminGroups
	if issuer == "" && cfg.Dev {
		var err error
		if issuer, err = g.startDevIssuer(); err != nil {
			return authSetup{}, err
		}
		if len(adminGroups) == 0 {
			adminGroups = []string{DevAdminGroup}
		}
	}
	g.Issuer = issuer
	tokens := auth.NewAPITokens(g.store, cfg.Auth.AdminUsers, adminGroups)
	tokens.SetGroupsMaxAge(cfg.Auth.GroupsMaxAge)
	out := authSetup{access: auth.Access{AdminUsers: cfg.Auth.AdminUsers, AdminGroups: adminGroups, GroupsMaxAge: cfg.Auth.GroupsMaxAge}}
	chain := auth.Chain{tokens}
	if issuer != "" {
		o, err := auth.NewOIDC(ctx, auth.OIDCConfig{
			Issuer: issuer, ClientID: cfg.Auth.OIDC.ClientID, Audience: cfg.Auth.OIDC.Audience,
			UsernameClaims: cfg.Auth.OIDC.UsernameClaims, GroupsClaim: cfg.Auth.OIDC.GroupsClaim,
			AdminGroups: adminGroups, AdminUsers: cfg.Auth.AdminUsers, ClockSkew: cfg.Auth.OIDC.ClockSkew,
			Users: g.store, // each login's claims, for the user's tokens and sessions
		})
		if err != nil {
			return authSetup{}, err
		}
		out.oidc = o
		chain = append(chain, o)
	}
	if h := cfg.Auth.JupyterHub; h.APIURL != "" {
		hub, err := auth.NewJupyterHub(auth.JupyterHubConfig{APIURL: h.APIURL, APIToken: h.APIToken, CacheTTL: h.CacheTTL, Identity: h.Identity,
			AdminUsers: cfg.Auth.AdminUsers, AdminGroups: adminGroups,
			Users: g.store, // the hub's word on each user's groups, for their sessions and tokens
		})
		if err != nil {
			return authSetup{}, err
		}
		out.hub = hub
		// Last: it takes any credential the others leave, and asks the hub.
		chain = append(chain, hub)
	}
	out.authn = chain
	return out, nil
}

// browserLogin is the browsers' sign-in that the configuration picks: with
// the identity provider, or with JupyterHub; nil when neither is there.
func (g *Gateway) browserLogin(a authSetup) *api.BrowserLogin {
	public := strings.TrimRight(g.PublicURL, "/")
	if g.cfg.Auth.BrowserLogin == config.BrowserLoginJupyterHub && a.hub != nil {
		h := g.cfg.Auth.JupyterHub
		hubAPI := strings.TrimRight(h.APIURL, "/")
		authorize := h.OAuthAuthorizeURL
		if authorize == "" {
			authorize = hubAPI + "/oauth2/authorize"
		}
		redirect := h.OAuthRedirectURI
		if redirect == "" {
			redirect = public + config.HubCallbackPath
		}
		return &api.BrowserLogin{
			OAuth2: &oauth2.Config{
				// A service's OAuth client secret is its api_token.
				ClientID: h.OAuthClientID, ClientSecret: h.APIToken,
				Endpoint:    oauth2.Endpoint{AuthURL: authorize, TokenURL: hubAPI + "/oauth2/token", AuthStyle: oauth2.AuthStyleInParams},
				RedirectURL: redirect,
			},
			Hub: a.hub.Authenticate,
		}
	}
	if a.oidc == nil {
		return nil
	}
	return &api.BrowserLogin{
		OAuth2: &oauth2.Config{
			ClientID: g.cfg.Auth.OIDC.ClientID, ClientSecret: g.cfg.Auth.OIDC.ClientSecret,
			Endpoint:    a.oidc.Provider().Endpoint(),
			RedirectURL: public + "/auth/callback",
			Scopes:      []string{"openid", "profile", "email", "groups"},
		},
		Verify: a.oidc.VerifyLogin,
	}
}

// dashboardAuth accepts a bearer token (curl, scripts) or the browser
// session cookie, and counts failures against the client's address.
func dashboardAuth(authn auth.Authenticator, sessions *auth.Sessions, limiter *auth.FailureLimiter) func(*http.Request) (*auth.User, error) {
	return auth.FromRequest(authn, sessions, limiter)
}
