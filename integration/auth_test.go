package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// userEnv is another person on the same gateway: their own config
// directory (credentials, cluster keys), logged in through the dev issuer.
func (e *env) userEnv(t *testing.T, username string) *env {
	t.Helper()
	u := &env{t: t, bin: e.bin, home: t.TempDir(), gwLog: e.gwLog, url: e.url}
	u.vars = append(filterEnv(os.Environ()), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, "config"), "GATEWAY_URL="+e.url)
	u.login(username)
	return u
}

var codeRE = regexp.MustCompile(`enter the code:\s+([A-Z]{4}-[A-Z]{4})`)
var deviceURIRE = regexp.MustCompile(`visit:\s+(http://127\.0\.0\.1:\d+/device)`)

// login runs `gateway login` (device flow) and approves it in the dev
// issuer's page as username, the way a person would in a browser.
func (e *env) login(username string) {
	t := e.t
	t.Helper()
	code, uri, wait := e.startLogin()
	resp, err := http.PostForm(uri, url.Values{"user_code": {code}, "username": {username}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approving the device code: %s", resp.Status)
	}
	if out := wait(); !strings.Contains(out, "as "+username) {
		t.Fatalf("gateway login: %s", out)
	}
}

// startLogin starts `gateway login` (device flow) and returns the code and
// the device page it prints, and wait, which returns its output once it
// has ended.
func (e *env) startLogin() (code, uri string, wait func() string) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, e.bin, "login")
	cmd.Env = e.vars
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && (code == "" || uri == "") {
		seen.WriteString(sc.Text() + "\n")
		if m := deviceURIRE.FindStringSubmatch(seen.String()); m != nil {
			uri = m[1]
		}
		if m := codeRE.FindStringSubmatch(seen.String()); m != nil {
			code = m[1]
		}
	}
	if code == "" || uri == "" {
		t.Fatalf("gateway login printed no code and URL:\n%s", seen.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return code, uri, func() string {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("gateway login: %v\n%s", err, stdout.String())
		}
		return stdout.String()
	}
}

// browserLogin signs a cookie-keeping HTTP client in through the dashboard's
// OIDC redirect, choosing username on the dev issuer's login page, and
// returns it with the final response of opening path.
func browserLogin(t *testing.T, gatewayURL, path, username string) (*http.Client, *http.Response, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var loginPage *url.URL
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/login" {
			loginPage = req.URL
		}
		return nil
	}}
	get := func(u string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get(gatewayURL + path)
	resp.Body.Close()
	if loginPage == nil {
		t.Fatalf("opening %s did not lead to the issuer's login page (ended at %s, %d)", path, resp.Request.URL, resp.StatusCode)
	}
	form := url.Values{"id": {loginPage.Query().Get("id")}, "username": {username}}
	resp, err := c.PostForm(loginPage.Scheme+"://"+loginPage.Host+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return c, resp, string(body)
}

// TestOIDCLoginAndIsolation: three people on one gateway. Each reaches only
// their own clusters, over the API, the CLI, the dashboard (token and
// browser session) and the scheduler route; nobody's tokens reach the logs.
func TestOIDCLoginAndIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	dev2 := e.userEnv(t, "dev2")
	admin := e.userEnv(t, "admin")

	var who map[string]any
	admin.gwJSON(&who, "whoami")
	if who["name"] != "admin" || who["admin"] != true || who["via"] != "oidc" {
		t.Fatalf("admin whoami: %v", who)
	}
	e.gwJSON(&who, "whoami")
	if who["name"] != "dev" || who["admin"] != false || who["subject"] != "dev-user-1" {
		t.Fatalf("dev whoami: %v", who)
	}

	var a, b cluster
	e.gwJSON(&a, "new-cluster")
	dev2.gwJSON(&b, "new-cluster")

	for _, other := range []*env{dev2, admin} {
		for _, args := range [][]string{
			{"show", a.Name}, {"scale", a.Name, "--workers", "1"}, {"stop", a.Name}, {"logs", a.Name}, {"dashboard", a.Name},
		} {
			out, err := other.gw(args...)
			if err == nil || !strings.Contains(out, "not found") {
				t.Errorf("%s as another user: err=%v %s", strings.Join(args, " "), err, out)
			}
		}
		var list []struct{ Name string }
		other.gwJSON(&list, "list", "--all")
		for _, c := range list {
			if c.Name == a.Name {
				t.Errorf("another user lists %s", a.Name)
			}
		}
		tok := strings.TrimSpace(other.gwOK("print-token"))
		for _, p := range []string{"/api/v1/clusters/" + a.Name, "/clusters/" + a.Name + "/health", "/api/v1/clusters/" + a.Name + "/logs"} {
			code, body := get(t, e.url+p, tok)
			if code != http.StatusNotFound || strings.Contains(body, "BEGIN") {
				t.Errorf("GET %s as another user: %d %s", p, code, body)
			}
		}
	}
	// The cluster survived all that, and its owner still reaches it.
	var d struct{ Cluster struct{ State string } }
	e.gwJSON(&d, "show", a.Name)
	if d.Cluster.State != "RUNNING" {
		t.Fatalf("dev's cluster after the others' attempts: %s", d.Cluster.State)
	}

	// Scheduler route: dev2's own cluster credentials do not open dev's.
	host := strings.TrimPrefix(e.url, "http://")
	certB := loadPair(t, b.TLSCertFile, b.TLSKeyFile)
	if err := daskHandshake(host, "daskgateway-"+a.Name, loadPool(t, a.TLSCertFile), certB); err == nil {
		t.Error("dev2's certificate opened dev's scheduler")
	}

	// Browser: the dashboard redirects to the issuer and back with a session.
	devBrowser, resp, body := browserLogin(t, e.url, "/clusters/"+a.Name+"/info/main/workers.html", "dev")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Workers") || resp.Request.URL.Path != "/clusters/"+a.Name+"/info/main/workers.html" {
		t.Fatalf("browser login as dev: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	_, resp, _ = browserLogin(t, e.url, "/clusters/"+a.Name+"/info/main/workers.html", "dev2")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("dev2's browser session on dev's dashboard: %d, want 404", resp.StatusCode)
	}

	// Browser sessions live in the store: each user lists their own only,
	// and a revoked one no longer opens the dashboard.
	dashboard := func(c *http.Client) int {
		t.Helper()
		resp, err := c.Get(e.url + "/clusters/" + a.Name + "/info/main/workers.html") // not HTML: no sign-in redirect
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var devSessions, dev2Sessions, adminSessions []struct{ ID, Via string }
	e.gwJSON(&devSessions, "sessions")
	dev2.gwJSON(&dev2Sessions, "sessions")
	admin.gwJSON(&adminSessions, "sessions")
	if len(devSessions) != 1 || devSessions[0].Via != "login" || len(dev2Sessions) != 1 || dev2Sessions[0].ID == devSessions[0].ID || len(adminSessions) != 0 {
		t.Fatalf("sessions: dev %v, dev2 %v, admin %v; want one each for dev and dev2, none for admin", devSessions, dev2Sessions, adminSessions)
	}
	if code := dashboard(devBrowser); code != http.StatusOK {
		t.Fatalf("dev's browser session: %d", code)
	}
	if out, err := dev2.gw("sessions", "revoke", devSessions[0].ID); err == nil || !strings.Contains(out, "no active session") {
		t.Errorf("dev2 revoked dev's session: %v %s", err, out)
	}
	e.gwOK("sessions", "revoke", devSessions[0].ID)
	if code := dashboard(devBrowser); code != http.StatusUnauthorized {
		t.Errorf("revoked browser session on the dashboard: %d, want 401", code)
	}

	// gateway logout ends the user's browser sessions too. An admin's API
	// token is admin through the groups of the admin's latest login.
	adminBrowser, resp, _ := browserLogin(t, e.url, "/clusters/"+a.Name+"/info/main/workers.html", "admin")
	if resp.StatusCode != http.StatusNotFound { // signed in; not admin's cluster
		t.Fatalf("admin's browser login: %d", resp.StatusCode)
	}
	var adminToken struct{ Token string }
	admin.gwJSON(&adminToken, "token", "create", "--name", "admin-ci", "--expires", "1h")
	if code, body := get(t, e.url+"/api/v1/whoami", adminToken.Token); code != http.StatusOK || !strings.Contains(body, `"admin":true`) {
		t.Errorf("admin's API token: %d %s", code, body)
	}
	if out := admin.gwOK("logout"); !strings.Contains(out, "Ended 1 browser session") {
		t.Errorf("gateway logout: %s", out)
	}
	if code := dashboard(adminBrowser); code != http.StatusUnauthorized {
		t.Errorf("browser session after gateway logout: %d, want 401", code)
	}

	// API tokens carry the identity, can be read-only, and can be revoked.
	var created struct{ ID, Token string }
	e.gwJSON(&created, "token", "create", "--name", "ci", "--expires", "1d", "--read-only")
	if !strings.HasPrefix(created.Token, "gw_") {
		t.Fatalf("token: %+v", created)
	}
	ci := &env{t: t, bin: e.bin, home: t.TempDir(), gwLog: e.gwLog, url: e.url}
	ci.vars = append(filterEnv(os.Environ()), "HOME="+ci.home, "XDG_CONFIG_HOME="+filepath.Join(ci.home, "config"), "GATEWAY_URL="+e.url, "GATEWAY_TOKEN="+created.Token)
	ci.gwJSON(&d, "show", a.Name)
	if d.Cluster.State != "RUNNING" {
		t.Fatal("read-only token cannot read")
	}
	if out, err := ci.gw("scale", a.Name, "--workers", "1"); err == nil || !strings.Contains(out, "read-only") {
		t.Errorf("read-only token scaled: %v %s", err, out)
	}
	// The cluster's key is a full Dask credential: not for a read-only token.
	if code, body := get(t, e.url+"/api/v1/clusters/"+a.Name, created.Token); code != http.StatusOK || !strings.Contains(body, `"tls_key":null`) {
		t.Errorf("read-only token got the cluster's key: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/clusters/"+a.Name+"/health", nil)
	req.Header.Set("Authorization", "Bearer "+created.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only token posted through the dashboard: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// A token cannot mint tokens (it could renew itself for ever).
	var rw struct{ ID, Token string }
	e.gwJSON(&rw, "token", "create", "--name", "rw", "--expires", "1h")
	minter := &env{t: t, bin: e.bin, home: t.TempDir(), gwLog: e.gwLog, url: e.url}
	minter.vars = append(filterEnv(os.Environ()), "HOME="+minter.home, "XDG_CONFIG_HOME="+filepath.Join(minter.home, "config"), "GATEWAY_URL="+e.url, "GATEWAY_TOKEN="+rw.Token)
	if out, err := minter.gw("token", "create", "--name", "again"); err == nil || !strings.Contains(out, "only be created from a login") {
		t.Errorf("a token minted a token: %v %s", err, out)
	}
	e.gwOK("token", "revoke", created.ID)
	if out, err := ci.gw("list"); err == nil || !strings.Contains(out, "revoked") {
		t.Errorf("revoked token still works: %v %s", err, out)
	}

	// Bad tokens: 401 with a clear message, then 429 for a guessing address.
	code, body := get(t, e.url+"/api/v1/clusters/", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	if code != http.StatusUnauthorized || !strings.Contains(body, "authentication failed") {
		t.Errorf("forged token: %d %s", code, body)
	}
	limited := false
	for i := 0; i < 40 && !limited; i++ {
		code, _ = get(t, e.url+"/api/v1/clusters/", "gw_guess"+strings.Repeat("x", i))
		limited = code == http.StatusTooManyRequests
	}
	if !limited {
		t.Error("40 failed authentications from one address were never limited")
	}

	// An expired login that cannot be renewed says what to do.
	credFile := filepath.Join(dev2.home, "config", "gateway", "credentials.json")
	raw, err := os.ReadFile(credFile)
	if err != nil {
		t.Fatal(err)
	}
	var creds map[string]any
	_ = json.Unmarshal(raw, &creds)
	gw := creds["gateways"].(map[string]any)[e.url].(map[string]any)
	gw["expiry"] = time.Now().Add(-time.Hour).Format(time.RFC3339)
	gw["refresh_token"] = "revoked-refresh-token"
	raw, _ = json.Marshal(creds)
	if err := os.WriteFile(credFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := dev2.gw("list"); err == nil || !strings.Contains(out, "run: gateway login") || strings.Contains(out, "goroutine") {
		t.Errorf("expired session: %v %s", err, out)
	}

	// No token, key or secret in the gateway's log.
	logs := e.gwLog.String()
	for _, secret := range []string{strings.TrimSpace(e.gwOK("print-token")), created.Token, "BEGIN EC PRIVATE KEY", "BEGIN PRIVATE KEY", "refresh_token"} {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the gateway log contains a secret (%.20s...)", secret)
		}
	}
	if regexp.MustCompile(`eyJ[A-Za-z0-9_-]{10,}\.eyJ`).MatchString(logs) {
		t.Error("the gateway log contains a JWT")
	}
}

func loadPair(t *testing.T, cert, key string) []tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{c}
}

var browserURLRE = regexp.MustCompile(`visit:\s+(http://\S+)`)

// TestBrowserLoginAndRefresh: `gateway login --browser` (code + PKCE with a
// loopback redirect) works, and an expired ID token is renewed with the
// refresh token without the user noticing.
func TestBrowserLoginAndRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	u := &env{t: t, bin: e.bin, home: t.TempDir(), gwLog: e.gwLog, url: e.url}
	u.vars = append(filterEnv(os.Environ()), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, "config"), "GATEWAY_URL="+e.url, "PATH=/usr/bin:/bin")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, u.bin, "login", "--browser")
	cmd.Env = u.vars
	stderr, _ := cmd.StderrPipe()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	var authURL string
	sc := bufio.NewScanner(stderr)
	for authURL == "" && sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if m := browserURLRE.FindStringSubmatch(seen.String()); m != nil {
			authURL = m[1]
		}
	}
	if authURL == "" {
		t.Fatalf("no login URL printed:\n%s", seen.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if !strings.Contains(authURL, "code_challenge_method=S256") || !strings.Contains(authURL, "redirect_uri=http%3A%2F%2F127.0.0.1%3A") {
		t.Errorf("login URL lacks PKCE or a loopback redirect: %s", authURL)
	}
	// The browser: the issuer's login page, pick dev2, follow redirects back
	// to the CLI's loopback listener.
	var loginPage *url.URL
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/login" {
			loginPage = req.URL
		}
		return nil
	}}
	resp, err := b.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loginPage == nil {
		t.Fatalf("the authorize URL did not reach the login page: %d %s", resp.StatusCode, resp.Request.URL)
	}
	resp, err = b.PostForm(loginPage.Scheme+"://"+loginPage.Host+"/login", url.Values{"id": {loginPage.Query().Get("id")}, "username": {"dev2"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Logged in to the gateway") {
		t.Fatalf("the loopback callback answered %d: %s", resp.StatusCode, page)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(stdout.String(), "as dev2") {
		t.Fatalf("gateway login --browser: %v %s", err, stdout.String())
	}

	// Expire the stored ID token: the next command renews it.
	credFile := filepath.Join(u.home, "config", "gateway", "credentials.json")
	raw, _ := os.ReadFile(credFile)
	var creds map[string]any
	_ = json.Unmarshal(raw, &creds)
	entry := creds["gateways"].(map[string]any)[e.url].(map[string]any)
	oldToken := entry["token"]
	entry["expiry"] = time.Now().Add(-time.Minute).Format(time.RFC3339)
	raw, _ = json.Marshal(creds)
	if err := os.WriteFile(credFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var who map[string]any
	u.gwJSON(&who, "whoami")
	if who["name"] != "dev2" {
		t.Fatalf("after renewal: %v", who)
	}
	raw, _ = os.ReadFile(credFile)
	_ = json.Unmarshal(raw, &creds)
	entry = creds["gateways"].(map[string]any)[e.url].(map[string]any)
	exp, _ := time.Parse(time.RFC3339, entry["expiry"].(string))
	if entry["token"] == oldToken || !exp.After(time.Now()) {
		t.Errorf("the ID token was not renewed: expiry %v", entry["expiry"])
	}
	st, _ := os.Stat(credFile)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v", st.Mode().Perm())
	}
	u.gwOK("logout")
	if out, err := u.gw("whoami"); err == nil || !strings.Contains(out, "gateway login") {
		t.Errorf("after logout: %v %s", err, out)
	}
}
