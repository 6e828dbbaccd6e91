package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// DefaultKeyRefetchInterval is the least time between two fetches of an
// issuer's key set that unknown keys trigger.
const DefaultKeyRefetchInterval = 5 * time.Second

// errUnknownKey is a signature by a key the issuer does not publish (as of
// the latest fetch).
var errUnknownKey = errors.New("token signed with an unknown key")

// signingAlgs are the algorithms ID tokens may be signed with: asymmetric
// only, so that a public key can never be used as an HMAC secret.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

// keySet verifies signatures with an issuer's published keys (go-oidc's
// KeySet). It keeps the keys it fetched and goes back to the issuer only for
// a key it does not know, and then at most once per interval: go-oidc's
// RemoteKeySet fetches again on every signature it cannot verify, so each
// forged token cost a request to the identity provider. A new key that
// appears right after a fetch is picked up at the next one, at most an
// interval later.
type keySet struct {
	url      string
	client   *http.Client
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	lastFetch time.Time // last attempt, successful or not
	inflight  chan struct{}
	fetchErr  error
}

func newKeySet(url string, client *http.Client, interval time.Duration, now func() time.Time) *keySet {
	if client == nil {
		client = http.DefaultClient
	}
	if interval <= 0 {
		interval = DefaultKeyRefetchInterval
	}
	return &keySet{url: url, client: client, interval: interval, now: now}
}

// VerifySignature implements oidc.KeySet. The verifier has already checked
// the token's algorithm against the issuer's.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("malformed jwt: want exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	payload, known, err := verifyWith(jws, keys, kid)
	if err == nil || known {
		// A known key that does not verify: a forgery, not a rotation
		// (a rotated key gets a new kid), so the issuer is not asked again.
		return payload, err
	}
	keys, err = k.refresh(ctx)
	if err != nil {
		return nil, err
	}
	payload, _, err = verifyWith(jws, keys, kid)
	return payload, err
}

// verifyWith verifies jws with the key called kid (every key when the token
// names none) and says whether such a key was known.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool, error) {
	known := false
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		known = kid != ""
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true, nil
		}
	}
	if known {
		return nil, true, errors.New("token signature does not verify")
	}
	return nil, false, errUnknownKey
}

// refresh fetches the key set again, unless a fetch started less than an
// interval ago: then the keys as they are. Concurrent callers share one
// fetch.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if k.inflight == nil {
		if !k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < k.interval {
			keys := k.keys
			k.mu.Unlock()
			return keys, nil
		}
		k.lastFetch = k.now()
		k.inflight = make(chan struct{})
		done := k.inflight
		go func() {
			// Not the caller's context: others wait on this fetch too.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			keys, err := k.fetch(fctx)
			k.mu.Lock()
			if err == nil {
				k.keys = keys
			}
			k.fetchErr = err
			k.inflight = nil
			k.mu.Unlock()
			close(done)
		}()
	}
	done := k.inflight
	k.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-done:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fetchErr != nil && len(k.keys) == 0 {
		return nil, k.fetchErr
	}
	return k.keys, nil
}

// maxKeySetBytes bounds what is read of a key set.
const maxKeySetBytes = 1 << 20

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching keys: %w", err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
	if err != nil {
		return nil, fmt.Errorf("fetching keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching keys: %s answered %s", k.url, resp.Status)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("fetching keys: %s is not a JSON key set: %w", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var key jose.JSONWebKey
		// Keys of types or curves go-jose does not know are skipped, as the
		// JWK specification asks, rather than failing the whole set.
		if json.Unmarshal(r, &key) != nil || !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}
