package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// testIssuer serves a discovery document and a JWKS, and signs whatever
// claims a test asks for: the verifier under test (go-oidc) fetches and
// checks them exactly as it would a production provider's.
type testIssuer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []*rsa.PrivateKey // published; the last one signs
	kids []string
	// jwksFetches counts key set requests: verification that stays in
	// memory makes none.
	jwksFetches atomic.Int64
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	ti := &testIssuer{}
	ti.rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": ti.srv.URL, "jwks_uri": ti.srv.URL + "/keys",
			"authorization_endpoint": ti.srv.URL + "/authorize", "token_endpoint": ti.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		ti.jwksFetches.Add(1)
		ti.mu.Lock()
		defer ti.mu.Unlock()
		var set jose.JSONWebKeySet
		for i, k := range ti.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: ti.kids[i], Algorithm: "RS256", Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(ti.srv.Close)
	return ti
}

func (ti *testIssuer) rotate(t testing.TB) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ti.mu.Lock()
	ti.keys = append(ti.keys, k)
	ti.kids = append(ti.kids, NewToken("kid-")[:12])
	ti.mu.Unlock()
}

func (ti *testIssuer) dropOld() {
	ti.mu.Lock()
	ti.keys, ti.kids = ti.keys[len(ti.keys)-1:], ti.kids[len(ti.kids)-1:]
	ti.mu.Unlock()
}

func signWith(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (ti *testIssuer) sign(t testing.TB, claims map[string]any) string {
	ti.mu.Lock()
	k, kid := ti.keys[len(ti.keys)-1], ti.kids[len(ti.kids)-1]
	ti.mu.Unlock()
	return signWith(t, k, kid, claims)
}

func (ti *testIssuer) claims(now time.Time, over map[string]any) map[string]any {
	c := map[string]any{
		"iss": ti.srv.URL, "sub": "sub-alice", "aud": "gateway", "exp": now.Add(10 * time.Minute).Unix(),
		"iat": now.Unix(), "preferred_username": "alice", "email": "alice@example.com", "groups": []string{"data", "ops"},
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func TestOIDCAuthenticate(t *testing.T) {
	ti := newTestIssuer(t)
	now := time.Now()
	clock := func() time.Time { return now }
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", AdminGroups: []string{"ops"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	u, err := o.Authenticate(ctx, ti.sign(t, ti.claims(now, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "alice" || u.Owner() != "oidc:sub-alice" || u.Subject != "sub-alice" || u.Email != "alice@example.com" || !u.Admin || len(u.Groups) != 2 || u.Via != "oidc" {
		t.Fatalf("user %+v", u)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	ti.mu.Lock()
	knownKid := ti.kids[0]
	ti.mu.Unlock()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	body, _ := json.Marshal(ti.claims(now, nil))
	algNone := header + "." + base64.RawURLEncoding.EncodeToString(body) + "."
	cases := []struct {
		name  string
		token string
		want  string
	}{
		{"expired", ti.sign(t, ti.claims(now, map[string]any{"exp": now.Add(-time.Minute).Unix()})), "expired"},
		{"not yet valid", ti.sign(t, ti.claims(now, map[string]any{"nbf": now.Add(10 * time.Minute).Unix()})), "not valid"},
		{"issued in the future", ti.sign(t, ti.claims(now, map[string]any{"iat": now.Add(10 * time.Minute).Unix()})), "future"},
		{"wrong audience", ti.sign(t, ti.claims(now, map[string]any{"aud": "someone-else"})), "audience"},
		{"wrong issuer", ti.sign(t, ti.claims(now, map[string]any{"iss": "https://evil.example"})), "another issuer"},
		{"forged: unknown key with a known kid", signWith(t, other, knownKid, ti.claims(now, nil)), "signature"},
		{"unknown key id", signWith(t, other, "nobody", ti.claims(now, nil)), "signature"},
		{"alg none", algNone, "signature"},
		{"no user claim", ti.sign(t, ti.claims(now, map[string]any{"preferred_username": nil, "email": nil, "sub": nil})), "no subject"},
		{"only an unverified email", ti.sign(t, ti.claims(now, map[string]any{"preferred_username": nil, "sub": nil, "email_verified": false})), "no subject"},
		{"garbage after header", "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", "cannot be verified"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := o.Authenticate(ctx, tc.token)
			if !errors.Is(err, ErrInvalid) || u != nil {
				t.Fatalf("accepted or wrong error: %v %v", u, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) || strings.Contains(err.Error(), "alice@example.com") {
				t.Errorf("error echoes the token or its claims: %v", err)
			}
		})
	}
	if _, err := o.Authenticate(ctx, "gw_notajwt"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("an API token is not the OIDC authenticator's: %v", err)
	}

	// Clock: a token valid now is refused once it has expired, even from the cache.
	tok := ti.sign(t, ti.claims(now, map[string]any{"exp": now.Add(time.Minute).Unix()}))
	if _, err := o.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := o.Authenticate(ctx, tok); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired cached token accepted: %v", err)
	}
}

func TestOIDCKeyRotation(t *testing.T) {
	ti := newTestIssuer(t)
	now := time.Now()
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := ti.sign(t, ti.claims(now, nil))
	if _, err := o.Authenticate(ctx, old); err != nil {
		t.Fatal(err)
	}
	ti.rotate(t)
	// The keys were fetched a moment ago: a token signed with a key that
	// appeared since is accepted at the next fetch, at most
	// DefaultKeyRefetchInterval later, with one fetch.
	now = now.Add(DefaultKeyRefetchInterval)
	before := ti.jwksFetches.Load()
	fresh := ti.sign(t, ti.claims(now, map[string]any{"preferred_username": "bob"}))
	if u, err := o.Authenticate(ctx, fresh); err != nil || u.Name != "bob" {
		t.Fatalf("token signed with the new key: %v %v (keys must be fetched again for an unknown kid)", u, err)
	}
	if n := ti.jwksFetches.Load() - before; n != 1 {
		t.Errorf("%d key set fetches for one rotation, want 1", n)
	}
	ti.dropOld()
	o2, err := NewOIDC(context.Background(), OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o2.Authenticate(ctx, old); !errors.Is(err, ErrInvalid) {
		t.Errorf("token of a retired key accepted: %v", err)
	}
}

// TestOIDCForgedTokensFetchKeysRarely: forged tokens do not make the
// gateway fetch the issuer's key set each time (go-oidc's RemoteKeySet
// did, once per forged token). A key the gateway knows never causes a
// fetch; unknown keys cause at most one per interval, shared by concurrent
// callers; a real rotation still needs only one.
func TestOIDCForgedTokensFetchKeysRarely(t *testing.T) {
	ti := newTestIssuer(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := o.Authenticate(ctx, ti.sign(t, ti.claims(clock(), nil))); err != nil {
		t.Fatal(err)
	}
	if n := ti.jwksFetches.Load(); n != 1 {
		t.Fatalf("%d key set fetches for the first token, want 1", n)
	}
	ti.mu.Lock()
	knownKid := ti.kids[0]
	ti.mu.Unlock()
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	// forge makes the i-th forged token: a known kid with another key, an
	// unknown kid, or no kid at all.
	forge := func(i int) string {
		c := ti.claims(clock(), map[string]any{"jti": NewToken("")})
		switch i % 3 {
		case 0:
			return signWith(t, other, knownKid, c)
		case 1:
			return signWith(t, other, NewToken("kid-")[:12], c)
		default:
			return signWith(t, other, "", c)
		}
	}
	forged := make([]string, 300)
	for i := range forged {
		forged[i] = forge(i)
	}
	check := func(batch string, parallel bool, want int64) {
		t.Helper()
		var wg sync.WaitGroup
		var accepted atomic.Int64
		for _, tok := range forged {
			wg.Add(1)
			try := func() {
				defer wg.Done()
				if _, err := o.Authenticate(ctx, tok); !errors.Is(err, ErrInvalid) {
					accepted.Add(1)
				}
			}
			if parallel {
				go try()
			} else {
				try()
			}
		}
		wg.Wait()
		if n := accepted.Load(); n != 0 {
			t.Fatalf("%s: %d forged tokens accepted", batch, n)
		}
		if n := ti.jwksFetches.Load(); n != want {
			t.Errorf("%s: %d key set fetches in all, want %d", batch, n, want)
		}
	}
	// Right after a fetch: none at all.
	check("300 forged tokens, one after another, right after a fetch", false, 1)
	// An interval later: one, for the whole concurrent batch.
	advance(DefaultKeyRefetchInterval)
	check("300 concurrent forged tokens an interval later", true, 2)
	check("300 more at the same time", false, 2)

	// A rotation: the new key is found with a single fetch, then kept.
	ti.rotate(t)
	advance(DefaultKeyRefetchInterval)
	for i := 0; i < 3; i++ {
		u, err := o.Authenticate(ctx, ti.sign(t, ti.claims(clock(), map[string]any{"preferred_username": "rotated-" + strconv.Itoa(i)})))
		if err != nil || u.Name != "rotated-"+strconv.Itoa(i) {
			t.Fatalf("token signed with the rotated key: %v %v", u, err)
		}
	}
	if n := ti.jwksFetches.Load(); n != 3 {
		t.Errorf("%d key set fetches after a rotation, want 3", n)
	}
}

func TestNewOIDCErrors(t *testing.T) {
	if _, err := NewOIDC(context.Background(), OIDCConfig{ClientID: "x"}); err == nil {
		t.Error("no issuer accepted")
	}
	if _, err := NewOIDC(context.Background(), OIDCConfig{Issuer: "http://127.0.0.1:1", ClientID: "x"}); err == nil || !strings.Contains(err.Error(), "discover") {
		t.Errorf("unreachable issuer: %v", err)
	}
}

func TestFailureLimiter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewFailureLimiter(3)
	l.SetClock(func() time.Time { return now })
	for i := 0; i < 3; i++ {
		if l.Fail("1.2.3.4") {
			t.Fatalf("over the limit after %d failures", i+1)
		}
	}
	if !l.Fail("1.2.3.4") || !l.Blocked("1.2.3.4") || l.Blocked("5.6.7.8") {
		t.Fatal("limit not per address")
	}
	for i := 0; i < 4; i++ {
		l.Fail("2001:db8::1")
	}
	if !l.Blocked("2001:db8::ffff") || l.Blocked("2001:db9::1") {
		t.Error("IPv6 addresses are not grouped by /64")
	}
	now = now.Add(61 * time.Second)
	if l.Blocked("1.2.3.4") {
		t.Fatal("still blocked after the window")
	}
}

// TestOIDCOwnershipFollowsSubject: names and emails label a user; the
// subject owns. Someone who takes another's user name or an unverified email
// does not become them.
func TestOIDCOwnershipFollowsSubject(t *testing.T) {
	ti := newTestIssuer(t)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: ti.srv.URL, ClientID: "gateway", UsernameClaims: []string{"email", "sub"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ctx := context.Background()
	verified, err := o.Authenticate(ctx, ti.sign(t, ti.claims(now, map[string]any{"sub": "s1", "email": "alice@example.com", "email_verified": true})))
	if err != nil || verified.Name != "alice@example.com" || verified.Owner() != "oidc:s1" {
		t.Fatalf("verified email: %+v %v", verified, err)
	}
	impostor, err := o.Authenticate(ctx, ti.sign(t, ti.claims(now, map[string]any{"sub": "s2", "email": "alice@example.com", "email_verified": false})))
	if err != nil || impostor.Name == "alice@example.com" || impostor.Owner() == verified.Owner() {
		t.Fatalf("an unverified email named a user: %+v %v", impostor, err)
	}
	same, err := o.Authenticate(ctx, ti.sign(t, ti.claims(now, map[string]any{"sub": "s3", "preferred_username": "alice"})))
	if err != nil || same.Owner() == verified.Owner() {
		t.Fatalf("a different subject with the same name owns the same: %+v %v", same, err)
	}
}
