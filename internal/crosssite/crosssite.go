// Package crosssite tells requests that a browser sends for another site's
// page apart from those of the gateway's own pages, of the user (an address
// typed, a bookmark) and of clients that are not browsers. A cookie rides
// along on all of them, so whatever lets a cookie authenticate a request
// that changes something asks here first: the dashboard proxy (the session
// cookie), the API (its cookie) and the sign-in and sign-out forms. So do
// requests with Basic credentials, which a browser also attaches by itself
// once it has them (see Ambient).
package crosssite

import (
	"net/http"
	"net/url"
	"strings"
)

// Reason says why r comes from a page of another origin than self, or ""
// when it does not. self is the gateway's public origin
// ("https://host[:port]"); empty, or without a host, means the request's
// own origin: its Host, with https when it came over TLS and http when not.
// Scheme, host and port must all match.
//
// Sec-Fetch-Site, which browsers set and pages cannot, decides when
// present: "same-origin" and "none" (the user's own navigation) pass,
// anything else is refused. It accounts for redirects and sandboxed
// frames, so a same-origin request passes even with "Origin: null" (sent
// on a form POST from a page whose Referrer-Policy is no-referrer). Older
// browsers do not send it; then Origin decides, the way
// net/http.CrossOriginProtection does it: "null" (an opaque origin, such
// as a sandboxed page of another site) is refused, and any other must be
// self. Without Origin, Referer, when sent, must be of self too; with
// neither, the request passes (browsers send Origin on every POST and
// websocket, so its absence means no browser page made the request).
func Reason(r *http.Request, self string) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site == "same-origin" || site == "none" {
			return ""
		}
		return "Sec-Fetch-Site is " + site
	}
	what, origin := "Origin", r.Header.Get("Origin")
	if origin == "" {
		// Browsers that send neither Sec-Fetch-Site nor Origin (old ones,
		// or an Origin a proxy dropped) still send Referer, unless a
		// policy asks them not to: a page's address says where it is.
		what, origin = "Referer", r.Header.Get("Referer")
	}
	if origin == "" {
		return ""
	}
	o, err := url.Parse(origin)
	if err != nil || o.Host == "" { // "null" has no host
		return what + " " + origin + " is not this gateway"
	}
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if s, err := url.Parse(self); err == nil && s.Host != "" {
		scheme, host = s.Scheme, s.Host
	}
	if !strings.EqualFold(o.Scheme, scheme) || !sameHost(scheme, o.Host, host) {
		return what + " " + origin + " is not this gateway"
	}
	return ""
}

// Ambient reports whether r's credential may be one a browser attaches by
// itself to any page's request: a cookie (no Authorization header), or
// an Authorization header a browser fills in from its own cache (Basic,
// Digest, Negotiate, NTLM: once entered or negotiated, a browser sends it
// with every request to the origin, another site's included). Only a
// bearer token ("Bearer", "token", "jupyterhub" schemes), which a browser
// never sends unless a page of this origin's script adds it, is not: such
// a request may skip the cross-site check, and no other may.
func Ambient(r *http.Request) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	switch strings.ToLower(scheme) {
	case "bearer", "token", "jupyterhub":
		return false
	}
	return true
}

// sameHost compares host[:port]s case-insensitively, a scheme's default
// port written out or left off alike (browsers leave it off).
func sameHost(scheme, a, b string) bool {
	return strings.EqualFold(withoutDefaultPort(scheme, a), withoutDefaultPort(scheme, b))
}

func withoutDefaultPort(scheme, host string) string {
	switch strings.ToLower(scheme) {
	case "https":
		return strings.TrimSuffix(host, ":443")
	case "http":
		return strings.TrimSuffix(host, ":80")
	}
	return host
}
