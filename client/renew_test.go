package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/auth/devissuer"
)

// clock is a settable time shared by the issuer, the stand-in gateway and
// the client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// renewEnv is the real development issuer, a stand-in gateway that
// verifies ID tokens with go-oidc as the gateway does (on its own clock,
// which may run ahead), and a login made through the device flow.
type renewEnv struct {
	issuer, gateway *clock
	gatewayURL      string
	refused         atomic.Int32 // 401s the stand-in answered
	entry           Entry
}

func newRenewEnv(t *testing.T, lifetime time.Duration) *renewEnv {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	start := time.Now()
	e := &renewEnv{issuer: &clock{t: start}, gateway: &clock{t: start}}
	srv := httptest.NewUnstartedServer(nil)
	issuerURL := "http://" + srv.Listener.Addr().String()
	iss, err := devissuer.New(devissuer.Config{Issuer: issuerURL, ClientID: "gateway-cli", Users: []devissuer.User{{Username: "dev", Subject: "dev-sub"}},
		IDTokenLifetime: lifetime, AccessTokenLifetime: lifetime, Now: e.issuer.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = iss.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, issuerURL)
	if err != nil {
		t.Fatal(err)
	}
	verifier := p.Verifier(&oidc.Config{ClientID: "gateway-cli", Now: e.gateway.Now})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, err := verifier.Verify(r.Context(), tok); err != nil {
			e.refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"code":"unauthenticated","message":"token expired"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"cluster":"`+strconv.Itoa(len(body))+`"}`) // what it read
	}))
	t.Cleanup(gw.Close)
	e.gatewayURL = gw.URL
	ac := &AuthConfig{Issuer: issuerURL, ClientID: "gateway-cli"}
	oc, err := OAuth2(ctx, ac)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := DeviceLogin(ctx, oc, func(r *oauth2.DeviceAuthResponse) error {
		form := url.Values{"user_code": {r.UserCode}, "username": {"dev"}}
		resp, err := http.PostForm(r.VerificationURI, form)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.entry, err = EntryFromToken(ac, oc, tok); err != nil {
		t.Fatal(err)
	}
	if e.entry.RefreshToken == "" {
		t.Fatal("the device login gave no refresh token")
	}
	if err := saveEntry(Key(gw.URL), e.entry); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *renewEnv) client(t *testing.T) (*Client, *EntrySource) {
	t.Helper()
	c, err := New(e.gatewayURL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewEntrySource(Key(e.gatewayURL), e.entry)
	src.Now = e.issuer.Now
	return c.WithTokenSource(src), src
}

func storedToken(t *testing.T, key string) string {
	t.Helper()
	c, err := LoadCredentials()
	if err != nil {
		t.Fatal(err)
	}
	return c.Gateways[key].Token
}

// TestTokenSourceRenewsOnExpiry: a command that outlives its ID token
// (a dev token lasts 10 minutes) renews it with the refresh token before
// sending, and saves the renewed login for the next command.
func TestTokenSourceRenewsOnExpiry(t *testing.T) {
	e := newRenewEnv(t, 10*time.Minute)
	c, src := e.client(t)
	ctx := t.Context()
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatalf("with a fresh token: %v", err)
	}
	first := src.Entry().Token
	for i := range 3 {
		e.issuer.Add(11 * time.Minute)
		e.gateway.Add(11 * time.Minute)
		if _, err := c.Whoami(ctx); err != nil {
			t.Fatalf("after expiry %d: %v", i+1, err)
		}
	}
	if e.refused.Load() != 0 {
		t.Errorf("the gateway refused %d requests: the token should be renewed before it is sent", e.refused.Load())
	}
	now := src.Entry()
	if now.Token == first || !now.Expiry.After(e.issuer.Now()) {
		t.Fatalf("token not renewed: expiry %v at %v", now.Expiry, e.issuer.Now())
	}
	if got := storedToken(t, Key(e.gatewayURL)); got != now.Token {
		t.Error("the renewed token was not saved in the credentials file")
	}
}

// TestTokenSourceRenewsOn401: a gateway whose clock runs ahead refuses a
// token the client thinks fresh; the client renews it and sends the
// request again, body included, once.
func TestTokenSourceRenewsOn401(t *testing.T) {
	e := newRenewEnv(t, 10*time.Minute)
	c, src := e.client(t)
	e.gateway.Add(11 * time.Minute)
	e.issuer.Add(3 * time.Minute) // the renewed token is valid on the gateway's clock too
	body := strings.Repeat("x", 5000)
	sh, err := c.Share(t.Context(), "c1", []string{body}, nil)
	if err != nil {
		t.Fatalf("POST after a 401: %v", err)
	}
	if e.refused.Load() != 1 {
		t.Errorf("the gateway refused %d requests, want the first one only", e.refused.Load())
	}
	if n, _ := strconv.Atoi(sh.Cluster); n < len(body) {
		t.Errorf("the retried request's body was %s bytes, want over %d", sh.Cluster, len(body))
	}
	if got := storedToken(t, Key(e.gatewayURL)); got != src.Entry().Token || got == e.entry.Token {
		t.Error("the renewed token was not saved")
	}
}

// TestTokenSourceExpiredSession: a login whose refresh token no longer
// works fails with a message saying to log in again.
func TestTokenSourceExpiredSession(t *testing.T) {
	e := newRenewEnv(t, 10*time.Minute)
	e.entry.RefreshToken = "not-a-refresh-token"
	c, _ := e.client(t)
	e.issuer.Add(11 * time.Minute)
	e.gateway.Add(11 * time.Minute)
	_, err := c.Whoami(t.Context())
	if !errors.Is(err, ErrSessionExpired) || !strings.Contains(err.Error(), "gateway login") {
		t.Fatalf("got %v, want ErrSessionExpired saying to run gateway login", err)
	}
}

// TestRenewMargin: short-lived tokens are renewed at a quarter of their
// lifetime rather than a minute before they expire (which would renew a
// 20-second token on every request).
func TestRenewMargin(t *testing.T) {
	jwt := func(iat, exp int64) string {
		claims := fmt.Sprintf(`{"iat":%d,"exp":%d}`, iat, exp)
		return "h." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".s"
	}
	for _, c := range []struct {
		name     string
		iat, exp int64
		want     time.Duration
	}{
		{"ten minutes", 1000, 1600, time.Minute},
		{"twenty seconds", 1000, 1020, 5 * time.Second},
		{"no iat", 0, 1020, time.Minute},
	} {
		e := Entry{Token: jwt(c.iat, c.exp), Expiry: time.Unix(c.exp, 0)}
		if got := renewMargin(e); got != c.want {
			t.Errorf("%s: margin %v, want %v", c.name, got, c.want)
		}
	}
}
