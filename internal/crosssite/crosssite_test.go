package crosssite

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReason: Sec-Fetch-Site decides when a browser sends it; without it,
// Origin is compared with the gateway's origin (its public URL, or the
// request's Host); requests with neither are not from a browser page.
func TestReason(t *testing.T) {
	const host = "gw.example:8443"
	for _, tc := range []struct {
		name    string
		self    string // "" compares with the request's Host
		hdr     map[string]string
		refused string // substring of the reason; "" passes
	}{
		{"no browser headers (curl, the Python client)", "", nil, ""},
		{"the gateway's own page", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://" + host}, ""},
		{"typed or bookmarked", "", map[string]string{"Sec-Fetch-Site": "none"}, ""},
		{"same-origin form POST under no-referrer (Origin null)", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, ""},
		{"another site", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, "Sec-Fetch-Site is cross-site"},
		{"a sibling host", "", map[string]string{"Sec-Fetch-Site": "same-site"}, "Sec-Fetch-Site is same-site"},
		{"cross-site fetch with a faked matching Origin", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://" + host}, "Sec-Fetch-Site"},
		{"older browser, own origin", "", map[string]string{"Origin": "https://" + host}, ""},
		{"older browser, own origin in capitals", "", map[string]string{"Origin": "https://GW.EXAMPLE:8443"}, ""},
		{"older browser, another port", "", map[string]string{"Origin": "https://gw.example:1"}, "Origin https://gw.example:1 is not this gateway"},
		{"older browser, another site", "", map[string]string{"Origin": "https://evil.example"}, "not this gateway"},
		{"older browser, opaque origin (sandboxed page)", "", map[string]string{"Origin": "null"}, "Origin null is not this gateway"},
		{"older browser, unparsable Origin", "", map[string]string{"Origin": "http://[::1"}, "not this gateway"},
		{"public URL: own origin", "https://gw.example:8443", map[string]string{"Origin": "https://gw.example:8443"}, ""},
		{"public URL: other scheme", "https://gw.example:8443", map[string]string{"Origin": "http://gw.example:8443"}, "not this gateway"},
		{"public URL: other host than the URL, though the Host header matches", "https://public.example", map[string]string{"Origin": "https://" + host}, "not this gateway"},
		{"public URL with its default port written out", "https://public.example:443/", map[string]string{"Origin": "https://public.example"}, ""},
		{"public URL, opaque origin", "https://public.example", map[string]string{"Origin": "null"}, "not this gateway"},
		{"public URL, Sec-Fetch-Site decides", "https://public.example", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, ""},
		// Issue 32, finding 7: the request's own origin has a scheme too
		// (this request came over TLS).
		{"own origin over http on an https request", "", map[string]string{"Origin": "http://" + host}, "Origin http://gw.example:8443 is not this gateway"},
		{"public URL: other port", "https://gw.example:8443", map[string]string{"Origin": "https://gw.example:9443"}, "not this gateway"},
		{"no Origin, own Referer", "", map[string]string{"Referer": "https://" + host + "/auth/logout"}, ""},
		{"no Origin, Referer of another site", "", map[string]string{"Referer": "https://evil.example/page"}, "Referer https://evil.example/page is not this gateway"},
		{"no Origin, Referer of another scheme", "https://gw.example:8443", map[string]string{"Referer": "http://gw.example:8443/"}, "Referer http://gw.example:8443/ is not this gateway"},
		{"no Origin, Referer of another port", "", map[string]string{"Referer": "https://gw.example:1/"}, "not this gateway"},
		{"Origin decides over Referer", "", map[string]string{"Origin": "https://evil.example", "Referer": "https://" + host + "/"}, "Origin https://evil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "https://"+host+"/x", nil)
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			got := Reason(r, tc.self)
			if tc.refused == "" && got != "" {
				t.Errorf("refused: %q", got)
			}
			if tc.refused != "" && !strings.Contains(got, tc.refused) {
				t.Errorf("reason %q, want one with %q", got, tc.refused)
			}
		})
	}
}

// TestReasonSchemeOfTheRequest: without a public URL, the request's own
// origin is https when it came over TLS and http when not.
func TestReasonSchemeOfTheRequest(t *testing.T) {
	for _, tc := range []struct {
		url, origin string
		refused     bool
	}{
		{"https://gw.example/x", "https://gw.example", false},
		{"https://gw.example/x", "http://gw.example", true},
		{"http://gw.example/x", "http://gw.example", false},
		{"http://gw.example/x", "https://gw.example", true},
	} {
		r := httptest.NewRequest("POST", tc.url, nil)
		r.Header.Set("Origin", tc.origin)
		if got := Reason(r, ""); (got != "") != tc.refused {
			t.Errorf("%s from %s: reason %q, want refused %v", tc.url, tc.origin, got, tc.refused)
		}
	}
}

// TestAmbient: only a bearer token, which a browser never attaches by
// itself, is exempt from the cross-site check.
func TestAmbient(t *testing.T) {
	for _, tc := range []struct {
		authorization string
		ambient       bool
	}{
		{"", true}, // a cookie, if anything
		{"Basic eDpnd190b2tlbg==", true},
		{"basic eDpnd190b2tlbg==", true},
		{"Digest username=x", true},
		{"Negotiate YII=", true},
		{"NTLM TlRM", true},
		{"Bearer gw_token", false},
		{"bearer gw_token", false},
		{"token cluster-token", false},
		{"jupyterhub hub-token", false},
		{"gw_token", true}, // no scheme: not a bearer token
	} {
		r := httptest.NewRequest("POST", "https://gw.example/x", nil)
		if tc.authorization != "" {
			r.Header.Set("Authorization", tc.authorization)
		}
		if got := Ambient(r); got != tc.ambient {
			t.Errorf("Authorization %q: ambient %v, want %v", tc.authorization, got, tc.ambient)
		}
	}
}
