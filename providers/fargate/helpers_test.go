package fargate_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/providers/internal/awslive"
)

// operatorAWS is the AWS set-up of the machine running the tests, as
// TestMain found it: only the live test (live_test.go) gets it back.
var operatorAWS awslive.Env

func TestMain(m *testing.M) {
	// The hermetic tests never ask an instance metadata service for
	// anything, and no AWS setting of the machine running them steers the
	// clients.
	operatorAWS = awslive.Isolate()
	os.Exit(m.Run())
}

// Fake TLS material: tests check that none of it leaves through anything
// but the secret.
const (
	testCert = "-----BEGIN CERTIFICATE-----\nMIIBCERTMARKERcertmarkerCERTMARKER0123456789\n-----END CERTIFICATE-----\n"
	testKey  = "-----BEGIN PRIVATE KEY-----\nMIIBKEYMARKERkeymarkerKEYMARKER0123456789\n-----END PRIVATE KEY-----\n"
)

const testGateway = "gw-test-1"

// loopbackClient sends requests to 127.0.0.1 only, never through a proxy:
// a request for anywhere else fails the dial (and so the test).
func loopbackClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil || host != "127.0.0.1" {
				return nil, fmt.Errorf("test refuses to dial %s: only 127.0.0.1 is allowed", addr)
			}
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// sleeps records the provider's waits instead of sleeping.
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

func baseConfig(f *fargatetest.Server, sl *sleeps) fargate.Config {
	return fargate.Config{
		Region:           fargatetest.DefaultRegion,
		Cluster:          fargatetest.DefaultCluster,
		Subnets:          []string{fargatetest.SubnetA, fargatetest.SubnetB},
		GatewayCIDRs:     []string{"10.0.0.0/16", "fd00:ec2::/56"},
		ExecutionRoleArn: "arn:aws:iam::123456789012:role/gateway-ecs-execution",
		TaskRoleArn:      "arn:aws:iam::123456789012:role/dask-task",
		LogGroup:         "/gateway/dask",
		GatewayID:        testGateway,
		Endpoints:        fargate.Endpoints{ECS: f.ECS.URL, SecretsManager: f.SecretsManager.URL, EC2: f.EC2.URL, Logs: f.Logs.URL},
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDFAKEFORTESTS", "fake-secret-key", ""),
		HTTPClient:       loopbackClient(),
		Retry: fargate.Retry{
			MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond,
			Jitter: func(max time.Duration) time.Duration { return max }, // the window itself: checkable
		},
		StopTimeout:  time.Second,
		PollInterval: 10 * time.Millisecond,
		Sleep:        sl.sleep,
	}
}

func newProvider(t *testing.T, f *fargatetest.Server, edit ...func(*fargate.Config)) (*fargate.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	cfg := baseConfig(f, sl)
	for _, e := range edit {
		e(&cfg)
	}
	p, err := fargate.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, sl
}

func testSpec(name, owner string) providers.ClusterSpec {
	return providers.ClusterSpec{
		Name: name, Owner: owner, GatewayID: testGateway,
		TLSCert: []byte(testCert), TLSKey: []byte(testKey),
		DashboardPrefix: "/clusters/" + name,
		WorkerThreads:   2,
		WorkerMemory:    3 << 30,
		Scheduler:       providers.Machine{VCPUs: 1, MemoryGiB: 2},
		Worker:          providers.Machine{VCPUs: 2, MemoryGiB: 4},
	}
}

// waitFor describes the cluster until ok holds (the fake moves tasks on
// at each DescribeTasks).
func waitFor(t *testing.T, p providers.Provider, cluster, what string, ok func([]providers.Member) bool) []providers.Member {
	t.Helper()
	var ms []providers.Member
	for range 50 {
		var err error
		ms, err = p.Describe(context.Background(), cluster)
		if err != nil {
			t.Fatalf("Describe(%s): %v", cluster, err)
		}
		if ok(ms) {
			return ms
		}
	}
	t.Fatalf("%s: %s never happened; members: %+v", cluster, what, ms)
	return nil
}

func find(ms []providers.Member, name string) *providers.Member {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

func running(names ...string) func([]providers.Member) bool {
	return func(ms []providers.Member) bool {
		for _, n := range names {
			m := find(ms, n)
			if m == nil || m.State != providers.StateRunning {
				return false
			}
		}
		return true
	}
}

func schedulerUp(t *testing.T, p providers.Provider, cluster string) providers.Member {
	t.Helper()
	ms := waitFor(t, p, cluster, "scheduler running", running("scheduler"))
	return *find(ms, "scheduler")
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not contain %q", what, s, sub)
		}
	}
}
