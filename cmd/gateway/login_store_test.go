package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gatewayhq/gateway/client"
)

// TestStoreLoginKeepsCAFile: a CA file given at login is remembered for the
// gateway, absolute, and kept by later logins that do not repeat it.
func TestStoreLoginKeepsCAFile(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	const url = "https://dask.example.com"
	steps := []struct {
		name, caFile, want string
	}{
		{"first login, no CA file", "", ""},
		{"login with a relative CA file", "fullchain.pem", filepath.Join(dir, "fullchain.pem")},
		{"a later login without one", "", filepath.Join(dir, "fullchain.pem")},
		{"a login with another", "/etc/ssl/other.pem", "/etc/ssl/other.pem"},
	}
	for _, s := range steps {
		if err := storeLogin(url, client.Entry{Token: "t-" + s.name}, s.caFile); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		creds, err := client.LoadCredentials()
		if err != nil {
			t.Fatal(err)
		}
		got := creds.Gateways[url]
		if got.CAFile != s.want || got.Token != "t-"+s.name || creds.Current != url {
			t.Errorf("%s: stored %+v (current %s), want CA file %q", s.name, got, creds.Current, s.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fullchain.pem")); !os.IsNotExist(err) {
		t.Error("storing a login must not create the CA file")
	}
}
