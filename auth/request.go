package auth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// FromRequest authenticates a request the way the dashboards do: a bearer
// token (curl, scripts), else the browser session cookie, with failed
// attempts counted against the client's address. An address over the
// limit is refused before any verification work. Ended sessions and
// tokens are genuine credentials, not guesses, and are not counted.
func FromRequest(authn Authenticator, sessions *Sessions, limiter *FailureLimiter) func(*http.Request) (*User, error) {
	return func(r *http.Request) (*User, error) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		if limiter.Blocked(ip) {
			return nil, fmt.Errorf("%w: too many failed authentications from your address; wait a minute", ErrInvalid)
		}
		var u *User
		tok, err := BearerToken(r)
		if err == nil {
			u, err = authn.Authenticate(r.Context(), tok)
		}
		if errors.Is(err, ErrNoCredentials) {
			u, err = sessions.FromRequest(r)
		}
		if errors.Is(err, ErrInvalid) && !errors.Is(err, ErrEnded) && limiter.Fail(ip) {
			return nil, fmt.Errorf("%w: too many failed authentications from your address; wait a minute", ErrInvalid)
		}
		return u, err
	}
}
