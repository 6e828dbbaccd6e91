package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/gatewayhq/gateway/internal/crosssite"
)

// The API cookie spares dask-gateway's client a round trip per call: it
// sends every request without credentials first and only adds them after a
// 401, unless its cookie jar holds a cookie from an earlier answer (as
// dask-gateway's own server sets one). The gateway does the same, but
// keeps no server-side cache of users: the cookie carries the credential
// that was sent, sealed (AES-GCM) with a key of the gateway's, for at most
// apiCookieTTL, and each request with it authenticates that credential
// again. A revoked API token therefore stops its cookie as it stops the
// token itself (at once on the replica that revoked it, within a second on
// the others: see auth.APITokens), an expired credential at its expiry, and
// the cookie never outlives its credential.
//
// It is scoped to /api/ (Path), so browsers never send it to dashboards,
// which have their own session cookie; the dashboard's authentication
// reads only the Authorization header and that session. Because a cookie
// rides along on requests other sites make, it authenticates only requests
// a page on another site cannot make without CORS, which the API never
// grants: safe methods, DELETE (never a "simple" request), and POST, PUT or
// PATCH with a JSON body, and none that a browser marks as cross-origin.
// Other requests ignore it (and get the usual 401, after which
// dask-gateway's client sends its credentials).
const (
	apiCookieName = "gateway-api"
	apiCookieTTL  = 5 * time.Minute
	// Browsers take cookies up to about 4 KiB; a longer one (a very large
	// ID token) is not set, and the client keeps sending its credentials.
	apiCookieMaxLen = 3800
)

type apiCookie struct {
	aead   cipher.AEAD
	secure bool
	now    func() time.Time
}

// SetAPICookie turns on the API cookie, sealed with key (32 bytes, the
// same on every replica). secure marks it HTTPS-only.
func (s *Server) SetAPICookie(key []byte, secure bool) error {
	if len(key) != 32 {
		return fmt.Errorf("api: the API cookie key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.cookie = &apiCookie{aead: aead, secure: secure, now: time.Now}
	return nil
}

var errBadCookie = errors.New("api cookie unusable")

// seal makes the cookie's value: expiry (Unix seconds) and credential,
// encrypted and authenticated.
func (c *apiCookie) seal(credential string, expires time.Time) string {
	plain := make([]byte, 8, 8+len(credential))
	binary.BigEndian.PutUint64(plain, uint64(expires.Unix()))
	plain = append(plain, credential...)
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, plain, []byte(apiCookieName)))
}

// open returns the credential in a cookie value that this gateway sealed
// and that has not expired.
func (c *apiCookie) open(v string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < c.aead.NonceSize() {
		return "", errBadCookie
	}
	plain, err := c.aead.Open(nil, raw[:c.aead.NonceSize()], raw[c.aead.NonceSize():], []byte(apiCookieName))
	if err != nil || len(plain) <= 8 {
		return "", errBadCookie
	}
	if !c.now().Before(time.Unix(int64(binary.BigEndian.Uint64(plain[:8])), 0)) {
		return "", errBadCookie
	}
	return string(plain[8:]), nil
}

// credential returns the credential of the request's API cookie when the
// cookie may authenticate this request.
func (c *apiCookie) credential(r *http.Request, publicURL string) (string, bool) {
	ck, err := r.Cookie(apiCookieName)
	if err != nil || !ambientMayAuthenticate(r, publicURL) {
		return "", false
	}
	tok, err := c.open(ck.Value)
	return tok, err == nil
}

// ambientMayAuthenticate says whether a request is one no other site's
// page can make with the credentials a browser attaches by itself: the
// API cookie, and Basic credentials (crosssite.Ambient).
func ambientMayAuthenticate(r *http.Request, publicURL string) bool {
	if crosssite.Reason(r, publicURL) != "" {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		return true
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// A form or a no-cors fetch can only send the "simple" types;
		// JSON needs a CORS preflight, which the API never answers.
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return err == nil && mt == "application/json"
	}
	return false
}

// issue sets a fresh cookie for the credential that authenticated r, ending
// within apiCookieTTL and never after the credential itself.
func (c *apiCookie) issue(w http.ResponseWriter, credential string, credExpires time.Time) {
	exp := c.now().Add(apiCookieTTL)
	if !credExpires.IsZero() && credExpires.Before(exp) {
		exp = credExpires
	}
	if !exp.After(c.now()) {
		return
	}
	v := c.seal(credential, exp)
	if len(v) > apiCookieMaxLen {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: apiCookieName, Value: v, Path: "/api/", Expires: exp,
		MaxAge: int(exp.Sub(c.now()).Seconds()), HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode})
}

// clear tells the client to drop a cookie that no longer authenticates.
func (c *apiCookie) clear(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: apiCookieName, Value: "", Path: "/api/", MaxAge: -1, HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode})
}
