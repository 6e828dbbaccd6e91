package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// parsePair decodes a Pair and checks its PEM framing.
func parsePair(t *testing.T, p Pair) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	block, rest := pem.Decode(p.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("certificate PEM: %q", p.CertPEM)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("trailing data after the certificate: %q", rest)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	kblock, _ := pem.Decode(p.KeyPEM)
	if kblock == nil || kblock.Type != "PRIVATE KEY" {
		t.Fatalf("key PEM: %q", p.KeyPEM)
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		t.Fatalf("parse PKCS#8 key: %v", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("key is %T, want *ecdsa.PrivateKey", k)
	}
	if key.Curve != elliptic.P256() {
		t.Errorf("key curve = %s, want P-256", key.Curve.Params().Name)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		t.Fatalf("certificate public key %T does not match the private key", cert.PublicKey)
	}
	if cert.PublicKeyAlgorithm != x509.ECDSA || cert.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		t.Errorf("algorithms = %v / %v", cert.PublicKeyAlgorithm, cert.SignatureAlgorithm)
	}
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if !bytes.Equal(cert.RawIssuer, cert.RawSubject) {
		t.Errorf("issuer %v differs from subject %v", cert.Issuer, cert.Subject)
	}
	if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Errorf("tls.X509KeyPair: %v", err)
	}
	return cert, key
}

func mustCluster(t *testing.T, name string, lifetime time.Duration, now time.Time) Pair {
	t.Helper()
	p, err := ClusterCert(name, lifetime, now)
	if err != nil {
		t.Fatalf("ClusterCert(%q): %v", name, err)
	}
	return p
}

func TestClusterCert(t *testing.T) {
	now := time.Now()
	const lifetime = 24 * time.Hour
	p := mustCluster(t, "c1", lifetime, now)
	cert, _ := parsePair(t, p)

	if !cert.BasicConstraintsValid || !cert.IsCA {
		t.Errorf("IsCA = %v (basic constraints valid %v), want a CA", cert.IsCA, cert.BasicConstraintsValid)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature; cert.KeyUsage != want {
		t.Errorf("KeyUsage = %b, want %b", cert.KeyUsage, want)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if !slices.Contains(cert.ExtKeyUsage, u) {
			t.Errorf("ExtKeyUsage %v lacks %v", cert.ExtKeyUsage, u)
		}
	}
	for _, san := range []string{"c1", DaskInternalName, "daskgateway-c1"} {
		if !slices.Contains(cert.DNSNames, san) {
			t.Errorf("DNSNames %v lack %q", cert.DNSNames, san)
		}
	}
	if len(cert.IPAddresses) != 0 {
		t.Errorf("IPAddresses = %v, want none", cert.IPAddresses)
	}
	if cert.Subject.CommonName != DaskInternalName {
		t.Errorf("CommonName = %q", cert.Subject.CommonName)
	}
	if !cert.NotBefore.Before(now) || now.Sub(cert.NotBefore) > time.Hour {
		t.Errorf("NotBefore = %v, want slightly before %v", cert.NotBefore, now)
	}
	// Certificates carry whole seconds.
	if want := now.Add(lifetime).UTC().Truncate(time.Second); !cert.NotAfter.Equal(want) {
		t.Errorf("NotAfter = %v, want %v", cert.NotAfter, want)
	}
	if len(cert.SubjectKeyId) == 0 || !bytes.Equal(cert.SubjectKeyId, cert.AuthorityKeyId) {
		t.Errorf("key ids: subject %x authority %x", cert.SubjectKeyId, cert.AuthorityKeyId)
	}
	if cert.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v is not positive", cert.SerialNumber)
	}

	// It is its own root, for servers and for clients.
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, name := range []string{"", "c1", DaskInternalName, "daskgateway-c1"} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now}); err != nil {
				t.Errorf("Verify(usage %v, name %q): %v", usage, name, err)
			}
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "c2", CurrentTime: now}); err == nil {
		t.Error("verified for another cluster's name")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now.Add(lifetime + time.Minute)}); err == nil {
		t.Error("verified after its lifetime")
	}
	// Another cluster's certificate is not a root for this one.
	other, _ := parsePair(t, mustCluster(t, "c2", lifetime, now))
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: otherRoots, CurrentTime: now}); err == nil {
		t.Error("c1's certificate verified against c2's")
	}
}

func TestClusterCertRefusesEmptyName(t *testing.T) {
	p, err := ClusterCert("", time.Hour, time.Now())
	if err == nil {
		t.Fatal("empty cluster name accepted")
	}
	if p.CertPEM != nil || p.KeyPEM != nil {
		t.Errorf("credentials returned with the error")
	}
}

func TestClusterCertIsFresh(t *testing.T) {
	now := time.Now()
	c1, k1 := parsePair(t, mustCluster(t, "same", time.Hour, now))
	c2, k2 := parsePair(t, mustCluster(t, "same", time.Hour, now))
	if k1.Equal(k2) {
		t.Error("two calls gave the same key")
	}
	if c1.SerialNumber.Cmp(c2.SerialNumber) == 0 {
		t.Errorf("two calls gave the same serial %v", c1.SerialNumber)
	}
	if bytes.Equal(c1.SubjectKeyId, c2.SubjectKeyId) {
		t.Error("two calls gave the same subject key id")
	}
}

// handshake runs a TLS handshake over net.Pipe between a server and a client
// configured the dask-gateway way (one pair as CA, server and client
// certificate) and returns both sides' errors. After a successful handshake
// the server sends a byte that the client must read, so that a client
// certificate refused by the server surfaces on the client too under TLS 1.3.
func handshake(t *testing.T, serverPair, clientPair, clientCA Pair, serverName string) (serverErr, clientErr error) {
	t.Helper()
	serverCert, err := tls.X509KeyPair(serverPair.CertPEM, serverPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(clientPair.CertPEM, clientPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	serverPool := x509.NewCertPool()
	if !serverPool.AppendCertsFromPEM(serverPair.CertPEM) {
		t.Fatal("server CA PEM")
	}
	clientPool := x509.NewCertPool()
	if !clientPool.AppendCertsFromPEM(clientCA.CertPEM) {
		t.Fatal("client CA PEM")
	}
	sc, cc := net.Pipe()
	deadline := time.Now().Add(10 * time.Second)
	_ = sc.SetDeadline(deadline)
	_ = cc.SetDeadline(deadline)
	server := tls.Server(sc, &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    serverPool,
		MinVersion:   tls.VersionTLS12,
	})
	client := tls.Client(cc, &tls.Config{
		Certificates: []tls.Certificate{clientCert},
		RootCAs:      clientPool,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	})
	errc := make(chan error, 1)
	go func() {
		// Closing the raw pipe, not the TLS connection: a close_notify
		// nobody reads would hold the unbuffered pipe for seconds.
		defer sc.Close()
		if err := server.Handshake(); err != nil {
			errc <- err
			return
		}
		if n := len(server.ConnectionState().PeerCertificates); n != 1 {
			errc <- errors.New("server saw no client certificate")
			return
		}
		_, err := server.Write([]byte("k"))
		errc <- err
	}()
	clientErr = client.Handshake()
	if clientErr == nil {
		b := make([]byte, 1)
		_, clientErr = io.ReadFull(client, b)
		if clientErr == nil && b[0] != 'k' {
			clientErr = errors.New("garbled")
		}
	}
	_ = cc.Close()
	return <-errc, clientErr
}

func TestClusterCertMutualTLS(t *testing.T) {
	now := time.Now()
	c1 := mustCluster(t, "c1", time.Hour, now)
	c2 := mustCluster(t, "c2", time.Hour, now)
	tests := []struct {
		name               string
		server, client, ca Pair
		serverName         string
		wantServer         bool // the server refuses
		wantClient         bool // the client refuses or sees the refusal
	}{
		{"one pair on both sides", c1, c1, c1, DaskInternalName, false, false},
		{"by cluster name", c1, c1, c1, "daskgateway-c1", false, false},
		{"client certificate of another cluster", c1, c2, c1, DaskInternalName, true, true},
		{"server of another cluster", c2, c1, c1, DaskInternalName, true, true},
		{"wrong server name", c1, c1, c1, "daskgateway-c2", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			serverErr, clientErr := handshake(t, tc.server, tc.client, tc.ca, tc.serverName)
			if (serverErr != nil) != tc.wantServer {
				t.Errorf("server error = %v, want error %v", serverErr, tc.wantServer)
			}
			if (clientErr != nil) != tc.wantClient {
				t.Errorf("client error = %v, want error %v", clientErr, tc.wantClient)
			}
		})
	}
}

func TestServingCert(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		hosts []string
		dns   []string
		ips   []string
	}{
		{"mixed", []string{"localhost", "127.0.0.1", "::1", "gw.example.com", "", "10.1.2.3"},
			[]string{"localhost", "gw.example.com"}, []string{"127.0.0.1", "::1", "10.1.2.3"}},
		{"only names", []string{"a.example", "b.example"}, []string{"a.example", "b.example"}, nil},
		{"only addresses", []string{"192.0.2.1", "2001:db8::1"}, nil, []string{"192.0.2.1", "2001:db8::1"}},
		{"none", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ServingCert(tc.hosts, 30*24*time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			cert, _ := parsePair(t, p)
			if !slices.Equal(cert.DNSNames, tc.dns) {
				t.Errorf("DNSNames = %q, want %q", cert.DNSNames, tc.dns)
			}
			if len(cert.IPAddresses) != len(tc.ips) {
				t.Fatalf("IPAddresses = %v, want %v", cert.IPAddresses, tc.ips)
			}
			for i, ip := range tc.ips {
				if !cert.IPAddresses[i].Equal(net.ParseIP(ip)) {
					t.Errorf("IPAddresses[%d] = %v, want %s", i, cert.IPAddresses[i], ip)
				}
				if err := cert.VerifyHostname(ip); err != nil {
					t.Errorf("VerifyHostname(%s): %v", ip, err)
				}
			}
			for _, d := range tc.dns {
				if err := cert.VerifyHostname(d); err != nil {
					t.Errorf("VerifyHostname(%s): %v", d, err)
				}
			}
			if err := cert.VerifyHostname("elsewhere.example"); err == nil {
				t.Error("valid for a host it was not made for")
			}
			if cert.IsCA {
				t.Error("serving certificate is a CA")
			}
			if cert.KeyUsage&x509.KeyUsageCertSign != 0 {
				t.Errorf("serving certificate may sign certificates: KeyUsage %b", cert.KeyUsage)
			}
			if cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
				t.Errorf("serving certificate unusable for TLS servers: %b %v", cert.KeyUsage, cert.ExtKeyUsage)
			}
			if want := now.Add(30 * 24 * time.Hour).UTC().Truncate(time.Second); !cert.NotAfter.Equal(want) {
				t.Errorf("NotAfter = %v, want %v", cert.NotAfter, want)
			}
		})
	}
}

func leafOf(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	if c.Leaf != nil {
		return c.Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestLoadOrCreateServing(t *testing.T) {
	now := time.Now()
	dir := filepath.Join(t.TempDir(), "data", "tls")
	hosts := []string{"localhost", "127.0.0.1"}
	certPath, keyPath := filepath.Join(dir, "gateway-tls.crt"), filepath.Join(dir, "gateway-tls.key")

	first, err := LoadOrCreateServing(dir, hosts, now)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	leaf := leafOf(t, first)
	if leaf.IsCA || !slices.Equal(leaf.DNSNames, []string{"localhost"}) || len(leaf.IPAddresses) != 1 {
		t.Errorf("created certificate: CA %v, DNS %v, IPs %v", leaf.IsCA, leaf.DNSNames, leaf.IPAddresses)
	}
	if want := now.Add(365 * 24 * time.Hour).UTC().Truncate(time.Second); !leaf.NotAfter.Equal(want) {
		t.Errorf("NotAfter = %v, want %v", leaf.NotAfter, want)
	}
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatalf("key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(certPath); err != nil {
		t.Fatalf("certificate file: %v", err)
	}
	// What is on disk is what was returned.
	onDisk, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("stored pair: %v", err)
	}
	if !bytes.Equal(onDisk.Certificate[0], first.Certificate[0]) {
		t.Error("stored certificate differs from the returned one")
	}
	certBytes, keyBytes := mustRead(t, certPath), mustRead(t, keyPath)

	tests := []struct {
		name  string
		now   time.Time
		reuse bool
	}{
		{"second call", now, true},
		{"a month later", now.Add(30 * 24 * time.Hour), true},
		{"just over a week before expiry", leaf.NotAfter.Add(-7*24*time.Hour - time.Second), true},
		{"exactly a week before expiry", leaf.NotAfter.Add(-7 * 24 * time.Hour), false},
		{"days before expiry", leaf.NotAfter.Add(-3 * 24 * time.Hour), false},
		{"far in the future", now.Add(10 * 365 * 24 * time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Start every case from the first certificate.
			if err := os.WriteFile(certPath, certBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyPath, keyBytes, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadOrCreateServing(dir, hosts, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			gl := leafOf(t, got)
			same := gl.SerialNumber.Cmp(leaf.SerialNumber) == 0
			if same != tc.reuse {
				t.Fatalf("reused = %v, want %v (serial %v vs %v)", same, tc.reuse, gl.SerialNumber, leaf.SerialNumber)
			}
			if tc.reuse {
				return
			}
			if want := tc.now.Add(365 * 24 * time.Hour).UTC().Truncate(time.Second); !gl.NotAfter.Equal(want) {
				t.Errorf("renewed NotAfter = %v, want %v", gl.NotAfter, want)
			}
			stored, err := tls.LoadX509KeyPair(certPath, keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(stored.Certificate[0], got.Certificate[0]) {
				t.Error("the renewed certificate was not stored")
			}
			if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("renewed key file mode: %v %v", st.Mode(), err)
			}
			// The next call reuses the renewed one.
			again, err := LoadOrCreateServing(dir, hosts, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if leafOf(t, again).SerialNumber.Cmp(gl.SerialNumber) != 0 {
				t.Error("the renewed certificate was not reused")
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadOrCreateServingReplacesBrokenFiles(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"garbage certificate", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "gateway-tls.crt"), []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"key of another certificate", func(t *testing.T, dir string) {
			other, err := ServingCert([]string{"localhost"}, time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "gateway-tls.key"), other.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing key", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "gateway-tls.key")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := LoadOrCreateServing(dir, []string{"localhost"}, now)
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			got, err := LoadOrCreateServing(dir, []string{"localhost"}, now)
			if err != nil {
				t.Fatalf("after %s: %v", tc.name, err)
			}
			if leafOf(t, got).SerialNumber.Cmp(leafOf(t, first).SerialNumber) == 0 {
				t.Error("broken files were reused")
			}
			if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "gateway-tls.crt"), filepath.Join(dir, "gateway-tls.key")); err != nil {
				t.Errorf("replacement not stored: %v", err)
			}
		})
	}
}
