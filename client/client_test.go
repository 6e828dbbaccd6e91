package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialsRoundTrip(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c, err := LoadCredentials()
	if err != nil || len(c.Gateways) != 0 {
		t.Fatalf("empty: %v %v", c, err)
	}
	c.Current = Key("http://127.0.0.1:8000/")
	c.Gateways[c.Current] = Entry{Token: "tok"}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	p, _ := CredentialsPath()
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode: %v %v", st, err)
	}
	back, err := LoadCredentials()
	if err != nil || back.Current != "http://127.0.0.1:8000" || back.Gateways[back.Current].Token != "tok" {
		t.Fatalf("reload: %+v %v", back, err)
	}
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(); err == nil || !strings.Contains(err.Error(), "delete it and log in again") {
		t.Fatalf("corrupt file: %v", err)
	}
}

func TestClusterTLSFiles(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cert, key, err := SaveClusterTLS("abc", "CERT", "KEY")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cert, key} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, st, err)
		}
	}
	RemoveClusterTLS("abc")
	if _, err := os.Stat(filepath.Dir(cert)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("not removed: %v", err)
	}
	RemoveClusterTLS("../..") // must not remove anything outside the clusters folder
	if _, err := ConfigDir(); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":"authentication failed","code":"unauthenticated","message":"authentication failed"}`))
			return
		}
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"error":"cluster x not found","code":"cluster_not_found","message":"cluster x not found"}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	bad, _ := New(srv.URL, "bad", nil)
	_, err := bad.Get(ctx, "x")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(ae.Error(), "run: gateway login") {
		t.Errorf("401: %v", err)
	}
	good, _ := New(srv.URL, "good", nil)
	if _, err := good.Get(ctx, "x"); !IsNotFound(err) || err.Error() != "cluster x not found" {
		t.Errorf("404: %v", err)
	}
	if _, err := New("127.0.0.1:8000", "", nil); err == nil {
		t.Error("URL without scheme accepted")
	}
	down, _ := New("http://127.0.0.1:1", "", nil)
	if _, err := down.Get(ctx, "x"); err == nil || !strings.Contains(err.Error(), "is it running?") {
		t.Errorf("unreachable: %v", err)
	}
}
