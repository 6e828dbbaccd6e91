package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gatewayhq/gateway/api/apitype"
)

// ListSessions lists the caller's active browser sessions (never their
// cookies).
func (c *Client) ListSessions(ctx context.Context) ([]apitype.SessionJSON, error) {
	var v []apitype.SessionJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/sessions", nil, &v)
	return v, err
}

// RevokeSession ends one of the caller's browser sessions.
func (c *Client) RevokeSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// RevokeSessions ends all the caller's browser sessions and says how many.
func (c *Client) RevokeSessions(ctx context.Context) (int, error) {
	var v struct {
		Revoked int `json:"revoked"`
	}
	err := c.do(ctx, http.MethodDelete, "/api/v1/sessions", nil, &v)
	return v.Revoked, err
}
