// Package pki makes the certificates the gateway hands out.
//
// Each cluster gets one self-signed ECDSA P-256 certificate that is at the same
// time its CA, the scheduler's and workers' certificate and the client
// certificate. This is the dask-gateway convention: the Python client writes
// tls_cert to a file and passes it both as CA file and as client certificate,
// so a separate CA and leaf would not be understood by it. Holding the key is
// what grants access to the scheduler, because the scheduler requires a client
// certificate signed by this CA.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 5280 key identifier, not a security function
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DaskInternalName is the SAN that Dask's TLS setup and dask-gateway use for
// every member of a cluster.
const DaskInternalName = "dask-internal"

// Pair is a PEM certificate and its PEM (PKCS#8) private key.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// ClusterCert makes the credentials of one cluster, valid for the given
// lifetime (clusters are ephemeral; the lifetime bounds what a leaked key is
// worth).
func ClusterCert(clusterName string, lifetime time.Duration, now time.Time) (Pair, error) {
	if clusterName == "" {
		return Pair{}, errors.New("pki: empty cluster name")
	}
	return selfSigned(pkix.Name{CommonName: DaskInternalName, Organization: []string{"gateway cluster " + clusterName}},
		[]string{clusterName, DaskInternalName, "daskgateway-" + clusterName}, nil, true, lifetime, now)
}

// ServingCert makes a self-signed certificate for the gateway's own HTTPS,
// used when the operator configured none.
func ServingCert(hosts []string, lifetime time.Duration, now time.Time) (Pair, error) {
	var dns []string
	var ips []net.IP
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, h)
		}
	}
	return selfSigned(pkix.Name{CommonName: "gateway", Organization: []string{"gateway self-signed"}}, dns, ips, false, lifetime, now)
}

func selfSigned(subject pkix.Name, dns []string, ips []net.IP, isCA bool, lifetime time.Duration, now time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Pair{}, fmt.Errorf("pki: serial: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return Pair{}, fmt.Errorf("pki: marshal public key: %w", err)
	}
	ski := sha1.Sum(pub) //nolint:gosec // key identifier only
	usage := x509.KeyUsageDigitalSignature
	if isCA {
		usage |= x509.KeyUsageCertSign
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-5 * time.Minute), // tolerate clock skew between machines
		NotAfter:              now.Add(lifetime),
		KeyUsage:              usage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		DNSNames:              dns,
		IPAddresses:           ips,
		SubjectKeyId:          ski[:],
		AuthorityKeyId:        ski[:],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("pki: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("pki: marshal key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// LoadOrCreateServing returns the serving certificate stored in dir, making
// and storing a new one when none is there or the stored one expires within a
// week.
func LoadOrCreateServing(dir string, hosts []string, now time.Time) (tls.Certificate, error) {
	certPath := filepath.Join(dir, "gateway-tls.crt")
	keyPath := filepath.Join(dir, "gateway-tls.key")
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && c.Leaf != nil && c.Leaf.NotAfter.After(now.Add(7*24*time.Hour)) {
		return c, nil
	}
	p, err := ServingCert(hosts, 365*24*time.Hour, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(keyPath, p.KeyPEM, 0o600); err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: write key: %w", err)
	}
	if err := os.WriteFile(certPath, p.CertPEM, 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: write certificate: %w", err)
	}
	return tls.X509KeyPair(p.CertPEM, p.KeyPEM)
}
