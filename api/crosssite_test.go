package api

import (
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestOneCrossSiteRule (issue 32, finding 7): on an HTTPS gateway, the
// sign-in and sign-out forms, the API cookie and Basic credentials on the
// API (which a browser attaches by itself once it has them) all refuse the
// same requests: another scheme, host or port in Origin (or, without
// Origin, in Referer), an opaque origin, and what Sec-Fetch-Site marks as
// not same-origin. Sign-out used to compare the host alone and answered
// 204 to http://<the same host:port>; Basic credentials were not checked
// at all.
func TestOneCrossSiteRule(t *testing.T) {
	ss, secrets := newSessionServerOver(t, true)
	self := ss.srv.URL
	if !strings.HasPrefix(self, "https://") {
		t.Fatalf("server %s is not HTTPS", self)
	}
	hostport := strings.TrimPrefix(self, "https://")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	origins := []struct {
		name    string
		hdr     map[string]string
		foreign bool
	}{
		{"same origin", map[string]string{"Origin": self}, false},
		{"same origin, marked same-origin", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}, false},
		{"no browser headers (curl, the Python client)", nil, false},
		{"no Origin, Referer of this gateway", map[string]string{"Referer": self + "/auth/logout"}, false},
		{"scheme mismatch", map[string]string{"Origin": "http://" + hostport}, true},
		{"port mismatch", map[string]string{"Origin": "https://" + net.JoinHostPort(host, "1")}, true},
		{"host mismatch", map[string]string{"Origin": "https://" + net.JoinHostPort("localhost", port)}, true},
		{"opaque origin", map[string]string{"Origin": "null"}, true},
		{"no Origin, Referer of another scheme", map[string]string{"Referer": "http://" + hostport + "/"}, true},
		{"no Origin, Referer of another site", map[string]string{"Referer": "https://evil.example/"}, true},
		{"marked cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true},
		{"marked same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://sub.example"}, true},
		{"marked cross-site, Origin faked same", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": self}, true},
	}

	_, h, _ := do(t, ss.srv, "GET", "/api/v1/whoami", secrets["rw"], "")
	var apiCookie string
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == apiCookieName {
			apiCookie = c.Name + "=" + c.Value
		}
	}
	if apiCookie == "" {
		t.Fatalf("no API cookie: %v", h)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+secrets["rw"]))
	const alice = "alice-token-000000"
	scale := func(cred map[string]string) func(hdr map[string]string) browserAnswer {
		return func(hdr map[string]string) browserAnswer {
			hdr["Content-Type"] = "application/json"
			for k, v := range cred {
				hdr[k] = v
			}
			return ss.sendBody(t, "POST", "/api/v1/clusters/run1/scale", hdr, `{"count":2}`)
		}
	}
	checks := []struct {
		name        string
		send        func(hdr map[string]string) browserAnswer
		ok, refused int
	}{
		{"sign-in", func(hdr map[string]string) browserAnswer {
			_, form := ss.link(t, alice)
			hdr["Content-Type"] = "application/x-www-form-urlencoded"
			return ss.send(t, "POST", "/auth/ticket", hdr, form)
		}, http.StatusSeeOther, http.StatusForbidden},
		{"sign-out", func(hdr map[string]string) browserAnswer {
			c := ss.signIn(t, alice)
			hdr["Cookie"] = c.Name + "=" + c.Value
			return ss.send(t, "POST", "/auth/logout", hdr, nil)
		}, http.StatusNoContent, http.StatusForbidden},
		// A refused cookie is ignored: the request has no credential.
		{"API cookie", scale(map[string]string{"Cookie": apiCookie}), http.StatusOK, http.StatusUnauthorized},
		{"API with Basic credentials", scale(map[string]string{"Authorization": basic}), http.StatusOK, http.StatusForbidden},
		{"API with a bearer token", scale(map[string]string{"Authorization": "Bearer " + secrets["rw"]}), http.StatusOK, http.StatusOK},
	}
	for _, c := range checks {
		for _, o := range origins {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				hdr := map[string]string{}
				for k, v := range o.hdr {
					hdr[k] = v
				}
				want := c.ok
				if o.foreign {
					want = c.refused
				}
				if a := c.send(hdr); a.status != want {
					t.Errorf("%d, want %d: %s", a.status, want, a.body)
				}
			})
		}
	}
}
