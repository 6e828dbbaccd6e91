package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/logtail"
	"github.com/gatewayhq/gateway/providers"
)

// reasonLines is how many of its last log lines an exit reason carries.
const reasonLines = 15

// Describe implements providers.Provider.
func (p *Provider) Describe(ctx context.Context, cluster string) ([]providers.Member, error) {
	list, err := p.containers(ctx, cluster, "")
	if err != nil {
		return nil, err
	}
	out, err := p.members(ctx, list, false)
	if err != nil {
		return nil, err
	}
	p.prune(list, cluster)
	if len(list) > 0 {
		p.keepIsolated(cluster)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ListMembers reports every cluster's members as Describe would, with one
// container listing: the scheduling core's sweep calls it once per poll
// interval instead of describing each running cluster.
func (p *Provider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	list, err := p.containers(ctx, "", "")
	if err != nil {
		return nil, err
	}
	out, err := p.members(ctx, list, false)
	if err != nil {
		return nil, err
	}
	p.prune(list, "")
	clusters := map[string]bool{}
	for _, c := range list {
		if cl := c.Labels[labelCluster]; !clusters[cl] {
			clusters[cl] = true
			p.keepIsolated(cl)
		}
	}
	return out, nil
}

// List implements providers.Provider.
func (p *Provider) List(ctx context.Context) ([]providers.Member, error) {
	list, err := p.containers(ctx, "", "")
	if err != nil {
		return nil, err
	}
	out, err := p.members(ctx, list, true)
	if err != nil {
		return nil, err
	}
	p.prune(list, "")
	nets, err := p.leftoverNetworks(ctx, out)
	if err != nil {
		return nil, err
	}
	return append(out, nets...), nil
}

// containers lists this gateway's containers, of one cluster and one member
// when they are not empty, in every state.
func (p *Provider) containers(ctx context.Context, cluster, member string) ([]container.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", labelGateway+"="+p.cfg.GatewayID))
	if cluster != "" {
		f.Add("label", labelCluster+"="+cluster)
	}
	if member != "" {
		f.Add("label", labelMember+"="+member)
	}
	list, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker provider: list containers: %w", err)
	}
	// The engine filters by label; a container is only ever taken for a
	// member by its exact labels.
	out := list[:0]
	for _, c := range list {
		if c.Labels[labelGateway] != p.cfg.GatewayID || (cluster != "" && c.Labels[labelCluster] != cluster) ||
			(member != "" && c.Labels[labelMember] != member) || c.Labels[labelCluster] == "" || c.Labels[labelMember] == "" {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// prune drops cached facts of containers that are gone: those of cluster
// (every cluster when empty) missing from list.
func (p *Provider) prune(list []container.Summary, cluster string) {
	ids := make(map[string]bool, len(list))
	for _, c := range list {
		ids[c.ID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.seen {
		if !ids[id] && (cluster == "" || s.cluster == cluster) {
			delete(p.seen, id)
		}
	}
}

func (p *Provider) members(ctx context.Context, list []container.Summary, listing bool) ([]providers.Member, error) {
	out := make([]providers.Member, 0, len(list))
	for _, c := range list {
		m, ok, err := p.member(ctx, c, listing)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// member describes one container. A "created" container that nobody is
// starting is the leftover of a crash between creating and starting it:
// Describe leaves it out, so that the core starts the member again (which
// replaces it), and List reports it stopped, so that the reaper removes it.
func (p *Provider) member(ctx context.Context, c container.Summary, listing bool) (providers.Member, bool, error) {
	m := providers.Member{
		Cluster: c.Labels[labelCluster], Name: c.Labels[labelMember], Owner: c.Labels[labelOwner],
		Role: providers.RoleWorker, StartedAt: time.Unix(c.Created, 0),
	}
	if c.Labels[labelRole] == string(providers.RoleScheduler) {
		m.Role = providers.RoleScheduler
	}
	key := memberKey(m.Cluster, m.Name)
	switch c.State {
	case "created":
		if p.isStarting(key) || time.Since(m.StartedAt) < leftoverAge {
			m.State = providers.StatePending
			return m, true, nil
		}
		m.State = providers.StateStopped
		return m, listing, nil
	case "running", "paused", "restarting":
		s, err := p.facts(ctx, c.ID, m.Cluster, false)
		if cerrdefs.IsNotFound(err) {
			return m, false, nil // removed since the listing
		} else if err != nil {
			return m, false, err
		}
		if !s.started.IsZero() {
			m.StartedAt = s.started
		}
		m.State = providers.StateRunning
		if m.Role == providers.RoleScheduler {
			m.State = providers.StatePending
			addr, dash, refused, ok := p.schedulerAddress(ctx, c.ID, s)
			switch {
			case refused != "":
				// Not routed to: the cluster fails with the reason (and
				// stopping it removes the container).
				m.State, m.Reason = providers.StateStopped, refused
			case ok:
				m.State, m.Address, m.DashboardURL = providers.StateRunning, addr, dash
			}
		}
		return m, true, nil
	default: // exited, dead, removing
		m.State = providers.StateStopped
		if p.isStopping(key) {
			return m, true, nil
		}
		s, err := p.facts(ctx, c.ID, m.Cluster, true)
		if cerrdefs.IsNotFound(err) {
			return m, false, nil
		} else if err != nil {
			return m, false, err
		}
		if !s.started.IsZero() {
			m.StartedAt = s.started
		}
		m.Reason = s.reason
		return m, true, nil
	}
}

// facts inspects a container once while it runs (for when it started),
// and once more after it exited (for why): neither changes afterwards.
func (p *Provider) facts(ctx context.Context, id, cluster string, exited bool) (seen, error) {
	p.mu.Lock()
	s, ok := p.seen[id]
	var known seen
	if ok {
		known = *s
	}
	p.mu.Unlock()
	if ok && (known.exited || !exited) {
		return known, nil
	}
	insp, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return seen{}, err
	}
	if !ok {
		known = seen{cluster: cluster}
	}
	known.started = parseTime(insp.State.StartedAt)
	known.hostNet = insp.HostConfig != nil && insp.HostConfig.NetworkMode.IsHost()
	if ns := insp.NetworkSettings; ns != nil {
		if ep := ns.Networks[networkName(p.cfg.GatewayID, cluster)]; ep != nil {
			known.ip = ep.IPAddress
		}
		known.schedPort = publishedPort(ns.Ports, schedulerPort)
		known.dashPort = publishedPort(ns.Ports, dashboardPort)
	}
	if insp.State.Status == "exited" || insp.State.Status == "dead" {
		known.exited = true
		known.reason = p.exitReason(ctx, id, insp.Config.Labels[labelMember], insp.State)
	}
	p.mu.Lock()
	p.seen[id] = &known
	p.mu.Unlock()
	return known, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 2000 { // the engine's zero time is 0001-01-01
		return time.Time{}
	}
	return t
}

// exitReason says why a member exited on its own: its status, and the end
// of its log. The launcher's mismatch table is kept whole even when it
// runs past the last lines.
func (p *Provider) exitReason(ctx context.Context, id, member string, st *container.State) string {
	msg := fmt.Sprintf("%s exited (status %d)", member, st.ExitCode)
	if st.OOMKilled {
		msg = fmt.Sprintf("%s was killed for using more memory than its limit (status %d)", member, st.ExitCode)
	}
	if st.Error != "" {
		msg += ": " + st.Error
	}
	text, _, err := p.containerLog(ctx, id, 200, maxLogBytes)
	if err != nil {
		p.log.Warn("cannot read the log of an exited member", "container", id, "err", err)
	}
	if tail := reasonTail(text); tail != "" {
		msg += "; last lines of its log:\n" + tail
	}
	return msg
}

// reasonTail is the last reasonLines lines of text, reaching back to the
// launcher's mismatch marker when the text has one.
func reasonTail(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	lines := logtail.LastLines(text, 0)
	from := len(lines) - reasonLines
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], images.MismatchMarker) {
			from = min(from, i)
			break
		}
	}
	return strings.Join(lines[max(from, 0):], "\n")
}

// schedulerAddress is where the gateway reaches a running scheduler, once
// its file says that it listens; refused says why what the file says is
// not routed to. The file is written inside the user's container, so it
// decides nothing: with a cluster network the gateway routes to the ports
// the engine published, and the file must name the container's own
// address there and the fixed ports; on the host's network it must name
// Host. What it says is cached, refusals too.
func (p *Provider) schedulerAddress(ctx context.Context, id string, s seen) (addr, dash, refused string, ok bool) {
	if s.refused != "" {
		return "", "", s.refused, false
	}
	if s.addr != "" {
		return s.addr, s.dash, "", true
	}
	b, err := p.readFile(ctx, id, schedulerFile, 1<<20)
	if err != nil {
		return "", "", "", false // not written yet
	}
	f, err := parseSchedulerFile(b)
	if err != nil {
		return "", "", "", false // written but not complete yet
	}
	if s.hostNet {
		addr, dash, err = f.onHost(p.cfg.Host)
	} else {
		addr, dash, err = f.onNetwork(s, routeHost(p.cfg.Host))
	}
	p.mu.Lock()
	if c := p.seen[id]; c != nil {
		if err != nil {
			c.refused = err.Error()
		} else {
			c.addr, c.dash = addr, dash
		}
	}
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("scheduler reported an address the gateway does not route to", "container", id, "err", err)
		return "", "", err.Error(), false
	}
	return addr, dash, "", true
}

// publishedPort is the host port the engine published a container port
// on, "" when none.
func publishedPort(ports nat.PortMap, port int) string {
	for _, b := range ports[nat.Port(strconv.Itoa(port)+"/tcp")] {
		if b.HostPort != "" {
			return b.HostPort
		}
	}
	return ""
}

// routeHost is the address the gateway dials for ports published on host:
// loopback when they are published on every interface.
func routeHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			return "127.0.0.1"
		}
		return "::1"
	}
	return strings.Trim(host, "[]")
}

// readFile reads one file out of a container (a tar stream of one entry),
// at most limit bytes.
func (p *Provider) readFile(ctx context.Context, id, path string, limit int64) ([]byte, error) {
	rc, _, err := p.cli.CopyFromContainer(ctx, id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(tr, limit))
}

// schedFile is what the gateway reads of a Dask scheduler file.
type schedFile struct {
	raw       string // the address as written
	host      string
	port      int
	dashboard int // 0: none
}

// parseSchedulerFile reads the address and dashboard port Dask writes into
// its scheduler file.
func parseSchedulerFile(b []byte) (schedFile, error) {
	var f struct {
		Address  string         `json:"address"`
		Services map[string]int `json:"services"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return schedFile{}, err
	}
	addr := strings.TrimPrefix(f.Address, "tls://")
	if addr == "" || addr == f.Address {
		return schedFile{}, fmt.Errorf("scheduler file has no tls address: %q", f.Address)
	}
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return schedFile{}, fmt.Errorf("scheduler file address %q: %w", f.Address, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return schedFile{}, fmt.Errorf("scheduler file address %q: port out of range", f.Address)
	}
	sf := schedFile{raw: f.Address, host: h, port: n}
	if d := f.Services["dashboard"]; d != 0 {
		if d < 1 || d > 65535 {
			return schedFile{}, fmt.Errorf("scheduler file dashboard port %d out of range", d)
		}
		sf.dashboard = d
	}
	return sf, nil
}

// onNetwork checks a scheduler file against what the engine assigned the
// container on its cluster network (its address there; the fixed ports)
// and answers the published ports on route, the host's address for them.
func (f schedFile) onNetwork(s seen, route string) (addr, dashboard string, err error) {
	if s.ip == "" || s.schedPort == "" || s.dashPort == "" {
		return "", "", fmt.Errorf("the engine reports no address on the cluster network or no published ports for the scheduler (address %q, ports %q, %q)", s.ip, s.schedPort, s.dashPort)
	}
	if f.host != s.ip || f.port != schedulerPort {
		return "", "", fmt.Errorf("the scheduler reported the address %s, not %s where the engine put it on the cluster's network: the gateway routes nothing to it", f.raw, joinHostPort(s.ip, strconv.Itoa(schedulerPort)))
	}
	if f.dashboard != 0 && f.dashboard != dashboardPort {
		return "", "", fmt.Errorf("the scheduler reported its dashboard on port %d, not %d: the gateway routes nothing to it", f.dashboard, dashboardPort)
	}
	addr = net.JoinHostPort(route, s.schedPort)
	if f.dashboard != 0 {
		dashboard = "https://" + net.JoinHostPort(route, s.dashPort)
	}
	return addr, dashboard, nil
}

// onHost checks a scheduler file of a member on the host's network: the
// address must be on host (members bind it), at a port a member can bind
// (they have no capability for privileged ports). With a wildcard host the
// gateway dials loopback at the file's ports, never the file's host.
func (f schedFile) onHost(host string) (addr, dashboard string, err error) {
	if f.port < 1024 || (f.dashboard != 0 && f.dashboard < 1024) {
		return "", "", fmt.Errorf("the scheduler reported the address %s (dashboard port %d), a privileged port no member binds: the gateway routes nothing to it", f.raw, f.dashboard)
	}
	route := routeHost(host)
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		if fh := net.ParseIP(f.host); f.host != route && (fh == nil || !fh.Equal(net.ParseIP(route))) {
			return "", "", fmt.Errorf("the scheduler reported the address %s, which is not on %s where members bind: the gateway routes nothing to it", f.raw, host)
		}
	}
	addr = net.JoinHostPort(route, strconv.Itoa(f.port))
	if f.dashboard != 0 {
		dashboard = "https://" + net.JoinHostPort(route, strconv.Itoa(f.dashboard))
	}
	return addr, dashboard, nil
}
