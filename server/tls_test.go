package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/pki"
)

// TestTLSConfig: the gateway serves the certificate it is given, as files
// or as text, and says which setting is wrong when it cannot.
func TestTLSConfig(t *testing.T) {
	src := t.TempDir()
	want, err := pki.LoadOrCreateServing(src, []string{"gateway.example"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(src, "gateway-tls.crt"), filepath.Join(src, "gateway-tls.key")
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	if _, err := pki.LoadOrCreateServing(otherDir, []string{"other.example"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	otherKey, err := os.ReadFile(filepath.Join(otherDir, "gateway-tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		set     func(c *config.Config)
		want    []byte // the leaf served; nil: a new self-signed one
		wantErr string
	}{
		{"files", func(c *config.Config) { c.TLS.CertFile, c.TLS.KeyFile = certPath, keyPath }, want.Certificate[0], ""},
		{"text", func(c *config.Config) { c.TLS.CertPEM, c.TLS.KeyPEM = string(certPEM), string(keyPEM) }, want.Certificate[0], ""},
		{"neither", func(*config.Config) {}, nil, ""},
		{"text that is not PEM", func(c *config.Config) { c.TLS.CertPEM, c.TLS.KeyPEM = "cert", "key" }, nil, "tls.cert_pem/tls.key_pem"},
		{"a key of another certificate", func(c *config.Config) {
			c.TLS.CertPEM, c.TLS.KeyPEM = string(certPEM), string(otherKey)
		}, nil, "tls.cert_pem/tls.key_pem"},
		{"missing files", func(c *config.Config) { c.TLS.CertFile, c.TLS.KeyFile = "/nonexistent.crt", "/nonexistent.key" }, nil, "tls.cert_file/tls.key_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Listen: "127.0.0.1:8443", PublicURL: "https://gateway.example", DataDir: t.TempDir()}
			tc.set(cfg)
			got, err := (&Gateway{cfg: cfg}).tlsConfig()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("tlsConfig = %v, want an error naming %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Errorf("the error shows key material: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			leaf := got.Certificates[0].Certificate[0]
			if tc.want != nil && !bytes.Equal(leaf, tc.want) {
				t.Error("the gateway serves another certificate than the one configured")
			}
			if tc.want == nil && bytes.Equal(leaf, want.Certificate[0]) {
				t.Error("with no certificate configured the gateway must make its own")
			}
		})
	}
}
