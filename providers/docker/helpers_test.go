package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/internal/testdocker"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// These tests run real containers on the Docker engine of this machine
// (testdocker skips them when there is none), each cluster on a network of
// its own (host networking where a test says so). Every test uses a gateway id of its own, and
// a cleanup removes every container that carries it.

const (
	waitTimeout = 60 * time.Second
	testGrace   = 3 * time.Second
	// pollInterval spaces Describes: each one of a starting scheduler
	// copies a file out of its container, which costs the engine CPU the
	// members need on this small machine.
	pollInterval = 250 * time.Millisecond
)

var (
	_ providers.Provider  = (*Provider)(nil)
	_ providers.Immediate = (*Provider)(nil)
	_ providers.StopTimes = (*Provider)(nil)
	_ providers.LogReader = (*Provider)(nil)
	_ providers.Closer    = (*Provider)(nil)
)

// engine is one test's view of the Docker engine.
type engine struct {
	t         *testing.T
	endpoint  string
	image     string
	gatewayID string
	cli       *client.Client // the test's own client, to check what the provider did
}

// newEngine finds the engine and the test image, and removes the test's
// containers at the end.
func newEngine(t *testing.T) *engine {
	t.Helper()
	pool := testdocker.Pool(t)
	e := &engine{t: t, endpoint: pool.Client.Endpoint(), image: testdocker.DaskImage(t), gatewayID: "gwtest-" + randHex(4)}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(e.endpoint), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	e.cli = cli
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range e.containers(ctx, "") {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				t.Logf("cleanup: remove %v: %v", c.Names, err)
			}
		}
		for _, n := range e.networks(ctx, "") {
			if err := cli.NetworkRemove(ctx, n.ID); err != nil {
				t.Logf("cleanup: remove network %s: %v", n.Name, err)
			}
		}
		_ = cli.Close()
	})
	return e
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// config is a provider configuration for the test's gateway id.
func (e *engine) config() Config {
	return Config{
		Endpoint: e.endpoint, Image: e.image, GatewayID: e.gatewayID,
		StopGrace: testGrace, Dir: e.t.TempDir(), Logger: testLogger(e.t),
	}
}

// provider makes a provider; it is closed (leaving members) at the end.
func (e *engine) provider(cfg Config) *Provider {
	e.t.Helper()
	p, err := New(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.t.Cleanup(func() { _ = p.Close(context.Background(), true) })
	return p
}

// containers lists the containers of the test's gateway id (of one
// cluster when not empty), whatever their state.
func (e *engine) containers(ctx context.Context, cluster string) []container.Summary {
	e.t.Helper()
	f := filters.NewArgs(filters.Arg("label", labelGateway+"="+e.gatewayID))
	if cluster != "" {
		f.Add("label", labelCluster+"="+cluster)
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		e.t.Fatalf("list containers: %v", err)
	}
	return list
}

// networks lists the networks labelled with the test's gateway id (of one
// cluster when not empty).
func (e *engine) networks(ctx context.Context, cluster string) []network.Summary {
	e.t.Helper()
	f := filters.NewArgs(filters.Arg("label", labelGateway+"="+e.gatewayID))
	if cluster != "" {
		f.Add("label", labelCluster+"="+cluster)
	}
	list, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		e.t.Fatalf("list networks: %v", err)
	}
	return list
}

// inspect inspects the container of a member.
func (e *engine) inspect(cluster, member string) container.InspectResponse {
	e.t.Helper()
	insp, err := e.cli.ContainerInspect(context.Background(), containerName(e.gatewayID, cluster, member))
	if err != nil {
		e.t.Fatalf("inspect %s of %s: %v", member, cluster, err)
	}
	return insp
}

// spec is a valid spec of a new cluster for the test's gateway.
func (e *engine) spec(cluster, owner string) providers.ClusterSpec {
	return testSpec(e.t, cluster, owner, e.gatewayID)
}

func testSpec(t *testing.T, cluster, owner, gatewayID string) providers.ClusterSpec {
	t.Helper()
	pair, err := pki.ClusterCert(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return providers.ClusterSpec{
		Name: cluster, Owner: owner, GatewayID: gatewayID, TLSCert: pair.CertPEM, TLSKey: pair.KeyPEM,
		DashboardPrefix: "/clusters/" + cluster, WorkerThreads: 1, WorkerMemory: 1 << 30,
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// waitMember describes the cluster until ok holds for the member (nil when
// it is not listed), failing after waitTimeout.
func waitMember(t *testing.T, p *Provider, cluster, name, what string, ok func(m *providers.Member) bool) providers.Member {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ms, err := p.Describe(context.Background(), cluster)
		if err != nil {
			t.Fatalf("Describe(%s): %v", cluster, err)
		}
		var m *providers.Member
		for i := range ms {
			if ms[i].Name == name {
				m = &ms[i]
			}
		}
		if ok(m) {
			if m == nil {
				return providers.Member{}
			}
			return *m
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %s of %s: want %s; members: %+v", waitTimeout, name, cluster, what, ms)
		}
		time.Sleep(pollInterval)
	}
}

// startWithWorker starts spec's scheduler and one worker, worker-0, and
// waits for both: the scheduler as Describe reports it.
func startWithWorker(t *testing.T, p *Provider, spec providers.ClusterSpec) providers.Member {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { _ = p.StopCluster(context.Background(), spec.Name) })
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sched := waitMember(t, p, spec.Name, "scheduler", "running with an address", schedulerRunning)
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatal(err)
	}
	waitMember(t, p, spec.Name, "worker-0", "running", running)
	return sched
}

func running(m *providers.Member) bool { return m != nil && m.State == providers.StateRunning }

func schedulerRunning(m *providers.Member) bool { return running(m) && m.Address != "" }

func newCluster() string { return contract.NewClusterName() }
