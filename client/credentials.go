package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Credentials is the CLI's credentials file: per gateway URL, the token to
// send and the CA that signs the gateway's certificate.
type Credentials struct {
	// Current is the gateway used when none is named.
	Current  string           `json:"current"`
	Gateways map[string]Entry `json:"gateways"`
}

// Entry holds what the CLI needs to talk to one gateway.
type Entry struct {
	// Token is sent as the bearer: an OIDC ID token, or an API token.
	Token  string `json:"token,omitempty"`
	CAFile string `json:"ca_file,omitempty"`
	// For OIDC logins: how to renew Token.
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitempty"`
	Issuer       string    `json:"issuer,omitempty"`
	ClientID     string    `json:"client_id,omitempty"`
	TokenURL     string    `json:"token_url,omitempty"`
}

// ConfigDir is $XDG_CONFIG_HOME/gateway (or ~/.config/gateway).
func ConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "gateway"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home directory; set XDG_CONFIG_HOME: %w", err)
	}
	return filepath.Join(h, ".config", "gateway"), nil
}

// CredentialsPath is where the credentials file lives.
func CredentialsPath() (string, error) {
	d, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "credentials.json"), nil
}

// LoadCredentials reads the credentials file; a missing file is empty.
func LoadCredentials() (*Credentials, error) {
	p, err := CredentialsPath()
	if err != nil {
		return nil, err
	}
	c := &Credentials{Gateways: map[string]Entry{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON (delete it and log in again): %w", p, err)
	}
	if c.Gateways == nil {
		c.Gateways = map[string]Entry{}
	}
	return c, nil
}

// Save writes the file atomically with mode 0600: it holds tokens.
func (c *Credentials) Save() error {
	p, err := CredentialsPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Key normalises a gateway URL for lookups.
func Key(u string) string { return strings.TrimRight(u, "/") }

// ClusterDir is where the CLI keeps a cluster's TLS credentials.
func ClusterDir(name string) (string, error) {
	d, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "clusters", name), nil
}

// SaveClusterTLS writes a cluster's certificate and key (mode 0600) and
// returns their paths.
func SaveClusterTLS(name, cert, key string) (certPath, keyPath string, err error) {
	dir, err := ClusterDir(name)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, []byte(cert), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, []byte(key), 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// RemoveClusterTLS deletes a stopped cluster's credentials.
func RemoveClusterTLS(name string) {
	if dir, err := ClusterDir(name); err == nil && name != "" && !strings.ContainsAny(name, "/\\.") {
		_ = os.RemoveAll(dir)
	}
}
