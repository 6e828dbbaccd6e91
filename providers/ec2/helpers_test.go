package ec2

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/internal/awslive"
)

const testRegion = "eu-west-1"

// testGatewayGroup is the security group the gateway's tasks are in.
const testGatewayGroup = "sg-0e000000000000001"

// operatorAWS is the AWS set-up of the machine running the tests, as
// TestMain found it: only the live test (live_test.go) gets it back.
var operatorAWS awslive.Env

func TestMain(m *testing.M) {
	// Belt and braces for the hermetic tests: nothing here may reach
	// instance metadata, and the SDK must not read a developer's AWS set-up.
	operatorAWS = awslive.Isolate()
	os.Exit(m.Run())
}

// env is a provider wired to fresh fakes.
type env struct {
	p      *Provider
	ec2    *ec2test.EC2
	ssm    *ec2test.SSM
	cfg    Config
	logs   *syncBuffer
	sleeps *sleepLog
	probes *sleepLog
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sleepLog records waits (and probed addresses) instead of waiting.
type sleepLog struct {
	mu    sync.Mutex
	waits []time.Duration
	addrs []string
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waits) + len(s.addrs)
}

// testConfig is a valid configuration pointing at the fakes, with static
// credentials (so that nothing is read from the environment or instance
// metadata), instant waits, and a scheduler probe that never dials.
func testConfig(f *ec2test.EC2, s *ec2test.SSM) Config {
	return Config{
		Region:               testRegion,
		Subnets:              []string{"subnet-0a000000000000001", "subnet-0b000000000000002"},
		GatewaySecurityGroup: testGatewayGroup,
		InstanceProfile:      "dask-member",
		GatewayID:            "gw-test",
		ExtraTags:            map[string]string{"team": "data"},
		Credentials:          credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:           loopbackOnly{},
		EC2Endpoint:          f.URL,
		SSMEndpoint:          s.URL,
		MaxAttempts:          4,
		BaseDelay:            100 * time.Millisecond,
		MaxDelay:             time.Second,
		PollInterval:         time.Second,
		StopTimeout:          time.Minute,
	}
}

func newEnv(t *testing.T, edit ...func(*Config)) *env {
	t.Helper()
	e := &env{ec2: ec2test.NewEC2(t, testRegion), ssm: nil, logs: &syncBuffer{}, sleeps: &sleepLog{}, probes: &sleepLog{}}
	e.ssm = ec2test.NewSSM(t, testRegion)
	// The gateway's own group, in the subnets' VPC, as Terraform makes it.
	e.ec2.AddSecurityGroup(ec2test.SecurityGroup{ID: testGatewayGroup, Name: "gateway", Description: "the gateway's tasks", VPC: "vpc-0c000000000000001"})
	cfg := testConfig(e.ec2, e.ssm)
	cfg.Sleep = e.sleeps.sleep
	cfg.ProbeScheduler = func(ctx context.Context, addr string) error {
		e.probes.mu.Lock()
		e.probes.addrs = append(e.probes.addrs, addr)
		e.probes.mu.Unlock()
		return nil
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range edit {
		f(&cfg)
	}
	e.cfg = cfg
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.p = p
	t.Cleanup(func() {
		// Every request must have come through the SDK, signed, for the
		// configured region.
		for _, r := range append(e.ec2.Requests(""), e.ssm.Requests("")...) {
			if r.AccessKey != "AKIDTEST" || r.Region != testRegion {
				t.Errorf("%s signed by %q for %q", r.Action, r.AccessKey, r.Region)
			}
		}
	})
	return e
}

// spec is a cluster spec as the core makes it.
func spec(name string) providers.ClusterSpec {
	return providers.ClusterSpec{
		Name: name, Owner: "alice", GatewayID: "gw-test",
		TLSCert:         []byte(testCert),
		TLSKey:          []byte(testKey),
		DashboardPrefix: "/clusters/" + name,
		WorkerThreads:   2,
		WorkerMemory:    4 << 30,
		Scheduler:       providers.Machine{InstanceType: "m6i.large", VCPUs: 2, MemoryGiB: 8},
		Worker:          providers.Machine{InstanceType: "m6i.xlarge", VCPUs: 4, MemoryGiB: 16, Alternatives: []string{"m5.xlarge"}},
	}
}

// Not a real key: PEM-shaped material whose lines the tests look for.
const testCert = `-----BEGIN CERTIFICATE-----
MIIBfakecertificatebodyLINE1AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
MIIBfakecertificatebodyLINE2BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB
-----END CERTIFICATE-----
`

const testKey = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIfakeprivatekeybodyLINE1CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC
-----END EC PRIVATE KEY-----
`

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// memberByName finds a member in a Describe answer.
func memberByName(ms []providers.Member, name string) (providers.Member, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return providers.Member{}, false
}

func faultAlways(action, code string) ec2test.Fault {
	return ec2test.Fault{Action: action, Code: code, Times: -1}
}

// loopbackOnly sends requests to 127.0.0.1 only: a test that would reach
// AWS (or anything else) fails instead.
type loopbackOnly struct{}

func (loopbackOnly) Do(r *http.Request) (*http.Response, error) {
	if h := r.URL.Hostname(); h != "127.0.0.1" {
		return nil, fmt.Errorf("test request to %s refused: tests talk to 127.0.0.1 only", r.URL.Host)
	}
	return http.DefaultClient.Do(r)
}

// groups returns the fake's security groups but the gateway's own.
func (e *env) groups() []ec2test.SecurityGroup {
	var out []ec2test.SecurityGroup
	for _, g := range e.ec2.SecurityGroups() {
		if g.ID != testGatewayGroup {
			out = append(out, g)
		}
	}
	return out
}
