// Package crosssite tells requests that a browser sends for another site's
// page apart from those of the gateway's own pages, of the user (an address
// typed, a bookmark) and of clients that are not browsers. A cookie rides
// along on all of them, so whatever lets a cookie authenticate a request
// that changes something asks here first: the dashboard proxy (the session
// cookie), the API (its cookie) and the sign-in and sign-out forms.
package crosssite

import (
	"net/http"
	"net/url"
	"strings"
)

// Reason says why r comes from a page of another origin than self, or ""
// when it does not. self is the gateway's public origin
// ("https://host[:port]"); empty, or without a host, means the request's
// own Host.
//
// Sec-Fetch-Site, which browsers set and pages cannot, decides when
// present: "same-origin" and "none" (the user's own navigation) pass,
// anything else is refused. It accounts for redirects and sandboxed
// frames, so a same-origin request passes even with "Origin: null" (sent
// on a form POST from a page whose Referrer-Policy is no-referrer). Older
// browsers do not send it; then Origin decides, the way
// net/http.CrossOriginProtection does it: absent passes (browsers send it
// on every POST and websocket, so its absence means no browser page made
// the request), "null" (an opaque origin, such as a sandboxed page of
// another site) is refused, and any other must be self.
func Reason(r *http.Request, self string) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site == "same-origin" || site == "none" {
			return ""
		}
		return "Sec-Fetch-Site is " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	o, err := url.Parse(origin)
	if err != nil || o.Host == "" { // "null" has no host
		return "Origin " + origin + " is not this gateway"
	}
	if s, err := url.Parse(self); err == nil && s.Host != "" {
		if !strings.EqualFold(o.Scheme, s.Scheme) || !sameHost(o.Scheme, o.Host, s.Host) {
			return "Origin " + origin + " is not this gateway"
		}
		return ""
	}
	if !sameHost(o.Scheme, o.Host, r.Host) {
		return "Origin " + origin + " is not this gateway"
	}
	return ""
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
