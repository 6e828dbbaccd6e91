package proxy

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/proxy/routes"
)

// testAuthn stands for the gateway's authenticator.
func testAuthn(r *http.Request) (*auth.User, error) {
	switch h := r.Header.Get("Authorization"); h {
	case "":
		return nil, auth.ErrNoCredentials
	case "Bearer alice-token":
		return &auth.User{Name: "alice"}, nil
	case "Bearer bob-token":
		return &auth.User{Name: "bob"}, nil
	default:
		return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalid)
	}
}

// seen is what a dashboard backend received.
type seen struct {
	Method     string
	RequestURI string
	Host       string
	Header     http.Header
	Body       string
}

// dashBackend is a scheduler's HTTP server: it records each request and
// answers with its name and the path; a websocket-style upgrade is hijacked
// and echoed byte for byte.
type dashBackend struct {
	name string
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func startDashBackend(t *testing.T, name string) *dashBackend {
	t.Helper()
	d := &dashBackend{name: name}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	ts.Listener.Close()
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = ln
	ts.Start()
	d.srv = ts
	t.Cleanup(ts.Close)
	return d
}

func (d *dashBackend) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	d.mu.Lock()
	d.reqs = append(d.reqs, seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), string(body)})
	d.mu.Unlock()

	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "no hijacker", http.StatusInternalServerError)
			return
		}
		conn, brw, err := hj.Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(ioTimeout))
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		// Echo whatever the client sends, including anything it sent
		// before the 101 that is already buffered in brw.
		_, _ = io.Copy(conn, brw)
		return
	}
	w.Header().Set("X-Dashboard", d.name)
	w.Header().Set("Set-Cookie", "bokeh=1; Path=/clusters/"+d.name+"/")
	_, _ = fmt.Fprintf(w, "dashboard %s %s %s", d.name, r.Method, r.RequestURI)
}

func (d *dashBackend) requests() []seen {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]seen(nil), d.reqs...)
}

func (d *dashBackend) url() string { return d.srv.URL }

type dashFixture struct {
	p      *harness
	c1     *dashBackend // alice's
	c2     *dashBackend // bob's
	client *http.Client
	base   string
	gwPool *x509.CertPool
}

// startDashboard wires the dashboard proxy the way the server package does:
// behind the proxy Server's HTTP listener, under DashboardPrefix of a mux.
func startDashboard(t *testing.T) *dashFixture {
	t.Helper()
	f := &dashFixture{c1: startDashBackend(t, "c1"), c2: startDashBackend(t, "c2")}
	deadURL := deadURL(t)

	rt := routes.New()
	rt.SetRoute("c1", "alice", "127.0.0.1:1", f.c1.url(), nil, nil)
	rt.SetRoute("c2", "bob", "127.0.0.1:1", f.c2.url(), nil, nil)
	rt.SetRoute("nodash", "alice", "127.0.0.1:1", "", nil, nil)
	rt.SetRoute("baddash", "alice", "127.0.0.1:1", "http://[::1", nil, nil) // unparsable: no dashboard
	rt.SetRoute("down", "alice", "127.0.0.1:1", deadURL, nil, nil)
	gwTLS, gwPool := gatewayCert(t)
	f.gwPool = gwPool
	f.p = startProxy(t, Config{TLS: gwTLS, AllowPlainHTTP: true, DialTimeout: 2 * time.Second}, rt, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.Handle(DashboardPrefix, s.DashboardHandler(testAuthn))
		mux.Handle("/", echoHandler())
		return mux
	})
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{
		Timeout:       ioTimeout,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	f.base = "http://" + f.p.addr
	return f
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (f *dashFixture) get(t *testing.T, path string, hdr map[string]string) answer {
	t.Helper()
	return f.do(t, http.MethodGet, path, hdr, nil)
}

func (f *dashFixture) do(t *testing.T, method, path string, hdr map[string]string, body io.Reader) answer {
	t.Helper()
	req, err := http.NewRequest(method, f.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Add(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

type dashErr struct {
	Error, Code, Message string
}

func decodeDashErr(t *testing.T, a answer) dashErr {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json (body %q)", ct, a.body)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", cc)
	}
	var e dashErr
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", a.body, err)
	}
	if e.Error == "" || e.Error != e.Message {
		t.Fatalf("error body %q: want equal non-empty error and message", a.body)
	}
	return e
}

var alice = map[string]string{"Authorization": "Bearer alice-token"}
var bob = map[string]string{"Authorization": "Bearer bob-token"}

func TestDashboardOwnerIsProxied(t *testing.T) {
	f := startDashboard(t)
	cases := []struct {
		name        string
		method      string
		path        string
		cookies     []string // one Cookie header each
		body        string
		wantCookies string // the Cookie header the scheduler gets ("" = none)
	}{
		{"path and query preserved", "GET", "/clusters/c1/status?x=1", []string{"gateway_session=secret; theme=dark; _xsrf=2|ab|cd"}, "", "theme=dark; _xsrf=2|ab|cd"},
		{"session cookie first in its own header", "GET", "/clusters/c1/individual-progress", []string{"gateway_session=secret", "theme=dark"}, "", "theme=dark"},
		{"only the session cookie", "GET", "/clusters/c1/", []string{"gateway_session=secret"}, "", ""},
		{"no cookies", "GET", "/clusters/c1/workers?a=1&b=%2F", nil, "", ""},
		{"name without trailing path", "GET", "/clusters/c1", nil, "", ""},
		{"POST body passes", "POST", "/clusters/c1/api/v1/retire", []string{"k=v"}, `{"workers":["w1"]}`, "k=v"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.c1.requests())
			req, err := http.NewRequest(tc.method, f.base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer alice-token")
			for _, c := range tc.cookies {
				req.Header.Add("Cookie", c)
			}
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("dashboard c1 %s %s", tc.method, tc.path); resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("%d %q, want 200 %q", resp.StatusCode, body, want)
			}
			if resp.Header.Get("X-Dashboard") != "c1" || resp.Header.Get("Set-Cookie") == "" {
				t.Fatalf("backend response headers not passed back: %v", resp.Header)
			}
			reqs := f.c1.requests()
			if len(reqs) != before+1 {
				t.Fatalf("backend got %d requests, want 1", len(reqs)-before)
			}
			got := reqs[len(reqs)-1]
			if got.Method != tc.method || got.RequestURI != tc.path || got.Body != tc.body {
				t.Fatalf("backend saw %s %s body %q, want %s %s body %q", got.Method, got.RequestURI, got.Body, tc.method, tc.path, tc.body)
			}
			if v, ok := got.Header["Authorization"]; ok {
				t.Fatalf("backend saw Authorization %q", v)
			}
			cookies := strings.Join(got.Header.Values("Cookie"), "; ")
			if strings.Contains(cookies, auth.SessionCookie) || strings.Contains(cookies, "secret") {
				t.Fatalf("backend saw the session cookie: %q", cookies)
			}
			if cookies != tc.wantCookies {
				t.Fatalf("backend saw Cookie %q, want %q", cookies, tc.wantCookies)
			}
			if got.Host != strings.TrimPrefix(f.c1.url(), "http://") {
				t.Fatalf("backend saw Host %q, want its own address", got.Host)
			}
			if got.Header.Get("X-Forwarded-Proto") != "http" || got.Header.Get("X-Forwarded-For") != "127.0.0.1" {
				t.Fatalf("X-Forwarded headers: %v", got.Header)
			}
		})
	}
	if n := len(f.c2.requests()); n != 0 {
		t.Fatalf("bob's dashboard got %d of alice's requests", n)
	}
}

func TestDashboardOverHTTPS(t *testing.T) {
	f := startDashboard(t)
	conn, _, err := dialTLS(t, f.p.addr, chainOnly("gateway.test", f.gwPool))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /clusters/c1/status?x=1 HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer alice-token\r\nCookie: gateway_session=s; other=1\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "dashboard c1 GET /clusters/c1/status?x=1" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	reqs := f.c1.requests()
	if len(reqs) != 1 {
		t.Fatalf("backend got %d requests", len(reqs))
	}
	got := reqs[0]
	if got.Header.Get("X-Forwarded-Proto") != "https" || got.Header.Get("Authorization") != "" || got.Header.Get("Cookie") != "other=1" {
		t.Fatalf("backend headers over HTTPS: %v", got.Header)
	}
}

func TestDashboardNotFoundIsUniform(t *testing.T) {
	f := startDashboard(t)
	f.p.rt.SetRoute("gone", "alice", "127.0.0.1:1", f.c1.url(), nil, nil)
	f.p.rt.DeleteRoute("gone") // stopped: no longer running

	cases := []struct {
		name, cluster string
		who           map[string]string
	}{
		{"bob asks for alice's cluster", "c1", bob},
		{"bob asks for an unknown cluster", "zz", bob},
		{"alice asks for an unknown cluster", "zz", alice},
		{"alice asks for bob's cluster", "c2", alice},
		{"alice asks for her stopped cluster", "gone", alice},
		{"alice asks for her cluster without a dashboard", "nodash", alice},
		{"alice asks for her cluster with an unparsable dashboard URL", "baddash", alice},
	}
	var template []byte
	var templateHeader http.Header
	bodies := map[string][]byte{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := f.get(t, "/clusters/"+tc.cluster+"/status", tc.who)
			if a.status != http.StatusNotFound {
				t.Fatalf("status %d (body %q), want 404", a.status, a.body)
			}
			e := decodeDashErr(t, a)
			if e.Code != "cluster_not_found" || e.Message != "cluster "+tc.cluster+" not found or not running" {
				t.Fatalf("error %+v", e)
			}
			if a.header.Get("WWW-Authenticate") != "" {
				t.Fatal("404 carries WWW-Authenticate")
			}
			norm := bytes.ReplaceAll(a.body, []byte("cluster "+tc.cluster+" "), []byte("cluster NAME "))
			h := a.header.Clone()
			h.Del("Date")
			h.Del("Content-Length")
			if template == nil {
				template, templateHeader = norm, h
			} else {
				if !bytes.Equal(norm, template) {
					t.Fatalf("body differs beyond the name:\n got %q\nwant %q", norm, template)
				}
				if fmt.Sprint(h) != fmt.Sprint(templateHeader) {
					t.Fatalf("headers differ:\n got %v\nwant %v", h, templateHeader)
				}
			}
			if tc.who["Authorization"] == bob["Authorization"] {
				bodies[tc.cluster] = a.body
			}
		})
	}
	// Bob cannot tell alice's running cluster from a name that does not
	// exist: the two answers are byte-identical once the (equal-length)
	// names are swapped.
	if got, want := bytes.ReplaceAll(bodies["c1"], []byte("c1"), []byte("zz")), bodies["zz"]; !bytes.Equal(got, want) {
		t.Fatalf("bob: alice's cluster %q vs unknown %q", bodies["c1"], bodies["zz"])
	}
	if n := len(f.c1.requests()) + len(f.c2.requests()); n != 0 {
		t.Fatalf("dashboards got %d requests from non-owners", n)
	}
}

func TestDashboardAuthentication(t *testing.T) {
	f := startDashboard(t)
	cases := []struct {
		name    string
		hdr     map[string]string
		wantMsg string
	}{
		{"no credentials", nil, "authentication required to view this dashboard"},
		{"unknown bearer token", map[string]string{"Authorization": "Bearer mallory-token"}, "authentication failed"},
		{"basic auth", map[string]string{"Authorization": "Basic YWxpY2U6YWxpY2U="}, "authentication failed"},
		{"session cookie alone is not a credential here", map[string]string{"Cookie": "gateway_session=alice"}, "authentication required to view this dashboard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The same answer for an existing and an unknown cluster:
			// authentication comes before the lookup.
			var first []byte
			for _, cluster := range []string{"c1", "zz"} {
				a := f.get(t, "/clusters/"+cluster+"/status", tc.hdr)
				if a.status != http.StatusUnauthorized {
					t.Fatalf("%s: status %d (body %q), want 401", cluster, a.status, a.body)
				}
				if got := a.header.Get("WWW-Authenticate"); got != `Bearer realm="gateway"` {
					t.Fatalf("%s: WWW-Authenticate %q", cluster, got)
				}
				e := decodeDashErr(t, a)
				if e.Code != "unauthenticated" || e.Message != tc.wantMsg {
					t.Fatalf("%s: error %+v, want code unauthenticated, message %q", cluster, e, tc.wantMsg)
				}
				if first == nil {
					first = a.body
				} else if !bytes.Equal(first, a.body) {
					t.Fatalf("401 bodies differ between an existing and an unknown cluster: %q vs %q", first, a.body)
				}
			}
		})
	}
	if n := len(f.c1.requests()); n != 0 {
		t.Fatalf("dashboard got %d unauthenticated requests", n)
	}
}

func TestDashboardNoClusterName(t *testing.T) {
	f := startDashboard(t)
	for _, hdr := range []map[string]string{nil, alice} {
		a := f.get(t, "/clusters/", hdr)
		if a.status != http.StatusNotFound {
			t.Fatalf("status %d (body %q), want 404", a.status, a.body)
		}
		if e := decodeDashErr(t, a); e.Code != "cluster_not_found" || !strings.Contains(e.Message, "/clusters/<name>/") {
			t.Fatalf("error %+v", e)
		}
	}
	// Mounted without a cleaning mux, an empty first segment is no name either.
	h := New(Config{}, f.p.rt).DashboardHandler(testAuthn)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/clusters//status", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("/clusters//status: %d %q, want 404", rec.Code, rec.Body)
	}
	if n := len(f.c1.requests()); n != 0 {
		t.Fatalf("dashboard got %d requests", n)
	}
}

func TestDashboardBackendDown(t *testing.T) {
	f := startDashboard(t)
	// The answer comes within the client's ioTimeout, these tests' hang
	// bound; how soon is the benchmark's to judge.
	a := f.get(t, "/clusters/down/status", alice)
	if a.status != http.StatusBadGateway {
		t.Fatalf("status %d (body %q), want 502", a.status, a.body)
	}
	if e := decodeDashErr(t, a); e.Code != "bad_gateway" || e.Message != "the cluster's dashboard did not answer" {
		t.Fatalf("error %+v", e)
	}
	// Someone else still gets the uniform 404, not a hint that it exists.
	if a := f.get(t, "/clusters/down/status", bob); a.status != http.StatusNotFound {
		t.Fatalf("bob: status %d, want 404", a.status)
	}
}

func TestDashboardRoutesAreLive(t *testing.T) {
	f := startDashboard(t)
	if a := f.get(t, "/clusters/c1/", alice); a.status != 200 {
		t.Fatalf("alice: %d", a.status)
	}
	f.p.rt.SetRoute("c1", "bob", "127.0.0.1:1", f.c1.url(), nil, nil) // ownership moves
	if a := f.get(t, "/clusters/c1/", alice); a.status != 404 {
		t.Fatalf("alice after the owner changed: %d, want 404", a.status)
	}
	if a := f.get(t, "/clusters/c1/", bob); a.status != 200 {
		t.Fatalf("bob after the owner changed: %d, want 200", a.status)
	}
	f.p.rt.SetRoute("new", "alice", "127.0.0.1:1", f.c2.url(), nil, nil)
	if a := f.get(t, "/clusters/new/x", alice); a.status != 200 || string(a.body) != "dashboard c2 GET /clusters/new/x" {
		t.Fatalf("route added later: %d %q", a.status, a.body)
	}
	f.p.rt.DeleteRoute("new")
	if a := f.get(t, "/clusters/new/x", alice); a.status != 404 {
		t.Fatalf("deleted route: %d, want 404", a.status)
	}
}

const upgradeRequest = "GET %s HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: %s\r\n" +
	"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: gateway_session=s; other=1\r\n\r\n"

func TestDashboardUpgrade(t *testing.T) {
	f := startDashboard(t)
	dial := map[string]func(t *testing.T) net.Conn{
		"plain": func(t *testing.T) net.Conn { return dialRaw(t, f.p.addr) },
		"https": func(t *testing.T) net.Conn {
			c, _, err := dialTLS(t, f.p.addr, chainOnly("gateway.test", f.gwPool))
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
	for _, transport := range []string{"plain", "https"} {
		t.Run(transport, func(t *testing.T) {
			before := len(f.c1.requests())
			c := dial[transport](t)
			_ = c.SetDeadline(time.Now().Add(ioTimeout))
			fmt.Fprintf(c, upgradeRequest, "/clusters/c1/ws?id=7", "Bearer alice-token")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
				t.Fatalf("status %d, Upgrade %q; want 101 websocket", resp.StatusCode, resp.Header.Get("Upgrade"))
			}
			// Bytes both ways over the hijacked connection.
			for i := range 3 {
				msg := fmt.Sprintf("frame-%d\n", i)
				if _, err := io.WriteString(c, msg); err != nil {
					t.Fatal(err)
				}
				got, err := br.ReadString('\n')
				if err != nil || got != msg {
					t.Fatalf("echo %q, %v; want %q", got, err, msg)
				}
			}
			bulk := randomBytes(t, 256<<10)
			werr := make(chan error, 1)
			go func() { _, err := c.Write(bulk); werr <- err }()
			got := make([]byte, len(bulk))
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatal(err)
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, bulk) {
				t.Fatal("bulk echo differs")
			}
			c.Close()

			reqs := f.c1.requests()
			if len(reqs) != before+1 {
				t.Fatalf("backend got %d requests, want 1", len(reqs)-before)
			}
			r := reqs[len(reqs)-1]
			if r.RequestURI != "/clusters/c1/ws?id=7" || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") ||
				!strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
				t.Fatalf("backend saw %s with headers %v", r.RequestURI, r.Header)
			}
			if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "other=1" || r.Header.Get("Sec-WebSocket-Key") == "" {
				t.Fatalf("upgrade headers at the backend: %v", r.Header)
			}
		})
	}
	t.Run("not the owner", func(t *testing.T) {
		before := len(f.c1.requests())
		c := dialRaw(t, f.p.addr)
		fmt.Fprintf(c, upgradeRequest, "/clusters/c1/ws", "Bearer bob-token")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d, want 404", resp.StatusCode)
		}
		if n := len(f.c1.requests()) - before; n != 0 {
			t.Fatalf("backend got %d requests", n)
		}
	})
}

// removeCookie rebuilds the Cookie header from net/http's parse of it, so
// every cookie net/http considers invalid is silently dropped and values with
// spaces or commas come back quoted, even when there is no session cookie to
// remove. Only gateway_session should go; the scheduler's own cookies should
// pass verbatim.
func TestRegressionCookieHeaderRewritten(t *testing.T) {
	f := startDashboard(t)
	const sent = `a=1; pref=a b; x=a"b; y=ünï`
	if a := f.get(t, "/clusters/c1/", map[string]string{"Authorization": "Bearer alice-token", "Cookie": sent}); a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	reqs := f.c1.requests()
	if got := reqs[len(reqs)-1].Header.Get("Cookie"); got != sent {
		t.Fatalf("scheduler got Cookie %q, want %q unchanged", got, sent)
	}
}

// deadURL is the URL of a loopback port that nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	dead, err := net.Listen("tcp", loopback)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	return "http://" + dead.Addr().String()
}
