package fargate

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers"
)

// stopReason is what StopTask records on tasks the gateway stops, so that
// Describe tells them from tasks that ended on their own.
const stopReason = "gateway: stopped on request"

// maxPages bounds a listing, against a service that never stops paging.
const maxPages = 1000

// listTasks returns every task ARN the listing gives, page by page.
func (p *Provider) listTasks(ctx context.Context, in ecs.ListTasksInput) ([]string, error) {
	var arns []string
	for range maxPages {
		page, err := call(ctx, p, "ListTasks", func(ctx context.Context) (*ecs.ListTasksOutput, error) {
			return p.ecs.ListTasks(ctx, &in)
		})
		if err != nil {
			return nil, fmt.Errorf("fargate provider: list tasks in ECS cluster %s: %w", p.cfg.Cluster, err)
		}
		arns = append(arns, page.TaskArns...)
		if aws.ToString(page.NextToken) == "" {
			return arns, nil
		}
		in.NextToken = page.NextToken
	}
	return nil, fmt.Errorf("fargate provider: list tasks in ECS cluster %s: more than %d pages", p.cfg.Cluster, maxPages)
}

// describeTasks describes tasks with their tags, 100 at a time (ECS's
// limit). It also returns the ARNs ECS no longer knows.
func (p *Provider) describeTasks(ctx context.Context, arns []string) ([]ecstypes.Task, []string, error) {
	var tasks []ecstypes.Task
	var missing []string
	for start := 0; start < len(arns); start += 100 {
		batch := arns[start:min(start+100, len(arns))]
		out, err := call(ctx, p, "DescribeTasks", func(ctx context.Context) (*ecs.DescribeTasksOutput, error) {
			return p.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{
				Cluster: aws.String(p.cfg.Cluster), Tasks: batch, Include: []ecstypes.TaskField{ecstypes.TaskFieldTags},
			})
		})
		if err != nil {
			return nil, nil, fmt.Errorf("fargate provider: describe tasks in ECS cluster %s: %w", p.cfg.Cluster, err)
		}
		tasks = append(tasks, out.Tasks...)
		for _, f := range out.Failures {
			if aws.ToString(f.Reason) == "MISSING" {
				missing = append(missing, aws.ToString(f.Arn))
			}
		}
	}
	return tasks, missing, nil
}

// clusterTasks returns the cluster's tasks that carry this gateway's tags:
// those ECS lists for the cluster's startedBy (desired RUNNING, and
// STOPPED too when withStopped), plus those started by this process that
// ECS does not list yet. With cluster "", every cluster's: the whole ECS
// cluster is listed, and the tags decide.
func (p *Provider) clusterTasks(ctx context.Context, cluster string, withStopped bool) ([]ecstypes.Task, error) {
	statuses := []ecstypes.DesiredStatus{ecstypes.DesiredStatusRunning}
	if withStopped {
		statuses = append(statuses, ecstypes.DesiredStatusStopped)
	}
	seen := map[string]bool{}
	var arns []string
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			arns = append(arns, a)
		}
	}
	for _, st := range statuses {
		in := ecs.ListTasksInput{Cluster: aws.String(p.cfg.Cluster), DesiredStatus: st}
		if cluster != "" {
			in.StartedBy = aws.String(startedBy(cluster))
		}
		listed, err := p.listTasks(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, a := range listed {
			add(a)
		}
	}
	// Tasks started here stay remembered until ECS forgets them or the
	// cluster stops, not just until first listed: a listing that misses a
	// running scheduler once would fail its cluster.
	clusterOf := map[string]string{}
	p.mu.Lock()
	for c, l := range p.launched {
		if cluster != "" && c != cluster {
			continue
		}
		for a := range l {
			clusterOf[a] = c
			add(a)
		}
	}
	p.mu.Unlock()
	if len(arns) == 0 {
		return nil, nil
	}
	tasks, missing, err := p.describeTasks(ctx, arns)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		p.mu.Lock()
		for _, a := range missing {
			if c, ok := clusterOf[a]; ok && !p.youngLocked(a) { // else: not known yet, rather than forgotten
				delete(p.launched[c], a)
				delete(p.launchedAt, a)
			}
		}
		p.mu.Unlock()
	}
	out := tasks[:0]
	for _, t := range tasks {
		tags := taskTags(t)
		// startedBy is only a narrowing (long names are hashed, other
		// gateways may share the ECS cluster): the tags decide.
		if tags[tagGateway] == p.idTag() && tags[tagMember] != "" &&
			(cluster != "" && tags[tagCluster] == cluster || cluster == "" && validName(tags[tagCluster])) {
			out = append(out, t)
		}
	}
	return out, nil
}

// stoppedStatus reports whether a task's last status means it no longer
// serves (on its way out, or out).
func stoppedStatus(last string) bool {
	switch last {
	case "DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED":
		return true
	}
	return false
}

// live reports whether a task is starting or running and meant to.
func live(t ecstypes.Task) bool {
	return aws.ToString(t.DesiredStatus) != "STOPPED" && !stoppedStatus(aws.ToString(t.LastStatus))
}

// privateIP is the task's address in its VPC, from its network interface.
func privateIP(t ecstypes.Task) string {
	for _, a := range t.Attachments {
		if aws.ToString(a.Type) != "ElasticNetworkInterface" {
			continue
		}
		for _, d := range a.Details {
			if aws.ToString(d.Name) == "privateIPv4Address" {
				return aws.ToString(d.Value)
			}
		}
	}
	for _, c := range t.Containers {
		for _, ni := range c.NetworkInterfaces {
			if ip := aws.ToString(ni.PrivateIpv4Address); ip != "" {
				return ip
			}
		}
	}
	return ""
}

// member maps a task to what the core sees; with report, the reason of a
// task whose launcher found other software than the client's carries its
// table (mismatchReport).
func (p *Provider) member(ctx context.Context, t ecstypes.Task, report bool) providers.Member {
	tags := taskTags(t)
	m := providers.Member{
		Cluster: tags[tagCluster], Name: tags[tagMember], Owner: tags[tagOwner],
		Role: providers.RoleWorker, State: providers.StatePending,
		StartedAt: aws.ToTime(t.CreatedAt),
	}
	if t.StartedAt != nil {
		m.StartedAt = *t.StartedAt
	}
	if m.Name == schedulerMember {
		m.Role = providers.RoleScheduler
	}
	last := aws.ToString(t.LastStatus)
	switch {
	case aws.ToString(t.DesiredStatus) == "STOPPED" || stoppedStatus(last):
		m.State = providers.StateStopped
		m.Reason = stoppedWhy(t)
		if report && mismatchExit(t) {
			m.Reason += "\n" + p.mismatchReport(ctx, t, m.Cluster, m.Role)
		}
	case last == "RUNNING":
		ip := privateIP(t)
		if ip == "" {
			break // not reachable yet
		}
		m.State = providers.StateRunning
		if m.Role == providers.RoleScheduler {
			m.Address = net.JoinHostPort(ip, strconv.Itoa(schedulerPort))
			// Served over TLS with the cluster's certificate (resources.go).
			m.DashboardURL = "https://" + net.JoinHostPort(ip, strconv.Itoa(dashboardPort))
		}
	}
	return m
}

// stoppedWhy says why a task stopped, or "" when the gateway stopped it (a
// stop on request is not a loss).
func stoppedWhy(t ecstypes.Task) string {
	reason := aws.ToString(t.StoppedReason)
	switch {
	case t.StopCode == ecstypes.TaskStopCodeSpotInterruption:
		return "spot interruption"
	case strings.HasPrefix(reason, stopReason):
		return ""
	}
	if reason == "" {
		reason = "the task stopped"
	}
	for _, c := range t.Containers {
		if aws.ToString(c.Name) != containerName {
			continue
		}
		if c.ExitCode != nil {
			reason += fmt.Sprintf(" (exit code %d)", *c.ExitCode)
		}
		if r := aws.ToString(c.Reason); r != "" {
			reason += ": " + r
		}
	}
	if t.StopCode != "" {
		reason += " [" + string(t.StopCode) + "]"
	}
	return reason
}

// mismatchExit reports whether the task's container exited with the
// launcher's status for other software than the client's.
func mismatchExit(t ecstypes.Task) bool {
	for _, c := range t.Containers {
		if aws.ToString(c.Name) == containerName && c.ExitCode != nil && *c.ExitCode == images.MismatchExitCode {
			return true
		}
	}
	return false
}

// mismatchReport is the launcher's table of differences for a task whose
// container exited with its status, which ECS does not carry (a
// container's reason is ECS's own, such as OutOfMemoryError): it is read
// from the task's log stream when the containers log to CloudWatch Logs.
// Where it cannot be read, a report that starts with images.MismatchMarker
// stands in, so that the cluster still fails as running other software,
// and says where the table is.
func (p *Provider) mismatchReport(ctx context.Context, t ecstypes.Task, cluster string, role providers.Role) string {
	arn := aws.ToString(t.TaskArn)
	id := arn[strings.LastIndex(arn, "/")+1:]
	// The awslogs driver's stream: <prefix>/<container>/<task id>.
	stream := "gateway/" + containerName + "/" + id
	where := "the container's output is not kept: set providers.fargate.log_group to keep it, where the launcher prints the table"
	if p.cfg.LogGroup != "" {
		if table := p.tableInLog(ctx, cluster, arn, stream); table != "" {
			return table
		}
		where = fmt.Sprintf("the table of differences is in its log: CloudWatch Logs group %s, stream %s (aws logs tail %s --log-stream-names %s --region %s)",
			p.cfg.LogGroup, stream, p.cfg.LogGroup, stream, p.cfg.Region)
	}
	return fmt.Sprintf("%s: this %s does not run the client's software (its launcher exited with status %d);\n%s",
		images.MismatchMarker, role, images.MismatchExitCode, where)
}

// logLines is how many of a stopped task's last log lines are read for the
// launcher's table: it prints a dozen at most, and nothing after them.
const logLines = 50

// tableInLog reads the launcher's table from the last lines of a task's log
// stream, or "" when it cannot (the log not yet delivered, or not
// readable: logged, and asked again at the next Describe). Once found it
// is kept.
func (p *Provider) tableInLog(ctx context.Context, cluster, arn, stream string) string {
	p.mu.Lock()
	table := p.tables[cluster][arn]
	p.mu.Unlock()
	if table != "" {
		return table
	}
	out, err := call(ctx, p, "GetLogEvents", func(ctx context.Context) (*cloudwatchlogs.GetLogEventsOutput, error) {
		return p.logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
			LogGroupName: aws.String(p.cfg.LogGroup), LogStreamName: aws.String(stream),
			StartFromHead: aws.Bool(false), Limit: aws.Int32(logLines),
		})
	})
	if err != nil {
		p.log.Warn("cannot read the log of a member whose software differs from the client's", "cluster", cluster, "task", arn, "log_group", p.cfg.LogGroup, "stream", stream, "err", err)
		return ""
	}
	lines := make([]string, 0, len(out.Events))
	for _, e := range out.Events {
		lines = append(lines, strings.TrimRight(aws.ToString(e.Message), "\r\n"))
	}
	table, ok := images.MismatchIn(strings.Join(lines, "\n"))
	if !ok {
		return ""
	}
	if len(table) > maxTable {
		table = table[:maxTable] + "\n(cut; the whole table is in CloudWatch Logs group " + p.cfg.LogGroup + ", stream " + stream + ")"
	}
	p.mu.Lock()
	if p.tables[cluster] == nil {
		p.tables[cluster] = map[string]string{}
	}
	p.tables[cluster][arn] = table
	p.mu.Unlock()
	return table
}

// maxTable bounds a table read from a log, which the image's code could
// fill with anything.
const maxTable = 4 << 10

// better reports whether task a describes its member better than b: a live
// task over a stopped one, else the newer.
func better(a, b ecstypes.Task) bool {
	if live(a) != live(b) {
		return live(a)
	}
	return aws.ToTime(a.CreatedAt).After(aws.ToTime(b.CreatedAt))
}

// members reduces tasks to one member each (with report, reading the
// launcher's table of a task that exited for it, as member does).
func (p *Provider) members(ctx context.Context, tasks []ecstypes.Task, report bool) []providers.Member {
	best := map[string]ecstypes.Task{}
	for _, t := range tasks {
		tags := taskTags(t)
		key := tags[tagCluster] + "/" + tags[tagMember]
		if cur, ok := best[key]; !ok || better(t, cur) {
			best[key] = t
		}
	}
	out := make([]providers.Member, 0, len(best))
	for _, t := range best {
		out = append(out, p.member(ctx, t, report))
	}
	slices.SortFunc(out, providers.CompareMembers)
	return out
}

// Describe implements providers.Provider. Stopped tasks are reported while
// ECS lists them (an hour or so).
func (p *Provider) Describe(ctx context.Context, cluster string) ([]providers.Member, error) {
	if !validName(cluster) {
		return nil, nil // nothing of ours can have this name
	}
	// A cluster's polls take at most its fair share of the read budget.
	tasks, err := p.clusterTasks(backoff.WithKey(ctx, cluster), cluster, true)
	if err != nil {
		return nil, err
	}
	p.dedupe(ctx, cluster, tasks)
	return p.members(ctx, tasks, true), nil
}

// ListMembers reports every cluster's members as Describe would, from
// one listing of the ECS cluster's tasks (desired RUNNING and STOPPED, a
// page per 100) and their descriptions (100 per call): the scheduling
// core's sweep calls it instead of a Describe per running cluster, three
// calls each, which at thousands of clusters would spend ECS's request
// rate on what one listing says.
func (p *Provider) ListMembers(ctx context.Context) ([]providers.Member, error) {
	tasks, err := p.clusterTasks(ctx, "", true)
	if err != nil {
		return nil, err
	}
	byCluster := map[string][]ecstypes.Task{}
	for _, t := range tasks {
		c := taskTags(t)[tagCluster]
		byCluster[c] = append(byCluster[c], t)
	}
	var out []providers.Member
	for cluster, ts := range byCluster {
		p.dedupe(ctx, cluster, ts)
		// ECS lists stopped tasks for an hour or so: a cluster with
		// nothing live has usually been stopped and forgotten, and reading
		// its logs would only make new records of it. Its members are
		// reported stopped with ECS's reason; the full pass that follows
		// describes it as ever.
		p.mu.Lock()
		report := p.tables[cluster] != nil || len(p.launched[cluster]) > 0 || slices.ContainsFunc(ts, live)
		p.mu.Unlock()
		out = append(out, p.members(ctx, ts, report)...)
	}
	slices.SortFunc(out, providers.CompareMembers)
	return out, nil
}

// dedupe stops every live task of a member but the one Describe reports.
// Two can only run after a launch retried on another subnet or capacity
// provider whose first answer was lost while ECS did not list it yet; the
// core never starts a running member again, so this is where the extra
// one is let go rather than billed until the cluster stops.
func (p *Provider) dedupe(ctx context.Context, cluster string, tasks []ecstypes.Task) {
	best := map[string]ecstypes.Task{}
	for _, t := range tasks {
		if !live(t) {
			continue
		}
		m := taskTags(t)[tagMember]
		if cur, ok := best[m]; !ok || better(t, cur) {
			best[m] = t
		}
	}
	for _, t := range tasks {
		m := taskTags(t)[tagMember]
		if !live(t) || aws.ToString(best[m].TaskArn) == aws.ToString(t.TaskArn) {
			continue
		}
		p.log.Warn("member has more than one task; stopping the extra one", "cluster", cluster, "member", m,
			"kept", aws.ToString(best[m].TaskArn), "stopped", aws.ToString(t.TaskArn))
		if err := p.stopTask(ctx, aws.ToString(t.TaskArn)); err != nil {
			p.log.Warn("could not stop a duplicate task", "cluster", cluster, "member", m, "err", err)
		}
	}
}

// List implements providers.Provider: the tasks of the ECS cluster that
// carry this gateway's tag and are meant to run. ECS cannot filter by tag,
// so every task of the ECS cluster is described; a dedicated ECS cluster
// keeps that cheap.
func (p *Provider) List(ctx context.Context) ([]providers.Member, error) {
	arns, err := p.listTasks(ctx, ecs.ListTasksInput{Cluster: aws.String(p.cfg.Cluster), DesiredStatus: ecstypes.DesiredStatusRunning})
	if err != nil {
		return nil, err
	}
	tasks, _, err := p.describeTasks(ctx, arns)
	if err != nil {
		return nil, err
	}
	ours := tasks[:0]
	for _, t := range tasks {
		tags := taskTags(t)
		if tags[tagGateway] == p.idTag() && tags[tagCluster] != "" && tags[tagMember] != "" {
			ours = append(ours, t)
		}
	}
	return p.members(ctx, ours, true), nil
}

// stoppedAt is when a task ended, as ECS says.
func stoppedAt(t ecstypes.Task) time.Time {
	switch {
	case t.StoppedAt != nil:
		return *t.StoppedAt
	case t.ExecutionStoppedAt != nil:
		return *t.ExecutionStoppedAt
	}
	return time.Time{}
}
