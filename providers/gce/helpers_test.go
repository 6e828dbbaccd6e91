package gce

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

const testGatewayID = "gw-test-1"

// sleeps records the pauses the provider asked for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// testGatewaySA is the service account the gateway's instances run as.
const testGatewaySA = "gateway@test-project.iam.gserviceaccount.com"

// testConfig is a valid configuration for the fake: every client goes to
// the fake's 127.0.0.1 URL, without credentials.
func testConfig(srv *gcetest.Server, sl *sleeps) Config {
	return Config{
		Project:               srv.Project,
		Zones:                 []string{"us-central1-a", "us-central1-b"},
		GatewayServiceAccount: testGatewaySA,
		ServiceAccount:        "dask-workers@test-project.iam.gserviceaccount.com",
		GatewayID:             testGatewayID,
		Labels:                map[string]string{"team": "data"},
		Endpoint:              srv.URL,
		ClientOptions:         []option.ClientOption{option.WithoutAuthentication()},
		Retry:                 RetryConfig{Sleep: sl.sleep},
		// Long enough for -race on a busy machine, short enough that the
		// timeout test runs quickly (it sets its own).
		OperationTimeout: 20 * time.Second,
		Logger:           slog.New(slog.DiscardHandler),
	}
}

type env struct {
	t   *testing.T
	srv *gcetest.Server
	p   *Provider
	sl  *sleeps
	ctx context.Context
}

// newEnv starts a fake and a provider on it; mutate adjusts the config.
func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	srv := gcetest.New(t, gcetest.Options{PageSize: 2}) // small pages: listings must follow nextPageToken
	e := &env{t: t, srv: srv, sl: &sleeps{}}
	cfg := testConfig(srv, e.sl)
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.p = e.provider(cfg)
	return e
}

// provider makes another provider on the same fake (a restarted gateway).
func (e *env) provider(cfg Config) *Provider {
	e.t.Helper()
	p, err := New(e.ctx, cfg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.t.Cleanup(func() { _ = p.Close(context.Background(), true) })
	return p
}

var (
	certOnce sync.Once
	certPEM  []byte
	keyPEM   []byte
)

// testTLS is a self-signed certificate and key, as the gateway makes per
// cluster.
func testTLS(t *testing.T) ([]byte, []byte) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dask"},
			NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			panic(err)
		}
		certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
	})
	return certPEM, keyPEM
}

func testSpec(t *testing.T, cluster, owner string) providers.ClusterSpec {
	cert, key := testTLS(t)
	return providers.ClusterSpec{
		Name: cluster, Owner: owner, GatewayID: testGatewayID, TLSCert: cert, TLSKey: key,
		DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 2, WorkerMemory: 4 << 30,
		Scheduler: providers.Machine{InstanceType: "e2-standard-2"},
		Worker:    providers.Machine{InstanceType: "n2-standard-4", Alternatives: []string{"e2-standard-4"}},
	}
}

// inserts decodes the recorded instance inserts, in order.
func (e *env) inserts() []gcetest.Instance {
	e.t.Helper()
	var out []gcetest.Instance
	for _, r := range e.srv.RequestsTo("POST", "/instances") {
		var in gcetest.Instance
		if err := json.Unmarshal(r.Body, &in); err != nil {
			e.t.Fatalf("decode insert: %v", err)
		}
		in.Zone = zoneOfPath(r.Path)
		out = append(out, in)
	}
	return out
}

func zoneOfPath(p string) string {
	parts := strings.Split(p, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "zones" {
			return parts[i+1]
		}
	}
	return ""
}

// insertFor returns the last recorded insert of the named instance.
func (e *env) insertFor(name string) gcetest.Instance {
	e.t.Helper()
	var found *gcetest.Instance
	for _, in := range e.inserts() {
		if in.Name == name {
			found = &in
		}
	}
	if found == nil {
		e.t.Fatalf("no insert of %s recorded", name)
	}
	return *found
}

func (e *env) describe(cluster string) map[string]providers.Member {
	e.t.Helper()
	ms, err := e.p.Describe(e.ctx, cluster)
	if err != nil {
		e.t.Fatalf("Describe(%s): %v", cluster, err)
	}
	out := map[string]providers.Member{}
	for _, m := range ms {
		if _, dup := out[m.Name]; dup {
			e.t.Fatalf("Describe(%s) lists %s twice: %+v", cluster, m.Name, ms)
		}
		out[m.Name] = m
	}
	return out
}

func filters(reqs []gcetest.Request) []string {
	var out []string
	for _, r := range reqs {
		if f := r.Query.Get("filter"); f != "" {
			out = append(out, f)
		}
	}
	return out
}
