package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ErrNoClusterCert means a member's https server cannot be verified: the
// route carries no usable cluster certificate.
var ErrNoClusterCert = errors.New("no cluster certificate to verify the member's https server with")

// ErrBadClusterKey means the route's cluster key does not go with its
// certificate: the gateway could not prove itself to the member.
var ErrBadClusterKey = errors.New("the cluster's key does not match its certificate")

// MemberTLS is how the gateway talks to a member's HTTP server (the Dask
// dashboard): the member must present a chain to the cluster's own
// certificate, which is a self-signed CA held by that cluster alone, so
// another cluster's member (with another cluster's certificate) is
// refused. Every cluster certificate names DaskInternalName; the chain,
// not the name, is what tells clusters apart. With the cluster's key, the
// gateway also presents the cluster's certificate: members' dashboards
// require it (the scheduler preload, images.BenchPreload), so that they
// answer the gateway and no one else who can reach their port.
func MemberTLS(clusterCert, clusterKey []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if len(clusterCert) == 0 || !pool.AppendCertsFromPEM(clusterCert) {
		return nil, ErrNoClusterCert
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: DaskInternalName, MinVersion: tls.VersionTLS12}
	if len(clusterKey) > 0 {
		pair, err := tls.X509KeyPair(clusterCert, clusterKey)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadClusterKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
