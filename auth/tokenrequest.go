package auth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// ErrTokenRequest marks a request for an API token that cannot be granted
// as asked (a name or an expiry out of bounds): the API's 422, and the
// console's.
var ErrTokenRequest = errors.New("invalid token request")

// TokenRequest is what a person asks of a new API token, through the API
// (gateway token create) or the console.
type TokenRequest struct {
	Name string
	// ExpiresIn is how long the token lasts: "30d", "12h" or "90m";
	// empty is DefaultTokenTTL.
	ExpiresIn string
	ReadOnly  bool
}

// DefaultTokenTTL is how long a token lasts when its request does not say.
const DefaultTokenTTL = "30d"

// MaxTokenTTL bounds a token's life.
const MaxTokenTTL = 366 * 24 * time.Hour

// maxTokenName bounds a token's name, in bytes.
const maxTokenName = 64

// MayCreateTokens reports whether u's credential may create API tokens: a
// login with the identity provider (the command line's), or a browser
// session that did not come from a token (an API token's or a JupyterHub
// token's dashboard link). A token must not mint tokens, not even through a
// dashboard link it made: a short-lived or stolen credential could
// otherwise renew itself forever.
func (u *User) MayCreateTokens() bool {
	return u.Via == "oidc" || (u.Via == "session" && u.TokenID == "" && u.SessionVia != SessionViaHubLink)
}

// NewAPIToken checks a request for a token of u's and makes it: the
// record to store and the secret, which its owner is shown once and
// which is kept nowhere (the store has its hash). A read-only user's
// token is read-only whatever the request says. It does not check that
// u may create tokens (MayCreateTokens): the caller says why not in its
// own words.
func NewAPIToken(u *User, req TokenRequest, now time.Time) (*store.APIToken, string, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" || len(name) > maxTokenName {
		return nil, "", fmt.Errorf("%w: name the token (1 to %d characters), e.g. \"ci\"", ErrTokenRequest, maxTokenName)
	}
	expires := req.ExpiresIn
	if expires == "" {
		expires = DefaultTokenTTL
	}
	ttl, err := ParseTTL(expires)
	if err != nil {
		return nil, "", err
	}
	if ttl > MaxTokenTTL {
		return nil, "", fmt.Errorf("%w: tokens may last at most 366d", ErrTokenRequest)
	}
	secret := NewToken(APITokenPrefix)
	t := &store.APIToken{ID: "tok_" + NewToken("")[:16], Owner: u.Owner(), OwnerName: u.Name, Name: name, Hash: HashToken(secret),
		Groups: u.Groups, ReadOnly: req.ReadOnly || u.ReadOnly, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	return t, secret, nil
}

// ParseTTL reads a token's life: a number of days (30d) or a duration
// (12h, 90m); anything else, zero or negative wraps ErrTokenRequest.
func ParseTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%w: expiry %q: use a positive number of days (30d) or a duration (12h)", ErrTokenRequest, s)
		}
		if int64(n) > math.MaxInt64/int64(24*time.Hour) {
			// More days than a duration holds: the product would wrap,
			// into a short life or a negative one.
			return 0, fmt.Errorf("%w: tokens may last at most 366d", ErrTokenRequest)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: expiry %q: use a positive number of days (30d) or a duration (12h)", ErrTokenRequest, s)
	}
	return d, nil
}
