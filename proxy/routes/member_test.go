package routes

import (
	"slices"
	"sync"
	"testing"
	"time"

	"crypto/tls"
	"net/http"

	"github.com/gatewayhq/gateway/internal/pki"
)

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
