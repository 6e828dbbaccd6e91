package proxy

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// sessionAuthn is testAuthn plus a browser session and Basic credentials:
// the session cookie with the value "alice-session" is alice's, and so is
// Basic with alice's token as the password (as dask-gateway's client and
// curl -u send it).
func sessionAuthn(r *http.Request) (*auth.User, error) {
	if r.Header.Get("Authorization") == "" {
		if c, err := r.Cookie(auth.SessionCookie); err == nil && c.Value == "alice-session" {
			return &auth.User{Name: "alice"}, nil
		}
	}
	if _, pw, ok := r.BasicAuth(); ok && pw == "alice-token" {
		return &auth.User{Name: "alice"}, nil
	}
	return testAuthn(r)
}

// startDashboardProxy serves the dashboard proxy (plain HTTP) over rt.
func startDashboardProxy(t *testing.T, rt *routes.Table, authn Authenticator) *harness {
	t.Helper()
	return startDashboardProxyAt(t, rt, authn, "")
}

// startDashboardProxyAt is startDashboardProxy for a gateway whose public
// URL is publicURL ("": none).
func startDashboardProxyAt(t *testing.T, rt *routes.Table, authn Authenticator, publicURL string) *harness {
	t.Helper()
	return startProxy(t, Config{AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		s.SetPublicURL(publicURL)
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(authn))
		return mux
	})
}

// rawRequest sends one request over a new connection and returns the
// status; an upgrade that succeeds is checked to echo.
func rawRequest(t *testing.T, addr, method, path string, hdr map[string]string) int {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, addr)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if method == http.MethodPost {
		b.WriteString("Content-Length: 2\r\n\r\n{}")
	} else {
		b.WriteString("\r\n")
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := br.ReadString('\n'); err != nil || got != "ping\n" {
			t.Fatalf("upgraded connection echoed %q, %v", got, err)
		}
	}
	return resp.StatusCode
}

// Regression test for issue 14 finding 8: the cookie-authenticated
// dashboard proxy checked no Origin, so another site's page could post to
// a dashboard or open its websocket as the signed-in user. Issue 32,
// finding 7: Basic credentials, which a browser also sends by itself once
// it has them, skipped the check (any Authorization header did), and the
// scheme was not compared (an https gateway took http://<its host:port>).
// Only a bearer token skips it. Run against the request's own origin, and
// against a public URL in https behind which TLS ended (a load balancer).
func TestDashboardRefusesCrossSiteCookieRequests(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x:alice-token"))
	creds := map[string]map[string]string{
		"cookie": {"Cookie": auth.SessionCookie + "=alice-session"},
		"basic":  {"Authorization": basic},
		"bearer": {"Authorization": "Bearer alice-token"},
	}
	requests := map[string]struct {
		method  string
		hdr     map[string]string
		allowed int
	}{
		"GET":     {http.MethodGet, nil, http.StatusOK},
		"POST":    {http.MethodPost, map[string]string{"Content-Type": "application/json"}, http.StatusOK},
		"upgrade": {http.MethodGet, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusSwitchingProtocols},
	}
	for _, setup := range []struct{ name, publicURL string }{
		{"request's origin", ""},
		{"https public URL", "https://gw.example:8443"},
	} {
		t.Run(setup.name, func(t *testing.T) {
			c1 := startDashBackend(t, "c1")
			rt := routes.New()
			rt.SetRoute("c1", "alice", "127.0.0.1:1", c1.url(), nil, nil)
			p := startDashboardProxyAt(t, rt, sessionAuthn, setup.publicURL)
			self := setup.publicURL
			if self == "" {
				self = "http://" + p.addr
			}
			scheme, hostport, _ := strings.Cut(self, "://")
			host, _, _ := strings.Cut(hostport, ":")
			otherScheme := map[string]string{"http": "https", "https": "http"}[scheme]
			origins := []struct {
				name    string
				hdr     map[string]string
				foreign bool
			}{
				{"same origin", map[string]string{"Origin": self}, false},
				{"same origin, other case", map[string]string{"Origin": strings.ToUpper(self)}, false},
				{"foreign origin", map[string]string{"Origin": "https://evil.example"}, true},
				{"same host, other port", map[string]string{"Origin": scheme + "://" + host + ":1"}, true},
				{"same host and port, other scheme", map[string]string{"Origin": otherScheme + "://" + hostport}, true},
				{"null origin", map[string]string{"Origin": "null"}, true},
				{"no origin", nil, false},
				{"no origin, own Referer", map[string]string{"Referer": self + "/clusters/c1/status"}, false},
				{"no origin, foreign Referer", map[string]string{"Referer": "https://evil.example/"}, true},
				{"Sec-Fetch-Site same-origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}, false},
				{"Sec-Fetch-Site none", map[string]string{"Sec-Fetch-Site": "none"}, false},
				{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://sub.127.0.0.1"}, true},
				{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true},
				{"Sec-Fetch-Site cross-site, Origin faked same", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": self}, true},
			}
			for _, cred := range []string{"cookie", "basic", "bearer"} {
				for _, rq := range []string{"GET", "POST", "upgrade"} {
					for _, o := range origins {
						t.Run(cred+"/"+rq+"/"+o.name, func(t *testing.T) {
							r := requests[rq]
							hdr := map[string]string{}
							for _, m := range []map[string]string{creds[cred], r.hdr, o.hdr} {
								for k, v := range m {
									hdr[k] = v
								}
							}
							before := len(c1.requests())
							want := r.allowed
							refuse := cred != "bearer" && rq != "GET" && o.foreign
							if refuse {
								want = http.StatusForbidden
							}
							if got := rawRequest(t, p.addr, r.method, "/clusters/c1/x", hdr); got != want {
								t.Fatalf("status %d, want %d", got, want)
							}
							forwarded := len(c1.requests()) - before
							if refuse && forwarded != 0 || !refuse && forwarded != 1 {
								t.Fatalf("the dashboard got %d requests", forwarded)
							}
						})
					}
				}
			}
		})
	}
}

// tlsDashBackend is a member's dashboard served over TLS with a cluster
// certificate, as members do (Dask's dashboard.tls settings).
func tlsDashBackend(t *testing.T, name string, cert pki.Pair) *dashBackend {
	t.Helper()
	d := &dashBackend{name: name}
	d.srv = testutil.ServeTLS(t, cert, http.HandlerFunc(d.serve))
	return d
}

// Network isolation (issue 14): the gateway reaches an https dashboard
// only when the member presents the cluster's own certificate.
func TestDashboardOverTLSVerifiesClusterCert(t *testing.T) {
	certA, certB := testutil.ClusterCert(t, "ca"), testutil.ClusterCert(t, "cb")
	memberA := tlsDashBackend(t, "ca", certA)
	memberB := tlsDashBackend(t, "cb", certB)
	rt := routes.New()
	rt.SetRoute("ca", "alice", "127.0.0.1:1", memberA.url(), certA.CertPEM, nil)
	// cb's route points at a member presenting ca's certificate (a member
	// of another cluster answering on cb's address).
	rt.SetRoute("cb", "alice", "127.0.0.1:1", memberA.url(), certB.CertPEM, nil)
	rt.SetRoute("nocert", "alice", "127.0.0.1:1", memberA.url(), nil, nil)
	p := startDashboardProxy(t, rt, sessionAuthn)
	get := func(cluster string) int {
		return rawRequest(t, p.addr, http.MethodGet, "/clusters/"+cluster+"/status", map[string]string{"Authorization": "Bearer alice-token"})
	}
	if !strings.HasPrefix(memberA.url(), "https://") {
		t.Fatalf("member URL %s is not https", memberA.url())
	}
	if got := get("ca"); got != http.StatusOK {
		t.Fatalf("own member: status %d, want 200", got)
	}
	for _, cluster := range []string{"cb", "nocert"} {
		before := len(memberA.requests())
		if got := get(cluster); got != http.StatusBadGateway {
			t.Fatalf("%s: status %d with another cluster's member, want 502", cluster, got)
		}
		if n := len(memberA.requests()) - before; n != 0 {
			t.Fatalf("%s: the foreign member got %d requests", cluster, n)
		}
	}
	// The route moves to cb's own member: the new certificate applies at
	// once (a new pool), and the upgrade path works over TLS too.
	rt.SetRoute("cb", "alice", "127.0.0.1:1", memberB.url(), certB.CertPEM, nil)
	if got := get("cb"); got != http.StatusOK {
		t.Fatalf("cb's own member: status %d, want 200", got)
	}
	if got := rawRequest(t, p.addr, http.MethodGet, "/clusters/cb/ws", map[string]string{"Authorization": "Bearer alice-token",
		"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}); got != http.StatusSwitchingProtocols {
		t.Fatalf("websocket over TLS: status %d", got)
	}
}
