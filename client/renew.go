package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// TokenSource gives the bearer each request carries, renewing it as a
// long command goes on (a bench run outlives a 10-minute dev token, an
// hour-long OIDC ID token).
type TokenSource interface {
	// Token is the bearer to send now, renewed first when it is about to
	// expire.
	Token(ctx context.Context) (string, error)
	// Renew is asked after the gateway refused refused (401): a new token
	// to retry with, or an error when there is none.
	Renew(ctx context.Context, refused string) (string, error)
}

// WithTokenSource makes c send src's token with every request, its own
// and those of the HTTP client Credentials returns (a cluster's
// dashboard), renewing it on expiry and retrying once on 401.
func (c *Client) WithTokenSource(src TokenSource) *Client {
	n := *c
	hc := *c.http
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &renewingTransport{base: base, src: src}
	n.http, n.token = &hc, ""
	return &n
}

// renewingTransport sets the bearer of requests that carry none and,
// when the gateway answers 401, renews the token and sends the request
// once more.
type renewingTransport struct {
	base http.RoundTripper
	src  TokenSource
}

func (t *renewingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	tok, err := t.src.Token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.base.RoundTrip(withBearer(req, req.Body, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, err
	}
	fresh, rerr := t.src.Renew(ctx, tok)
	if rerr != nil || fresh == tok {
		return resp, nil // the gateway's 401 says what to do
	}
	body := req.Body
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return t.base.RoundTrip(withBearer(req, body, fresh))
}

func withBearer(req *http.Request, body io.ReadCloser, tok string) *http.Request {
	r := req.Clone(req.Context())
	r.Body = body
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return r
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// EntrySource is the TokenSource of a stored login: it renews the entry
// with its refresh token shortly before it expires (or when the gateway
// refuses it) and saves the renewed entry in the credentials file, so
// that later commands start from it. An entry without expiry (an API
// token) is sent as it is.
type EntrySource struct {
	Key string // the gateway's key in the credentials file
	Now func() time.Time

	mu    sync.Mutex
	entry Entry
}

// NewEntrySource renews e, the credentials file's entry for gateway key.
func NewEntrySource(key string, e Entry) *EntrySource {
	return &EntrySource{Key: key, Now: time.Now, entry: e}
}

// Entry is the entry as last renewed.
func (s *EntrySource) Entry() Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry
}

// Token implements TokenSource.
func (s *EntrySource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	fresh, changed, err := s.entry.Fresh(ctx, now)
	switch {
	case err != nil && now.Before(s.entry.Expiry):
		// The issuer is unreachable for now, but the token still holds:
		// renewal is tried again on the next request.
		return s.entry.Token, nil
	case err != nil:
		return "", err
	case changed:
		s.adopt(fresh)
	}
	return s.entry.Token, nil
}

// Renew implements TokenSource: the gateway refused refused, so unless
// another command (or request) renewed it meanwhile, it is renewed now
// whatever its expiry says (the gateway's clock may be ahead).
func (s *EntrySource) Renew(ctx context.Context, refused string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entry.Token != refused {
		return s.entry.Token, nil
	}
	if stored, ok := s.stored(); ok && stored.Token != refused && s.Now().Before(stored.Expiry) {
		// Another command renewed the login (and perhaps rotated the
		// refresh token this one holds).
		s.entry = stored
		return stored.Token, nil
	}
	if s.entry.Expiry.IsZero() {
		return "", ErrSessionExpired // an API token: nothing renews it
	}
	old := s.entry
	old.Expiry = time.Unix(1, 0)
	fresh, _, err := old.Fresh(ctx, s.Now())
	if err != nil {
		return "", err
	}
	s.adopt(fresh)
	return fresh.Token, nil
}

// adopt takes a renewed entry and saves it; a file that cannot be
// written does not stop the command, which keeps the token in memory.
func (s *EntrySource) adopt(e Entry) {
	s.entry = e
	_ = saveEntry(s.Key, e)
}

func (s *EntrySource) stored() (Entry, bool) {
	c, err := LoadCredentials()
	if err != nil {
		return Entry{}, false
	}
	e, ok := c.Gateways[s.Key]
	return e, ok
}

// saveEntry writes one gateway's entry into the credentials file, keeping
// the others as the file has them now.
func saveEntry(key string, e Entry) error {
	c, err := LoadCredentials()
	if err != nil {
		return err
	}
	if prev, ok := c.Gateways[key]; ok && e.CAFile == "" {
		e.CAFile = prev.CAFile
	}
	c.Gateways[key] = e
	if err := c.Save(); err != nil {
		return fmt.Errorf("save renewed credentials: %w", err)
	}
	return nil
}

// renewMargin is how long before its expiry a token is renewed: a
// minute, or a quarter of its lifetime for short-lived tokens (a gateway
// configured with auth.dev_token_lifetime of seconds, in tests).
func renewMargin(e Entry) time.Duration {
	m := time.Minute
	if iat, err := jwtClaim(e.Token, "iat"); err == nil && iat > 0 {
		if life := e.Expiry.Sub(time.Unix(iat, 0)); life > 0 && life/4 < m {
			m = life / 4
		}
	}
	return m
}

// errNotJWT is a token that is not a JWT.
var errNotJWT = errors.New("the ID token is not a JWT")
