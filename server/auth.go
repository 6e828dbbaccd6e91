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

// setupAuth builds the authenticators: the gateway's API tokens, then OIDC
// ID tokens from the configured (or, in dev, embedded) issuer; and what
// stored credentials (tokens, browser sessions) grant.
func (g *Gateway) setupAuth(ctx context.Context) (auth.Authenticator, *auth.OIDC, auth.Access, error) {
	cfg := g.cfg
	issuer := cfg.Auth.OIDC.Issuer
	adminGroups := cfg.Auth.AdminGroups
	if issuer == "" && cfg.Dev {
		var err error
		if issuer, err = g.startDevIssuer(); err != nil {
			return nil, nil, auth.Access{}, err
		}
		if len(adminGroups) == 0 {
			adminGroups = []string{DevAdminGroup}
		}
	}
	g.Issuer = issuer
	o, err := auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer: issuer, ClientID: cfg.Auth.OIDC.ClientID, Audience: cfg.Auth.OIDC.Audience,
		UsernameClaims: cfg.Auth.OIDC.UsernameClaims, GroupsClaim: cfg.Auth.OIDC.GroupsClaim,
		AdminGroups: adminGroups, AdminUsers: cfg.Auth.AdminUsers, ClockSkew: cfg.Auth.OIDC.ClockSkew,
		Users: g.store, // each login's claims, for the user's tokens and sessions
	})
	if err != nil {
		return nil, nil, auth.Access{}, err
	}
	tokens := auth.NewAPITokens(g.store, cfg.Auth.AdminUsers, adminGroups)
	tokens.SetGroupsMaxAge(cfg.Auth.GroupsMaxAge)
	access := auth.Access{AdminUsers: cfg.Auth.AdminUsers, AdminGroups: adminGroups, GroupsMaxAge: cfg.Auth.GroupsMaxAge}
	return auth.Chain{tokens, o}, o, access, nil
}

// browserLogin is the dashboards' sign-in with the identity provider.
func (g *Gateway) browserLogin(o *auth.OIDC) *api.BrowserLogin {
	return &api.BrowserLogin{
		OAuth2: &oauth2.Config{
			ClientID: g.cfg.Auth.OIDC.ClientID, ClientSecret: g.cfg.Auth.OIDC.ClientSecret,
			Endpoint:    o.Provider().Endpoint(),
			RedirectURL: strings.TrimRight(g.PublicURL, "/") + "/auth/callback",
			Scopes:      []string{"openid", "profile", "email", "groups"},
		},
		Verify: o.VerifyLogin,
	}
}

// dashboardAuth accepts a bearer token (curl, scripts) or the browser
// session cookie, and counts failures against the client's address.
func dashboardAuth(authn auth.Authenticator, sessions *auth.Sessions, limiter *auth.FailureLimiter) func(*http.Request) (*auth.User, error) {
	return auth.FromRequest(authn, sessions, limiter)
}
