package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// ErrNoClusterCert means a member's https server cannot be verified: the
// route carries no usable cluster certificate.
var ErrNoClusterCert = errors.New("no cluster certificate to verify the member's https server with")

// MemberTLS is how the gateway checks a member's HTTP server (the Dask
// dashboard): it must present a chain to the cluster's own certificate,
// which is a self-signed CA held by that cluster alone, so another
// cluster's member (with another cluster's certificate) is refused. Every
// cluster certificate names DaskInternalName; the chain, not the name,
// is what tells clusters apart.
func MemberTLS(clusterCert []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if len(clusterCert) == 0 || !pool.AppendCertsFromPEM(clusterCert) {
		return nil, ErrNoClusterCert
	}
	return &tls.Config{RootCAs: pool, ServerName: DaskInternalName, MinVersion: tls.VersionTLS12}, nil
}
