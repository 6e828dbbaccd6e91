package gce

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
)

// found is an instance of this gateway, identified by its metadata.
type found struct {
	inst    *computepb.Instance
	zone    string
	cluster string
	member  string
	role    providers.Role
	owner   string
}

func (f *found) state() memberState {
	return memberState{zone: f.zone, id: f.inst.GetId(), role: f.role, owner: f.owner,
		spot: f.inst.GetScheduling().GetProvisioningModel() == "SPOT"}
}

func findMember(fs []*found, member string) *found {
	for _, f := range fs {
		if f.member == member {
			return f
		}
	}
	return nil
}

func metadataValue(in *computepb.Instance, key string) string {
	for _, it := range in.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// identify reads who an instance belongs to from its metadata (the exact
// names), and refuses instances of other gateways whose labels happen to
// match.
func (p *Provider) identify(in *computepb.Instance) (*found, bool) {
	if metadataValue(in, keyGateway) != p.cfg.GatewayID {
		return nil, false
	}
	f := &found{
		inst: in, zone: lastSegment(in.GetZone()),
		cluster: metadataValue(in, keyCluster), member: metadataValue(in, keyMember),
		role: providers.Role(metadataValue(in, keyRole)), owner: metadataValue(in, keyOwner),
	}
	if f.cluster == "" || f.member == "" {
		return nil, false
	}
	if f.role != providers.RoleScheduler && f.role != providers.RoleWorker {
		f.role = providers.RoleWorker
		if f.member == schedulerMember {
			f.role = providers.RoleScheduler
		}
	}
	return f, true
}

// Filters on the ownership labels. Label values hold only [a-z0-9_-], so
// they need no escaping inside the quotes.
func (p *Provider) gatewayFilter() string {
	return fmt.Sprintf(`(labels.%s = "%s")`, keyGateway, p.gwLabel)
}

func (p *Provider) clusterFilter(cluster string) string {
	return fmt.Sprintf(`%s AND (labels.%s = "%s")`, p.gatewayFilter(), keyCluster, labelValue(cluster))
}

func (p *Provider) memberFilter(cluster, member string) string {
	return fmt.Sprintf(`%s AND (labels.%s = "%s")`, p.clusterFilter(cluster), keyMember, labelValue(member))
}

// PartialListError says that Compute Engine answered a listing without
// some zones (aggregatedList's unreachables, or a scope's UNREACHABLE
// warning): what those zones hold is unknown, so no member missing from
// the listing may be taken for gone.
type PartialListError struct {
	Scopes []string // "zones/us-central1-a"
}

func (e *PartialListError) Error() string {
	return fmt.Sprintf("Compute Engine did not reach %s: its members are unknown until it answers", strings.Join(e.Scopes, ", "))
}

// listInstances lists this gateway's instances in every zone matching the
// filter, in one aggregated listing (retried whole when a page fails, so
// that a partial answer never passes for the truth: a member missing from
// it would look gone). A listing that some zone did not answer is an
// error (*PartialListError).
func (p *Provider) listInstances(ctx context.Context, filter string) ([]*found, error) {
	out, unreachable, err := p.listReachable(ctx, filter)
	if err == nil && len(unreachable) > 0 {
		err = fmt.Errorf("list instances: %w", &PartialListError{Scopes: unreachable})
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listReachable is listInstances that returns what the zones that
// answered hold, and names the scopes that did not.
func (p *Provider) listReachable(ctx context.Context, filter string) ([]*found, []string, error) {
	var out []*found
	unreachable := map[string]bool{}
	err := p.call(ctx, "list instances", func(ctx context.Context) error {
		out = out[:0]
		clear(unreachable)
		it := p.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: p.cfg.Project, Filter: &filter})
		for pair, err := range it.All() {
			if err != nil {
				return err
			}
			if resp, ok := it.Response.(*computepb.InstanceAggregatedList); ok {
				for _, u := range resp.GetUnreachables() {
					unreachable[u] = true
				}
			}
			if pair.Value.GetWarning().GetCode() == "UNREACHABLE" {
				unreachable[pair.Key] = true
			}
			for _, in := range pair.Value.GetInstances() {
				if f, ok := p.identify(in); ok {
					out = append(out, f)
				}
			}
		}
		// A page with no scopes at all yields no pair: its unreachables
		// are read here.
		if resp, ok := it.Response.(*computepb.InstanceAggregatedList); ok {
			for _, u := range resp.GetUnreachables() {
				unreachable[u] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list instances: %w", err)
	}
	if len(unreachable) > 0 {
		p.log.Warn("instance listing is partial; members in these zones are unknown", "unreachable", slices.Sorted(maps.Keys(unreachable)))
	}
	return out, slices.Sorted(maps.Keys(unreachable)), nil
}

// clusterInstances lists the cluster's instances, checking the exact
// cluster name (two names may share a sanitized label value).
func (p *Provider) clusterInstances(ctx context.Context, cluster string) ([]*found, error) {
	all, err := p.listInstances(ctx, p.clusterFilter(cluster))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, f := range all {
		if f.cluster == cluster {
			out = append(out, f)
		}
	}
	return out, nil
}

// Describe implements providers.Provider. Instances map to states as
// PROVISIONING/STAGING/REPAIRING -> pending; RUNNING -> running (a
// scheduler only once its startup script reports Dask listening, with its
// private address); STOPPING/SUSPENDED/TERMINATED -> stopped, with the
// reason when the gateway did not ask ("spot preemption" for a preempted
// Spot worker). A member that vanished without being asked to stop (a Spot
// VM deleted on preemption) is reported stopped, with its reason, until
// StopWorker or StopCluster makes the provider forget it.
func (p *Provider) Describe(ctx context.Context, cluster string) ([]providers.Member, error) {
	p.mu.Lock()
	gen := p.gen // members registered after this may not be in the listing yet
	p.mu.Unlock()
	fs, err := p.clusterInstances(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("gce provider: describe %s: %w", cluster, err)
	}
	out := make([]providers.Member, 0, len(fs))
	listed := map[string]bool{}
	for _, f := range fs {
		m, err := p.member(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("gce provider: describe %s: %w", cluster, err)
		}
		listed[f.member] = true
		out = append(out, m)
	}
	out = append(out, p.vanished(ctx, cluster, listed, gen)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ListMembers reports every cluster's members as Describe would, from
// one aggregated listing by the gateway's label (a page per 500
// instances): the scheduling core's sweep calls it instead of a Describe
// per running cluster, which at thousands of clusters would spend the
// project's read quota on what one listing says. Members that vanished
// are reported for every cluster this process knows, as Describe reports
// them for one.
func (p *Provider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	p.mu.Lock()
	gen := p.gen // members registered after this may not be in the listing yet
	p.mu.Unlock()
	fs, err := p.listInstances(ctx, p.gatewayFilter())
	if err != nil {
		return nil, fmt.Errorf("gce provider: list members: %w", err)
	}
	out := make([]providers.Member, 0, len(fs))
	listed := map[string]map[string]bool{}
	failed := map[string]bool{}
	for _, f := range fs {
		m, err := p.member(ctx, f)
		if err != nil {
			// One cluster's failure (a scheduler's guest attributes not
			// readable) is not every cluster's: that cluster is left out,
			// which sends it to a full pass, whose Describe says why.
			if ctx.Err() != nil {
				return nil, fmt.Errorf("gce provider: list members: %w", err)
			}
			p.log.Warn("list members: a cluster left out", "cluster", f.cluster, "err", err)
			failed[f.cluster] = true
			continue
		}
		if listed[f.cluster] == nil {
			listed[f.cluster] = map[string]bool{}
		}
		listed[f.cluster][f.member] = true
		out = append(out, m)
	}
	p.mu.Lock()
	known := slices.Collect(maps.Keys(p.clusters))
	p.mu.Unlock()
	for _, c := range known {
		if !failed[c] {
			out = append(out, p.vanished(ctx, c, listed[c], gen)...)
		}
	}
	out = slices.DeleteFunc(out, func(m providers.Member) bool { return failed[m.Cluster] })
	slices.SortFunc(out, providers.CompareMembers)
	return out, nil
}

// List implements providers.Provider: every instance with this gateway's
// ownership label.
func (p *Provider) List(ctx context.Context) ([]providers.Member, error) {
	fs, err := p.listInstances(ctx, p.gatewayFilter())
	if err != nil {
		return nil, fmt.Errorf("gce provider: list: %w", err)
	}
	out := make([]providers.Member, 0, len(fs))
	for _, f := range fs {
		m, err := p.member(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("gce provider: list: %w", err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, providers.CompareMembers)
	return out, nil
}

func (p *Provider) member(ctx context.Context, f *found) (providers.Member, error) {
	in := f.inst
	m := providers.Member{Cluster: f.cluster, Name: f.member, Role: f.role, Owner: f.owner, StartedAt: parseTime(in.GetCreationTimestamp())}
	p.remember(f.cluster, f.member, f.state())
	switch status := in.GetStatus(); status {
	case "RUNNING":
		ip := ""
		if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
			ip = nics[0].GetNetworkIP()
		}
		m.State = providers.StatePending
		if ip == "" {
			break
		}
		if f.role == providers.RoleScheduler {
			ready, err := p.schedulerReady(ctx, f)
			if err != nil {
				return m, err
			}
			if !ready {
				break
			}
			m.Address = net.JoinHostPort(ip, strconv.Itoa(SchedulerPort))
			// Served over TLS with the cluster's certificate (script.go).
			m.DashboardURL = "https://" + net.JoinHostPort(ip, strconv.Itoa(DashboardPort))
		}
		m.State = providers.StateRunning
	case "STOPPING", "SUSPENDING", "SUSPENDED", "TERMINATED", "STOPPED":
		m.State = providers.StateStopped
		m.Reason = p.stopReason(ctx, f)
	default: // PROVISIONING, STAGING, REPAIRING, PENDING_STOP and future ones
		m.State = providers.StatePending
	}
	return m, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// guestAttributes reads the gateway/ guest attributes the startup script
// set; none yet is not an error.
func (p *Provider) guestAttributes(ctx context.Context, zone, name string) (map[string]string, error) {
	var ga *computepb.GuestAttributes
	err := p.call(ctx, "guest attributes of "+name, func(ctx context.Context) error {
		var err error
		ga, err = p.instances.GetGuestAttributes(ctx, &computepb.GetGuestAttributesInstanceRequest{
			Project: p.cfg.Project, Zone: zone, Instance: name, QueryPath: ptr(guestNamespace + "/"),
		})
		return err
	})
	if isNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the guest attributes of %s: %w", name, err)
	}
	out := map[string]string{}
	for _, e := range ga.GetQueryValue().GetItems() {
		if e.GetNamespace() == guestNamespace {
			out[e.GetKey()] = e.GetValue()
		}
	}
	return out, nil
}

// schedulerReady reports whether the scheduler's startup script has seen
// Dask accept connections; once true it is not asked again.
func (p *Provider) schedulerReady(ctx context.Context, f *found) (bool, error) {
	id := f.inst.GetId()
	p.mu.Lock()
	ready := p.ready[id]
	p.mu.Unlock()
	if ready {
		return true, nil
	}
	attrs, err := p.guestAttributes(ctx, f.zone, f.inst.GetName())
	if err != nil {
		return false, err
	}
	if attrs[guestReady] != "1" {
		return false, nil
	}
	p.mu.Lock()
	p.ready[id] = true
	p.mu.Unlock()
	return true, nil
}

// stopReason says why a stopped instance stopped, "" when the gateway (or
// anyone) asked for its deletion: the core counts a member with a reason as
// lost.
func (p *Provider) stopReason(ctx context.Context, f *found) string {
	id := f.inst.GetId()
	p.mu.Lock()
	ms := p.state(f.cluster).members[f.member]
	asked := ms != nil && ms.stopping
	cached, known := p.reasons[id]
	p.mu.Unlock()
	switch {
	case asked:
		return ""
	case known:
		return cached
	}
	reason, final := p.findStopReason(ctx, f.zone, f.inst.GetName(), id, f.inst.GetStatus())
	if final {
		p.mu.Lock()
		p.reasons[id] = reason
		p.mu.Unlock()
	}
	return reason
}

// findStopReason looks for why an instance stopped or vanished (status ""):
// the zone's operations on it (preemption, host error, a stop or delete
// request), then what its startup script recorded before powering off.
// final is false for a guess that a later look may improve.
func (p *Provider) findStopReason(ctx context.Context, zone, name string, id uint64, status string) (reason string, final bool) {
	ops, err := p.targetOps(ctx, zone, id)
	if err != nil {
		p.log.Warn("cannot read the operations on an instance that stopped", "instance", name, "err", err)
	}
	has := map[string]bool{}
	for _, op := range ops {
		has[op.GetOperationType()] = true
	}
	switch {
	case has["compute.instances.preempted"]:
		return "spot preemption", true
	case has["compute.instances.hostError"]:
		return "the instance's host failed (Compute Engine host error)", true
	case has["stop"], has["suspend"]:
		return "the instance was stopped or suspended outside the gateway", true
	case has["delete"]:
		return "", true // asked for, by the gateway or an operator: not a failure
	}
	if status != "" {
		attrs, err := p.guestAttributes(ctx, zone, name)
		if err == nil && attrs[guestStatus] != "" {
			if strings.Contains(attrs[guestStatus], images.MismatchMarker) {
				// The launcher's table, whole: nothing may follow its rows.
				return "the instance powered itself off:\n" + attrs[guestStatus], true
			}
			return attrs[guestStatus] + " (the instance powered itself off)" + p.pullAdvice(attrs[guestStatus]), true
		}
		return fmt.Sprintf("the instance is %s without the gateway asking (see its serial console output)", status), false
	}
	return "the instance disappeared without the gateway asking (deleted outside the gateway?)", err == nil
}

// targetOps lists the zone's operations on one instance.
func (p *Provider) targetOps(ctx context.Context, zone string, id uint64) ([]*computepb.Operation, error) {
	filter := fmt.Sprintf(`(targetId = "%d")`, id)
	var out []*computepb.Operation
	err := p.call(ctx, "list operations", func(ctx context.Context) error {
		out = out[:0]
		it := p.zoneOps.List(ctx, &computepb.ListZoneOperationsRequest{Project: p.cfg.Project, Zone: zone, Filter: &filter})
		for op, err := range it.All() {
			if err != nil {
				return err
			}
			out = append(out, op)
		}
		return nil
	})
	return out, err
}

// vanished reports the cluster's remembered members that the listing no
// longer has: forgotten when the gateway asked them to stop, else reported
// stopped with why (a Spot worker deleted on preemption).
func (p *Provider) vanished(ctx context.Context, cluster string, listed map[string]bool, gen uint64) []providers.Member {
	type lookup struct {
		name string
		ms   memberState
	}
	var out []providers.Member
	var todo []lookup
	p.mu.Lock()
	st := p.clusters[cluster]
	if st != nil {
		for name, ms := range st.members {
			switch {
			case listed[name] || ms.gen > gen:
			case ms.stopping:
				delete(st.members, name)
			case ms.lost != nil:
				out = append(out, *ms.lost)
			case ms.id != 0:
				todo = append(todo, lookup{name, *ms})
			}
		}
	}
	p.mu.Unlock()
	for _, l := range todo {
		reason, _ := p.findStopReason(ctx, l.ms.zone, instanceName(cluster, l.name), l.ms.id, "")
		p.mu.Lock()
		cur := p.state(cluster).members[l.name]
		switch {
		case cur == nil || cur.id != l.ms.id || cur.gen != l.ms.gen:
			// Restarted or forgotten meanwhile.
		case reason == "":
			delete(p.state(cluster).members, l.name)
		default:
			lost := providers.Member{Cluster: cluster, Name: l.name, Role: l.ms.role, Owner: l.ms.owner, State: providers.StateStopped, Reason: reason}
			cur.lost = &lost
			out = append(out, lost)
			p.log.Warn("member vanished", "cluster", cluster, "member", l.name, "reason", reason)
		}
		p.mu.Unlock()
	}
	// A listing that raced with StopCluster can record a member of a
	// cluster already forgotten; once its members are gone, so is it.
	p.mu.Lock()
	if st := p.clusters[cluster]; st != nil && len(st.members) == 0 && !st.infraReady {
		delete(p.clusters, cluster)
	}
	p.mu.Unlock()
	return out
}

// unreachableRegistry are what docker pull says when no route leads to the
// registry (members have no external address).
var unreachableRegistry = []string{"i/o timeout", "dial tcp", "no route to host", "network is unreachable", "client.timeout exceeded", "tls handshake timeout", "context deadline exceeded"}

// pullAdvice explains a pull that failed for want of a route to the
// registry: members have no external address, so they reach a public
// registry only through Cloud NAT, and Artifact Registry through Private
// Google Access. It is said in the member's reason (so on the cluster), and
// logged once per gateway process, the first time.
func (p *Provider) pullAdvice(status string) string {
	if !strings.HasPrefix(status, "cannot pull the container image") {
		return ""
	}
	low := strings.ToLower(status)
	if !slices.ContainsFunc(unreachableRegistry, func(s string) bool { return strings.Contains(low, s) }) {
		return ""
	}
	advice := fmt.Sprintf("; members have no external address, so network %q must reach the registry: add Cloud NAT to its region (the Terraform module does when it creates the network), or mirror the image into Artifact Registry and enable Private Google Access on the subnetwork", p.cfg.Network)
	p.mu.Lock()
	first := !p.pullAdvised
	p.pullAdvised = true
	p.mu.Unlock()
	if first {
		p.log.Error("a member could not reach its image registry"+advice, "network", p.cfg.Network, "subnetwork", p.cfg.Subnetwork, "status", status)
	}
	return advice
}
