package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewAPIToken(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ann := &User{ID: "sub-ann", Name: "ann", Groups: []string{"g"}, Via: "oidc"}
	annRO := &User{ID: "sub-ann", Name: "ann", Via: "session", ReadOnly: true}
	for _, tt := range []struct {
		name     string
		u        *User
		req      TokenRequest
		wantErr  string // "" : made
		wantTTL  time.Duration
		wantRO   bool
		wantName string
	}{
		{name: "default expiry", u: ann, req: TokenRequest{Name: " ci "}, wantTTL: 30 * 24 * time.Hour, wantName: "ci"},
		{name: "hours", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "12h"}, wantTTL: 12 * time.Hour, wantName: "ci"},
		{name: "the longest", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "366d"}, wantTTL: 366 * 24 * time.Hour, wantName: "ci"},
		{name: "read-only asked", u: ann, req: TokenRequest{Name: "ro", ReadOnly: true}, wantTTL: 30 * 24 * time.Hour, wantRO: true, wantName: "ro"},
		{name: "a read-only user's token is read-only", u: annRO, req: TokenRequest{Name: "x"}, wantTTL: 30 * 24 * time.Hour, wantRO: true, wantName: "x"},
		{name: "no name", u: ann, req: TokenRequest{Name: "   "}, wantErr: `name the token (1 to 64 characters), e.g. "ci"`},
		{name: "name too long", u: ann, req: TokenRequest{Name: strings.Repeat("n", 65)}, wantErr: "1 to 64 characters"},
		{name: "expiry unreadable", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "soon"}, wantErr: `expiry "soon": use a positive number of days (30d) or a duration (12h)`},
		{name: "expiry zero days", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "0d"}, wantErr: "positive number of days"},
		{name: "expiry negative", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "-5h"}, wantErr: "positive number of days"},
		{name: "expiry too long", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "367d"}, wantErr: "tokens may last at most 366d"},
		{name: "expiry too long in hours", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "9000h"}, wantErr: "at most 366d"},
		// 213504 days times a day's nanoseconds wraps past int64 to about
		// 25 minutes: it was a 25-minute token instead of a refusal.
		{name: "days that wrap a duration", u: ann, req: TokenRequest{Name: "ci", ExpiresIn: "213504d"}, wantErr: "at most 366d"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok, secret, err := NewAPIToken(tt.u, tt.req, now)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrTokenRequest) || !strings.Contains(err.Error(), tt.wantErr) || tok != nil || secret != "" {
					t.Fatalf("got %v, %q, %v; want an ErrTokenRequest saying %q", tok, secret, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(secret, APITokenPrefix) || tok.Hash != HashToken(secret) || strings.Contains(tok.Hash, secret) {
				t.Errorf("secret %q, hash %q", secret, tok.Hash)
			}
			if tok.Name != tt.wantName || tok.ReadOnly != tt.wantRO || tok.Owner != "sub-ann" || tok.OwnerName != "ann" ||
				!tok.CreatedAt.Equal(now) || tok.ExpiresAt.Sub(now) != tt.wantTTL || !strings.HasPrefix(tok.ID, "tok_") {
				t.Errorf("token %+v", tok)
			}
		})
	}
}

// Only a login may create tokens: never a token, nor a browser session
// that a token's dashboard link started.
func TestMayCreateTokens(t *testing.T) {
	for _, tt := range []struct {
		u    User
		want bool
	}{
		{User{Via: "oidc"}, true},
		{User{Via: "session"}, true},
		{User{Via: "session", TokenID: "tok_1"}, false},
		{User{Via: "token", TokenID: "tok_1"}, false},
		{User{Via: "static"}, false},
	} {
		if got := tt.u.MayCreateTokens(); got != tt.want {
			t.Errorf("%+v: %v, want %v", tt.u, got, tt.want)
		}
	}
}
