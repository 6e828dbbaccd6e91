package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// The JupyterHub tests run Debian's jupyterhub (3.0) on loopback, as the
// test's own processes: its dummy authenticator (any password), users
// alice and bob, the group hub-ops (alice), the gateway registered as a
// hub service (api_token, OAuth client, no confirmation page), and a
// test-admin service that makes and revokes users' tokens. The gateway
// reaches the hub's API through a proxy of the test's, which counts the
// hub requests by the token they carry.

// envRequireJupyterHub, set to 1 by the test command where it runs as root
// (scripts/setup.sh installs jupyterhub there), makes a missing jupyterhub
// fail the tests instead of skipping them.
const envRequireJupyterHub = "GATEWAY_TEST_REQUIRE_JUPYTERHUB"

const (
	hubServiceToken = "gateway-service-0123456789abcdef0123456789"
	hubAdminToken   = "test-admin-0123456789abcdef0123456789abcd"
	hubClientID     = "service-gateway"
	hubCacheTTL     = 2 * time.Second
)

// jupyterhubPath is Debian's jupyterhub, or the test is skipped (or, under
// GATEWAY_TEST_REQUIRE_JUPYTERHUB=1, failed) with what to install.
func jupyterhubPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("jupyterhub")
	if err != nil {
		testutil.Missing(t, envRequireJupyterHub, "the JupyterHub tests need Debian's jupyterhub (apt-get install jupyterhub; scripts/setup.sh installs it as root)")
	}
	return p
}

// realHub is one JupyterHub run by a test.
type realHub struct {
	t       *testing.T
	dir     string
	public  string // where browsers reach it: configurable-http-proxy
	api     string // its own API, http://127.0.0.1:<port>/hub/api
	counter *hubCounter
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
}

// hubCounter is the test's proxy in front of the hub's API: the
// gateway's auth.jupyterhub.api_url. It counts GET /hub/api/user requests
// by the token they carry.
type hubCounter struct {
	srv  *httptest.Server
	mu   sync.Mutex
	asks map[string]int
}

func (c *hubCounter) count(tok string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asks[tok]
}

// hubGateway is a `gateway dev` whose users include the hub's.
type hubGateway struct {
	e   *env
	hub *realHub
}

// startHubGateway starts the counting proxy, a gateway pointed at it
// (with extra settings), then the hub, which must know the gateway's
// address for its OAuth redirect.
func startHubGateway(t *testing.T, extra ...string) *hubGateway {
	t.Helper()
	bin := jupyterhubPath(t)
	h := &realHub{t: t, dir: t.TempDir(), log: &syncBuffer{}, exited: make(chan struct{})}
	hubPort, proxyPort, proxyAPIPort := freePort(t), freePort(t), freePort(t)
	h.public = fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	h.api = fmt.Sprintf("http://127.0.0.1:%d/hub/api", hubPort)
	h.counter = &hubCounter{asks: map[string]int{}}
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", hubPort))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorHandler = func(http.ResponseWriter, *http.Request, error) {
		panic(http.ErrAbortHandler) // as the hub would: no answer at all
	}
	h.counter.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hub/api/user" {
			_, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			h.counter.mu.Lock()
			h.counter.asks[tok]++
			h.counter.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(h.counter.srv.Close)

	e := newEnv(t, append([]string{
		"GATEWAY_AUTH_JUPYTERHUB_API_URL=" + h.counter.srv.URL + "/hub/api",
		"GATEWAY_AUTH_JUPYTERHUB_API_TOKEN=" + hubServiceToken,
		"GATEWAY_AUTH_JUPYTERHUB_OAUTH_CLIENT_ID=" + hubClientID,
		"GATEWAY_AUTH_JUPYTERHUB_OAUTH_AUTHORIZE_URL=" + h.public + "/hub/api/oauth2/authorize",
		"GATEWAY_AUTH_JUPYTERHUB_CACHE_TTL=" + hubCacheTTL.String(),
	}, extra...)...)
	e.startGateway()

	cfg := fmt.Sprintf(`c = get_config()
c.JupyterHub.bind_url = %[1]q
c.JupyterHub.hub_bind_url = "http://127.0.0.1:%[2]d"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%[3]d"
c.ConfigurableHTTPProxy.pid_file = %[4]q
c.JupyterHub.pid_file = %[5]q
c.JupyterHub.db_url = "sqlite:///" + %[6]q
c.JupyterHub.cookie_secret_file = %[7]q
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
c.JupyterHub.redirect_to_server = False
c.Authenticator.allowed_users = {"alice", "bob"}
c.JupyterHub.load_groups = {"hub-ops": ["alice"]}
c.JupyterHub.services = [
    {"name": "gateway", "api_token": %[8]q, "oauth_client_id": %[9]q,
     "oauth_redirect_uri": %[10]q, "oauth_no_confirm": True},
    {"name": "test-admin", "api_token": %[11]q},
]
c.JupyterHub.load_roles = [
    {"name": "user", "scopes": ["self", "access:services!service=gateway"]},
    {"name": "server", "scopes": ["users:activity!user", "access:servers!user", "access:services!service=gateway"]},
    {"name": "test-admin", "scopes": ["admin:users", "tokens"], "services": ["test-admin"]},
]
`, h.public, hubPort, proxyAPIPort, filepath.Join(h.dir, "proxy.pid"), filepath.Join(h.dir, "hub.pid"),
		filepath.Join(h.dir, "hub.sqlite"), filepath.Join(h.dir, "cookie_secret"),
		hubServiceToken, hubClientID, e.url+"/auth/jupyterhub/callback", hubAdminToken)
	if err := os.WriteFile(filepath.Join(h.dir, "jupyterhub_config.py"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.cmd = exec.Command(bin, "-f", filepath.Join(h.dir, "jupyterhub_config.py"))
	h.cmd.Dir = h.dir
	// Debian's configurable-http-proxy finds its modules only there when
	// the machine's node is not Debian's own.
	h.cmd.Env = append(filterEnv(os.Environ()), "NODE_PATH=/usr/share/nodejs")
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The hub starts its proxy in a session of its own, holding the hub's
	// output: without a delay, Wait would wait for the proxy too, and a
	// proxy the hub did not stop (a hub killed after its 30 s) would hang
	// the test (a CI run: HubStopped for 20 minutes).
	h.cmd.WaitDelay = 5 * time.Second
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(h.stop)
	h.waitReady()
	return &hubGateway{e: e, hub: h}
}

// waitReady waits until the hub answers on its own port and, through
// the proxy, its login page.
func (h *realHub) waitReady() {
	h.t.Helper()
	deadline := time.Now().Add(testutil.HangBound)
	for {
		ok := true
		for _, u := range []string{strings.TrimSuffix(h.api, "/api") + "/api/", h.public + "/hub/login"} {
			resp, err := http.Get(u)
			if err != nil {
				ok = false
				break
			}
			resp.Body.Close()
			ok = ok && resp.StatusCode == http.StatusOK
		}
		if ok {
			return
		}
		select {
		case <-h.exited:
			h.t.Fatalf("jupyterhub exited at start:\n%s", h.log.String())
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("jupyterhub did not answer within %s:\n%s", testutil.HangBound, h.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the hub (and the proxy it started) and waits for it.
func (h *realHub) stop() {
	select {
	case <-h.exited:
		return
	default:
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-h.exited
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	// The proxy runs in a session of its own: the hub stops it when it
	// stops cleanly; when it did not, its pid file names it.
	if b, err := os.ReadFile(filepath.Join(h.dir, "proxy.pid")); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		// Only if that pid is still a proxy: it may have been reused.
		if cmdline, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && pid > 1 && rerr == nil && strings.Contains(string(cmdline), "configurable-http-proxy") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// hubToken is a user's token, made on the hub by its admin service.
type hubToken struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// newToken makes a token of user's on the hub.
func (h *realHub) newToken(user string) hubToken {
	h.t.Helper()
	code, body := h.admin(http.MethodPost, "/users/"+user+"/tokens", `{"note": "gateway test"}`)
	var tok hubToken
	if code != http.StatusCreated && code != http.StatusOK || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		h.t.Fatalf("making a token for %s on the hub: %d %s", user, code, body)
	}
	return tok
}

// revoke revokes a token of user's on the hub.
func (h *realHub) revoke(user string, tok hubToken) {
	h.t.Helper()
	if code, body := h.admin(http.MethodDelete, "/users/"+user+"/tokens/"+tok.ID, ""); code != http.StatusNoContent {
		h.t.Fatalf("revoking %s's token on the hub: %d %s", user, code, body)
	}
}

// admin calls the hub's API (directly, not through the counter) as the
// test-admin service.
func (h *realHub) admin(method, path, body string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.api+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+hubAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s on the hub: %v\n%s", method, path, err, h.log.String())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hubCall sends one request to the gateway with the Authorization header
// given (none when empty) from the loopback address from (any when
// empty), and returns the answer.
func hubCall(t *testing.T, method, u, authz, from string) (int, http.Header, string) {
	t.Helper()
	return hubSend(t, method, u, authz, from, "")
}

// hubSend is hubCall with a JSON body.
func hubSend(t *testing.T, method, u, authz, from, body string) (int, http.Header, string) {
	t.Helper()
	client := http.DefaultClient
	if from != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
		client = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		defer client.CloseIdleConnections()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// periods is how many cache periods have begun since start: the most hub
// requests one token may have cost since.
func periods(start time.Time) int {
	return 1 + int(time.Since(start)/hubCacheTTL)
}

type hubWho struct {
	Name   string   `json:"name"`
	ID     string   `json:"id"`
	Groups []string `json:"groups"`
	Admin  bool     `json:"admin"`
	Via    string   `json:"via"`
}

func (g *hubGateway) whoami(t *testing.T, authz string) (int, hubWho, string) {
	t.Helper()
	code, _, body := hubCall(t, http.MethodGet, g.e.url+"/api/v1/whoami", authz, "")
	var w hubWho
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatalf("whoami: %v: %s", err, body)
		}
	}
	return code, w, body
}

// jupyterHubAuthClient is dask_gateway's client as a notebook runs it,
// written against its source: Gateway._request (one aiohttp session with
// CookieJar(unsafe=True); each request sent first as it is, then after a
// 401 again with the headers of auth.pre_request) and auth.JupyterHubAuth
// (the token from JUPYTERHUB_API_TOKEN, sent as "Authorization: jupyterhub
// <token>"). It prints, for each call, the statuses the gateway answered.
const jupyterHubAuthClient = `
import asyncio, json, os, sys
import aiohttp

class JupyterHubAuth:
    def __init__(self, api_token=None):
        if api_token is None:
            api_token = os.environ.get("JUPYTERHUB_API_TOKEN")
            if api_token is None:
                raise ValueError("No JupyterHub API token provided, and JUPYTERHUB_API_TOKEN environment variable not found")
        self.api_token = api_token

    def pre_request(self, resp):
        return {"Authorization": "jupyterhub " + self.api_token}, None

    def post_response(self, resp, context=None):
        pass

async def main(address):
    auth = JupyterHubAuth()
    calls = []
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        async def request(method, url, json_body=None):
            statuses = []
            resp = await session.request(method, url, json=json_body)
            statuses.append(resp.status)
            if resp.status == 401:
                headers, context = auth.pre_request(resp)
                resp = await session.request(method, url, json=json_body, headers=headers)
                statuses.append(resp.status)
                auth.post_response(resp, context)
            calls.append({"url": url, "statuses": statuses, "body": await resp.text()})
        await request("GET", address + "/api/v1/clusters/")
        await request("GET", address + "/api/v1/options")
        await request("GET", address + "/api/v1/clusters/?status=running")
        cookies = sorted(c.key for c in session.cookie_jar)
    print(json.dumps({"calls": calls, "cookies": cookies}))

asyncio.run(main(sys.argv[1]))
`

// TestJupyterHubTokens: the hub's users and their tokens on the gateway,
// against the real JupyterHub.
func TestJupyterHubTokens(t *testing.T) {
	t.Parallel()
	quotas := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(quotas, []byte("quotas:\n  entries:\n    - {subject: group:hub-ops, max_clusters: 7}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startHubGateway(t, "GATEWAY_AUTH_ADMIN_GROUPS=hub-ops", "GATEWAY_CONFIG="+quotas)
	hub := g.hub
	// Every hub token sent, and the gateway's own service token: none may
	// reach the gateway's log.
	secrets := []string{hubServiceToken}
	newToken := func(user string) hubToken {
		tok := hub.newToken(user)
		secrets = append(secrets, tok.Token)
		return tok
	}
	t.Cleanup(func() {
		for _, s := range secrets {
			if strings.Contains(g.e.gwLog.String(), s) {
				t.Errorf("the gateway's log shows a hub token (%.6s...)", s)
			}
		}
	})

	// A user's token names them and their hub groups, with either
	// scheme dask-gateway's clients send; the groups make alice an admin
	// (auth.admin_groups) and give her the group's quota.
	t.Run("WhoAmI", func(t *testing.T) {
		alice, bob := newToken("alice"), newToken("bob")
		for _, scheme := range []string{"jupyterhub", "token"} {
			code, w, body := g.whoami(t, scheme+" "+alice.Token)
			if code != http.StatusOK || w.Name != "alice" || w.ID != "jupyterhub:alice" || w.Via != "jupyterhub" || len(w.Groups) != 1 || w.Groups[0] != "hub-ops" || !w.Admin {
				t.Fatalf("%s scheme: %d %s; want alice, jupyterhub:alice, groups [hub-ops], admin", scheme, code, body)
			}
		}
		code, w, body := g.whoami(t, "jupyterhub "+bob.Token)
		if code != http.StatusOK || w.ID != "jupyterhub:bob" || len(w.Groups) != 0 || w.Admin {
			t.Fatalf("bob: %d %s; want jupyterhub:bob, no groups, not an admin", code, body)
		}
		code, _, body = hubCall(t, http.MethodGet, g.e.url+"/api/v1/quota", "jupyterhub "+alice.Token, "")
		if code != http.StatusOK || !strings.Contains(body, `"max_clusters":7`) || !strings.Contains(body, "group:hub-ops") {
			t.Errorf("alice's quota: %d %s; want max_clusters 7 from group:hub-ops", code, body)
		}
		code, _, body = hubCall(t, http.MethodGet, g.e.url+"/api/v1/quota", "jupyterhub "+bob.Token, "")
		if code != http.StatusOK || strings.Contains(body, "group:hub-ops") {
			t.Errorf("bob's quota: %d %s; want none of hub-ops's", code, body)
		}
		// The gateway's own service token is a service's, not a user's.
		if code, _, body := g.whoami(t, "jupyterhub "+hubServiceToken); code != http.StatusUnauthorized {
			t.Errorf("the gateway's service token: %d %s; want 401", code, body)
		}
	})

	// A token revoked on the hub stops working once the gateway's cached
	// answer, made before the revocation, is over: by revocation +
	// cache_ttl.
	t.Run("Revoked", func(t *testing.T) {
		tok := newToken("alice")
		if code, _, body := g.whoami(t, "jupyterhub "+tok.Token); code != http.StatusOK {
			t.Fatalf("before revocation: %d %s", code, body)
		}
		hub.revoke("alice", tok)
		// Not a wait for something to happen, but the bound under test:
		// every answer the gateway holds was asked for before now, and
		// is over by now + cache_ttl.
		time.Sleep(hubCacheTTL)
		if code, _, body := g.whoami(t, "jupyterhub "+tok.Token); code != http.StatusUnauthorized {
			t.Fatalf("%s after revocation: %d %s; want 401", hubCacheTTL, code, body)
		}
	})

	// A forged token costs the hub one request, however often it is tried;
	// its failures count against the address like any other, up to 429
	// (from 127.0.0.2, so that the other tests' address is not blocked).
	t.Run("Forged", func(t *testing.T) {
		const forged = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"
		limit := 30 // auth.failed_per_minute's default
		start := time.Now()
		for i := 1; i <= limit+1; i++ {
			code, _, body := hubCall(t, http.MethodGet, g.e.url+"/api/v1/whoami", "jupyterhub "+forged, "127.0.0.2")
			want := http.StatusUnauthorized
			if i > limit {
				want = http.StatusTooManyRequests
			}
			if code != want {
				t.Fatalf("forged token, try %d: %d %s; want %d", i, code, body, want)
			}
		}
		if n, most := hub.counter.count(forged), periods(start); n > most {
			t.Fatalf("the hub was asked %d times about the forged token in %d cache periods, want at most one each", n, most)
		}
	})

	// dask_gateway's JupyterHubAuth, as its client sends it: the first
	// request is refused (401) and sent again with the hub token; the
	// gateway's API cookie then carries the others, with no 401 and no
	// further hub request.
	t.Run("JupyterHubAuthClient", func(t *testing.T) {
		if err := exec.Command(python, "-c", "import aiohttp").Run(); err != nil {
			testutil.Missing(t, testutil.EnvRequirePython, "python3-aiohttp is not installed (apt-get install python3-aiohttp)")
		}
		tok := newToken("bob")
		f := filepath.Join(t.TempDir(), "client.py")
		if err := os.WriteFile(f, []byte(jupyterHubAuthClient), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		cmd := exec.CommandContext(ctx, python, f, g.e.url)
		cmd.Env = append(filterEnv(os.Environ()), "JUPYTERHUB_API_TOKEN="+tok.Token)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the client: %v\n%s", err, out)
		}
		var res struct {
			Calls []struct {
				URL      string
				Statuses []int
				Body     string
			}
			Cookies []string
		}
		if err := json.Unmarshal(out, &res); err != nil || len(res.Calls) != 3 {
			t.Fatalf("the client printed %s (%v)", out, err)
		}
		for i, c := range res.Calls {
			want := "[200]"
			if i == 0 {
				want = "[401 200]"
			}
			if got := fmt.Sprint(c.Statuses); got != want {
				t.Errorf("call %d (%s): statuses %s, want %s: %s", i+1, c.URL, got, want, c.Body)
			}
		}
		if len(res.Cookies) != 1 || res.Cookies[0] != "gateway-api" {
			t.Errorf("the client keeps cookies %v, want the API cookie alone", res.Cookies)
		}
		if n, most := hub.counter.count(tok.Token), periods(start); n > most {
			t.Errorf("the hub was asked %d times about the client's token in %d cache periods, want at most one each", n, most)
		}
	})

	// A hub that does not answer: a hub token is 503 (not 401, and no
	// cookie cleared); the gateway's own tokens with dask-gateway's
	// jupyterhub scheme, and the OIDC login of the CLI, work on.
	t.Run("HubStopped", func(t *testing.T) {
		tok := newToken("alice") // never used: nothing cached
		hub.stop()
		code, hdr, body := hubCall(t, http.MethodGet, g.e.url+"/api/v1/whoami", "jupyterhub "+tok.Token, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"auth_unavailable"`) {
			t.Fatalf("a hub token with the hub stopped: %d %s; want 503 auth_unavailable", code, body)
		}
		if sc := hdr.Values("Set-Cookie"); len(sc) > 0 {
			t.Errorf("the 503 sets cookies: %v", sc)
		}
		if code, w, body := g.whoami(t, "jupyterhub "+g.e.token()); code != http.StatusOK || w.Name != "dev" {
			t.Errorf("the gateway's own token with the jupyterhub scheme: %d %s", code, body)
		}
		g.e.gwOK("list") // the CLI's OIDC login
	})
}
