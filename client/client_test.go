package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/images"
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
		if r.Header.Get("Authorization") == "" {
			// The gateway's own answer without credentials names the fix.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":"x","code":"unauthenticated","message":"authentication required: send \"Authorization: Bearer <token>\" (run: gateway login)"}`))
			return
		}
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
	none, _ := New(srv.URL, "", nil)
	if _, err := none.Get(ctx, "x"); err == nil || strings.Count(err.Error(), "gateway login") != 1 {
		t.Errorf("401 without credentials: want the hint once, got %v", err)
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

// countingConn counts the bytes written to it.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// TestLargeBodyRefusedUnsent: a large upload asks first (Expect:
// 100-continue), so that a gateway that refuses it before reading it
// answers with its refusal, and the body is never sent; a small request
// goes at once.
func TestLargeBodyRefusedUnsent(t *testing.T) {
	expects := map[int64]string{}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		expects[r.ContentLength] = r.Header.Get("Expect")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"over max_builds","code":"quota_exceeded","message":"over max_builds"}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	tr := c.http.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: &sent}, nil
	}
	for _, size := range []int{1 << 10, 32 << 20} {
		sent.Store(0)
		_, err = c.EnsureEnv(context.Background(), images.Spec{Python: "3.11"}, map[string][]byte{"proj": make([]byte, size)})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Message != "over max_builds" {
			t.Fatalf("a refused upload of %d bytes: %v, want the gateway's 429", size, err)
		}
		if size > 1<<20 && sent.Load() > 64<<10 {
			t.Errorf("%d bytes sent of a refused %d MiB upload, want its headers only", sent.Load(), size>>20)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for length, expect := range expects {
		if want := length > 1<<20; (expect == "100-continue") != want {
			t.Errorf("a body of %d bytes sent with Expect %q, want 100-continue: %v", length, expect, want)
		}
	}
}
