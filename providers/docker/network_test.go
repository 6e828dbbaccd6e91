package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/gatewayhq/gateway/internal/pki"
	"github.com/gatewayhq/gateway/providers"
)

// probeScript tries a TCP connection to each host:port argument, all at
// once, and prints "<target> OPEN" or "<target> FAIL <why>" for each.
const probeScript = `
import socket, sys, threading
out = {}
def probe(t):
    h, p = t.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((h, int(p)))
        out[t] = "OPEN"
    except Exception as e:
        out[t] = "FAIL " + repr(e)
    finally:
        s.close()
ts = [threading.Thread(target=probe, args=(t,)) for t in sys.argv[1:]]
for t in ts: t.start()
for t in ts: t.join()
for t in sys.argv[1:]: print(t, out[t])
`

// TestClusterNetworksIsolated runs two users' clusters, each on a network
// of its own, and tries from inside cluster B's worker every way to cluster
// A's scheduler and dashboard: A's container address on its network, the
// ports the engine published for the gateway (on the worker's loopback,
// and on the host's addresses on both networks). All fail, while B's
// worker reaches B's scheduler, and this host (the gateway's side) reaches
// both clusters and computes on them with Dask.
func TestClusterNetworksIsolated(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	p := e.provider(e.config())
	ctx := context.Background()
	type cl struct {
		name  string
		spec  providers.ClusterSpec
		sched providers.Member
		net   network.Inspect
		ip    string // the scheduler's address on the cluster network
	}
	a, b := &cl{name: newCluster()}, &cl{name: newCluster()}
	a.spec, b.spec = e.spec(a.name, "ann"), e.spec(b.name, "bob")
	for _, c := range []*cl{a, b} {
		t.Cleanup(func() { _ = p.StopCluster(context.Background(), c.name) })
		if err := p.StartScheduler(ctx, c.spec); err != nil {
			t.Fatalf("StartScheduler(%s): %v", c.name, err)
		}
	}
	for _, c := range []*cl{a, b} {
		c.sched = waitMember(t, p, c.name, "scheduler", "running with an address", schedulerRunning)
		if err := p.StartWorker(ctx, c.spec, "worker-0", c.sched.Address); err != nil {
			t.Fatalf("StartWorker(%s): %v", c.name, err)
		}
	}
	for _, c := range []*cl{a, b} {
		waitMember(t, p, c.name, "worker-0", "running", running)
		name := networkName(e.gatewayID, c.name)
		n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
		if err != nil {
			t.Fatalf("the network of %s: %v", c.name, err)
		}
		c.net = n
		if n.Driver != "bridge" || n.Labels[labelGateway] != e.gatewayID || n.Labels[labelCluster] != c.name || n.Labels[labelOwner] != c.spec.Owner {
			t.Errorf("network %s: driver %s, labels %v; want a bridge with the ownership labels", name, n.Driver, n.Labels)
		}
		if members := len(n.Containers); members != 2 {
			t.Errorf("network %s has %d containers, want the cluster's scheduler and worker", name, members)
		}
		if b, err := os.ReadFile(filepath.Join(procNet, n.Options[bridgeOption], "forwarding")); err != nil || strings.TrimSpace(string(b)) != "0" {
			t.Errorf("forwarding on the bridge %q of %s = %q, %v; want 0", n.Options[bridgeOption], name, b, err)
		}
		c.ip = e.inspect(c.name, "scheduler").NetworkSettings.Networks[name].IPAddress
		if c.ip == "" || !strings.HasPrefix(c.sched.Address, "127.0.0.1:") || !strings.HasPrefix(c.sched.DashboardURL, "https://127.0.0.1:") {
			t.Fatalf("%s: scheduler at %q on its network, reported %q and %q; want an address there and published ports on loopback", c.name, c.ip, c.sched.Address, c.sched.DashboardURL)
		}
	}
	if a.net.ID == b.net.ID {
		t.Fatal("both clusters are on one network")
	}
	gatewayIP := func(n network.Inspect) string {
		for _, c := range n.IPAM.Config {
			if c.Gateway != "" {
				return c.Gateway
			}
		}
		t.Fatalf("network %s has no gateway address", n.Name)
		return ""
	}
	port := func(addr string) string {
		if u, err := url.Parse(addr); err == nil && u.Host != "" {
			addr = u.Host
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	aSched, aDash := port(a.sched.Address), port(a.sched.DashboardURL)
	blocked := []string{
		net.JoinHostPort(a.ip, "8786"), net.JoinHostPort(a.ip, "8787"), // A's container on A's network
		"127.0.0.1:" + aSched, "127.0.0.1:" + aDash, // the published ports, from the worker's own loopback
		net.JoinHostPort(gatewayIP(b.net), aSched), net.JoinHostPort(gatewayIP(b.net), aDash), // the host, on B's network
		net.JoinHostPort(gatewayIP(a.net), aSched), net.JoinHostPort(gatewayIP(a.net), aDash), // the host, on A's network
	}
	open := []string{"scheduler:8786", "scheduler:8787", net.JoinHostPort(b.ip, "8786")}
	results := probe(t, e, containerName(e.gatewayID, b.name, "worker-0"), append(blocked, open...))
	t.Logf("probes from B's worker: %v", results)
	for _, target := range blocked {
		if r := results[target]; !strings.HasPrefix(r, "FAIL") {
			t.Errorf("cluster B's worker connecting to %s (cluster A): %s; want it to fail", target, r)
		}
	}
	for _, target := range open {
		if r := results[target]; r != "OPEN" {
			t.Errorf("cluster B's worker connecting to %s (its own scheduler): %s; want it open", target, r)
		}
	}

	// The gateway's side reaches both clusters: the scheduler's TLS port
	// and the dashboard through the published ports, and Dask computes.
	// The dashboard answers over TLS with its cluster's certificate, as
	// the gateway verifies it; another cluster's certificate is refused.
	for _, c := range []*cl{a, b} {
		if code, body, err := dashboardGet(c.sched.DashboardURL+c.spec.DashboardPrefix+"/health", c.spec.TLSCert, c.spec.TLSKey); err != nil || code != http.StatusOK || body != "ok" {
			t.Errorf("dashboard of %s at %s: %d %q, %v; want 200 ok", c.name, c.sched.DashboardURL, code, body, err)
		}
		hostClient(t, c.spec, c.sched.Address, 1)
	}
	if _, _, err := dashboardGet(a.sched.DashboardURL+a.spec.DashboardPrefix+"/health", b.spec.TLSCert, b.spec.TLSKey); err == nil {
		t.Errorf("cluster A's dashboard verified with cluster B's certificate")
	}

	// Forwarding turned on again behind the provider's back (writing 1
	// to net.ipv4.ip_forward after a 0 does that to every interface) is
	// turned off at the next Describe.
	fwd := filepath.Join(procNet, b.net.Options[bridgeOption], "forwarding")
	if err := os.WriteFile(fwd, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	describe(t, p, b.name)
	if v, err := os.ReadFile(fwd); err != nil || strings.TrimSpace(string(v)) != "0" {
		t.Errorf("forwarding on %s after Describe = %q, %v; want 0", fwd, v, err)
	}

	// Stopping a cluster removes its network; the other one keeps its own.
	if err := p.StopCluster(ctx, a.name); err != nil {
		t.Fatal(err)
	}
	if left := e.networks(ctx, a.name); len(left) != 0 {
		t.Errorf("networks of %s after StopCluster: %v", a.name, left)
	}
	if left := e.networks(ctx, b.name); len(left) != 1 {
		t.Errorf("networks of %s after stopping %s: %v; want its own", b.name, a.name, left)
	}
}

// dashboardGet fetches url as the gateway does: over TLS, verifying the
// member against the cluster certificate cert and presenting it with key
// (pki.MemberTLS).
func dashboardGet(url string, cert, key []byte) (int, string, error) {
	tc, err := pki.MemberTLS(cert, key)
	if err != nil {
		return 0, "", err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// probe runs probeScript in a container and returns each target's result.
func probe(t *testing.T, e *engine, ctr string, targets []string) map[string]string {
	t.Helper()
	out, code := e.exec(context.Background(), ctr, append([]string{"python3", "-c", probeScript}, targets...)...)
	if code != 0 {
		t.Fatalf("probe in %s: exit %d:\n%s", ctr, code, out)
	}
	results := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		target, r, _ := strings.Cut(line, " ")
		results[target] = r
	}
	return results
}

// TestNetworkLeftovers checks that a cluster network without containers
// (a crash between making it and starting the scheduler) is listed, as a
// stopped member, once it is older than a start takes, and that stopping
// its cluster removes it; and that the network name of another owner is
// not taken over.
func TestNetworkLeftovers(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	p := e.provider(e.config())
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	if err := p.ensureNetwork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := p.ensureNetwork(ctx, spec); err != nil {
		t.Fatalf("ensureNetwork again: %v", err)
	}
	if n := e.networks(ctx, cluster); len(n) != 1 {
		t.Fatalf("networks after two ensureNetwork calls: %v; want one", n)
	}
	ms, err := p.List(ctx)
	if err != nil || len(ms) != 0 {
		t.Errorf("List with a young empty network = %+v, %v; want nothing (a start may be under way)", ms, err)
	}
	p.netLeftoverAge = 0
	ms, err = p.List(ctx)
	if err != nil || len(ms) != 1 || ms[0].Cluster != cluster || ms[0].State != providers.StateStopped || ms[0].Owner != "ann" {
		t.Fatalf("List with a leftover network = %+v, %v; want it, stopped", ms, err)
	}
	if err := p.StopCluster(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if n := e.networks(ctx, cluster); len(n) != 0 {
		t.Errorf("networks after StopCluster: %v", n)
	}
	if ms, err := p.List(ctx); err != nil || len(ms) != 0 {
		t.Errorf("List after StopCluster = %+v, %v", ms, err)
	}

	// A network of that name that this gateway did not make is refused.
	other := newCluster()
	name := networkName(e.gatewayID, other)
	if _, err := e.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{labelGateway: e.gatewayID}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cli.NetworkRemove(context.Background(), name) })
	if err := p.StartScheduler(ctx, e.spec(other, "ann")); err == nil || !strings.Contains(err.Error(), "did not make") {
		t.Errorf("StartScheduler on a network name taken by another: %v", err)
	}
	if n := len(e.containers(ctx, other)); n != 0 {
		t.Errorf("the refused start left %d containers", n)
	}

	// Close without leaving removes even a young network of the gateway
	// (and leaves the one it did not make).
	young := newCluster()
	if err := p.ensureNetwork(ctx, e.spec(young, "ann")); err != nil {
		t.Fatal(err)
	}
	p2, err := New(ctx, e.config())
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(ctx, false); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := e.networks(ctx, young); len(n) != 0 {
		t.Errorf("networks of %s after Close(leave=false): %v", young, n)
	}
	if _, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{}); err != nil {
		t.Errorf("Close removed a network it did not make: %v", err)
	}
}

// fakeScheduler stands in for the launcher and Dask (as the image's
// "python"): it writes the scheduler file that its name asks for, the way
// code in a user's image could, and sleeps.
const fakeScheduler = `#!/bin/sh
ip=$(python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')
case "$(basename "$0")" in
honest-network) addr="$ip:8786" dash=8787 ;;
honest-host) addr="127.0.0.1:41234" dash=41235 ;;
otherhost) addr="127.0.0.2:8786" dash=8787 ;;
otherport) addr="$ip:9000" dash=8787 ;;
otherdash) addr="$ip:8786" dash=9000 ;;
esac
printf '{"address": "tls://%s", "services": {"dashboard": %s}}' "$addr" "$dash" > /run/gateway/scheduler.json.tmp
mv /run/gateway/scheduler.json.tmp /run/gateway/scheduler.json
exec sleep 600
`

// TestSchedulerFileNamingAnotherHost is the regression test of a member
// choosing where the gateway routes (finding 9): a scheduler whose file
// names another host, or other ports than the ones the provider gave it,
// gets no address and is reported stopped with the reason, so that its
// cluster fails; an honest one gets the ports the engine published.
func TestSchedulerFileNamingAnotherHost(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	ref := fakeSchedulerImage(t, e)
	tests := []struct {
		fake    string
		network string
		refused string // in the reason; "" when it must run
	}{
		{"honest-network", NetworkCluster, ""},
		{"otherhost", NetworkCluster, "127.0.0.2:8786"},
		{"otherport", NetworkCluster, ":9000"},
		{"otherdash", NetworkCluster, "dashboard on port 9000"},
		{"honest-host", NetworkHost, ""},
		{"otherhost", NetworkHost, "127.0.0.2:8786"},
	}
	for _, tc := range tests {
		t.Run(tc.network+"/"+tc.fake, func(t *testing.T) {
			t.Parallel()
			cfg := e.config()
			cfg.Network, cfg.Image, cfg.Python = tc.network, ref, "/usr/local/bin/"+tc.fake
			cfg.Logger = testLogger(t)
			p := e.provider(cfg)
			cluster := newCluster()
			t.Cleanup(func() { _ = p.StopCluster(context.Background(), cluster) })
			if err := p.StartScheduler(ctx, e.spec(cluster, "ann")); err != nil {
				t.Fatal(err)
			}
			m := waitMember(t, p, cluster, "scheduler", "an address or a refusal", func(m *providers.Member) bool {
				return m != nil && (m.State == providers.StateStopped || schedulerRunning(m))
			})
			if tc.refused == "" {
				want := "127.0.0.1:41234"
				if tc.network == NetworkCluster {
					want = "127.0.0.1:" + publishedPort(e.inspect(cluster, "scheduler").NetworkSettings.Ports, schedulerPort)
				}
				if m.State != providers.StateRunning || m.Address != want {
					t.Errorf("honest scheduler = %+v; want running at %s", m, want)
				}
				return
			}
			if m.State != providers.StateStopped || m.Address != "" || m.DashboardURL != "" ||
				!strings.Contains(m.Reason, tc.refused) || !strings.Contains(m.Reason, "routes nothing") {
				t.Errorf("scheduler naming %s = %+v; want stopped, no address, the reason naming it", tc.refused, m)
			}
			// It stays refused, and List (the reaper) says so too.
			if again := find(describe(t, p, cluster), "scheduler"); again == nil || again.State != providers.StateStopped || again.Address != "" {
				t.Errorf("described again: %+v", again)
			}
		})
	}
}

// fakeSchedulerImage commits an image of the test image with fakeScheduler
// under each name it knows.
func fakeSchedulerImage(t *testing.T, e *engine) string {
	t.Helper()
	ctx := context.Background()
	base, err := e.cli.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.cli.ContainerRemove(context.Background(), base.ID, container.RemoveOptions{Force: true}) }()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Name: "usr/local/bin/fake-scheduler", Mode: 0o755, Size: int64(len(fakeScheduler)), ModTime: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(fakeScheduler)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"honest-network", "honest-host", "otherhost", "otherport", "otherdash"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/local/bin/" + name, Linkname: "fake-scheduler", Mode: 0o777, ModTime: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.cli.CopyToContainer(ctx, base.ID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("gateway-test/fake-scheduler:%s", e.gatewayID)
	if _, err := e.cli.ContainerCommit(ctx, base.ID, container.CommitOptions{Reference: ref}); err != nil {
		t.Fatalf("commit the fake scheduler's image: %v", err)
	}
	t.Cleanup(func() {
		_, _ = e.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// TestHostNetwork runs a cluster on the host's network (providers.docker.
// network: host): members bind Host with ports chosen at start, no network
// is made, and Dask computes at the reported address.
func TestHostNetwork(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cfg := e.config()
	cfg.Network = NetworkHost
	p := e.provider(cfg)
	ctx := context.Background()
	cluster := newCluster()
	spec := e.spec(cluster, "ann")
	sched := startWithWorker(t, p, spec)
	if !strings.HasPrefix(sched.Address, "127.0.0.1:") || !strings.HasPrefix(sched.DashboardURL, "https://127.0.0.1:") {
		t.Errorf("scheduler at %q, dashboard %q; want 127.0.0.1", sched.Address, sched.DashboardURL)
	}
	hostClient(t, spec, sched.Address, 1)
	if code, body, err := dashboardGet(sched.DashboardURL+spec.DashboardPrefix+"/health", spec.TLSCert, spec.TLSKey); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("dashboard at %s: %d %q, %v; want 200 ok over TLS with the cluster's certificate", sched.DashboardURL, code, body, err)
	}
	for _, m := range []string{"scheduler", "worker-0"} {
		insp := e.inspect(cluster, m)
		if insp.HostConfig.NetworkMode != NetworkHost || len(insp.HostConfig.PortBindings) != 0 {
			t.Errorf("%s: network %q, ports %v; want the host's, none published", m, insp.HostConfig.NetworkMode, insp.HostConfig.PortBindings)
		}
	}
	w := strings.Join(e.inspect(cluster, "worker-0").Config.Entrypoint, " ")
	if !strings.Contains(w, "tls://"+sched.Address+" --host 127.0.0.1 ") {
		t.Errorf("worker arguments %q; want the reported address and --host 127.0.0.1", w)
	}
	if n := e.networks(ctx, ""); len(n) != 0 {
		t.Errorf("networks with host networking: %v", n)
	}

	// A gateway restarted with networks per cluster (the default) keeps
	// this cluster on the host's network: it adopts the scheduler at its
	// address, and a new worker joins it there.
	p2 := e.provider(e.config())
	if s2 := waitMember(t, p2, cluster, "scheduler", "running with an address", schedulerRunning); s2.Address != sched.Address || s2.DashboardURL != sched.DashboardURL {
		t.Errorf("re-adopted scheduler = %+v, was %+v", s2, sched)
	}
	if err := p2.StartWorker(ctx, spec, "worker-1", sched.Address); err != nil {
		t.Fatal(err)
	}
	waitMember(t, p2, cluster, "worker-1", "running", running)
	if insp := e.inspect(cluster, "worker-1"); insp.HostConfig.NetworkMode != NetworkHost {
		t.Errorf("worker started after the change: network %q, want the cluster's (host)", insp.HostConfig.NetworkMode)
	}
	hostClient(t, spec, sched.Address, 2)
	if err := p2.StopCluster(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if n := e.networks(ctx, ""); len(n) != 0 {
		t.Errorf("networks after the cluster stopped: %v", n)
	}
}
