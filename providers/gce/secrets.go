package gce

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	htransport "google.golang.org/api/transport/http"
)

// secretClient speaks Secret Manager's v1 REST API with plain net/http:
// the provider needs six calls of it, not the generated client's module.
// Authentication comes from the same client options as the Compute Engine
// clients (google.golang.org/api/transport/http adds the credentials).
type secretClient struct {
	http    *http.Client
	base    string // endpoint without trailing slash
	project string
}

// newSecretClient makes the client. An empty endpoint is resolved the way
// Google's generated clients resolve theirs (the universe domain, mTLS
// settings), so that only a configured endpoint replaces Google's.
func newSecretClient(ctx context.Context, project, endpoint string, opts []option.ClientOption) (*secretClient, error) {
	all := append(slices.Clone(opts),
		option.WithScopes(CloudPlatformScope),
		internaloption.WithDefaultEndpoint(DefaultSecretEndpoint),
		internaloption.WithDefaultEndpointTemplate("https://secretmanager.UNIVERSE_DOMAIN/"),
		internaloption.WithDefaultMTLSEndpoint("https://secretmanager.mtls.googleapis.com/"),
		internaloption.WithDefaultUniverseDomain("googleapis.com"),
		internaloption.WithDefaultAudience(DefaultSecretEndpoint),
	)
	if endpoint != "" {
		all = append(all, option.WithEndpoint(endpoint))
	}
	hc, resolved, err := htransport.NewClient(ctx, all...)
	if err != nil {
		return nil, err
	}
	return &secretClient{http: hc, base: strings.TrimRight(resolved, "/"), project: project}, nil
}

// secretAPIError is an error answer of Secret Manager (google.rpc.Status
// in JSON).
type secretAPIError struct {
	Code    int
	Status  string // NOT_FOUND, ALREADY_EXISTS, ...
	Message string
	Header  http.Header
}

func (e *secretAPIError) Error() string {
	return fmt.Sprintf("secret manager: HTTP %d %s: %s", e.Code, e.Status, e.Message)
}

func (c *secretClient) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := c.base + "/v1/projects/" + url.PathEscape(c.project) + "/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		return &secretAPIError{Code: resp.StatusCode, Status: e.Error.Status, Message: msg, Header: resp.Header}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("secret manager: decode %s answer: %w", path, err)
		}
	}
	return nil
}

type secretResource struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Replication map[string]any    `json:"replication,omitempty"`
}

func (c *secretClient) create(ctx context.Context, id string, labels map[string]string) error {
	in := secretResource{Labels: labels, Replication: map[string]any{"automatic": map[string]any{}}}
	return c.do(ctx, http.MethodPost, "secrets", url.Values{"secretId": {id}}, in, nil)
}

func (c *secretClient) get(ctx context.Context, id string) (secretResource, error) {
	var s secretResource
	err := c.do(ctx, http.MethodGet, "secrets/"+url.PathEscape(id), nil, nil, &s)
	return s, err
}

func (c *secretClient) delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "secrets/"+url.PathEscape(id), nil, nil, nil)
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type secretPayload struct {
	Data       string `json:"data"`
	DataCrc32c string `json:"dataCrc32c,omitempty"` // int64 as a JSON string
}

// addVersion stores data as the secret's new version, with its CRC32C so
// that the service refuses a payload damaged on the way.
func (c *secretClient) addVersion(ctx context.Context, id string, data []byte) error {
	in := map[string]any{"payload": secretPayload{
		Data:       base64.StdEncoding.EncodeToString(data),
		DataCrc32c: strconv.FormatUint(uint64(crc32.Checksum(data, crcTable)), 10),
	}}
	return c.do(ctx, http.MethodPost, "secrets/"+url.PathEscape(id)+":addVersion", nil, in, nil)
}

// access returns the latest version's payload.
func (c *secretClient) access(ctx context.Context, id string) ([]byte, error) {
	var out struct {
		Payload struct {
			Data string `json:"data"`
		} `json:"payload"`
	}
	if err := c.do(ctx, http.MethodGet, "secrets/"+url.PathEscape(id)+"/versions/latest:access", nil, nil, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.Payload.Data)
}

// grantAccess sets the secret's IAM policy to one binding: member may read
// it. The secret is the provider's own, so the policy is replaced whole.
func (c *secretClient) grantAccess(ctx context.Context, id, member string) error {
	in := map[string]any{"policy": map[string]any{"bindings": []map[string]any{
		{"role": "roles/secretmanager.secretAccessor", "members": []string{member}},
	}}}
	return c.do(ctx, http.MethodPost, "secrets/"+url.PathEscape(id)+":setIamPolicy", nil, in, nil)
}
