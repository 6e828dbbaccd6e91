package devissuer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ---- helpers ----

const (
	testClientID = "gateway-dev"
	testCallback = "http://127.0.0.1:8000/auth/callback"
)

var allScopes = []string{"openid", "profile", "email", "groups", "offline_access"}

func testUsers() []User {
	return []User{
		{Subject: "dev-user-1", Username: "alice", Email: "alice@example.test", Name: "Alice Dev", Groups: []string{"admins", "dask-users"}},
		{Subject: "dev-user-2", Username: "bob", Email: "bob@example.test", Name: "Bob Dev", Groups: []string{"dask-users"}},
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type env struct {
	t       *testing.T
	iss     *Issuer
	url     string // issuer URL
	browser *http.Client
	logs    *syncBuffer
}

// newEnv serves a new Issuer with httptest on 127.0.0.1. mutate may change
// the config (its Issuer is already set to the server's URL).
func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listens on 127.0.0.1:0
	logs := &syncBuffer{}
	cfg := Config{
		Issuer:       "http://" + srv.Listener.Addr().String(),
		ClientID:     testClientID,
		RedirectURIs: []string{testCallback},
		Users:        testUsers(),
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	iss, err := New(cfg)
	if err != nil {
		srv.Listener.Close()
		t.Fatalf("New: %v", err)
	}
	srv.Config.Handler = iss.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{
		t:   t,
		iss: iss,
		url: cfg.Issuer,
		browser: &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logs: logs,
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) provider(ctx context.Context) *oidc.Provider {
	e.t.Helper()
	p, err := oidc.NewProvider(ctx, e.url)
	if err != nil {
		e.t.Fatalf("oidc.NewProvider: %v", err)
	}
	return p
}

func oauthConfig(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    testClientID,
		Endpoint:    p.Endpoint(),
		RedirectURL: redirect,
		Scopes:      slices.Clone(allScopes),
	}
}

func (e *env) do(req *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := e.browser.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("reading %s: %v", req.URL, err)
	}
	return resp, string(body)
}

func (e *env) get(u string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(req)
}

func (e *env) post(u string, form url.Values) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(req)
}

func wantStatus(t *testing.T, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, want, body)
	}
}

// browserLogin plays the browser: follows authURL to the login page, picks
// username by POSTing the form, follows the library's callback and returns
// the redirect to the client (not followed).
func (e *env) browserLogin(authURL, username string) *url.URL {
	e.t.Helper()
	resp, body := e.get(authURL)
	wantStatus(e.t, resp, body, http.StatusFound)
	login, err := resp.Location()
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(login.String(), e.url+"/login?") {
		e.t.Fatalf("authorize redirected to %s, want the login page %s/login", login, e.url)
	}
	id := login.Query().Get("id")
	if id == "" {
		e.t.Fatalf("login URL %s has no id", login)
	}

	resp, body = e.get(login.String())
	wantStatus(e.t, resp, body, http.StatusOK)
	for _, want := range []string{banner, `name="username" value="` + username + `"`, `name="id" value="` + id + `"`} {
		if !strings.Contains(body, want) {
			e.t.Fatalf("login page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(strings.ToLower(body), "<script") {
		e.t.Fatal("login page contains a script")
	}

	resp, body = e.post(e.url+"/login", url.Values{"id": {id}, "username": {username}})
	wantStatus(e.t, resp, body, http.StatusSeeOther)
	callback, err := resp.Location()
	if err != nil {
		e.t.Fatal(err)
	}
	resp, body = e.get(callback.String())
	wantStatus(e.t, resp, body, http.StatusFound)
	final, err := resp.Location()
	if err != nil {
		e.t.Fatal(err)
	}
	return final
}

type flowResult struct {
	token    *oauth2.Token
	idToken  string
	nonce    string
	code     string
	verifier string
}

// codeFlow runs the authorization code flow with PKCE and a nonce.
func (e *env) codeFlow(ctx context.Context, oc *oauth2.Config, username string) flowResult {
	e.t.Helper()
	verifier := oauth2.GenerateVerifier()
	state, nonce := randomToken(12), randomToken(12)
	final := e.browserLogin(oc.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), username)
	redirect, _ := url.Parse(oc.RedirectURL)
	if final.Scheme != redirect.Scheme || final.Host != redirect.Host || final.Path != redirect.Path {
		e.t.Fatalf("redirected to %s, want %s", final, oc.RedirectURL)
	}
	q := final.Query()
	if q.Get("error") != "" {
		e.t.Fatalf("authorization error: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != state {
		e.t.Fatalf("state = %q, want %q", q.Get("state"), state)
	}
	code := q.Get("code")
	if code == "" {
		e.t.Fatalf("no code in %s", final)
	}
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		e.t.Fatalf("Exchange: %v", err)
	}
	return flowResult{token: tok, idToken: idTokenOf(e.t, tok), nonce: nonce, code: code, verifier: verifier}
}

func idTokenOf(t *testing.T, tok *oauth2.Token) string {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("token response has no id_token")
	}
	return raw
}

type idClaims struct {
	PreferredUsername string   `json:"preferred_username"`
	Email             string   `json:"email"`
	EmailVerified     bool     `json:"email_verified"`
	Name              string   `json:"name"`
	Groups            []string `json:"groups"`
	Iat               int64    `json:"iat"`
	Exp               int64    `json:"exp"`
	Nbf               *int64   `json:"nbf"`
}

func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	header, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	if h.Alg != "RS256" {
		t.Fatalf("alg = %q, want RS256", h.Alg)
	}
	return h.Kid
}

func (e *env) jwksKids() []string {
	e.t.Helper()
	resp, body := e.get(e.url + "/keys")
	wantStatus(e.t, resp, body, http.StatusOK)
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			Use string `json:"use"`
			Kty string `json:"kty"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &set); err != nil {
		e.t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		if k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" {
			e.t.Fatalf("unexpected JWK %+v", k)
		}
		kids = append(kids, k.Kid)
	}
	return kids
}

func checkClaims(t *testing.T, tok *oidc.IDToken, u User) {
	t.Helper()
	var c idClaims
	if err := tok.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if tok.Subject != u.Subject {
		t.Errorf("sub = %q, want %q", tok.Subject, u.Subject)
	}
	if !slices.Contains(tok.Audience, testClientID) {
		t.Errorf("aud = %v, want it to contain %q", tok.Audience, testClientID)
	}
	if c.PreferredUsername != u.Username || c.Email != u.Email || !c.EmailVerified || c.Name != u.Name {
		t.Errorf("claims = %+v, want username %q email %q (verified) name %q", c, u.Username, u.Email, u.Name)
	}
	if !slices.Equal(c.Groups, u.Groups) {
		t.Errorf("groups = %v, want %v", c.Groups, u.Groups)
	}
	if c.Iat == 0 || c.Exp <= c.Iat {
		t.Errorf("iat = %d, exp = %d", c.Iat, c.Exp)
	}
}

func retrieveErrorCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// ---- tests ----

func TestDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp, body := e.get(e.url + "/.well-known/openid-configuration")
	wantStatus(t, resp, body, http.StatusOK)
	var d struct {
		Issuer                      string   `json:"issuer"`
		AuthorizationEndpoint       string   `json:"authorization_endpoint"`
		TokenEndpoint               string   `json:"token_endpoint"`
		UserinfoEndpoint            string   `json:"userinfo_endpoint"`
		JwksURI                     string   `json:"jwks_uri"`
		RevocationEndpoint          string   `json:"revocation_endpoint"`
		EndSessionEndpoint          string   `json:"end_session_endpoint"`
		DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint"`
		IntrospectionEndpoint       string   `json:"introspection_endpoint"`
		CodeChallengeMethods        []string `json:"code_challenge_methods_supported"`
		GrantTypes                  []string `json:"grant_types_supported"`
		ResponseTypes               []string `json:"response_types_supported"`
		Scopes                      []string `json:"scopes_supported"`
		Claims                      []string `json:"claims_supported"`
		IDTokenAlgs                 []string `json:"id_token_signing_alg_values_supported"`
		TokenAuthMethods            []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{
		"issuer":                        d.Issuer,
		"authorization_endpoint":        d.AuthorizationEndpoint,
		"token_endpoint":                d.TokenEndpoint,
		"userinfo_endpoint":             d.UserinfoEndpoint,
		"jwks_uri":                      d.JwksURI,
		"revocation_endpoint":           d.RevocationEndpoint,
		"end_session_endpoint":          d.EndSessionEndpoint,
		"device_authorization_endpoint": d.DeviceAuthorizationEndpoint,
	} {
		want := map[string]string{
			"issuer":                        e.url,
			"authorization_endpoint":        e.url + "/authorize",
			"token_endpoint":                e.url + "/oauth/token",
			"userinfo_endpoint":             e.url + "/userinfo",
			"jwks_uri":                      e.url + "/keys",
			"revocation_endpoint":           e.url + "/revoke",
			"end_session_endpoint":          e.url + "/end_session",
			"device_authorization_endpoint": e.url + "/device_authorization",
		}[name]
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if d.IntrospectionEndpoint != "" {
		t.Errorf("introspection_endpoint = %q, want none", d.IntrospectionEndpoint)
	}
	if !slices.Equal(d.CodeChallengeMethods, []string{"S256"}) {
		t.Errorf("code_challenge_methods_supported = %v, want [S256]", d.CodeChallengeMethods)
	}
	wantGrants := []string{"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"}
	if !slices.Equal(d.GrantTypes, wantGrants) {
		t.Errorf("grant_types_supported = %v, want %v", d.GrantTypes, wantGrants)
	}
	if !slices.Equal(d.ResponseTypes, []string{"code"}) {
		t.Errorf("response_types_supported = %v, want [code]", d.ResponseTypes)
	}
	for _, s := range allScopes {
		if !slices.Contains(d.Scopes, s) {
			t.Errorf("scopes_supported %v lacks %q", d.Scopes, s)
		}
	}
	if !slices.Contains(d.Claims, "groups") {
		t.Errorf("claims_supported %v lacks groups", d.Claims)
	}
	if !slices.Equal(d.IDTokenAlgs, []string{"RS256"}) {
		t.Errorf("id_token_signing_alg_values_supported = %v", d.IDTokenAlgs)
	}
	if !slices.Equal(d.TokenAuthMethods, []string{"none"}) {
		t.Errorf("token_endpoint_auth_methods_supported = %v, want [none]", d.TokenAuthMethods)
	}

	// An independent client accepts the document.
	p := e.provider(testContext(t))
	ep := p.Endpoint()
	if ep.AuthURL != d.AuthorizationEndpoint || ep.TokenURL != d.TokenEndpoint || ep.DeviceAuthURL != d.DeviceAuthorizationEndpoint {
		t.Errorf("go-oidc endpoint = %+v", ep)
	}
	if kids := e.jwksKids(); len(kids) != 1 {
		t.Errorf("JWKS kids = %v, want one key", kids)
	}
}

func TestCodeFlowPKCE(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, testCallback)
	verifier := p.Verifier(&oidc.Config{ClientID: testClientID})
	alice := testUsers()[0]

	res := e.codeFlow(ctx, oc, "alice")
	first := res
	if res.token.AccessToken == "" || res.token.RefreshToken == "" {
		t.Fatalf("want access and refresh tokens (offline_access), got %+v", res.token)
	}
	idt, err := verifier.Verify(ctx, res.idToken)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if idt.Issuer != e.url {
		t.Errorf("iss = %q, want %q", idt.Issuer, e.url)
	}
	if idt.Nonce != res.nonce {
		t.Errorf("nonce = %q, want %q", idt.Nonce, res.nonce)
	}
	checkClaims(t, idt, alice)
	if err := idt.VerifyAccessToken(res.token.AccessToken); err != nil {
		t.Errorf("at_hash: %v", err)
	}

	// userinfo with the access token.
	info, err := p.UserInfo(ctx, oauth2.StaticTokenSource(res.token))
	if err != nil {
		t.Fatalf("UserInfo: %v", err)
	}
	var ui idClaims
	if err := info.Claims(&ui); err != nil {
		t.Fatal(err)
	}
	if info.Subject != alice.Subject || info.Email != alice.Email || ui.PreferredUsername != "alice" || !slices.Equal(ui.Groups, alice.Groups) {
		t.Errorf("userinfo = %+v %+v", info, ui)
	}

	// The code is single use.
	if _, err := oc.Exchange(ctx, res.code, oauth2.VerifierOption(res.verifier)); err == nil {
		t.Error("second exchange of the same code succeeded")
	}

	// Bob gets his own identity.
	res = e.codeFlow(ctx, oc, "bob")
	idt, err = verifier.Verify(ctx, res.idToken)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, idt, testUsers()[1])

	// With only "openid": no profile or email claims, but groups all the same.
	minimal := *oc
	minimal.Scopes = []string{"openid"}
	res = e.codeFlow(ctx, &minimal, "alice")
	idt, err = verifier.Verify(ctx, res.idToken)
	if err != nil {
		t.Fatal(err)
	}
	var mc idClaims
	if err := idt.Claims(&mc); err != nil {
		t.Fatal(err)
	}
	if mc.PreferredUsername != "" || mc.Email != "" || mc.Name != "" || !slices.Equal(mc.Groups, alice.Groups) || res.token.RefreshToken != "" {
		t.Errorf("openid-only claims = %+v (refresh token %t)", mc, res.token.RefreshToken != "")
	}

	// Neither tokens nor codes reach the log.
	logs := e.logs.String()
	if !strings.Contains(logs, "sign-in") {
		t.Errorf("expected sign-in log lines, got:\n%s", logs)
	}
	for _, secret := range []string{first.code, first.token.AccessToken, first.token.RefreshToken, first.idToken, first.verifier, res.code, res.token.AccessToken, res.idToken} {
		if secret == "" {
			t.Fatal("empty secret in the list")
		}
		if strings.Contains(logs, secret) {
			t.Errorf("log contains a secret:\n%s", logs)
		}
	}
}

func TestCodeFlowRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, testCallback)

	t.Run("wrong code_verifier", func(t *testing.T) {
		verifier := oauth2.GenerateVerifier()
		final := e.browserLogin(oc.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), "alice")
		code := final.Query().Get("code")
		if code == "" {
			t.Fatalf("no code in %s", final)
		}
		_, err := oc.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
		if err == nil {
			t.Fatal("exchange with a wrong code_verifier succeeded")
		}
		if got := retrieveErrorCode(err); got != "invalid_grant" {
			t.Errorf("error = %q (%v), want invalid_grant", got, err)
		}
		if _, err := oc.Exchange(ctx, code); err == nil {
			t.Fatal("exchange without code_verifier succeeded")
		}
	})

	t.Run("PKCE required", func(t *testing.T) {
		for name, opts := range map[string][]oauth2.AuthCodeOption{
			"none":  nil,
			"plain": {oauth2.SetAuthURLParam("code_challenge", oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
		} {
			resp, body := e.get(oc.AuthCodeURL("st", opts...))
			wantStatus(t, resp, body, http.StatusFound)
			loc, _ := resp.Location()
			if !strings.HasPrefix(loc.String(), testCallback+"?") || loc.Query().Get("error") != "invalid_request" || loc.Query().Get("state") != "st" {
				t.Errorf("%s: redirected to %s, want %s?error=invalid_request", name, loc, testCallback)
			}
		}
	})

	t.Run("redirect URI not allowed", func(t *testing.T) {
		for _, bad := range []string{
			"https://evil.example/auth/callback",
			"http://127.0.0.1:8000/other",
			"http://127.0.0.1:8000/auth/callback/x",
			"http://gateway.invalid:8000/auth/callback",
		} {
			bc := *oc
			bc.RedirectURL = bad
			resp, body := e.get(bc.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400; location %q; body %s", bad, resp.StatusCode, resp.Header.Get("Location"), body)
			}
			if loc := resp.Header.Get("Location"); loc != "" {
				t.Errorf("%s: redirected to %s", bad, loc)
			}
		}
	})

	t.Run("unknown client", func(t *testing.T) {
		bc := *oc
		bc.ClientID = "someone-else"
		resp, body := e.get(bc.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		if resp.StatusCode < 400 || resp.Header.Get("Location") != "" {
			t.Errorf("status %d location %q body %s", resp.StatusCode, resp.Header.Get("Location"), body)
		}
	})

	t.Run("prompt none", func(t *testing.T) {
		resp, body := e.get(oc.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("prompt", "none")))
		wantStatus(t, resp, body, http.StatusFound)
		loc, _ := resp.Location()
		if loc.Query().Get("error") != "login_required" {
			t.Errorf("redirected to %s, want error=login_required", loc)
		}
	})
}

func TestLoopbackRedirectAnyPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	for _, redirect := range []string{"http://127.0.0.1:49152/callback", "http://127.0.0.1:3/callback", "http://localhost:61000/callback"} {
		res := e.codeFlow(ctx, oauthConfig(p, redirect), "bob")
		idt, err := p.Verifier(&oidc.Config{ClientID: testClientID}).Verify(ctx, res.idToken)
		if err != nil {
			t.Fatalf("%s: %v", redirect, err)
		}
		if idt.Subject != "dev-user-2" {
			t.Errorf("%s: sub = %q", redirect, idt.Subject)
		}
	}
	// The exchange must name the same redirect URI.
	oc := oauthConfig(p, "http://127.0.0.1:40000/callback")
	verifier := oauth2.GenerateVerifier()
	final := e.browserLogin(oc.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), "alice")
	oc.RedirectURL = "http://127.0.0.1:40001/callback"
	if _, err := oc.Exchange(ctx, final.Query().Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Error("exchange with a different redirect_uri succeeded")
	}
}

func TestLoginPageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	oc := oauthConfig(e.provider(ctx), testCallback)

	resp, body := e.get(e.url + "/login?id=nope")
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown or expired authorization request") || !strings.Contains(body, banner) {
		t.Errorf("body: %s", body)
	}
	resp, body = e.get(e.url + "/login")
	wantStatus(t, resp, body, http.StatusBadRequest)

	resp, body = e.post(e.url+"/login", url.Values{"id": {"nope"}, "username": {"alice"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown or expired authorization request") {
		t.Errorf("body: %s", body)
	}

	// A real request id with an unknown username.
	resp, body = e.get(oc.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	wantStatus(t, resp, body, http.StatusFound)
	loc, _ := resp.Location()
	id := loc.Query().Get("id")
	resp, body = e.post(e.url+"/login", url.Values{"id": {id}, "username": {"mallory"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown username") || !strings.Contains(body, "mallory") {
		t.Errorf("body: %s", body)
	}
	// The library's callback refuses a request nobody signed in to.
	resp, body = e.get(e.url + "/authorize/callback?id=" + url.QueryEscape(id))
	if loc, _ := resp.Location(); loc == nil || loc.Query().Get("code") != "" {
		t.Errorf("callback without login: status %d location %v body %s", resp.StatusCode, loc, body)
	}
}

func TestDeviceFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, "")
	oc.Endpoint.AuthStyle = oauth2.AuthStyleInParams

	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		t.Fatalf("DeviceAuth: %v", err)
	}
	if !regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`).MatchString(da.UserCode) {
		t.Errorf("user code %q is not XXXX-XXXX from the unambiguous alphabet", da.UserCode)
	}
	if len(da.DeviceCode) < 22 {
		t.Errorf("device code %q is short", da.DeviceCode)
	}
	if da.VerificationURI != e.url+"/device" {
		t.Errorf("verification_uri = %q, want %q", da.VerificationURI, e.url+"/device")
	}
	if da.VerificationURIComplete != e.url+"/device?user_code="+da.UserCode {
		t.Errorf("verification_uri_complete = %q", da.VerificationURIComplete)
	}
	if da.Interval < 1 || da.Interval > 5 {
		t.Errorf("interval = %d", da.Interval)
	}

	// Before approval the token endpoint says authorization_pending.
	resp, body := e.post(p.Endpoint().TokenURL, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da.DeviceCode}, "client_id": {testClientID},
	})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "authorization_pending") {
		t.Errorf("pending poll: %s", body)
	}

	// The pages: the bare form, and the one prefilled by verification_uri_complete.
	resp, body = e.get(da.VerificationURI)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, banner) || !strings.Contains(body, `name="user_code"`) || strings.Contains(strings.ToLower(body), "<script") {
		t.Errorf("device page: %s", body)
	}
	// Every identity is a choice, none made: the page's first submit button
	// (what Enter presses) names no identity.
	if strings.Contains(body, " checked") || strings.Count(body, `type="radio" name="username"`) < 2 ||
		!regexp.MustCompile(`<button type="submit" class="approve">`).MatchString(body) || strings.Contains(body, `<button type="submit" name="username"`) {
		t.Errorf("device page offers a default identity: %s", body)
	}
	resp, body = e.get(da.VerificationURIComplete)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `value="`+da.UserCode+`"`) || !strings.Contains(body, testClientID) {
		t.Errorf("prefilled device page: %s", body)
	}

	// Poll in the background while the user approves (typed sloppily).
	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		pollCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		tok, err := oc.DeviceAccessToken(pollCtx, da)
		done <- result{tok, err}
	}()
	sloppy := strings.ToLower(strings.ReplaceAll(da.UserCode, "-", " "))
	resp, body = e.post(e.url+"/device", url.Values{"user_code": {sloppy}, "username": {"alice"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "CLI may continue") {
		t.Errorf("approval page: %s", body)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("DeviceAccessToken: %v", r.err)
	}
	if r.tok.RefreshToken == "" {
		t.Error("no refresh token for offline_access")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: testClientID}).Verify(ctx, idTokenOf(t, r.tok))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	checkClaims(t, idt, testUsers()[0])

	// The user code is spent.
	resp, body = e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}, "username": {"alice"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	// And so is the device code.
	resp, body = e.post(p.Endpoint().TokenURL, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da.DeviceCode}, "client_id": {testClientID},
	})
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "access_token") {
		t.Errorf("reused device code: %d %s", resp.StatusCode, body)
	}
}

func TestDeviceFlowDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	oc := oauthConfig(e.provider(ctx), "")
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}, "action": {"deny"}})
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "denied") {
		t.Errorf("deny page: %s", body)
	}
	pollCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = oc.DeviceAccessToken(pollCtx, da)
	if got := retrieveErrorCode(err); got != "access_denied" {
		t.Fatalf("DeviceAccessToken error = %v (code %q), want access_denied", err, got)
	}
}

func TestDevicePageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	oc := oauthConfig(e.provider(ctx), "")

	for _, form := range []url.Values{
		{"user_code": {"BCDF-GHJK"}, "username": {"alice"}},
		{"user_code": {"BCDF-GHJK"}, "action": {"deny"}},
		{"username": {"alice"}},
	} {
		resp, body := e.post(e.url+"/device", form)
		wantStatus(t, resp, body, http.StatusBadRequest)
		if !strings.Contains(body, banner) {
			t.Errorf("%v: body lacks banner", form)
		}
	}
	resp, body := e.post(e.url+"/device", url.Values{"user_code": {"BCDF-GHJK"}, "username": {"alice"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown or expired code") {
		t.Errorf("body: %s", body)
	}
	resp, body = e.get(e.url + "/device?user_code=BCDF-GHJK")
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown or expired code") {
		t.Errorf("body: %s", body)
	}

	// A real code with an unknown username stays pending.
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Enter in the code's field posts the form without a choice (a browser
	// stops it first; a script need not): nothing is approved.
	resp, body = e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Choose the identity") || !strings.Contains(body, `value="`+da.UserCode+`"`) {
		t.Errorf("no identity chosen: %s", body)
	}
	resp, body = e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}, "username": {"mallory"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	if !strings.Contains(body, "Unknown username") {
		t.Errorf("body: %s", body)
	}
	resp, body = e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}, "username": {"bob"}})
	wantStatus(t, resp, body, http.StatusOK)
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, testCallback)
	verifier := p.Verifier(&oidc.Config{ClientID: testClientID})

	res := e.codeFlow(ctx, oc, "alice")
	first, err := verifier.Verify(ctx, res.idToken)
	if err != nil {
		t.Fatal(err)
	}

	stale := *res.token
	stale.Expiry = time.Now().Add(-time.Minute) // make the TokenSource refresh
	tok, err := oc.TokenSource(ctx, &stale).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if tok.AccessToken == res.token.AccessToken {
		t.Error("refresh returned the same access token")
	}
	if tok.RefreshToken == "" || tok.RefreshToken == res.token.RefreshToken {
		t.Error("refresh token was not rotated")
	}
	idToken := idTokenOf(t, tok)
	if idToken == res.idToken {
		t.Error("refresh returned the same ID token")
	}
	second, err := verifier.Verify(ctx, idToken)
	if err != nil {
		t.Fatalf("Verify refreshed ID token: %v", err)
	}
	if second.Subject != first.Subject {
		t.Errorf("refreshed sub = %q, want %q", second.Subject, first.Subject)
	}
	checkClaims(t, second, testUsers()[0])

	// The spent refresh token is refused.
	_, err = oc.TokenSource(ctx, &oauth2.Token{RefreshToken: res.token.RefreshToken}).Token()
	if got := retrieveErrorCode(err); got != "invalid_grant" {
		t.Errorf("reused refresh token: %v (code %q), want invalid_grant", err, got)
	}

	// Without offline_access there is no refresh token.
	noOffline := *oc
	noOffline.Scopes = []string{"openid", "profile", "email", "groups"}
	if r := e.codeFlow(ctx, &noOffline, "bob"); r.token.RefreshToken != "" {
		t.Error("refresh token issued without offline_access")
	}

	// Revocation (RFC 7009) of the current refresh token.
	resp, body := e.post(e.url+"/revoke", url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {testClientID}})
	wantStatus(t, resp, body, http.StatusOK)
	_, err = oc.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if got := retrieveErrorCode(err); got != "invalid_grant" {
		t.Errorf("revoked refresh token: %v (code %q), want invalid_grant", err, got)
	}
}

func TestEndSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	res := e.codeFlow(ctx, oauthConfig(p, testCallback), "alice")

	q := url.Values{"id_token_hint": {res.idToken}, "post_logout_redirect_uri": {"http://127.0.0.1:8000/"}, "state": {"bye"}}
	resp, body := e.get(e.url + "/end_session?" + q.Encode())
	wantStatus(t, resp, body, http.StatusFound)
	if loc := resp.Header.Get("Location"); loc != "http://127.0.0.1:8000/?state=bye" {
		t.Errorf("end_session redirected to %q", loc)
	}
	// The session's tokens are gone.
	if _, err := p.UserInfo(ctx, oauth2.StaticTokenSource(res.token)); err == nil {
		t.Error("userinfo still works after end_session")
	}
	// Without a redirect: the issuer's own page.
	resp, body = e.get(e.url + "/end_session")
	wantStatus(t, resp, body, http.StatusFound)
	if loc := resp.Header.Get("Location"); loc != e.url+"/logged-out" {
		t.Errorf("end_session redirected to %q", loc)
	}
	resp, body = e.get(e.url + "/logged-out")
	wantStatus(t, resp, body, http.StatusOK)
	// A foreign post-logout redirect is refused.
	q.Set("post_logout_redirect_uri", "https://evil.example/")
	resp, body = e.get(e.url + "/end_session?" + q.Encode())
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("foreign post_logout_redirect_uri: %d %s", resp.StatusCode, body)
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	// Hours away from the wall clock: an ID token stamped with time.Now
	// instead of Config.Now would not verify on the fake clock at all.
	clock := testutil.NewClock(time.Now().Add(3 * time.Hour).Truncate(time.Second))
	e := newEnv(t, func(c *Config) {
		c.Now = clock.Now
		c.IDTokenLifetime = 5 * time.Minute
		c.AccessTokenLifetime = 5 * time.Minute
		c.RefreshTokenLifetime = time.Hour
	})
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, testCallback)
	verifier := p.Verifier(&oidc.Config{ClientID: testClientID, Now: clock.Now})

	res := e.codeFlow(ctx, oc, "alice")
	idt, err := verifier.Verify(ctx, res.idToken)
	if err != nil {
		t.Fatalf("Verify on the fake clock: %v", err)
	}
	if !idt.IssuedAt.Equal(clock.Now()) || !idt.Expiry.Equal(clock.Now().Add(5*time.Minute)) {
		t.Errorf("iat = %v, exp = %v; want %v and +5m", idt.IssuedAt, idt.Expiry, clock.Now())
	}
	var c idClaims
	_ = idt.Claims(&c)
	if c.Nbf != nil && *c.Nbf != clock.Now().Unix() {
		t.Errorf("nbf = %d, want %d", *c.Nbf, clock.Now().Unix())
	}
	// expires_in of the access token follows AccessTokenLifetime.
	if d := time.Until(res.token.Expiry); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("access token expires in %v, want about 5m", d)
	}
	// The token really carries the fake clock, not the wall clock.
	if idt.IssuedAt.Before(time.Now().Add(time.Hour)) {
		t.Errorf("iat %v is not on the fake clock", idt.IssuedAt)
	}

	clock.Advance(5*time.Minute + time.Second)
	_, err = verifier.Verify(ctx, res.idToken)
	var expired *oidc.TokenExpiredError
	if !errors.As(err, &expired) {
		t.Fatalf("Verify after IDTokenLifetime: %v, want *oidc.TokenExpiredError", err)
	}
	// The access token has expired on the fake clock too.
	if _, err := p.UserInfo(ctx, oauth2.StaticTokenSource(res.token)); err == nil {
		t.Error("userinfo accepted an access token past AccessTokenLifetime")
	}

	// The refresh token outlives them and yields a fresh ID token.
	tok, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: res.token.RefreshToken}).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	idt2, err := verifier.Verify(ctx, idTokenOf(t, tok))
	if err != nil {
		t.Fatalf("Verify refreshed: %v", err)
	}
	if !idt2.IssuedAt.Equal(clock.Now()) || idt2.Subject != idt.Subject {
		t.Errorf("refreshed iat = %v sub = %q", idt2.IssuedAt, idt2.Subject)
	}
	var at1, at2 struct {
		AuthTime int64 `json:"auth_time"`
	}
	_ = idt.Claims(&at1)
	_ = idt2.Claims(&at2)
	if at1.AuthTime == 0 || at1.AuthTime != at2.AuthTime {
		t.Errorf("auth_time %d -> %d on refresh, want it kept", at1.AuthTime, at2.AuthTime)
	}

	// Past RefreshTokenLifetime, refreshing fails.
	clock.Advance(time.Hour + time.Second)
	_, err = oc.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if got := retrieveErrorCode(err); got != "invalid_grant" {
		t.Errorf("expired refresh token: %v (code %q), want invalid_grant", err, got)
	}

	// Device codes expire on the fake clock as well.
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(deviceLifetime + time.Second)
	resp, body := e.post(e.url+"/device", url.Values{"user_code": {da.UserCode}, "username": {"alice"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	resp, body = e.post(p.Endpoint().TokenURL, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da.DeviceCode}, "client_id": {testClientID},
	})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired_token") {
		t.Errorf("expired device code: %d %s", resp.StatusCode, body)
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testContext(t)
	p := e.provider(ctx)
	oc := oauthConfig(p, testCallback)
	verifier := p.Verifier(&oidc.Config{ClientID: testClientID})

	old := e.codeFlow(ctx, oc, "alice")
	oldKid := kidOf(t, old.idToken)
	if _, err := verifier.Verify(ctx, old.idToken); err != nil {
		t.Fatal(err)
	}
	if kids := e.jwksKids(); !slices.Equal(kids, []string{oldKid}) {
		t.Fatalf("JWKS = %v, want [%s]", kids, oldKid)
	}

	if err := e.iss.RotateKey(); err != nil {
		t.Fatalf("RotateKey: %v", err)
	}
	kids := e.jwksKids()
	if len(kids) != 2 || !slices.Contains(kids, oldKid) {
		t.Fatalf("JWKS after rotation = %v, want the new key and %s", kids, oldKid)
	}
	// Old tokens still verify, also for a verifier that has never seen the key.
	if _, err := verifier.Verify(ctx, old.idToken); err != nil {
		t.Errorf("old token after rotation: %v", err)
	}
	freshVerifier := e.provider(ctx).Verifier(&oidc.Config{ClientID: testClientID})
	if _, err := freshVerifier.Verify(ctx, old.idToken); err != nil {
		t.Errorf("old token, fresh verifier, after rotation: %v", err)
	}

	// New tokens (code flow and refresh) carry the new kid.
	fresh := e.codeFlow(ctx, oc, "bob")
	newKid := kidOf(t, fresh.idToken)
	if newKid == oldKid || !slices.Contains(kids, newKid) {
		t.Fatalf("new token kid = %s, old %s, JWKS %v", newKid, oldKid, kids)
	}
	if _, err := verifier.Verify(ctx, fresh.idToken); err != nil {
		t.Errorf("new token, verifier with cached old key set: %v", err)
	}
	refreshed, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: old.token.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if kid := kidOf(t, idTokenOf(t, refreshed)); kid != newKid {
		t.Errorf("refreshed token kid = %s, want %s", kid, newKid)
	}

	e.iss.DropOldKeys()
	if kids := e.jwksKids(); !slices.Equal(kids, []string{newKid}) {
		t.Fatalf("JWKS after DropOldKeys = %v, want [%s]", kids, newKid)
	}
	freshVerifier = e.provider(ctx).Verifier(&oidc.Config{ClientID: testClientID})
	if _, err := freshVerifier.Verify(ctx, old.idToken); err == nil {
		t.Error("token signed by a dropped key still verifies")
	}
	if _, err := freshVerifier.Verify(ctx, fresh.idToken); err != nil {
		t.Errorf("current token after DropOldKeys: %v", err)
	}
}

func TestIssuerWithPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Issuer += "/dev-idp" })
	ctx := testContext(t)
	p := e.provider(ctx) // discovery at <issuer>/.well-known/openid-configuration
	oc := oauthConfig(p, testCallback)
	res := e.codeFlow(ctx, oc, "alice")
	if _, err := p.Verifier(&oidc.Config{ClientID: testClientID}).Verify(ctx, res.idToken); err != nil {
		t.Fatal(err)
	}
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if da.VerificationURI != e.url+"/device" {
		t.Errorf("verification_uri = %q, want %q", da.VerificationURI, e.url+"/device")
	}
	resp, body := e.get(da.VerificationURIComplete)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `action="/dev-idp/device"`) {
		t.Errorf("device form does not post under the issuer path: %s", body)
	}
	// Outside the issuer path there is nothing.
	root := strings.TrimSuffix(e.url, "/dev-idp")
	resp, body = e.get(root + "/.well-known/openid-configuration")
	wantStatus(t, resp, body, http.StatusNotFound)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	valid := func() Config {
		return Config{Issuer: "http://127.0.0.1:8001", ClientID: testClientID, RedirectURIs: []string{testCallback}, Users: testUsers()}
	}
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no issuer", func(c *Config) { c.Issuer = "" }, "Issuer is required"},
		{"relative issuer", func(c *Config) { c.Issuer = "/idp" }, "absolute http or https"},
		{"ftp issuer", func(c *Config) { c.Issuer = "ftp://127.0.0.1" }, "absolute http or https"},
		{"http on a public host", func(c *Config) { c.Issuer = "http://idp.example.com" }, "loopback"},
		{"trailing slash", func(c *Config) { c.Issuer = "http://127.0.0.1:8001/" }, "must not end with a slash"},
		{"query", func(c *Config) { c.Issuer = "http://127.0.0.1:8001?x=1" }, "query or fragment"},
		{"fragment", func(c *Config) { c.Issuer = "http://127.0.0.1:8001#x" }, "query or fragment"},
		{"unparsable issuer", func(c *Config) { c.Issuer = "http://[::1" }, "not a valid URL"},
		{"no client", func(c *Config) { c.ClientID = "" }, "ClientID is required"},
		{"client with space", func(c *Config) { c.ClientID = "a b" }, "spaces"},
		{"no users", func(c *Config) { c.Users = nil }, "at least one user"},
		{"duplicate username", func(c *Config) { c.Users[1].Username = "alice" }, `duplicate username "alice"`},
		{"duplicate subject", func(c *Config) { c.Users[1].Subject = "dev-user-1" }, `duplicate subject "dev-user-1"`},
		{"empty username", func(c *Config) { c.Users[0].Username = "" }, "Username is required"},
		{"empty subject", func(c *Config) { c.Users[0].Subject = " " }, "Subject is required"},
		{"relative redirect", func(c *Config) { c.RedirectURIs = []string{"/auth/callback"} }, "absolute http or https"},
		{"http redirect off loopback", func(c *Config) { c.RedirectURIs = []string{"http://gw.example.com/cb"} }, "non-loopback"},
		{"redirect with fragment", func(c *Config) { c.RedirectURIs = []string{"http://127.0.0.1:8000/cb#x"} }, "fragment"},
		{"negative lifetime", func(c *Config) { c.IDTokenLifetime = -time.Second }, "IDTokenLifetime must not be negative"},
		{"sub-second lifetime", func(c *Config) { c.AccessTokenLifetime = time.Millisecond }, "AccessTokenLifetime must be at least 1s"},
	}
	for _, tc := range cases {
		cfg := valid()
		cfg.Users = testUsers()
		tc.mutate(&cfg)
		_, err := New(cfg)
		if err == nil {
			t.Errorf("%s: New succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "devissuer: ") {
			t.Errorf("%s: error %q, want it to mention %q", tc.name, err, tc.want)
		}
	}

	// Valid configs: defaults, https anywhere, localhost and ::1.
	for _, issuer := range []string{"http://127.0.0.1:8001", "http://localhost:8001", "http://[::1]:8001", "https://idp.dev.example.com", "http://127.0.0.1:8001/idp"} {
		cfg := valid()
		cfg.Issuer = issuer
		iss, err := New(cfg)
		if err != nil {
			t.Errorf("%s: %v", issuer, err)
			continue
		}
		if iss.cfg.IDTokenLifetime != 10*time.Minute || iss.cfg.AccessTokenLifetime != 10*time.Minute || iss.cfg.RefreshTokenLifetime != 24*time.Hour {
			t.Errorf("%s: defaults not applied: %+v", issuer, iss.cfg)
		}
	}

	// Users returns a copy; the issuer keeps its own.
	cfg := valid()
	iss, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users[0].Groups[0] = "changed-by-caller"
	users := iss.Users()
	users[0].Groups[0] = "changed-by-reader"
	users[1].Username = "changed"
	if got := iss.Users(); !slices.Equal(got[0].Groups, testUsers()[0].Groups) || got[1].Username != "bob" {
		t.Errorf("Users() not isolated: %+v", got)
	}
}

func TestUserCodeNormalization(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"BCDF-GHJK":   "BCDF-GHJK",
		"bcdfghjk":    "BCDF-GHJK",
		" bcdf ghjk ": "BCDF-GHJK",
		"bcdf--ghjk":  "BCDF-GHJK",
		"bcd":         "BCD",
		"":            "",
	} {
		if got := normalizeUserCode(in); got != want {
			t.Errorf("normalizeUserCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// A web page whose name its owner re-points at 127.0.0.1 (DNS rebinding)
// reaches the issuer's port with its own name in Host: the issuer refuses
// it, on every endpoint, and answers its own loopback names (issue 14,
// finding 10).
func TestRefusesOtherHosts(t *testing.T) {
	e := newEnv(t, nil)
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	tests := []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"LOCALHOST:" + port, true},
		{"[::1]:" + port, true},
		{"evil.example:" + port, false},
		{"evil.example", false},
		{"127.0.0.1", false},          // port 80
		{"127.0.0.1:1" + port, false}, // another port
		{"localhost.:" + port, false},
		{"127.0.0.2:" + port, false},
	}
	paths := []struct{ method, path, form string }{
		{http.MethodGet, "/.well-known/openid-configuration", ""},
		{http.MethodGet, "/keys", ""},
		{http.MethodPost, "/device_authorization", "client_id=" + testClientID + "&scope=openid"},
		{http.MethodPost, "/device", "user_code=BCDF-GHJK&username=admin"},
		{http.MethodPost, "/oauth/token", "grant_type=refresh_token&refresh_token=x&client_id=" + testClientID},
	}
	for _, tt := range tests {
		for _, p := range paths {
			req, err := http.NewRequest(p.method, e.url+p.path, strings.NewReader(p.form))
			if err != nil {
				t.Fatal(err)
			}
			if p.form != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req.Host = tt.host
			resp, body := e.do(req)
			refused := resp.StatusCode == http.StatusMisdirectedRequest
			if refused == tt.ok {
				t.Errorf("Host %q %s %s: %s %s", tt.host, p.method, p.path, resp.Status, body)
			}
			if refused && !strings.Contains(body, "DNS rebinding") {
				t.Errorf("Host %q: the refusal does not say why: %s", tt.host, body)
			}
		}
	}
}
