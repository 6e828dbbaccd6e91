// Package client is the Go client of the gateway's API, used by the CLI.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/providers/catalog"
)

// APIError is an error answer from the gateway.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("gateway answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// IsNotFound reports whether err is a 404 from the gateway.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Client talks to one gateway.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New makes a client for the gateway at base (http[s]://host:port).
func New(base, token string, tlsCfg *tls.Config) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q must look like http://127.0.0.1:8000 or https://gateway.example.com", base)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.Proxy = nil // the gateway is reached directly; HTTP proxies would see tokens
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}, nil
}

// BaseURL is the gateway's URL.
func (c *Client) BaseURL() string { return c.base }

// Credentials are the HTTP client and token this client reaches the
// gateway with, for its other doors: a cluster's dashboard, through which
// bench.Agent reaches the cluster's scheduler.
func (c *Client) Credentials() (*http.Client, string) { return c.http, c.token }

// expectContinueOver is the request body size over which the client asks
// the gateway whether it will read the body before sending it (the
// gateway reads a body of up to 1 MiB before its build quota check).
const expectContinueOver = 1 << 20

func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if req.ContentLength > expectContinueOver {
			// The gateway may refuse a large body (a build quota, its
			// per-user upload budget) before reading it: asked first, it
			// answers before the body is sent, rather than resetting the
			// connection under it.
			req.Header.Set("Expect", "100-continue")
		}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the gateway at %s: %w (is it running? start one with: gateway dev)", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if resp.StatusCode >= 400 {
		ae := &APIError{Status: resp.StatusCode}
		var e apitype.Error
		if json.Unmarshal(data, &e) == nil {
			ae.Code, ae.Message = e.Code, e.Message
			if ae.Message == "" {
				ae.Message = e.Error
			}
		}
		if resp.StatusCode == http.StatusUnauthorized && !strings.Contains(ae.Message, "gateway login") {
			// The gateway's own message usually says it already.
			ae.Message = strings.TrimSpace(ae.Message + "; run: gateway login (or gateway dev, which stores a dev token)")
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if s, ok := out.(*string); ok {
		*s = string(data)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("unexpected answer from the gateway (%s): %w", resp.Status, err)
	}
	return nil
}

// Version returns the server version.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	err := c.do(ctx, http.MethodGet, "/api/version", nil, &v)
	return v.Version, err
}

// Whoami returns the caller's identity.
func (c *Client) Whoami(ctx context.Context) (map[string]any, error) {
	var v map[string]any
	err := c.do(ctx, http.MethodGet, "/api/v1/whoami", nil, &v)
	return v, err
}

// Create requests a cluster and returns its name.
func (c *Client) Create(ctx context.Context, options clusteropts.Request) (string, error) {
	var v struct {
		Name string `json:"name"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/clusters/", clusterOptions{Options: options}, &v)
	return v.Name, err
}

// CreateShared starts a cluster shared as share says (nil: not shared).
func (c *Client) CreateShared(ctx context.Context, options clusteropts.Request, share *apitype.ShareRequest) (string, error) {
	var v struct {
		Name string `json:"name"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/clusters/", clusterOptions{options, share}, &v)
	return v.Name, err
}

// clusterOptions is the body of a request with cluster options, as
// dask-gateway's client sends it, and whom to share the cluster with.
type clusterOptions struct {
	Options clusteropts.Request   `json:"cluster_options"`
	Share   *apitype.ShareRequest `json:"share,omitempty"`
}

// Shares returns whom the caller's cluster is shared with.
func (c *Client) Shares(ctx context.Context, name string) (*apitype.Shares, error) {
	var v apitype.Shares
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(name)+"/shares", nil, &v)
	return &v, err
}

// Share shares the caller's cluster with users and groups (user:NAME,
// group:NAME), allowing what allow names beyond viewing and connecting.
func (c *Client) Share(ctx context.Context, name string, with, allow []string) (*apitype.Shares, error) {
	var v apitype.Shares
	err := c.do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/share", apitype.ShareRequest{With: with, Allow: allow}, &v)
	return &v, err
}

// Unshare ends the shares naming with (none: all of them).
func (c *Client) Unshare(ctx context.Context, name string, with []string) (*apitype.Shares, error) {
	var v apitype.Shares
	err := c.do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/unshare", apitype.UnshareRequest{With: with}, &v)
	return &v, err
}

// Get returns the detailed view of a cluster.
func (c *Client) Get(ctx context.Context, name string) (*apitype.ClusterDetail, error) {
	var v apitype.ClusterDetail
	if err := c.do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(name)+"?view=detail", nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// List returns the caller's clusters with the given statuses; none means the
// active ones, "all" every one.
func (c *Client) List(ctx context.Context, statuses []string) (map[string]apitype.ClusterDetail, error) {
	q := url.Values{"view": {"detail"}}
	if len(statuses) > 0 {
		q.Set("status", strings.Join(statuses, ","))
	}
	v := map[string]apitype.ClusterDetail{}
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters/?"+q.Encode(), nil, &v)
	return v, err
}

// Scale sets the number of workers; msg is set when the request was clamped.
func (c *Client) Scale(ctx context.Context, name string, n int) (msg string, err error) {
	return c.clamped(ctx, name, "scale", apitype.ScaleRequest{Count: &n})
}

// clamped posts a scale or adapt request and returns the message saying how
// it was clamped, if it was.
func (c *Client) clamped(ctx context.Context, name, action string, body any) (string, error) {
	var v struct {
		Msg *string `json:"msg"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/"+action, body, &v); err != nil {
		return "", err
	}
	if v.Msg != nil {
		return *v.Msg, nil
	}
	return "", nil
}

// Stop asks for a cluster to stop.
func (c *Client) Stop(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/clusters/"+url.PathEscape(name), nil, nil)
}

// Logs returns a cluster's logs, the last tail lines per member when tail > 0.
func (c *Client) Logs(ctx context.Context, name string, tail int) (string, error) {
	var s string
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(name)+"/logs?tail="+strconv.Itoa(tail), nil, &s)
	return s, err
}

// Events returns a cluster's lifecycle events.
func (c *Client) Events(ctx context.Context, name string) ([]apitype.EventJSON, error) {
	var v []apitype.EventJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(name)+"/events", nil, &v)
	return v, err
}

// DashboardLink returns a one-time sign-in link that opens the cluster's
// dashboard in a browser.
func (c *Client) DashboardLink(ctx context.Context, name string) (string, error) {
	var v struct {
		URL string `json:"url"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/dashboard-link", map[string]string{}, &v)
	return v.URL, err
}

// CreateToken makes an API token; the answer holds the secret, once.
func (c *Client) CreateToken(ctx context.Context, name, expiresIn string, readOnly bool) (*apitype.TokenJSON, error) {
	var v apitype.TokenJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/tokens", apitype.CreateTokenRequest{Name: name, ExpiresIn: expiresIn, ReadOnly: readOnly}, &v)
	return &v, err
}

// ListTokens lists the caller's API tokens (never their secrets).
func (c *Client) ListTokens(ctx context.Context) ([]apitype.TokenJSON, error) {
	var v []apitype.TokenJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/tokens", nil, &v)
	return v, err
}

// RevokeToken revokes one of the caller's API tokens.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// Adapt turns adaptive scaling on within [minimum, maximum], or off; msg is
// set when the bounds were clamped.
func (c *Client) Adapt(ctx context.Context, name string, minimum, maximum int, active bool) (msg string, err error) {
	return c.clamped(ctx, name, "adapt", apitype.AdaptRequest{Minimum: &minimum, Maximum: &maximum, Active: &active})
}

// InstanceTypes lists the machine types the caller may use, cheapest
// first; gpu keeps those with GPUs.
func (c *Client) InstanceTypes(ctx context.Context, gpu bool) ([]catalog.InstanceType, error) {
	path := "/api/v1/instance-types"
	if gpu {
		path += "?gpu=true"
	}
	var out []catalog.InstanceType
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
