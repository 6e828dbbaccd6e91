package routes

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"crypto/tls"
	"net/http"

	"github.com/gatewayhq/gateway/internal/pki"
)

func TestMemberTLS(t *testing.T) {
	a, err := pki.ClusterCert("a", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := MemberTLS(a.CertPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InsecureSkipVerify || cfg.RootCAs == nil || cfg.ServerName != pki.DaskInternalName {
		t.Fatalf("config %+v does not verify against the cluster certificate", cfg)
	}
	for _, bad := range [][]byte{nil, []byte("not PEM")} {
		if _, err := MemberTLS(bad, nil); err == nil {
			t.Errorf("MemberTLS(%q) succeeded", bad)
		}
	}
	if len(cfg.Certificates) != 0 {
		t.Errorf("without the key, the config presents %d certificates", len(cfg.Certificates))
	}
	// With the cluster's key, the gateway presents the cluster's
	// certificate: members' dashboards require it.
	withKey, err := MemberTLS(a.CertPEM, a.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(withKey.Certificates) != 1 || withKey.RootCAs == nil {
		t.Fatalf("with the key: %d certificates, roots %v; want the cluster's, verifying", len(withKey.Certificates), withKey.RootCAs)
	}
	b, err := pki.ClusterCert("b", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MemberTLS(a.CertPEM, b.KeyPEM); !errors.Is(err, ErrBadClusterKey) {
		t.Errorf("another cluster's key: %v, want ErrBadClusterKey", err)
	}
}

func TestPoolPerClusterAndDropped(t *testing.T) {
	a, _ := pki.ClusterCert("a", time.Hour, time.Now())
	b, _ := pki.ClusterCert("b", time.Hour, time.Now())
	made := 0
	p := NewPool(func(tc *tls.Config) *http.Transport { made++; return &http.Transport{TLSClientConfig: tc} })
	ta := p.Transport("a", a.CertPEM, nil)
	if p.Transport("a", a.CertPEM, nil) != ta {
		t.Fatal("the same cluster and certificate got a new transport")
	}
	if p.Transport("b", b.CertPEM, nil) == ta {
		t.Fatal("two clusters share a transport")
	}
	if p.Transport("a", b.CertPEM, nil) == ta {
		t.Fatal("a new certificate kept the old transport")
	}
	tb := p.Transport("a", b.CertPEM, nil)
	if tk := p.Transport("a", b.CertPEM, b.KeyPEM); tk == tb || len(tk.TLSClientConfig.Certificates) != 1 {
		t.Fatal("the cluster's key given later kept the transport that presents no certificate")
	}
	if p.Len() != 2 || made != 4 {
		t.Fatalf("%d transports kept, %d made; want 2 and 4", p.Len(), made)
	}
	p.Drop("a")
	if p.Len() != 1 {
		t.Fatalf("%d transports after Drop, want 1", p.Len())
	}
	// Unused transports go after poolIdle, on a later call.
	now := time.Now()
	p.now = func() time.Time { return now.Add(poolIdle + 2*time.Minute) }
	p.Transport("c", a.CertPEM, nil)
	if p.Len() != 1 {
		t.Fatalf("%d transports after b went unused, want 1 (c)", p.Len())
	}
}

func TestOnGone(t *testing.T) {
	tb := New()
	var mu sync.Mutex
	var gone []string
	tb.OnGone(func(c string) { mu.Lock(); gone = append(gone, c); mu.Unlock() })
	tb.SetRoute("c", "o", "s:1", "https://h:1", []byte("A"), nil)
	tb.SetRoute("c", "o", "s:1", "https://h:1", []byte("A"), nil)         // unchanged
	tb.SetRoute("c", "o", "s:2", "https://h:1", []byte("A"), nil)         // scheduler moved: the dashboard did not
	tb.SetRoute("c", "o", "s:2", "https://h:1", []byte("B"), nil)         // new certificate
	tb.SetRoute("c", "o", "s:2", "https://h:2", []byte("B"), nil)         // dashboard moved
	tb.SetRoute("c", "o", "s:2", "https://h:2", []byte("B"), []byte("K")) // the key came: connections must present it
	tb.DeleteRoute("c")
	if want := []string{"c", "c", "c", "c"}; !slices.Equal(gone, want) {
		t.Fatalf("gone = %v, want %v", gone, want)
	}
}
