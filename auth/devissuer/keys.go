package devissuer

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// signingKey is an RS256 key. It implements op.SigningKey (private side) and,
// through publicKey, op.Key (what the JWKS publishes).
type signingKey struct {
	id   string
	priv *rsa.PrivateKey
}

var (
	_ op.SigningKey = (*signingKey)(nil)
	_ op.Key        = publicKey{}
)

// newSigningKey generates a 2048-bit RSA key whose kid is its RFC 7638
// thumbprint, so that every rotation yields a new kid.
func newSigningKey() (*signingKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	jwk := jose.JSONWebKey{Key: &priv.PublicKey, Algorithm: string(jose.RS256), Use: "sig"}
	thumb, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("key thumbprint: %w", err)
	}
	return &signingKey{id: base64.RawURLEncoding.EncodeToString(thumb), priv: priv}, nil
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.priv }
func (k *signingKey) ID() string                                  { return k.id }

func (k *signingKey) public() op.Key { return publicKey{id: k.id, pub: &k.priv.PublicKey} }

// signer returns a JOSE signer that stamps the key's kid and typ JWT, as the
// library's op.SignerFromKey does.
func (k *signingKey) signer() (jose.Signer, error) {
	return op.SignerFromKey(k)
}

type publicKey struct {
	id  string
	pub *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.pub }
