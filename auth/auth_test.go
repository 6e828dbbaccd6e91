package auth

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBearerToken(t *testing.T) {
	cases := []struct {
		header string
		tok    string
		err    error
	}{
		{"", "", ErrNoCredentials},
		{"Bearer abc", "abc", nil},
		{"bearer  abc ", "abc", nil},
		{"token abc", "abc", nil},
		{"jupyterhub abc", "abc", nil}, // dask_gateway.auth.JupyterHubAuth
		{"JupyterHub abc", "abc", nil},
		{"jupyterhub ", "", ErrInvalid},
		{"Basic dXNlcjpwdw==", "pw", nil},  // user:pw
		{"Basic OnRvaw==", "tok", nil},     // :tok
		{"Basic dXNlcjo=", "", ErrInvalid}, // user: (no password)
		{"Basic %%%", "", ErrInvalid},
		{"Digest abc", "", ErrInvalid},
		{"Bearer", "", ErrInvalid},
		{"Bearer   ", "", ErrInvalid},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		tok, err := BearerToken(r)
		if tok != tc.tok || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%q: got %q, %v; want %q, %v", tc.header, tok, err, tc.tok, tc.err)
		}
	}
}

func TestStaticTokensAndChain(t *testing.T) {
	a := NewStaticTokens(map[string]User{"alice-token-0123456789": {Name: "alice"}})
	b := NewStaticTokens(map[string]User{"bob-token-0123456789": {Name: "bob", Admin: true}})
	chain := Chain{a, b}
	ctx := context.Background()
	for tok, want := range map[string]string{"alice-token-0123456789": "alice", "bob-token-0123456789": "bob"} {
		u, err := chain.Authenticate(ctx, tok)
		if err != nil || u.Name != want {
			t.Errorf("%s: %v %v", tok, u, err)
		}
	}
	if _, err := chain.Authenticate(ctx, "nobody"); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "nobody") {
		t.Errorf("unknown token: %v (must be ErrInvalid and not echo the token)", err)
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "tok")
	a, err := LoadOrCreateToken(p, "x_")
	if err != nil || !strings.HasPrefix(a, "x_") || len(a) < 40 {
		t.Fatalf("%q %v", a, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := LoadOrCreateToken(p, "x_")
	if a != b {
		t.Error("token changed on reload")
	}
}

func TestTicketsAndSealedCookies(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	now := time.Unix(1_800_000_000, 0)
	s, err := NewSessions(key, time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	s.SetClock(func() time.Time { return now })
	if _, err := NewSessions(key[:16], time.Hour, true); err == nil {
		t.Error("short key accepted")
	}

	tk := s.NewTicket(User{Name: "alice", Groups: []string{"g"}})
	u, err := s.Redeem(tk)
	if err != nil || u.Name != "alice" {
		t.Fatalf("redeem: %v %v", u, err)
	}
	if _, err := s.Redeem(tk); !errors.Is(err, ErrInvalid) {
		t.Errorf("ticket redeemed twice: %v", err)
	}
	expired := s.NewTicket(User{Name: "alice"})
	now = now.Add(TicketTTL + time.Second)
	if _, err := s.Redeem(expired); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired ticket accepted: %v", err)
	}

	type state struct{ Next string }
	c, err := s.Seal("gateway_login", state{Next: "/clusters/x/status"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
		t.Errorf("cookie attributes: %+v", c)
	}
	req := func(v string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if v != "" {
			r.AddCookie(&http.Cookie{Name: "gateway_login", Value: v})
		}
		return r
	}
	var got state
	if err := s.Open(req(c.Value), "gateway_login", &got); err != nil || got.Next != "/clusters/x/status" {
		t.Fatalf("valid cookie: %v %v", got, err)
	}
	body, sig, _ := strings.Cut(c.Value, ".")
	flip := map[byte]byte{'e': 'f'}[body[0]]
	if flip == 0 {
		flip = 'e'
	}
	forged := string(flip) + body[1:] + "." + sig
	for name, v := range map[string]string{"forged": forged, "no signature": body, "garbage": "x.y", "empty sig": body + "."} {
		if err := s.Open(req(v), "gateway_login", &got); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s cookie: %v", name, err)
		}
	}
	if err := s.Open(req(""), "gateway_login", &got); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("no cookie: %v", err)
	}
	other, _ := NewSessions(append([]byte(nil), make([]byte, 32)...), time.Hour, true)
	other.SetClock(func() time.Time { return now })
	if err := other.Open(req(c.Value), "gateway_login", &got); !errors.Is(err, ErrInvalid) {
		t.Errorf("cookie from another key accepted: %v", err)
	}
	now = now.Add(2 * time.Hour)
	if err := s.Open(req(c.Value), "gateway_login", &got); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired cookie accepted: %v", err)
	}
}
