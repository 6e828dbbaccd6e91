package fargate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// StartScheduler implements providers.Provider.
func (p *Provider) StartScheduler(ctx context.Context, spec providers.ClusterSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.checkSpec(spec); err != nil {
		return err
	}
	size, err := schedulerSize(spec)
	if err != nil {
		return err
	}
	// The workers' size is checked now too: a cluster whose workers
	// Fargate cannot run is refused before its scheduler costs anything.
	if _, err := workerSize(spec); err != nil {
		return err
	}
	prefix := spec.DashboardPrefix
	if prefix == "" {
		prefix = "/clusters/" + spec.Name
	}
	cmd := append([]string{"scheduler"},
		"--port", strconv.Itoa(schedulerPort), "--protocol", "tls",
		"--tls-ca-file", tlsCertPath, "--tls-cert", tlsCertPath, "--tls-key", tlsKeyPath,
		"--dashboard-address", ":"+strconv.Itoa(dashboardPort),
		"--dashboard-prefix", prefix, "--no-show")
	return p.start(ctx, spec, schedulerMember, providers.RoleScheduler, size, cmd, false)
}

// StartWorker implements providers.Provider.
func (p *Provider) StartWorker(ctx context.Context, spec providers.ClusterSpec, worker, schedulerAddress string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validName(worker) || worker == schedulerMember {
		return fmt.Errorf("fargate provider: invalid worker name %q (letters, digits, - and _, at most 64)", worker)
	}
	if err := p.checkSpec(spec); err != nil {
		return err
	}
	if host, port, err := net.SplitHostPort(schedulerAddress); err != nil || host == "" || port == "" {
		return fmt.Errorf("fargate provider: worker %s needs the scheduler's host:port, got %q", worker, schedulerAddress)
	}
	size, err := workerSize(spec)
	if err != nil {
		return err
	}
	threads := spec.WorkerThreads
	if threads <= 0 {
		threads = max(1, size.CPU/1024)
	}
	cmd := append([]string{"worker"}, "tls://"+schedulerAddress,
		"--tls-ca-file", tlsCertPath, "--tls-cert", tlsCertPath, "--tls-key", tlsKeyPath,
		"--nthreads", strconv.Itoa(threads), "--name", worker,
		"--no-dashboard",
		// A worker whose scheduler is gone exits by itself: no task runs on
		// (and bills) without its cluster even if the gateway is not there.
		"--death-timeout", "60")
	if spec.WorkerMemory > 0 {
		cmd = append(cmd, "--memory-limit", strconv.FormatInt(spec.WorkerMemory, 10))
	}
	return p.start(ctx, spec, worker, providers.RoleWorker, size, cmd, spec.Spot)
}

// maxOverrides is ECS's limit on a RunTask's overrides: "A total of 8192
// characters are allowed for overrides. This limit includes the JSON
// formatting characters of the override structure."
const maxOverrides = 8192

// overrides is what one launch changes in the task definition: the
// launcher's arguments (the role, then Dask's), and the client's versions
// for the launcher to check (images.ExpectEnv). The versions are the
// cluster's own, so they go here, never into the task definition, whose
// family is shared by every task of its content; the launcher itself is
// in the task definition (taskDefinition), which leaves these well under
// ECS's 8192 characters (checkSpec).
func overrides(spec providers.ClusterSpec, cmd []string) *ecstypes.TaskOverride {
	o := ecstypes.ContainerOverride{Name: aws.String(containerName), Command: cmd}
	for _, kv := range providers.EnvList(spec.Env) {
		k, v, _ := strings.Cut(kv, "=")
		o.Environment = append(o.Environment, ecstypes.KeyValuePair{Name: aws.String(k), Value: aws.String(v)})
	}
	if spec.EnvExpect != "" {
		o.Environment = append(o.Environment, ecstypes.KeyValuePair{Name: aws.String(images.ExpectEnv), Value: aws.String(spec.EnvExpect)})
	}
	return &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{o}}
}

// checkSpec refuses what this backend cannot run, before any request.
func (p *Provider) checkSpec(spec providers.ClusterSpec) error {
	if !validName(spec.Name) {
		return fmt.Errorf("fargate provider: invalid cluster name %q (letters, digits, - and _, at most 64)", spec.Name)
	}
	if spec.GatewayID != "" && spec.GatewayID != p.cfg.GatewayID {
		return fmt.Errorf("fargate provider: the cluster belongs to gateway %q, this provider to %q", spec.GatewayID, p.cfg.GatewayID)
	}
	if g := max(spec.Scheduler.GPUs, spec.Worker.GPUs); g > 0 {
		what := strconv.Itoa(g)
		if t := spec.Worker.GPUType; t != "" {
			what += " " + t
		}
		return fmt.Errorf("fargate provider: Fargate has no GPUs and the cluster asks for %s GPU(s) per member; run GPU clusters with the ec2 provider (provider: ec2): %w", what, providers.ErrUnsupported)
	}
	if spec.Region != "" && spec.Region != p.cfg.Region {
		return fmt.Errorf("fargate provider: this provider runs in %s, the cluster asks for %s: %w", p.cfg.Region, spec.Region, providers.ErrUnsupported)
	}
	if len(spec.TLSCert) == 0 || len(spec.TLSKey) == 0 {
		return errors.New("fargate provider: the cluster has no TLS certificate and key")
	}
	if strings.ContainsAny(spec.Image, " \t\n") {
		return fmt.Errorf("fargate provider: image %q has white space", spec.Image)
	}
	// What the overrides hold besides the versions is bounded (names,
	// addresses, numbers): 2 KiB of it leaves the versions the rest.
	if len(spec.EnvExpect) > maxOverrides-2048 {
		return fmt.Errorf("fargate provider: the client's package versions take %d characters, more than a task's overrides can carry (ECS allows %d in all)", len(spec.EnvExpect), maxOverrides)
	}
	// The owner's variables ride in the same overrides (each with its
	// JSON: {"name":"","value":""}, 22 characters, plus escapes).
	envLen := len(spec.EnvExpect)
	for k, v := range spec.Env {
		envLen += len(k) + len(v) + 22
	}
	if envLen > maxOverrides-2048 {
		return fmt.Errorf("fargate provider: the environ option and the client's package versions take %d characters, more than a task's overrides can carry (ECS allows %d in all): set fewer or shorter variables", envLen, maxOverrides)
	}
	return nil
}

// start launches one member unless it already runs.
func (p *Provider) start(ctx context.Context, spec providers.ClusterSpec, member string, role providers.Role, size taskSize, cmd []string, spot bool) error {
	// One launch of a member at a time in this process; across processes
	// the client token keeps a repeated launch from starting a second task.
	unlock, err := p.locks.Lock(ctx, "member/"+spec.Name+"/"+member)
	if err != nil {
		return err
	}
	defer unlock()
	running, err := p.liveTask(ctx, spec.Name, member)
	if err != nil {
		return err
	}
	if running != nil {
		return nil
	}
	group, err := p.ensureGroup(ctx, spec.Name, spec.Owner)
	if err != nil {
		return err
	}
	secretARN, err := p.ensureSecret(ctx, spec)
	if err != nil {
		return err
	}
	image := spec.Image
	if image == "" {
		image = p.cfg.Image
	}
	taskDef, err := p.ensureTaskDefinition(ctx, spec.Name, spec.Owner, image, role, size, secretARN)
	if err != nil {
		return err
	}
	return p.runTask(ctx, spec, member, taskDef, group, cmd, spot)
}

// liveTask returns the member's task that is starting or running, if any.
func (p *Provider) liveTask(ctx context.Context, cluster, member string) (*ecstypes.Task, error) {
	tasks, err := p.clusterTasks(ctx, cluster, false)
	if err != nil {
		return nil, err
	}
	for i, t := range tasks {
		if taskTags(t)[tagMember] == member && live(t) {
			return &tasks[i], nil
		}
	}
	return nil, nil
}

// launch is one place RunTask is asked to start a task: a capacity
// provider in one subnet.
type launch struct {
	capacity string // FARGATE or FARGATE_SPOT
	subnet   string
}

func (l launch) String() string { return l.capacity + " in " + l.subnet }

// launches lists where to try, in order: each subnet on spot capacity
// first when asked for, then each on regular Fargate.
func (p *Provider) launches(spot bool) []launch {
	var out []launch
	if spot {
		for _, s := range p.cfg.Subnets {
			out = append(out, launch{"FARGATE_SPOT", s})
		}
	}
	for _, s := range p.cfg.Subnets {
		out = append(out, launch{"FARGATE", s})
	}
	return out
}

// runTask starts the member's task, moving on to the next subnet, then to
// regular Fargate, when one has no capacity.
func (p *Provider) runTask(ctx context.Context, spec providers.ClusterSpec, member, taskDef, group string, cmd []string, spot bool) error {
	assign := ecstypes.AssignPublicIpDisabled
	if p.cfg.AssignPublicIP {
		assign = ecstypes.AssignPublicIpEnabled
	}
	var tries []string
	spotRefused := false
	for _, l := range p.launches(spot) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if l.capacity == "FARGATE_SPOT" && spotRefused {
			continue
		}
		in := &ecs.RunTaskInput{
			Cluster:        aws.String(p.cfg.Cluster),
			TaskDefinition: aws.String(taskDef),
			Count:          aws.Int32(1),
			StartedBy:      aws.String(startedBy(spec.Name)),
			NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{
				Subnets: []string{l.subnet}, SecurityGroups: []string{group}, AssignPublicIp: assign,
			}},
			Overrides: overrides(spec, cmd),
			Tags: []ecstypes.Tag{
				{Key: aws.String(tagGateway), Value: aws.String(p.idTag())},
				{Key: aws.String(tagCluster), Value: aws.String(spec.Name)},
				{Key: aws.String(tagMember), Value: aws.String(member)},
				{Key: aws.String(tagOwner), Value: aws.String(tagValue(spec.Owner))},
			},
			EnableECSManagedTags: true,
			PropagateTags:        ecstypes.PropagateTagsTaskDefinition,
			PlatformVersion:      aws.String("LATEST"),
		}
		if l.capacity == "FARGATE_SPOT" {
			in.CapacityProviderStrategy = []ecstypes.CapacityProviderStrategyItem{{CapacityProvider: aws.String("FARGATE_SPOT"), Weight: 1}}
		} else {
			in.LaunchType = ecstypes.LaunchTypeFargate
		}
		t, failure, err := p.runOnce(ctx, in, spec.Name, member, l)
		switch {
		case err != nil && l.capacity == "FARGATE_SPOT" && spotNotAssociated(err):
			// The ECS cluster has no FARGATE_SPOT capacity provider: no
			// subnet will do better; regular Fargate may.
			p.log.Warn("FARGATE_SPOT is not a capacity provider of the ECS cluster; starting on regular Fargate", "cluster", spec.Name, "member", member, "ecs_cluster", p.cfg.Cluster)
			tries = append(tries, l.String()+": "+awsutil.ErrorMessage(err))
			spotRefused = true
		case err != nil && awsutil.ErrorCode(err) != "" && capacityError(awsutil.ErrorMessage(err)):
			tries = append(tries, l.String()+": "+awsutil.ErrorMessage(err))
			p.log.Warn("no Fargate capacity; trying elsewhere", "cluster", spec.Name, "member", member, "tried", l.String(), "err", err)
		case err != nil:
			return fmt.Errorf("fargate provider: start %s of %s (%s): %w", member, spec.Name, l, err)
		case t != nil:
			if member == schedulerMember {
				crashpoint.Hit(ctx, pointSchedulerRun)
			} else {
				crashpoint.Hit(ctx, pointWorkerRun)
			}
			p.remember(spec.Name, aws.ToString(t.TaskArn), member)
			p.log.Info("started member", "cluster", spec.Name, "member", member, "task", aws.ToString(t.TaskArn), "capacity", l.capacity, "subnet", l.subnet)
			return nil
		case capacityError(failure):
			tries = append(tries, l.String()+": "+failure)
			p.log.Warn("no Fargate capacity; trying elsewhere", "cluster", spec.Name, "member", member, "tried", l.String(), "reason", failure)
		default:
			return fmt.Errorf("fargate provider: ECS refused to start %s of %s (%s): %s", member, spec.Name, l, failure)
		}
	}
	return fmt.Errorf("fargate provider: no Fargate capacity for %s of %s; tried %s: %w", member, spec.Name, strings.Join(tries, "; "), providers.ErrCapacity)
}

// runOnce asks RunTask for one task in one place. It returns the task,
// or the failure ECS gave instead, or the request's error. A task that
// the client token maps to but that has stopped since (the member is being
// started again under its old name) is not an answer: the next token of
// the chain, derived from that task, asks anew.
func (p *Provider) runOnce(ctx context.Context, in *ecs.RunTaskInput, cluster, member string, l launch) (*ecstypes.Task, string, error) {
	after := ""
	for range 5 {
		in.ClientToken = aws.String(p.runToken(cluster, member, l.String(), after))
		out, err := call(ctx, p, "RunTask", func(ctx context.Context) (*ecs.RunTaskOutput, error) {
			return p.ecs.RunTask(ctx, in)
		})
		if err != nil {
			return nil, "", err
		}
		if len(out.Tasks) == 0 {
			if len(out.Failures) == 0 {
				return nil, "RunTask started no task and gave no reason", nil
			}
			f := out.Failures[0]
			reason := aws.ToString(f.Reason)
			if d := aws.ToString(f.Detail); d != "" {
				reason += " (" + d + ")"
			}
			return nil, reason, nil
		}
		t := out.Tasks[0]
		if live(t) {
			return &t, "", nil
		}
		after = aws.ToString(t.TaskArn)
	}
	return nil, "", fmt.Errorf("client tokens keep naming stopped tasks of %s", member)
}

// capacityError reports ECS's ways of saying Fargate has no capacity.
func capacityError(reason string) bool {
	return strings.HasPrefix(reason, "RESOURCE:") || strings.Contains(strings.ToLower(reason), "capacity is unavailable")
}

func spotNotAssociated(err error) bool {
	return awsutil.ErrorCode(err) == "InvalidParameterException" && strings.Contains(strings.ToLower(awsutil.ErrorMessage(err)), "capacity provider")
}

// remember keeps a started task's ARN: ECS lists new tasks with a delay,
// and Describe and the next start must see it at once.
func (p *Provider) remember(cluster, arn, member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.launched[cluster] == nil {
		p.launched[cluster] = map[string]string{}
	}
	p.launched[cluster][arn] = member
	p.launchedAt[arn] = time.Now()
}
