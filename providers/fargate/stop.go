package fargate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// stopTask asks ECS to stop a task; one ECS no longer knows is stopped.
func (p *Provider) stopTask(ctx context.Context, arn string) error {
	_, err := call(ctx, p, "StopTask", func(ctx context.Context) (*ecs.StopTaskOutput, error) {
		return p.ecs.StopTask(ctx, &ecs.StopTaskInput{
			Cluster: aws.String(p.cfg.Cluster), Task: aws.String(arn), Reason: aws.String(stopReason),
		})
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("fargate provider: stop task %s: %w", arn, err)
	}
	return nil
}

// StopWorker implements providers.Provider. It returns once ECS has taken
// the stop; Describe reports the worker stopped (without a reason) from
// then on.
func (p *Provider) StopWorker(ctx context.Context, cluster, worker string) error {
	if !validName(cluster) || !validName(worker) {
		return nil
	}
	tasks, err := p.clusterTasks(ctx, cluster, false)
	if err != nil {
		return err
	}
	polls := int(p.cfg.StopTimeout/p.cfg.PollInterval) + 1
	for arn, member := range p.unknownYet(cluster, tasks) {
		if member == worker {
			if err := p.stopUnknown(ctx, arn, &polls); err != nil {
				return err
			}
		}
	}
	for _, t := range tasks {
		if taskTags(t)[tagMember] != worker || aws.ToString(t.DesiredStatus) == "STOPPED" {
			continue
		}
		if err := p.stopTask(ctx, aws.ToString(t.TaskArn)); err != nil {
			return err
		}
		p.log.Info("stopped worker", "cluster", cluster, "worker", worker, "task", aws.ToString(t.TaskArn))
		crashpoint.Hit(ctx, pointWorkerStopped)
	}
	return nil
}

// StopCluster implements providers.Provider: it stops every task of the
// cluster, waits until ECS reports them STOPPED (at most StopTimeout: the
// security group cannot be deleted while a task's network interface holds
// it), then deletes the security group, the TLS secret and the cluster's
// task definitions. An unknown cluster has nothing to stop; a second call
// finds nothing left.
func (p *Provider) StopCluster(ctx context.Context, cluster string) error {
	if !validName(cluster) {
		return nil
	}
	defer p.budgetFor("DescribeTasks").Forget(cluster)
	deadline := time.Now().Add(p.cfg.StopTimeout)
	polls := int(p.cfg.StopTimeout/p.cfg.PollInterval) + 1 // bounds the wait even with a sleep that does not sleep
	tasks, err := p.clusterTasks(ctx, cluster, true)
	if err != nil {
		return err
	}
	// Workers first, while their scheduler can still release them.
	var sched []ecstypes.Task
	stopping := map[string]string{} // task ARN -> member, until STOPPED
	for _, t := range tasks {
		arn, member := aws.ToString(t.TaskArn), taskTags(t)[tagMember]
		if aws.ToString(t.LastStatus) == "STOPPED" {
			p.noteEnd(cluster, member, stoppedAt(t))
			continue
		}
		stopping[arn] = member
		if aws.ToString(t.DesiredStatus) == "STOPPED" {
			continue // already on its way
		}
		if member == schedulerMember {
			sched = append(sched, t)
			continue
		}
		if err := p.stopTask(ctx, arn); err != nil {
			return err
		}
	}
	for _, t := range sched {
		if err := p.stopTask(ctx, aws.ToString(t.TaskArn)); err != nil {
			return err
		}
	}
	for arn, member := range p.unknownYet(cluster, tasks) {
		if err := p.stopUnknown(ctx, arn, &polls); err != nil {
			return err
		}
		stopping[arn] = member
	}
	if len(stopping) > 0 {
		p.log.Info("stopping cluster", "cluster", cluster, "tasks", len(stopping))
		crashpoint.Hit(ctx, pointClusterStopAsked)
	}
	waited := len(stopping) > 0
	for len(stopping) > 0 {
		if polls <= 0 || time.Now().After(deadline) {
			return fmt.Errorf("fargate provider: %d task(s) of %s still stopping after %s; their security group and secret are left for the next StopCluster", len(stopping), cluster, p.cfg.StopTimeout)
		}
		polls--
		if err := p.cfg.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return err
		}
		arns := make([]string, 0, len(stopping))
		for a := range stopping {
			arns = append(arns, a)
		}
		described, missing, err := p.describeTasks(ctx, arns)
		if err != nil {
			return err
		}
		for _, a := range missing {
			if !p.young(a) {
				delete(stopping, a) // ECS has forgotten it: long stopped
			}
		}
		for _, t := range described {
			if aws.ToString(t.LastStatus) == "STOPPED" {
				arn := aws.ToString(t.TaskArn)
				p.noteEnd(cluster, stopping[arn], stoppedAt(t))
				delete(stopping, arn)
			}
		}
	}
	if waited {
		crashpoint.Hit(ctx, pointClusterTasksStopped)
	}
	if err := p.deleteGroup(ctx, cluster, deadline, polls); err != nil {
		return err
	}
	if err := p.deleteSecret(ctx, cluster); err != nil {
		return err
	}
	p.deleteTaskDefinitions(ctx, cluster)
	p.mu.Lock()
	delete(p.groups, cluster)
	delete(p.secrets, cluster)
	delete(p.launched, cluster)
	delete(p.tables, cluster)
	prefix := p.familyPrefix(cluster)
	for f := range p.taskDefs {
		if strings.HasPrefix(f, prefix) && p.ownFamily(f, cluster) {
			delete(p.taskDefs, f)
		}
	}
	p.mu.Unlock()
	return nil
}

// deleteGroup deletes the cluster's security group, waiting while the
// stopped tasks' network interfaces still hold it (ECS releases them a
// little after STOPPED).
func (p *Provider) deleteGroup(ctx context.Context, cluster string, deadline time.Time, polls int) error {
	// By name, not by VPC: found even if the subnets were changed since
	// the group was made.
	gs, err := p.findGroups(ctx, cluster, "")
	if err != nil {
		return err
	}
	for _, g := range gs {
		if ec2Tag(g.Tags, tagGateway) != p.idTag() {
			p.log.Warn("leaving a security group of the cluster's name that is not this gateway's", "cluster", cluster, "group", aws.ToString(g.GroupId))
			continue
		}
		if err := p.deleteGroupID(ctx, cluster, aws.ToString(g.GroupId), deadline, &polls); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) deleteGroupID(ctx context.Context, cluster, id string, deadline time.Time, polls *int) error {
	for {
		_, err := call(ctx, p, "DeleteSecurityGroup", func(ctx context.Context) (*ec2.DeleteSecurityGroupOutput, error) {
			return p.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
		})
		switch {
		case err == nil || isNotFound(err):
			p.log.Info("deleted security group", "cluster", cluster, "group", id)
			crashpoint.Hit(ctx, pointClusterGroupDeleted)
			return nil
		case awsutil.ErrorCode(err) != "DependencyViolation":
			return fmt.Errorf("fargate provider: delete security group %s of %s: %w", id, cluster, err)
		case *polls <= 0 || time.Now().After(deadline):
			return fmt.Errorf("fargate provider: security group %s of %s is still in use after %s: %w", id, cluster, p.cfg.StopTimeout, err)
		}
		*polls--
		if err := p.cfg.Sleep(ctx, p.cfg.PollInterval); err != nil {
			return err
		}
	}
}

// deleteSecret deletes the cluster's TLS secret at once: the certificate
// is of no use once the cluster is gone, and a recovery window would keep
// the key around for a week.
func (p *Provider) deleteSecret(ctx context.Context, cluster string) error {
	name := p.secretName(cluster)
	_, err := call(ctx, p, "DeleteSecret", func(ctx context.Context) (*secretsmanager.DeleteSecretOutput, error) {
		return p.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
			SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true),
		})
	})
	switch {
	case err == nil:
		p.log.Info("deleted the cluster's TLS secret", "cluster", cluster, "secret", name)
		crashpoint.Hit(ctx, pointClusterSecretDeleted)
	case !isNotFound(err):
		return fmt.Errorf("fargate provider: delete secret %s: %w", name, err)
	}
	return nil
}

// deleteTaskDefinitions deregisters and deletes the cluster's task
// definitions. They hold no secret material (only the secret's ARN), so a
// failure here is logged, not returned: it must not keep a cluster from
// counting as stopped.
//
// ListTaskDefinitions filters by the full family name only (its
// familyPrefix matches exactly), so the cluster's families are found first
// with ListTaskDefinitionFamilies, whose familyPrefix is a prefix.
func (p *Provider) deleteTaskDefinitions(ctx context.Context, cluster string) {
	families, err := p.listFamilies(ctx, cluster)
	if err != nil {
		p.log.Warn("cannot list the cluster's task definition families", "cluster", cluster, "err", err)
		return
	}
	_ = p.deleteFamilies(ctx, cluster, families) // logged there
}

// deleteFamilies deregisters and deletes every ACTIVE and INACTIVE
// revision of the cluster's families. It logs each failure and returns
// the first.
func (p *Provider) deleteFamilies(ctx context.Context, cluster string, families []string) error {
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	var gone []string
	seen := map[string]bool{}
	for _, family := range families {
		for _, status := range []ecstypes.TaskDefinitionStatus{ecstypes.TaskDefinitionStatusActive, ecstypes.TaskDefinitionStatusInactive} {
			arns, err := p.listTaskDefinitions(ctx, family, status)
			if err != nil {
				p.log.Warn("cannot list the cluster's task definitions", "cluster", cluster, "family", family, "err", err)
				note(err)
				break
			}
			for _, arn := range arns {
				if seen[arn] {
					continue // deregistered just above: now listed as INACTIVE
				}
				seen[arn] = true
				if status == ecstypes.TaskDefinitionStatusActive {
					_, err := call(ctx, p, "DeregisterTaskDefinition", func(ctx context.Context) (*ecs.DeregisterTaskDefinitionOutput, error) {
						return p.ecs.DeregisterTaskDefinition(ctx, &ecs.DeregisterTaskDefinitionInput{TaskDefinition: aws.String(arn)})
					})
					if err != nil && !isNotFound(err) {
						p.log.Warn("cannot deregister task definition", "cluster", cluster, "arn", arn, "err", err)
						note(err)
						continue
					}
				}
				gone = append(gone, arn)
			}
		}
	}
	if len(gone) > 0 {
		crashpoint.Hit(ctx, pointTaskDefsDeregistered)
	}
	for start := 0; start < len(gone); start += 10 { // DeleteTaskDefinitions takes 10 at most
		batch := gone[start:min(start+10, len(gone))]
		out, err := call(ctx, p, "DeleteTaskDefinitions", func(ctx context.Context) (*ecs.DeleteTaskDefinitionsOutput, error) {
			return p.ecs.DeleteTaskDefinitions(ctx, &ecs.DeleteTaskDefinitionsInput{TaskDefinitions: batch})
		})
		if err != nil {
			p.log.Warn("cannot delete task definitions", "cluster", cluster, "err", err)
			note(err)
			continue
		}
		for _, f := range out.Failures {
			p.log.Warn("cannot delete task definition", "cluster", cluster, "arn", aws.ToString(f.Arn), "reason", aws.ToString(f.Reason))
			note(fmt.Errorf("fargate provider: delete task definition %s: %s", aws.ToString(f.Arn), aws.ToString(f.Reason)))
		}
		crashpoint.Hit(ctx, pointTaskDefsDeleted)
	}
	return first
}

// listFamilies returns the cluster's task definition families, with or
// without ACTIVE revisions.
func (p *Provider) listFamilies(ctx context.Context, cluster string) ([]string, error) {
	in := ecs.ListTaskDefinitionFamiliesInput{
		FamilyPrefix: aws.String(p.familyPrefix(cluster)),
		Status:       ecstypes.TaskDefinitionFamilyStatusAll,
	}
	var out []string
	for range maxPages {
		page, err := call(ctx, p, "ListTaskDefinitionFamilies", func(ctx context.Context) (*ecs.ListTaskDefinitionFamiliesOutput, error) {
			return p.ecs.ListTaskDefinitionFamilies(ctx, &in)
		})
		if err != nil {
			return nil, err
		}
		for _, family := range page.Families {
			// The prefix also matches another cluster whose name starts
			// with this one's plus "-".
			if p.ownFamily(family, cluster) {
				out = append(out, family)
			}
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
	return out, nil
}

// listTaskDefinitions returns the ARNs of one family's revisions in one
// status.
func (p *Provider) listTaskDefinitions(ctx context.Context, family string, status ecstypes.TaskDefinitionStatus) ([]string, error) {
	in := ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String(family), Status: status}
	var out []string
	for range maxPages {
		page, err := call(ctx, p, "ListTaskDefinitions", func(ctx context.Context) (*ecs.ListTaskDefinitionsOutput, error) {
			return p.ecs.ListTaskDefinitions(ctx, &in)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, page.TaskDefinitionArns...)
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
	return out, nil
}

// noteEnd remembers when a member stopped by StopCluster ended.
func (p *Provider) noteEnd(cluster, member string, at time.Time) { p.ends.Note(cluster, member, at) }

// StoppedAt implements providers.StopTimes: when ECS says the member's
// task stopped.
func (p *Provider) StoppedAt(cluster, member string) (time.Time, bool) {
	return p.ends.StoppedAt(cluster, member)
}
