package ec2

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
)

// liveStates are the states of an instance that still exists as a machine
// (it may run again, or run now); shutting-down and terminated ones are
// ending or gone.
func liveStates() []string { return []string{"pending", "running", "stopping", "stopped"} }

// Causes EC2 gives in StateReason.
const (
	reasonSpot         = "Server.SpotInstanceTermination"
	reasonSelfShutdown = "Client.InstanceInitiatedShutdown"
	reasonUserShutdown = "Client.UserInitiatedShutdown"
)

// stoppedMemory is how long the provider remembers terminating an
// instance: longer than EC2 lists terminated instances.
const stoppedMemory = 3 * time.Hour

// spotNotice reports whether a spot request status code announces an
// interruption: EC2 reclaims the instance about two minutes later.
func spotNotice(code string) bool {
	switch code {
	case "marked-for-termination", "marked-for-stop", "marked-for-hibernation":
		return true
	}
	return false
}

// describe lists the instances of this gateway matching filters, every
// page of them. The gateway-id tag filter narrows the listing on EC2's
// side; every tag filter is then checked again here, exactly: EC2 takes *
// and ? in filter values as wildcards, and a server (or emulator) that
// lets more through than asked must not hand this gateway another's
// instances to describe, stop or terminate.
func (p *Provider) describe(ctx context.Context, filters []types.Filter) ([]types.Instance, error) {
	filters = append([]types.Filter{filter("tag:"+tagGateway, p.cfg.GatewayID)}, filters...)
	var out []types.Instance
	var token *string
	for {
		page, err := call(ctx, p, "DescribeInstances", func(ctx context.Context) (*awsec2.DescribeInstancesOutput, error) {
			return p.ec2.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000), NextToken: token})
		})
		if err != nil {
			return nil, p.apiError("DescribeInstances", err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				if tagValue(in.Tags, tagGateway) == p.cfg.GatewayID && tagsMatch(in.Tags, filters) {
					out = append(out, in)
				}
			}
		}
		if token = page.NextToken; aws.ToString(token) == "" {
			return out, nil
		}
	}
}

// tagsMatch reports whether tags hold, for every tag:<key> filter, one of
// its values exactly.
func tagsMatch(tags []types.Tag, filters []types.Filter) bool {
	for _, f := range filters {
		key, ok := strings.CutPrefix(aws.ToString(f.Name), "tag:")
		if !ok {
			continue
		}
		v, has := "", false
		for _, t := range tags {
			if aws.ToString(t.Key) == key {
				v, has = aws.ToString(t.Value), true
			}
		}
		if !has || !slices.Contains(f.Values, v) {
			return false
		}
	}
	return true
}

// clusterInstances lists a cluster's instances in the given states (all
// when none are given).
func (p *Provider) clusterInstances(ctx context.Context, cluster string, states ...string) ([]types.Instance, error) {
	filters := []types.Filter{filter("tag:"+tagCluster, cluster)}
	if len(states) > 0 {
		filters = append(filters, filter("instance-state-name", states...))
	}
	return p.describe(ctx, filters)
}

// Describe implements providers.Provider. Members are found by their tags;
// one launched by this process that EC2 does not list yet is reported
// pending. A scheduler is running once it accepts connections.
func (p *Provider) Describe(ctx context.Context, cluster string) ([]providers.Member, error) {
	// A cluster's polls take at most its fair share of the budget.
	all, err := p.clusterInstances(backoff.WithKey(ctx, cluster), cluster)
	if err != nil {
		return nil, err
	}
	picked := p.pick(ctx, cluster, all)
	return p.clusterMembers(ctx, cluster, picked, p.spotNotices(ctx, picked), true), nil
}

// ListMembers reports every cluster's members as Describe would, from
// one DescribeInstances listing by the gateway's tag (a page per 1,000
// instances) and one listing of the spot requests with an interruption
// notice: the scheduling core's sweep calls it instead of a Describe per
// running cluster, which at thousands of clusters would spend EC2's
// request rate on what one listing says.
func (p *Provider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	all, err := p.describe(ctx, nil)
	if err != nil {
		return nil, err
	}
	byCluster := map[string][]types.Instance{}
	for _, in := range all {
		if c := tagValue(in.Tags, tagCluster); c != "" {
			byCluster[c] = append(byCluster[c], in)
		}
	}
	p.mu.Lock()
	for c, l := range p.launched {
		if _, listed := byCluster[c]; !listed && len(l) > 0 {
			byCluster[c] = nil // its launches, not listed yet, are reported pending
		}
	}
	p.mu.Unlock()
	picked := make(map[string]map[string]types.Instance, len(byCluster))
	var every []types.Instance
	for c, ins := range byCluster {
		picked[c] = p.pick(ctx, c, ins)
		for _, in := range picked[c] {
			every = append(every, in)
		}
	}
	notices := p.spotNoticesOf(ctx, every)
	out := make([]providers.Member, 0, len(all))
	for c, byMember := range picked {
		// EC2 lists terminated instances for about an hour: a cluster
		// with nothing live left has usually been stopped and forgotten
		// (StopCluster), and reading its consoles would only make new
		// records of it. Its members are reported stopped with the usual
		// reason; the full pass that follows describes it as ever.
		p.mu.Lock()
		probe := p.consoles[c] != nil || len(p.launched[c]) > 0 || slices.ContainsFunc(byCluster[c], isLive)
		p.mu.Unlock()
		out = append(out, p.clusterMembers(ctx, c, byMember, notices, probe)...)
	}
	slices.SortFunc(out, providers.CompareMembers)
	return out, nil
}

// pick chooses the instance that represents each member of the cluster
// among those listed (all of them the cluster's), and terminates the
// younger copies of a member launched twice.
func (p *Provider) pick(ctx context.Context, cluster string, all []types.Instance) map[string]types.Instance {
	byMember := map[string]types.Instance{}
	live := map[string][]types.Instance{}
	for _, in := range all {
		name := tagValue(in.Tags, tagMember)
		if name == "" {
			continue
		}
		if cur, ok := byMember[name]; !ok || better(in, cur) {
			byMember[name] = in
		}
		if in.State != nil && (in.State.Name == types.InstanceStateNamePending || in.State.Name == types.InstanceStateNameRunning) {
			live[name] = append(live[name], in)
		}
	}
	// A member launched twice (a retry on another subnet or type after a
	// lost answer) is seen here first: the core never starts a running
	// member again, so this is where the younger copy is let go.
	for name, ins := range live {
		if err := p.dedupe(ctx, cluster, name, ins); err != nil {
			p.log.Warn("could not terminate a duplicate member", "cluster", cluster, "member", name, "err", err)
		}
	}
	return byMember
}

// clusterMembers reports the cluster's members from the instances picked
// for them (probing schedulers and reading consoles with probe, as
// member does), adding those this process launched that EC2 does not list
// yet as pending.
func (p *Provider) clusterMembers(ctx context.Context, cluster string, byMember map[string]types.Instance, notices map[string]string, probe bool) []providers.Member {
	out := make([]providers.Member, 0, len(byMember))
	for _, in := range byMember {
		out = append(out, p.member(ctx, cluster, in, notices, probe))
	}
	p.mu.Lock()
	for name, l := range p.launched[cluster] {
		if _, listed := byMember[name]; listed {
			delete(p.launched[cluster], name) // EC2 lists it now
			continue
		}
		out = append(out, providers.Member{Cluster: cluster, Name: name, Role: l.role, Owner: l.owner, State: providers.StatePending, StartedAt: l.startedAt})
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b providers.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// better reports whether instance a represents its member better than b:
// a live instance over an ended one, then the older live one (dedupe keeps
// it), or the newer ended one.
func better(a, b types.Instance) bool {
	la, lb := isLive(a), isLive(b)
	if la != lb {
		return la
	}
	ta, tb := aws.ToTime(a.LaunchTime), aws.ToTime(b.LaunchTime)
	if la {
		return ta.Before(tb)
	}
	return ta.After(tb)
}

func isLive(in types.Instance) bool {
	return in.State != nil && slices.Contains(liveStates(), string(in.State.Name))
}

// List implements providers.Provider: every instance carrying this
// gateway's tag, stopped ones included while EC2 lists them (about an hour
// after termination). It makes no connection to schedulers: one not yet
// known to serve is reported pending.
func (p *Provider) List(ctx context.Context) ([]providers.Member, error) {
	all, err := p.describe(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Member, 0, len(all))
	for _, in := range all {
		cluster := tagValue(in.Tags, tagCluster)
		if cluster == "" || tagValue(in.Tags, tagMember) == "" {
			continue
		}
		out = append(out, p.member(ctx, cluster, in, nil, false))
	}
	slices.SortFunc(out, providers.CompareMembers)
	return out, nil
}

// member maps an instance to the member it runs.
func (p *Provider) member(ctx context.Context, cluster string, in types.Instance, notices map[string]string, probe bool) providers.Member {
	id := aws.ToString(in.InstanceId)
	m := providers.Member{
		Cluster:   cluster,
		Name:      tagValue(in.Tags, tagMember),
		Role:      providers.RoleWorker,
		Owner:     tagValue(in.Tags, tagOwner),
		StartedAt: aws.ToTime(in.LaunchTime),
		State:     providers.StatePending,
	}
	if m.Name == schedulerMember {
		m.Role = providers.RoleScheduler
	}
	state := types.InstanceStateNamePending
	if in.State != nil {
		state = in.State.Name
	}
	p.mu.Lock()
	_, asked := p.stopped[cluster][id]
	p.mu.Unlock()
	switch state {
	case types.InstanceStateNamePending:
	case types.InstanceStateNameRunning:
		ip := aws.ToString(in.PrivateIpAddress)
		if ip == "" {
			break
		}
		if code, ok := notices[aws.ToString(in.SpotInstanceRequestId)]; ok && !asked {
			// EC2 takes the instance back in two minutes: report the loss now
			// so that a replacement starts meanwhile.
			m.State = providers.StateStopped
			m.Reason = fmt.Sprintf("spot interruption: AWS is reclaiming spot instance %s (%s)", id, code)
			break
		}
		if m.Role == providers.RoleWorker {
			m.State = providers.StateRunning
			break
		}
		addr := net.JoinHostPort(ip, fmt.Sprint(schedulerPort))
		if p.schedulerReady(ctx, cluster, id, addr, probe) {
			m.State = providers.StateRunning
			m.Address = addr
			// Served over TLS with the cluster's certificate (userdata.go).
			m.DashboardURL = "https://" + net.JoinHostPort(ip, fmt.Sprint(dashboardPort))
		}
	default: // stopping, stopped, shutting-down, terminated
		m.State = providers.StateStopped
		if asked {
			break
		}
		m.Reason = stopReason(in, m.Role)
		if !probe || in.StateReason == nil || aws.ToString(in.StateReason.Code) != reasonSelfShutdown {
			break
		}
		table, wait := p.consoleMismatch(ctx, cluster, id)
		switch {
		case table != "":
			m.Reason += "\n" + table
		case wait:
			// Its console may yet say why (the launcher's table): the
			// member is not reported lost before it does, or ConsoleWait
			// has passed.
			m.State, m.Reason = providers.StatePending, ""
		}
	}
	return m
}

// consoleVerdict is what the console output of a member that shut itself
// down said: the launcher's table of differences, or nothing (done), or not
// yet (since when it was first looked at).
type consoleVerdict struct {
	table string
	done  bool
	since time.Time
}

// maxTable bounds the table taken from a console, which the image's code
// could fill with anything.
const maxTable = 4 << 10

// consoleMismatch reads the console output of a member that shut itself
// down (its unit prints the last lines of its log there when Dask exits,
// userdata.go) for the launcher's table of differences. It returns the
// table, or "" and wait when the console does not have the unit's last
// lines yet and ConsoleWait has not passed since it was first read. A
// verdict, once reached, is kept: the console of an ended instance no
// longer changes.
func (p *Provider) consoleMismatch(ctx context.Context, cluster, id string) (table string, wait bool) {
	p.mu.Lock()
	if p.consoles[cluster] == nil {
		p.consoles[cluster] = map[string]*consoleVerdict{}
	}
	v := p.consoles[cluster][id]
	if v == nil {
		v = &consoleVerdict{since: time.Now()}
		p.consoles[cluster][id] = v
	}
	done, table, since := v.done, v.table, v.since
	p.mu.Unlock()
	if done {
		return table, false
	}
	out, err := call(ctx, p, "GetConsoleOutput", func(ctx context.Context) (*awsec2.GetConsoleOutputOutput, error) {
		return p.ec2.GetConsoleOutput(ctx, &awsec2.GetConsoleOutputInput{InstanceId: aws.String(id)})
	})
	text := ""
	switch {
	case err != nil:
		// Without it the member is reported with the usual reason (which
		// names the console); a missing permission is no reason to keep
		// the member pending.
		p.log.Warn("cannot read the console output of a member that shut itself down", "cluster", cluster, "instance", id, "err", p.apiError("GetConsoleOutput", err))
		done = true
	default:
		b, derr := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
		if derr != nil {
			p.log.Warn("console output is not base64", "cluster", cluster, "instance", id, "err", derr)
			done = true
			break
		}
		text = strings.ReplaceAll(string(b), "\r", "")
	}
	if t, ok := images.MismatchIn(text); ok {
		if len(t) > maxTable {
			t = t[:maxTable] + "\n(cut; the whole table is in the console output: aws ec2 get-console-output --instance-id " + id + ")"
		}
		table, done = t, true
	}
	if strings.Contains(text, consoleEnd) || time.Since(since) >= p.cfg.ConsoleWait {
		done = true
	}
	if done {
		p.mu.Lock()
		v.done, v.table = true, table
		p.mu.Unlock()
	}
	return table, !done
}

// schedulerReady reports whether the scheduler on instance id serves,
// probing it (when allowed) until it does once.
func (p *Provider) schedulerReady(ctx context.Context, cluster, id, addr string, probe bool) bool {
	p.mu.Lock()
	ok := p.ready[cluster][id]
	p.mu.Unlock()
	if ok || !probe {
		return ok
	}
	if err := p.cfg.ProbeScheduler(ctx, addr); err != nil {
		p.log.Debug("scheduler not accepting connections yet", "cluster", cluster, "instance", id, "address", addr, "err", err)
		return false
	}
	p.mu.Lock()
	if p.ready[cluster] == nil {
		p.ready[cluster] = map[string]bool{}
	}
	p.ready[cluster][id] = true
	p.mu.Unlock()
	return true
}

// stopReason says why an instance stopped when the gateway did not ask.
func stopReason(in types.Instance, role providers.Role) string {
	id := aws.ToString(in.InstanceId)
	var code, msg string
	if in.StateReason != nil {
		code, msg = aws.ToString(in.StateReason.Code), aws.ToString(in.StateReason.Message)
	}
	switch code {
	case reasonSpot:
		return fmt.Sprintf("spot interruption: AWS reclaimed spot instance %s", id)
	case reasonSelfShutdown:
		return fmt.Sprintf("instance %s shut itself down: the Dask %s exited or its set-up failed (the reason is in its console output: aws ec2 get-console-output --instance-id %s)", id, role, id)
	case reasonUserShutdown:
		return fmt.Sprintf("instance %s was stopped or terminated through the EC2 API or console by someone other than this gateway process", id)
	}
	state := ""
	if in.State != nil {
		state = string(in.State.Name)
	}
	detail := orDefault(msg, aws.ToString(in.StateTransitionReason))
	if detail == "" {
		return fmt.Sprintf("instance %s is %s", id, state)
	}
	return fmt.Sprintf("instance %s is %s: %s", id, state, detail)
}

// spotNotices asks EC2 which running spot instances have an interruption
// notice (status code by spot request id). The answer only brings a loss
// forward, so a failure is logged and ignored.
func (p *Provider) spotNotices(ctx context.Context, byMember map[string]types.Instance) map[string]string {
	var ids []string
	for _, in := range byMember {
		if id := runningSpotRequest(in); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return p.spotRequestNotices(ctx, &awsec2.DescribeSpotInstanceRequestsInput{SpotInstanceRequestIds: ids}, nil)
}

// spotNoticesOf is spotNotices for every cluster's instances at once:
// one listing of the spot requests whose status announces an
// interruption (usually none), kept for the instances given. Asked by id
// instead, one request EC2 does not know yet (made a moment ago) would
// fail the call for every cluster.
func (p *Provider) spotNoticesOf(ctx context.Context, ins []types.Instance) map[string]string {
	ours := map[string]bool{}
	for _, in := range ins {
		if id := runningSpotRequest(in); id != "" {
			ours[id] = true
		}
	}
	if len(ours) == 0 {
		return nil
	}
	return p.spotRequestNotices(ctx, &awsec2.DescribeSpotInstanceRequestsInput{
		Filters:    []types.Filter{filter("status-code", "marked-for-termination", "marked-for-stop", "marked-for-hibernation")},
		MaxResults: aws.Int32(1000),
	}, ours)
}

// runningSpotRequest is the spot request of a running spot instance, or "".
func runningSpotRequest(in types.Instance) string {
	if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot && in.State != nil && in.State.Name == types.InstanceStateNameRunning {
		return aws.ToString(in.SpotInstanceRequestId)
	}
	return ""
}

// spotRequestNotices pages through DescribeSpotInstanceRequests and
// returns the interruption notices among the requests (of keep, when not
// nil). A failure is logged and leaves what was read.
func (p *Provider) spotRequestNotices(ctx context.Context, in *awsec2.DescribeSpotInstanceRequestsInput, keep map[string]bool) map[string]string {
	out := map[string]string{}
	for {
		page, err := call(ctx, p, "DescribeSpotInstanceRequests", func(ctx context.Context) (*awsec2.DescribeSpotInstanceRequestsOutput, error) {
			return p.ec2.DescribeSpotInstanceRequests(ctx, in)
		})
		if err != nil {
			p.log.Debug("cannot read spot interruption notices", "err", err)
			return out
		}
		for _, r := range page.SpotInstanceRequests {
			id := aws.ToString(r.SpotInstanceRequestId)
			if r.Status != nil && spotNotice(aws.ToString(r.Status.Code)) && (keep == nil || keep[id]) {
				out[id] = aws.ToString(r.Status.Code)
			}
		}
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			return out
		}
	}
}

// StopWorker implements providers.Provider: it terminates the worker's
// instance(s); a worker without any is not an error.
func (p *Provider) StopWorker(ctx context.Context, cluster, worker string) error {
	live, err := p.describe(ctx, []types.Filter{
		filter("tag:"+tagCluster, cluster),
		filter("tag:"+tagMember, worker),
		filter("instance-state-name", liveStates()...),
	})
	if err != nil {
		return err
	}
	ids := instanceIDs(live)
	p.mu.Lock()
	l, launched := p.launched[cluster][worker]
	p.mu.Unlock()
	if launched && !slices.Contains(ids, l.id) {
		// Launched by this process but not listed by tag yet: terminate it
		// by id (a no-op if it has ended). Should EC2 not know the id yet
		// either, the error makes the caller try again.
		ids = append(ids, l.id)
	}
	if err := p.terminate(ctx, cluster, ids); err != nil {
		return err
	}
	if len(ids) > 0 {
		crashpoint.Hit(ctx, pointWorkerTerminated)
	}
	p.mu.Lock()
	delete(p.launched[cluster], worker)
	p.mu.Unlock()
	return nil
}

// terminate terminates instances of a cluster, noting that the gateway
// asked for it. TerminateInstances is idempotent: instances already ending
// are fine.
func (p *Provider) terminate(ctx context.Context, cluster string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	now := time.Now()
	p.mu.Lock()
	for c, m := range p.stopped {
		for id, at := range m {
			if now.Sub(at) > stoppedMemory {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(p.stopped, c)
		}
	}
	if p.stopped[cluster] == nil {
		p.stopped[cluster] = map[string]time.Time{}
	}
	for _, id := range ids {
		p.stopped[cluster][id] = now
	}
	p.mu.Unlock()
	// EC2 takes a bounded number of ids per call.
	for chunk := range slices.Chunk(ids, 500) {
		_, err := call(ctx, p, "TerminateInstances", func(ctx context.Context) (*awsec2.TerminateInstancesOutput, error) {
			return p.ec2.TerminateInstances(ctx, &awsec2.TerminateInstancesInput{InstanceIds: chunk})
		})
		if err != nil {
			return p.apiError(fmt.Sprintf("TerminateInstances %s", strings.Join(chunk, " ")), err)
		}
	}
	p.log.Info("terminated instances", "cluster", cluster, "instances", ids)
	return nil
}

// StopCluster implements providers.Provider: it terminates every instance
// of the cluster, waits (up to StopTimeout) until EC2 reports them
// terminated, then deletes the security group and the TLS parameter. An
// unknown cluster is not an error, and a repeat after a partial stop does
// what is left.
func (p *Provider) StopCluster(ctx context.Context, cluster string) error {
	defer p.describeBudget().Forget(cluster)
	all, err := p.clusterInstances(ctx, cluster)
	if err != nil {
		return err
	}
	ids := instanceIDs(all)
	var live []string
	for _, in := range all {
		if isLive(in) {
			live = append(live, aws.ToString(in.InstanceId))
		}
	}
	p.mu.Lock()
	var unlisted []string
	for _, l := range p.launched[cluster] {
		if !slices.Contains(ids, l.id) {
			unlisted = append(unlisted, l.id)
		}
	}
	p.mu.Unlock()
	if err := p.terminate(ctx, cluster, live); err != nil {
		return err
	}
	b := &budget{left: p.cfg.StopTimeout}
	for _, id := range unlisted {
		// Not listed by tag yet: terminate by id, waiting out EC2's
		// eventual consistency while the budget lasts; after it, the
		// caller tries again.
		if err := p.terminateUnlisted(ctx, cluster, id, b); err != nil {
			return err
		}
	}
	if len(live)+len(unlisted) > 0 {
		crashpoint.Hit(ctx, pointClusterTerminated)
	}

	ended, err := p.waitTerminated(ctx, cluster, len(ids)+len(unlisted) > 0, unlisted, b)
	if err != nil {
		return err
	}
	for member, t := range ended {
		p.ends.Note(cluster, member, t)
	}
	if len(ids)+len(unlisted) > 0 {
		crashpoint.Hit(ctx, pointClusterInstancesGone)
	}

	if err := p.deleteGroup(ctx, cluster, b); err != nil {
		return err
	}
	if err := p.deleteSecret(ctx, cluster); err != nil {
		return err
	}
	p.forget(cluster)
	if len(ids)+len(unlisted) > 0 {
		p.log.Info("stopped cluster", "cluster", cluster, "instances", len(ids)+len(unlisted))
	}
	return nil
}

// waitTerminated polls until every instance of the cluster is terminated,
// the unlisted ones (launched by this process, not listed yet) included,
// and returns when each member ended: the time EC2 gives for the
// transition, else when it was first seen terminated.
func (p *Provider) waitTerminated(ctx context.Context, cluster string, any bool, unlisted []string, b *budget) (map[string]time.Time, error) {
	ended := map[string]time.Time{}
	if !any {
		return ended, nil
	}
	for {
		found, err := p.clusterInstances(ctx, cluster)
		if err != nil {
			return nil, err
		}
		var waiting []string
		for _, in := range found {
			member := tagValue(in.Tags, tagMember)
			if in.State == nil || in.State.Name != types.InstanceStateNameTerminated {
				waiting = append(waiting, aws.ToString(in.InstanceId))
				continue
			}
			if _, ok := ended[member]; !ok && member != "" {
				ended[member] = transitionTime(aws.ToString(in.StateTransitionReason), time.Now())
			}
		}
		for _, id := range unlisted {
			if !slices.ContainsFunc(found, func(in types.Instance) bool { return aws.ToString(in.InstanceId) == id }) {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) == 0 {
			return ended, nil
		}
		if !b.spend(p.cfg.PollInterval) {
			return nil, fmt.Errorf("ec2 provider: instances %s of cluster %s are not terminated after %s; StopCluster will try again", strings.Join(waiting, ", "), cluster, p.cfg.StopTimeout)
		}
		if err := p.cfg.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return nil, fmt.Errorf("ec2 provider: waiting for cluster %s to terminate: %w", cluster, err)
		}
	}
}

// transitionTime reads the time in EC2's StateTransitionReason ("User
// initiated (2024-05-01 12:34:56 GMT)"), or returns def.
func transitionTime(reason string, def time.Time) time.Time {
	i, j := strings.LastIndexByte(reason, '('), strings.LastIndexByte(reason, ')')
	if i < 0 || j < i {
		return def
	}
	t, err := time.Parse("2006-01-02 15:04:05 MST", reason[i+1:j])
	if err != nil {
		return def
	}
	return t
}

func instanceIDs(ins []types.Instance) []string {
	ids := make([]string, 0, len(ins))
	for _, in := range ins {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	return ids
}

func tagValue(tags []types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
