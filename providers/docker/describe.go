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
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
	return out, nil
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
			if addr, dash, ok := p.schedulerAddress(ctx, c.ID, s); ok {
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

// schedulerAddress reads the scheduler's file from inside its container
// (host networking and port 0: only the scheduler knows its ports) and
// caches what it says.
func (p *Provider) schedulerAddress(ctx context.Context, id string, s seen) (addr, dash string, ok bool) {
	if s.addr != "" {
		return s.addr, s.dash, true
	}
	b, err := p.readFile(ctx, id, schedulerFile, 1<<20)
	if err != nil {
		return "", "", false // not written yet
	}
	addr, dash, err = parseSchedulerFile(b, p.cfg.Host)
	if err != nil {
		return "", "", false // written but not complete yet
	}
	p.mu.Lock()
	if c := p.seen[id]; c != nil {
		c.addr, c.dash = addr, dash
	}
	p.mu.Unlock()
	return addr, dash, true
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

// parseSchedulerFile reads the address and dashboard port Dask writes into
// its scheduler file. The dashboard is on the scheduler's host, which is
// host unless that is a wildcard.
func parseSchedulerFile(b []byte, host string) (addr, dashboard string, err error) {
	var f struct {
		Address  string         `json:"address"`
		Services map[string]int `json:"services"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", "", err
	}
	addr = strings.TrimPrefix(f.Address, "tls://")
	if addr == "" || addr == f.Address {
		return "", "", fmt.Errorf("scheduler file has no tls address: %q", f.Address)
	}
	// The file is written inside the user's container: the gateway routes
	// to what it says only on the members' own host, at ports a member can
	// bind (members have no capability to bind privileged ports).
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("scheduler file address %q: %w", f.Address, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1024 || n > 65535 {
		return "", "", fmt.Errorf("scheduler file address %q: port out of range", f.Address)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsUnspecified()) && h != strings.Trim(host, "[]") {
		return "", "", fmt.Errorf("scheduler file address %q is not on %s", f.Address, host)
	}
	if port := f.Services["dashboard"]; port > 0 {
		if port < 1024 || port > 65535 {
			return "", "", fmt.Errorf("scheduler file dashboard port %d out of range", port)
		}
		dashHost := host
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			dashHost = h // the address was split and checked above
		}
		dashboard = "http://" + net.JoinHostPort(dashHost, strconv.Itoa(port))
	}
	return addr, dashboard, nil
}
