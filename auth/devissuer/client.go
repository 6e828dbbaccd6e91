package devissuer

import (
	"net/url"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is the one public client of the issuer. It is a native client
// (op.ApplicationTypeNative) so that the library applies the RFC 8252
// loopback rule: a registered loopback redirect URI matches on any port.
type client struct {
	iss          *Issuer
	redirectURIs []string
	postLogout   []string
}

var _ op.Client = (*client)(nil)

func newClient(iss *Issuer) *client {
	c := &client{iss: iss}
	c.redirectURIs = slices.Clone(iss.cfg.RedirectURIs)
	if !slices.Contains(c.redirectURIs, loopbackCallback) {
		c.redirectURIs = append(c.redirectURIs, loopbackCallback)
	}
	// After logout the client may return to any of its redirect URIs or to
	// the root of their origins.
	for _, raw := range c.redirectURIs {
		if !slices.Contains(c.postLogout, raw) {
			c.postLogout = append(c.postLogout, raw)
		}
		if u, err := url.Parse(raw); err == nil {
			root := u.Scheme + "://" + u.Host + "/"
			if !slices.Contains(c.postLogout, root) {
				c.postLogout = append(c.postLogout, root)
			}
		}
	}
	return c
}

func (c *client) GetID() string                       { return c.iss.cfg.ClientID }
func (c *client) RedirectURIs() []string              { return slices.Clone(c.redirectURIs) }
func (c *client) PostLogoutRedirectURIs() []string    { return slices.Clone(c.postLogout) }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeDeviceCode}
}

// LoginURL is where the library sends the browser with a new authorization
// request; the issuer's own /login page.
func (c *client) LoginURL(authRequestID string) string {
	return c.iss.cfg.Issuer + "/login?id=" + url.QueryEscape(authRequestID)
}

// AccessTokenType: opaque bearer tokens (the library encrypts
// "tokenID:subject"); they are only meant for the userinfo endpoint.
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return c.iss.cfg.IDTokenLifetime }
func (c *client) DevMode() bool                       { return false }

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(scopes []string) []string { return scopes }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(scopes []string) []string { return scopes }
}

// IsScopeAllowed is asked for scopes beyond the standard OIDC ones.
func (c *client) IsScopeAllowed(scope string) bool { return scope == scopeGroups }

// IDTokenUserinfoClaimsAssertion: without it the library strips the
// profile/email claims from ID tokens issued together with an access token.
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }
