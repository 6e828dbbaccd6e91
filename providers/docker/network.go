package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gatewayhq/gateway/providers"
)

// With NetworkCluster every cluster gets a bridge network of its own:
// its members reach each other there (workers find their scheduler by the
// network alias schedulerAlias), and the gateway reaches the scheduler
// through ports the engine publishes on Host. Nothing of another cluster
// is on that network.
//
// A bridge is not enough on its own: the engine's host routes between its
// bridges, and only the engine's iptables rules (which dockerd adds unless
// started with --iptables=false) drop what one bridge sends to another.
// Without Egress the provider therefore turns IPv4 forwarding off on each
// cluster's bridge: what a member sends beyond its own network (to another
// cluster, or anywhere else) is then dropped by the host's kernel, with or
// without iptables. The host itself still reaches the members (which is
// not forwarding), and the published ports listen on Host only.

// Ports members listen on inside their containers with NetworkCluster:
// fixed, since each container has a network namespace of its own, so that
// the scheduler's file can only confirm them.
const (
	schedulerPort = 8786
	dashboardPort = 8787
	// schedulerAlias is the scheduler's name on its cluster network (and
	// its host name), workerHostname the workers' host name: in each
	// container the engine maps its own host name to its address on the
	// network, which Dask binds and advertises.
	schedulerAlias = "scheduler"
	workerHostname = "worker"
)

// labelNetwork marks a cluster network among the gateway's resources.
const labelNetwork = "io.gateway.network"

// bridgeOption names the bridge's interface on the engine's host.
const bridgeOption = "com.docker.network.bridge.name"

// wOK is access(2)'s W_OK.
const wOK = 2

// procNet is where the host's IPv4 interface settings are.
const procNet = "/proc/sys/net/ipv4/conf"

// networkName is the deterministic name of a cluster's network,
// "gateway-<gateway>-<cluster>", made safe like container names.
func networkName(gatewayID, cluster string) string {
	return safeName("gateway-"+gatewayID+"-"+cluster, gatewayID+"\x00"+cluster+"\x00network")
}

// bridgeName is the interface of a cluster network's bridge on the host:
// at most 15 characters (IFNAMSIZ), so a hash rather than the name.
func bridgeName(gatewayID, cluster string) string {
	sum := sha256.Sum256([]byte(gatewayID + "\x00" + cluster))
	return "gw-" + hex.EncodeToString(sum[:6])
}

// engineEndpoint is the engine address the client will use: the
// configured one, else DOCKER_HOST, else the local socket ("").
func engineEndpoint(configured string) string {
	if configured != "" {
		return configured
	}
	return os.Getenv("DOCKER_HOST")
}

// localEngine reports whether the engine at endpoint runs on this host (a
// socket, or TCP on a loopback address), where its bridges can be reached.
func localEngine(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix", "npipe":
		return true
	case "tcp", "http", "https":
		host := u.Hostname()
		if host == "localhost" {
			return true
		}
		ip, err := netip.ParseAddr(host)
		return err == nil && ip.IsLoopback()
	}
	return false // ssh:// and anything else reach another machine
}

// canIsolate checks, at start-up, that this process may turn forwarding
// off on bridges, rather than failing the first cluster.
func canIsolate() error {
	path := filepath.Join(procNet, "default", "forwarding")
	if err := syscall.Access(path, wOK); err != nil {
		return fmt.Errorf("docker provider: with providers.docker.network %q and providers.docker.egress false (the defaults), "+
			"the gateway turns IPv4 forwarding off on each cluster's bridge, which needs root (CAP_NET_ADMIN) on the engine's host, "+
			"and %s is not writable (%w); run the gateway so, or set providers.docker.egress: true on an engine whose iptables rules "+
			"keep networks apart (dockerd's default, not --iptables=false), or providers.docker.network: host (every cluster shares the host's network)",
			NetworkCluster, path, err)
	}
	return nil
}

// ensureNetwork creates the cluster's network, or finds the one an earlier
// call made, and isolates its bridge.
func (p *Provider) ensureNetwork(ctx context.Context, spec providers.ClusterSpec) error {
	name := networkName(p.cfg.GatewayID, spec.Name)
	insp, err := p.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if cerrdefs.IsNotFound(err) {
		_, err = p.cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			Labels: map[string]string{
				labelGateway: p.cfg.GatewayID, labelCluster: spec.Name, labelOwner: spec.Owner, labelNetwork: "cluster",
			},
			Options: map[string]string{bridgeOption: bridgeName(p.cfg.GatewayID, spec.Name)},
		})
		if err != nil && !cerrdefs.IsConflict(err) { // a conflict: another process made it
			if strings.Contains(err.Error(), "address pool") {
				return fmt.Errorf("docker provider: create network %s: the engine has no address range left for another network "+
					"(give dockerd smaller default-address-pools in daemon.json, e.g. base 10.200.0.0/16 size 24, or stop clusters): %w", name, err)
			}
			return fmt.Errorf("docker provider: create network %s: %w", name, err)
		}
		insp, err = p.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	}
	if err != nil {
		return fmt.Errorf("docker provider: inspect network %s: %w", name, err)
	}
	if insp.Labels[labelGateway] != p.cfg.GatewayID || insp.Labels[labelCluster] != spec.Name {
		return fmt.Errorf("docker provider: the network name %s is taken by a network this gateway did not make for %s", name, spec.Name)
	}
	if p.cfg.Egress {
		return nil
	}
	return isolateBridge(insp.Options[bridgeOption], name)
}

// isolateBridge turns IPv4 forwarding off for what arrives on a cluster
// network's bridge, and checks that it is off.
func isolateBridge(bridge, netName string) error {
	if bridge == "" {
		return fmt.Errorf("docker provider: network %s names no bridge interface; remove it (docker network rm %s) so that the gateway makes it again", netName, netName)
	}
	path := filepath.Join(procNet, bridge, "forwarding")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("docker provider: the bridge %s of network %s is not on this host (is the engine remote?): "+
			"providers.docker.egress false needs the engine on the gateway's host; set providers.docker.egress: true on an engine whose iptables rules keep networks apart", bridge, netName)
	}
	if err != nil {
		return fmt.Errorf("docker provider: read %s: %w", path, err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return nil
	}
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		return fmt.Errorf("docker provider: turn forwarding off on the bridge %s of network %s (needs root on the engine's host, or providers.docker.egress: true): %w", bridge, netName, err)
	}
	if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != "0" {
		return fmt.Errorf("docker provider: forwarding on the bridge %s of network %s stays on (%q, %v)", bridge, netName, b, err)
	}
	return nil
}

// keepIsolated turns forwarding off again on a cluster's bridge when
// something turned it on: writing 1 to net.ipv4.ip_forward (after a 0),
// as an engine or a network manager may at start, turns it on for every
// interface. Describe calls it at each poll; it reads one file.
func (p *Provider) keepIsolated(cluster string) {
	if p.cfg.Egress {
		return
	}
	bridge := bridgeName(p.cfg.GatewayID, cluster)
	path := filepath.Join(procNet, bridge, "forwarding")
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) == "0" {
		return // no such bridge here (host networking), or isolated
	}
	err = isolateBridge(bridge, networkName(p.cfg.GatewayID, cluster))
	p.log.Warn("forwarding was on again on a cluster's bridge (was net.ipv4.ip_forward set?); turned it off", "cluster", cluster, "bridge", bridge, "err", err)
}

// networks lists this gateway's cluster networks, of one cluster when not
// empty.
func (p *Provider) networks(ctx context.Context, cluster string) ([]network.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", labelGateway+"="+p.cfg.GatewayID), filters.Arg("label", labelNetwork))
	if cluster != "" {
		f.Add("label", labelCluster+"="+cluster)
	}
	list, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker provider: list networks: %w", err)
	}
	out := list[:0]
	for _, n := range list {
		if n.Labels[labelGateway] == p.cfg.GatewayID && n.Labels[labelCluster] != "" && (cluster == "" || n.Labels[labelCluster] == cluster) {
			out = append(out, n)
		}
	}
	return out, nil
}

// removeNetworks removes the cluster's networks (once its containers are
// gone).
func (p *Provider) removeNetworks(ctx context.Context, cluster string) error {
	list, err := p.networks(ctx, cluster)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range list {
		if err := p.cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker provider: remove network %s of %s: %w", n.Name, cluster, err))
			continue
		}
		p.log.Info("removed cluster network", "cluster", cluster, "network", n.Name)
	}
	return errors.Join(errs...)
}

// leftoverNetworks are the members List reports for cluster networks that
// no container of the gateway uses any more (a stop that removed the
// containers and not the network, a crash between creating the network
// and the scheduler): stopped, so that the reaper stops their clusters,
// which removes them. Young ones are left alone: a scheduler may be about
// to start on them.
func (p *Provider) leftoverNetworks(ctx context.Context, members []providers.Member) ([]providers.Member, error) {
	list, err := p.networks(ctx, "")
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, m := range members {
		used[m.Cluster] = true
	}
	var out []providers.Member
	for _, n := range list {
		cluster := n.Labels[labelCluster]
		if used[cluster] || time.Since(n.Created) < p.netLeftoverAge {
			continue
		}
		used[cluster] = true
		out = append(out, providers.Member{
			Cluster: cluster, Name: "network", Owner: n.Labels[labelOwner],
			State: providers.StateStopped, StartedAt: n.Created,
		})
	}
	return out, nil
}
