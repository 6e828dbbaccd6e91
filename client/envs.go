package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/images"
)

// OptionFields returns the names of the cluster options the gateway
// offers the caller (what its backend supports).
func (c *Client) OptionFields(ctx context.Context) (map[string]bool, error) {
	var v struct {
		Fields []struct {
			Field string `json:"field"`
		} `json:"cluster_options"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/options", nil, &v); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(v.Fields))
	for _, f := range v.Fields {
		out[f.Field] = true
	}
	return out, nil
}

// EnsureEnv asks for the image of an environment: ready at once when it
// exists, else a build starts. code may be nil until the gateway answers
// code_required.
func (c *Client) EnsureEnv(ctx context.Context, spec images.Spec, code map[string][]byte) (apitype.EnvStatus, error) {
	var st apitype.EnvStatus
	err := c.do(ctx, http.MethodPost, "/api/v1/envs", apitype.EnvRequest{Spec: spec, Code: code}, &st)
	return st, err
}

// EnvStatus returns the state of an environment's build.
func (c *Client) EnvStatus(ctx context.Context, hash string) (apitype.EnvStatus, error) {
	var st apitype.EnvStatus
	err := c.do(ctx, http.MethodGet, "/api/v1/envs/"+url.PathEscape(hash), nil, &st)
	return st, err
}

// EnvLogs returns the build log of an environment.
func (c *Client) EnvLogs(ctx context.Context, hash string) (string, error) {
	var s string
	err := c.do(ctx, http.MethodGet, "/api/v1/envs/"+url.PathEscape(hash)+"/logs", nil, &s)
	return s, err
}

// Envs lists the published environments.
func (c *Client) Envs(ctx context.Context) ([]apitype.PublishedEnv, error) {
	var v []apitype.PublishedEnv
	err := c.do(ctx, http.MethodGet, "/api/v1/envs", nil, &v)
	return v, err
}

// AdminPublishEnv publishes an environment under name (admins only).
func (c *Client) AdminPublishEnv(ctx context.Context, name string, req apitype.PublishEnvRequest) (apitype.PublishedEnv, error) {
	var p apitype.PublishedEnv
	err := c.do(ctx, http.MethodPut, "/api/v1/admin/envs/"+url.PathEscape(name), req, &p)
	return p, err
}

// AdminUnpublishEnv removes an environment published at run time (admins
// only).
func (c *Client) AdminUnpublishEnv(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/admin/envs/"+url.PathEscape(name), nil, nil)
}
