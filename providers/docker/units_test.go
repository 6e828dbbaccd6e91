package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
)

// Docker's rule for container names.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func TestContainerName(t *testing.T) {
	t.Parallel()
	if got := containerName("gw1", "82c6ead88602331f", "worker-3"); got != "gw-gw1-82c6ead88602331f-worker-3" {
		t.Errorf("plain name = %q", got)
	}
	seen := map[string]string{}
	for _, c := range [][3]string{
		{"gw1", "c", "worker-0"}, {"gw 1", "c", "worker-0"}, {"gw_1", "c", "worker-0"}, {"gw/1", "c", "worker-0"},
		{"gw1", "c", "wörker"}, {"gw1", "c", "w_rker"}, {"gw1", "c:d", "x"}, {strings.Repeat("g", 200), "c", "worker-0"},
		{strings.Repeat("g", 200), "c", "worker-1"},
	} {
		n := containerName(c[0], c[1], c[2])
		if !dockerName.MatchString(n) || len(n) > maxNameLen {
			t.Errorf("containerName(%q) = %q: not a valid Docker name of at most %d characters", c, n, maxNameLen)
		}
		if n != containerName(c[0], c[1], c[2]) {
			t.Errorf("containerName(%q) is not deterministic", c)
		}
		if prev, ok := seen[n]; ok {
			t.Errorf("containerName(%q) = %q, the same as for %s", c, n, prev)
		}
		seen[n] = fmt.Sprint(c)
	}
}

// TestSchedulerFileChecks checks that the address a scheduler writes into
// its file (from inside the user's container) is routed to only where the
// engine put the member: on a cluster network, the ports the engine
// published, the file confirming the container's own address and the
// fixed ports; on the host's network, Host (loopback for a wildcard).
func TestSchedulerFileChecks(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `{"address":`, `{"address":"tcp://127.0.0.1:1"}`, `{}`, `{"address":"tls://127.0.0.1"}`,
		`{"address":"tls://127.0.0.1:0"}`, `{"address":"tls://127.0.0.1:70000"}`, `{"address":"tls://127.0.0.1:1","services":{"dashboard":-1}}`} {
		if _, err := parseSchedulerFile([]byte(bad)); err == nil {
			t.Errorf("parseSchedulerFile(%q) accepted", bad)
		}
	}
	assigned := seen{ip: "172.18.0.2", schedPort: "49153", dashPort: "49154"}
	tests := []struct {
		name, file string
		network    bool
		host       string
		s          seen
		addr, dash string
		refused    string // in the error; "" for accepted
	}{
		{"cluster network", `{"address":"tls://172.18.0.2:8786","services":{"dashboard":8787}}`, true, "127.0.0.1", assigned,
			"127.0.0.1:49153", "https://127.0.0.1:49154", ""},
		{"cluster network, no dashboard", `{"address":"tls://172.18.0.2:8786"}`, true, "127.0.0.1", assigned, "127.0.0.1:49153", "", ""},
		{"cluster network, published on every interface", `{"address":"tls://172.18.0.2:8786","services":{"dashboard":8787}}`, true, "0.0.0.0", assigned,
			"127.0.0.1:49153", "https://127.0.0.1:49154", ""},
		{"cluster network, another host", `{"address":"tls://127.0.0.2:8786","services":{"dashboard":8787}}`, true, "127.0.0.1", assigned, "", "", "127.0.0.2:8786"},
		{"cluster network, another container", `{"address":"tls://172.18.0.3:8786"}`, true, "127.0.0.1", assigned, "", "", "172.18.0.3:8786"},
		{"cluster network, a name", `{"address":"tls://example.com:8786"}`, true, "127.0.0.1", assigned, "", "", "example.com:8786"},
		{"cluster network, another port", `{"address":"tls://172.18.0.2:9999"}`, true, "127.0.0.1", assigned, "", "", "172.18.0.2:9999"},
		{"cluster network, another dashboard port", `{"address":"tls://172.18.0.2:8786","services":{"dashboard":9999}}`, true, "127.0.0.1", assigned, "", "", "dashboard on port 9999"},
		{"cluster network, nothing published", `{"address":"tls://172.18.0.2:8786"}`, true, "127.0.0.1", seen{ip: "172.18.0.2"}, "", "", "no published ports"},
		{"host network", `{"address":"tls://127.0.0.1:41234","services":{"dashboard":41235}}`, false, "127.0.0.1", seen{},
			"127.0.0.1:41234", "https://127.0.0.1:41235", ""},
		{"host network, another host", `{"address":"tls://127.0.0.2:41234"}`, false, "127.0.0.1", seen{}, "", "", "127.0.0.2:41234"},
		{"host network, another machine", `{"address":"tls://10.0.0.1:41234"}`, false, "127.0.0.1", seen{}, "", "", "10.0.0.1:41234"},
		{"host network, privileged port", `{"address":"tls://127.0.0.1:22"}`, false, "127.0.0.1", seen{}, "", "", "privileged"},
		{"host network, privileged dashboard", `{"address":"tls://127.0.0.1:41234","services":{"dashboard":80}}`, false, "127.0.0.1", seen{}, "", "", "privileged"},
		// A wildcard bind address: the gateway dials loopback, whatever
		// host the file names.
		{"host network, wildcard", `{"address":"tls://10.9.9.9:41234","services":{"dashboard":41235}}`, false, "0.0.0.0", seen{},
			"127.0.0.1:41234", "https://127.0.0.1:41235", ""},
		{"host network, IPv6 wildcard", `{"address":"tls://[fd00::9]:41234"}`, false, "::", seen{}, "[::1]:41234", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseSchedulerFile([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var addr, dash string
			if tc.network {
				addr, dash, err = f.onNetwork(tc.s, routeHost(tc.host))
			} else {
				addr, dash, err = f.onHost(tc.host)
			}
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) || addr != "" || dash != "" {
					t.Errorf("= %q, %q, %v; want refused, naming %q", addr, dash, err, tc.refused)
				}
				return
			}
			if err != nil || addr != tc.addr || dash != tc.dash {
				t.Errorf("= %q, %q, %v; want %q, %q", addr, dash, err, tc.addr, tc.dash)
			}
		})
	}
}

func TestReasonTail(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	got := reasonTail(strings.Join(lines, "\n") + "\n")
	if want := strings.Join(lines[40-reasonLines:], "\n"); got != want {
		t.Errorf("reasonTail = %q, want the last %d lines", got, reasonLines)
	}
	// A mismatch table longer than the tail is kept whole.
	table := []string{images.MismatchMarker + ": this worker does not run the client's software", "package  client  image"}
	for i := range 20 {
		table = append(table, fmt.Sprintf("pkg%02d    1.0     2.0", i))
	}
	text := "gateway-env: ...\n" + strings.Join(table, "\n") + "\n"
	got = reasonTail(text)
	if want, _ := images.MismatchIn(text); !strings.Contains(got, want) || !strings.HasPrefix(got, images.MismatchMarker) {
		t.Errorf("reasonTail cut the table:\n%s", got)
	}
	if reasonTail("  \n") != "" {
		t.Error("reasonTail of an empty log is not empty")
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	tb := &tailBuffer{max: 100}
	for i := range 100 {
		fmt.Fprintf(tb, "line %03d\n", i)
	}
	text, cut := tb.text()
	if !cut || len(text) > 100 || !strings.HasPrefix(text, "line ") || !strings.HasSuffix(text, "line 099\n") {
		t.Errorf("tail = %q, cut %v", text, cut)
	}
	small := &tailBuffer{max: 100}
	fmt.Fprint(small, "a\nb\n")
	if text, cut := small.text(); cut || text != "a\nb\n" {
		t.Errorf("small tail = %q, %v", text, cut)
	}
}

func TestTLSArchive(t *testing.T) {
	t.Parallel()
	r, err := tlsArchive([]byte("CERT"), []byte("KEY"))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	want := map[string]struct {
		mode int64
		data string
	}{"run/gateway/": {0o700, ""}, "run/gateway/tls.crt": {0o644, "CERT"}, "run/gateway/tls.key": {0o600, "KEY"}}
	n := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		w, ok := want[hdr.Name]
		if !ok || hdr.Mode != w.mode || string(b) != w.data {
			t.Errorf("entry %s mode %o %q", hdr.Name, hdr.Mode, b)
		}
		n++
	}
	if n != len(want) {
		t.Errorf("%d entries, want %d", n, len(want))
	}
}

func TestContainerConfig(t *testing.T) {
	t.Parallel()
	p := &Provider{cfg: Config{GatewayID: "gw", Python: "/opt/py/bin/python", Network: NetworkHost, StopGrace: 1500 * time.Millisecond}}
	spec := providers.ClusterSpec{Name: "c1", Owner: "ann", EnvExpect: `{"dask":"2024.1.0"}`,
		Scheduler: providers.Machine{VCPUs: 0.25, MemoryGiB: 0.5},
		Worker:    providers.Machine{VCPUs: 4, MemoryGiB: 16, GPUs: 2}}
	cfg, hc := p.containerConfig(spec, "worker-1", providers.RoleWorker, "img:1", []string{"tls://a:1", "--x"})
	if cfg.Image != "img:1" || cfg.Cmd != nil || cfg.StopSignal != "SIGTERM" || *cfg.StopTimeout != 2 {
		t.Errorf("config = %+v", cfg)
	}
	wantEntry := images.LauncherCommand("/opt/py/bin/python", "worker", "tls://a:1", "--x")
	if fmt.Sprint(cfg.Entrypoint) != fmt.Sprint(wantEntry) {
		t.Errorf("entrypoint = %q", head(cfg.Entrypoint, 6))
	}
	if fmt.Sprint(cfg.Env) != fmt.Sprint([]string{"PYTHONUNBUFFERED=1", images.ExpectEnv + `={"dask":"2024.1.0"}`}) {
		t.Errorf("env = %q", cfg.Env)
	}
	if cfg.Labels[labelGateway] != "gw" || cfg.Labels[labelCluster] != "c1" || cfg.Labels[labelMember] != "worker-1" ||
		cfg.Labels[labelRole] != "worker" || cfg.Labels[labelOwner] != "ann" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	r := hc.Resources
	if r.NanoCPUs != 4e9 || r.Memory != 16<<30 || r.MemorySwap != r.Memory || len(r.DeviceRequests) != 1 ||
		r.DeviceRequests[0].Driver != "nvidia" || r.DeviceRequests[0].Count != 2 || fmt.Sprint(r.DeviceRequests[0].Capabilities) != "[[gpu]]" {
		t.Errorf("worker resources = %+v", r)
	}
	if hc.NetworkMode != "host" || hc.Init == nil || !*hc.Init || hc.AutoRemove || hc.RestartPolicy.Name != container.RestartPolicyDisabled {
		t.Errorf("host config = %+v", hc)
	}
	cfg, hc = p.containerConfig(spec, "scheduler", providers.RoleScheduler, "img:1", nil)
	if hc.NanoCPUs != 25e7 || hc.Memory != 1<<29 || len(hc.DeviceRequests) != 0 || cfg.Labels[labelRole] != "scheduler" {
		t.Errorf("scheduler resources = %+v", hc.Resources)
	}
	// The owner's variables (the environ option) come first, so that
	// the gateway's, later, win.
	spec.Env = map[string]string{"Z_VAR": "z", "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1"}
	cfg, _ = p.containerConfig(spec, "worker-1", providers.RoleWorker, "img:1", nil)
	if fmt.Sprint(cfg.Env) != fmt.Sprint([]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.1", "Z_VAR=z", "PYTHONUNBUFFERED=1", images.ExpectEnv + `={"dask":"2024.1.0"}`}) {
		t.Errorf("env with the owner's variables = %q", cfg.Env)
	}
	spec.Env = nil
	spec.EnvExpect = ""
	spec.Worker = providers.Machine{}
	cfg, hc = p.containerConfig(spec, "worker-1", providers.RoleWorker, "img:1", nil)
	if len(cfg.Env) != 1 || hc.NanoCPUs != 0 || hc.Memory != 0 || hc.MemorySwap != 0 || hc.DeviceRequests != nil {
		t.Errorf("unsized worker: env %q, resources %+v", cfg.Env, hc.Resources)
	}
}

// TestClusterNetworkConfig checks the containers of a cluster network:
// the scheduler's two ports published on Host alone (the engine picks the
// host ports), its alias and host name, workers with nothing published.
func TestClusterNetworkConfig(t *testing.T) {
	t.Parallel()
	p := &Provider{cfg: Config{GatewayID: "gw", Python: "python3", Network: NetworkCluster, Host: "127.0.0.1", StopGrace: time.Second}}
	spec := providers.ClusterSpec{Name: "c1", Owner: "ann"}
	net := networkName("gw", "c1")
	cfg, hc := p.containerConfig(spec, "scheduler", providers.RoleScheduler, "img:1", nil)
	if string(hc.NetworkMode) != net || cfg.Hostname != "scheduler" || len(cfg.ExposedPorts) != 2 || len(hc.PortBindings) != 2 {
		t.Errorf("scheduler: network %q, host name %q, exposed %v, bindings %v", hc.NetworkMode, cfg.Hostname, cfg.ExposedPorts, hc.PortBindings)
	}
	for _, port := range []string{"8786/tcp", "8787/tcp"} {
		if b := hc.PortBindings[nat.Port(port)]; len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "" {
			t.Errorf("scheduler port %s bound %v; want 127.0.0.1 and a port the engine picks", port, b)
		}
	}
	if nc := p.networkingConfig(spec, providers.RoleScheduler); nc == nil || fmt.Sprint(nc.EndpointsConfig[net].Aliases) != "[scheduler]" {
		t.Errorf("scheduler networking config %+v; want the alias scheduler on %s", nc, net)
	}
	cfg, hc = p.containerConfig(spec, "worker-0", providers.RoleWorker, "img:1", nil)
	if string(hc.NetworkMode) != net || cfg.Hostname != "worker" || len(cfg.ExposedPorts) != 0 || len(hc.PortBindings) != 0 || p.networkingConfig(spec, providers.RoleWorker) != nil {
		t.Errorf("worker: network %q, host name %q, exposed %v, bindings %v", hc.NetworkMode, cfg.Hostname, cfg.ExposedPorts, hc.PortBindings)
	}
	// Names: valid for Docker, distinct per cluster, bridges within IFNAMSIZ.
	if !dockerName.MatchString(net) || net != "gateway-gw-c1" || networkName("gw", "c2") == net || networkName("g w", "c1") == networkName("g_w", "c1") {
		t.Errorf("network names %q, %q", net, networkName("g w", "c1"))
	}
	if b := bridgeName("gw", "c1"); len(b) > 15 || b == bridgeName("gw", "c2") {
		t.Errorf("bridge name %q", b)
	}
}

// TestCreatedLeftovers checks how a container left "created" is reported:
// pending while young or being started here, then left out of Describe
// (so that the core starts the member again) and listed as stopped (so that
// the reaper removes it).
func TestCreatedLeftovers(t *testing.T) {
	t.Parallel()
	p := &Provider{cfg: Config{GatewayID: "gw"}, log: slog.New(slog.DiscardHandler),
		stopping: map[string]int{}, starting: map[string]bool{}, seen: map[string]*seen{}}
	c := container.Summary{ID: "x", State: "created", Created: time.Now().Add(-time.Hour).Unix(),
		Labels: map[string]string{labelGateway: "gw", labelCluster: "c", labelMember: "scheduler", labelRole: "scheduler"}}
	ctx := context.Background()
	if _, ok, err := p.member(ctx, c, false); ok || err != nil {
		t.Errorf("old leftover described: %v, %v", ok, err)
	}
	if m, ok, _ := p.member(ctx, c, true); !ok || m.State != providers.StateStopped || m.Reason != "" || m.Role != providers.RoleScheduler {
		t.Errorf("old leftover listed as %+v, %v", m, ok)
	}
	p.setStarting("c/scheduler", true)
	if m, ok, _ := p.member(ctx, c, false); !ok || m.State != providers.StatePending {
		t.Errorf("member being started described as %+v, %v", m, ok)
	}
	p.setStarting("c/scheduler", false)
	c.Created = time.Now().Unix()
	if m, ok, _ := p.member(ctx, c, false); !ok || m.State != providers.StatePending {
		t.Errorf("young created container described as %+v, %v", m, ok)
	}
}

func TestStopSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{0: 1, 300 * time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 10 * time.Second: 10} {
		if got := stopSeconds(d); got != want {
			t.Errorf("stopSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// Turning forwarding off works only on the engine's own host: a remote
// engine without egress is refused at start with what to set instead.
func TestRemoteEngineNeedsEgress(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		local    bool
	}{
		{"", true},
		{"unix:///var/run/docker.sock", true},
		{"tcp://127.0.0.1:2375", true},
		{"tcp://localhost:2376", true},
		{"tcp://[::1]:2376", true},
		{"tcp://10.0.0.5:2376", false},
		{"tcp://docker.example:2376", false},
		{"ssh://me@builder", false},
		{"://bad", false},
	} {
		if got := localEngine(tc.endpoint); got != tc.local {
			t.Errorf("localEngine(%q) = %v, want %v", tc.endpoint, got, tc.local)
		}
	}
	_, err := New(context.Background(), Config{GatewayID: "gw", Endpoint: "tcp://10.0.0.5:2376"})
	if err == nil || !strings.Contains(err.Error(), "providers.docker.egress: true") {
		t.Fatalf("remote engine without egress: %v", err)
	}
}
