package fargate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Ports the scheduler listens on inside its task.
const (
	schedulerPort = 8786
	dashboardPort = 8787
)

// ---- the VPC and the cluster's security group ----

// vpcID is the VPC of the configured subnets, where security groups are
// made. All subnets must share it: a task's group must be in its VPC.
func (p *Provider) vpcID(ctx context.Context) (string, error) {
	p.mu.Lock()
	vpc := p.vpc
	p.mu.Unlock()
	if vpc != "" {
		return vpc, nil
	}
	out, err := call(ctx, p, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: p.cfg.Subnets})
	})
	if err != nil {
		return "", fmt.Errorf("fargate provider: look up subnets %s: %w", strings.Join(p.cfg.Subnets, ", "), err)
	}
	byVPC := map[string][]string{}
	for _, s := range out.Subnets {
		byVPC[aws.ToString(s.VpcId)] = append(byVPC[aws.ToString(s.VpcId)], aws.ToString(s.SubnetId))
	}
	if len(byVPC) != 1 {
		var parts []string
		for v, ss := range byVPC {
			parts = append(parts, v+": "+strings.Join(ss, ", "))
		}
		slices.Sort(parts)
		return "", fmt.Errorf("fargate provider: the subnets must be in one VPC, they are in %d (%s)", len(byVPC), strings.Join(parts, "; "))
	}
	for v := range byVPC {
		vpc = v
	}
	p.mu.Lock()
	p.vpc = vpc
	p.mu.Unlock()
	return vpc, nil
}

// findGroups returns the security groups of the cluster's name (in vpc,
// when given), whoever made them.
func (p *Provider) findGroups(ctx context.Context, cluster, vpc string) ([]ec2types.SecurityGroup, error) {
	filters := []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{p.groupName(cluster)}}}
	if vpc != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("vpc-id"), Values: []string{vpc}})
	}
	out, err := call(ctx, p, "DescribeSecurityGroups", func(ctx context.Context) (*ec2.DescribeSecurityGroupsOutput, error) {
		return p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
	})
	if err != nil {
		return nil, fmt.Errorf("fargate provider: look up security group %s: %w", p.groupName(cluster), err)
	}
	return out.SecurityGroups, nil
}

// findGroup returns the cluster's security group in vpc, or nil.
func (p *Provider) findGroup(ctx context.Context, cluster, vpc string) (*ec2types.SecurityGroup, error) {
	gs, err := p.findGroups(ctx, cluster, vpc)
	if err != nil || len(gs) == 0 {
		return nil, err
	}
	g := gs[0]
	if ec2Tag(g.Tags, tagGateway) != p.idTag() {
		// Same name, not ours: never open someone else's group to anything.
		return nil, fmt.Errorf("fargate provider: security group %s (%s) exists but does not carry this gateway's %s tag", p.groupName(cluster), aws.ToString(g.GroupId), tagGateway)
	}
	return &g, nil
}

func ec2Tag(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// ensureGroup makes the cluster's security group, or finds the one made
// before, and makes sure it has its two ingress rules: the scheduler and
// dashboard ports from the gateway's security group (or, as a fallback,
// its networks), and every TCP port from the group itself (workers and
// scheduler reach each other; no other cluster's tasks). Egress stays
// AWS's default (all), for image pulls, secrets and user code.
func (p *Provider) ensureGroup(ctx context.Context, cluster, owner string) (string, error) {
	p.mu.Lock()
	id := p.groups[cluster]
	p.mu.Unlock()
	if id != "" {
		return id, nil
	}
	unlock, err := p.locks.Lock(ctx, "group/"+cluster)
	if err != nil {
		return "", err
	}
	defer unlock()
	vpc, err := p.vpcID(ctx)
	if err != nil {
		return "", err
	}
	g, err := p.findGroup(ctx, cluster, vpc)
	if err != nil {
		return "", err
	}
	if g == nil {
		out, err := call(ctx, p, "CreateSecurityGroup", func(ctx context.Context) (*ec2.CreateSecurityGroupOutput, error) {
			return p.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
				GroupName:   aws.String(p.groupName(cluster)),
				Description: aws.String("Dask cluster " + cluster + " of gateway " + p.gwKey + ": scheduler from the gateway, members from each other"),
				VpcId:       aws.String(vpc),
				TagSpecifications: []ec2types.TagSpecification{{
					ResourceType: ec2types.ResourceTypeSecurityGroup,
					Tags: []ec2types.Tag{
						{Key: aws.String("Name"), Value: aws.String(p.groupName(cluster))},
						{Key: aws.String(tagGateway), Value: aws.String(p.idTag())},
						{Key: aws.String(tagCluster), Value: aws.String(cluster)},
						{Key: aws.String(tagMember), Value: aws.String(clusterMember)},
						{Key: aws.String(tagOwner), Value: aws.String(tagValue(owner))},
					},
				}},
			})
		})
		switch {
		case awsutil.ErrorCode(err) == "InvalidGroup.Duplicate":
			// Made by a concurrent or earlier call whose answer was lost.
			if g, err = p.findGroup(ctx, cluster, vpc); err != nil {
				return "", err
			}
			if g == nil {
				return "", fmt.Errorf("fargate provider: security group %s is reported to exist but cannot be found", p.groupName(cluster))
			}
		case err != nil:
			return "", fmt.Errorf("fargate provider: create security group %s in %s: %w", p.groupName(cluster), vpc, err)
		default:
			g = &ec2types.SecurityGroup{GroupId: out.GroupId}
			p.log.Info("created security group", "cluster", cluster, "group", aws.ToString(out.GroupId), "vpc", vpc)
			crashpoint.Hit(ctx, pointGroupCreated)
		}
	}
	id = aws.ToString(g.GroupId)
	if missing := awsutil.Missing(p.ingress().Rules(id), g.IpPermissions); len(missing) > 0 {
		_, err := call(ctx, p, "AuthorizeSecurityGroupIngress", func(ctx context.Context) (*ec2.AuthorizeSecurityGroupIngressOutput, error) {
			return p.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: missing})
		})
		// A duplicate means a retried request had already added them.
		switch {
		case err != nil && awsutil.ErrorCode(err) == "InvalidGroup.NotFound" && p.cfg.GatewaySecurityGroup != "":
			return "", fmt.Errorf("fargate provider: the gateway's security group %s is not in %s, the subnets' VPC; set gateway_security_group to the group of the gateway's tasks in that VPC: %w",
				p.cfg.GatewaySecurityGroup, vpc, err)
		case err != nil && awsutil.ErrorCode(err) != "InvalidPermission.Duplicate":
			return "", fmt.Errorf("fargate provider: allow the gateway into security group %s: %w", id, err)
		}
		crashpoint.Hit(ctx, pointGroupAuthorized)
	}
	if stale := awsutil.Stale(p.ingress().Rules(id), g.IpPermissions); len(stale) > 0 {
		// A group made under an earlier configuration (gateway_cidrs, or
		// another gateway group) keeps no source that is no longer wanted.
		_, err := call(ctx, p, "RevokeSecurityGroupIngress", func(ctx context.Context) (*ec2.RevokeSecurityGroupIngressOutput, error) {
			return p.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: stale})
		})
		// Not found means another process removed them meanwhile.
		if err != nil && awsutil.ErrorCode(err) != "InvalidPermission.NotFound" {
			return "", fmt.Errorf("fargate provider: remove ingress rules no longer wanted from security group %s: %w", id, err)
		}
		p.log.Info("removed ingress rules no longer wanted", "cluster", cluster, "group", id, "rules", len(stale))
	}
	p.mu.Lock()
	p.groups[cluster] = id
	p.mu.Unlock()
	return id, nil
}

// ingress is what a cluster's security group admits (awsutil.Ingress).
func (p *Provider) ingress() awsutil.Ingress {
	return awsutil.Ingress{GatewayGroup: p.cfg.GatewaySecurityGroup, GatewayCIDRs: p.cfg.GatewayCIDRs, FromPort: schedulerPort, ToPort: dashboardPort}
}

// ---- the cluster's TLS secret ----

// ensureSecret stores the cluster's certificate and key in Secrets Manager
// (once: a secret already made under the cluster's name is reused) and
// returns its ARN, which the task definition references.
func (p *Provider) ensureSecret(ctx context.Context, spec providers.ClusterSpec) (string, error) {
	p.mu.Lock()
	arn := p.secrets[spec.Name]
	p.mu.Unlock()
	if arn != "" {
		return arn, nil
	}
	unlock, err := p.locks.Lock(ctx, "secret/"+spec.Name)
	if err != nil {
		return "", err
	}
	defer unlock()
	name := p.secretName(spec.Name)
	value, err := json.Marshal(map[string]string{"cert": string(spec.TLSCert), "key": string(spec.TLSKey)})
	if err != nil {
		return "", fmt.Errorf("fargate provider: %w", err)
	}
	in := &secretsmanager.CreateSecretInput{
		Name:               aws.String(name),
		Description:        aws.String("TLS certificate and key of Dask cluster " + spec.Name + " (gateway " + p.gwKey + ")"),
		SecretString:       aws.String(string(value)),
		ClientRequestToken: aws.String(p.secretToken(spec.Name)),
		Tags: []smtypes.Tag{
			{Key: aws.String(tagGateway), Value: aws.String(p.idTag())},
			{Key: aws.String(tagCluster), Value: aws.String(spec.Name)},
			{Key: aws.String(tagMember), Value: aws.String(clusterMember)},
			{Key: aws.String(tagOwner), Value: aws.String(tagValue(spec.Owner))},
		},
	}
	if p.cfg.KMSKeyID != "" {
		in.KmsKeyId = aws.String(p.cfg.KMSKeyID)
	}
	out, err := call(ctx, p, "CreateSecret", func(ctx context.Context) (*secretsmanager.CreateSecretOutput, error) {
		return p.sm.CreateSecret(ctx, in)
	})
	switch {
	case err == nil:
		arn = aws.ToString(out.ARN)
		p.log.Info("stored the cluster's TLS secret", "cluster", spec.Name, "secret", name)
		crashpoint.Hit(ctx, pointSecretCreated)
	case awsutil.ErrorCode(err) == "ResourceExistsException":
		// Made by an earlier start of this cluster (the material does not
		// change during a cluster's life).
		d, derr := call(ctx, p, "DescribeSecret", func(ctx context.Context) (*secretsmanager.DescribeSecretOutput, error) {
			return p.sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
		})
		if derr != nil {
			return "", fmt.Errorf("fargate provider: look up secret %s: %w", name, derr)
		}
		owner := ""
		for _, t := range d.Tags {
			if aws.ToString(t.Key) == tagGateway {
				owner = aws.ToString(t.Value)
			}
		}
		if owner != p.idTag() {
			return "", fmt.Errorf("fargate provider: secret %s exists but does not carry this gateway's %s tag", name, tagGateway)
		}
		if d.DeletedDate != nil {
			return "", fmt.Errorf("fargate provider: secret %s is scheduled for deletion; restore or delete it", name)
		}
		arn = aws.ToString(d.ARN)
	default:
		return "", fmt.Errorf("fargate provider: store the TLS secret %s: %w", name, err)
	}
	p.mu.Lock()
	p.secrets[spec.Name] = arn
	p.mu.Unlock()
	return arn, nil
}

// ---- task definitions ----

// Paths inside the container where the entrypoint writes the TLS material.
const (
	containerName = "dask"
	tlsCertPath   = "/tmp/gateway-tls/tls.crt"
	tlsKeyPath    = "/tmp/gateway-tls/tls.key"
	envTLSCert    = "GATEWAY_TLS_CERT"
	envTLSKey     = "GATEWAY_TLS_KEY"
)

// entrypoint runs before Dask: ECS puts the secret's two JSON keys in the
// environment; the script writes them to files only the container user
// can read, drops them from the environment (so that the Dask processes
// and whatever user code they run do not inherit them), and runs its
// arguments: the launcher (taskDefinition), then the command.
const entrypoint = `set -eu
umask 077
mkdir -p /tmp/gateway-tls
printf '%s\n' "$` + envTLSCert + `" > ` + tlsCertPath + `
printf '%s\n' "$` + envTLSKey + `" > ` + tlsKeyPath + `
unset ` + envTLSCert + ` ` + envTLSKey + `
exec "$@"`

// taskDefinition builds the definition for one role and size. The family
// is left for ensureTaskDefinition to name after the content's hash.
func (p *Provider) taskDefinition(cluster, owner, image string, role providers.Role, size taskSize, secretARN string) *ecs.RegisterTaskDefinitionInput {
	c := ecstypes.ContainerDefinition{
		Name:      aws.String(containerName),
		Image:     aws.String(image),
		Essential: aws.Bool(true),
		// The launcher follows the entry point's script as its arguments,
		// and the command (the role, then Dask's arguments) follows the
		// launcher: Docker runs the entry point with the command appended.
		// The launcher is here, not in each launch's overrides, which ECS
		// bounds at 8192 characters; it is the same for every cluster.
		EntryPoint: append([]string{"/bin/sh", "-c", entrypoint, "gateway-entrypoint"}, images.LauncherCommand(p.cfg.Python)...),
		// The role; each launch overrides it with the full command
		// (scheduler address, worker name).
		Command: []string{string(role)},
		Secrets: []ecstypes.Secret{
			// JSON keys of the cluster's secret: "<arn>:<key>::".
			{Name: aws.String(envTLSCert), ValueFrom: aws.String(secretARN + ":cert::")},
			{Name: aws.String(envTLSKey), ValueFrom: aws.String(secretARN + ":key::")},
		},
		Environment: []ecstypes.KeyValuePair{{Name: aws.String("PYTHONUNBUFFERED"), Value: aws.String("1")}},
		// An init process reaps the zombies a nanny and user code leave.
		LinuxParameters: &ecstypes.LinuxParameters{InitProcessEnabled: aws.Bool(true)},
	}
	if role == providers.RoleScheduler {
		// The dashboard is served over TLS with the cluster's certificate
		// (Dask's distributed.scheduler.dashboard.tls settings), so that the
		// gateway's hop to it is authenticated like the Dask port.
		c.Environment = append(c.Environment,
			ecstypes.KeyValuePair{Name: aws.String("DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE"), Value: aws.String(tlsCertPath)},
			ecstypes.KeyValuePair{Name: aws.String("DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT"), Value: aws.String(tlsCertPath)},
			ecstypes.KeyValuePair{Name: aws.String("DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY"), Value: aws.String(tlsKeyPath)},
		)
		c.PortMappings = []ecstypes.PortMapping{
			{ContainerPort: aws.Int32(schedulerPort), Protocol: ecstypes.TransportProtocolTcp},
			{ContainerPort: aws.Int32(dashboardPort), Protocol: ecstypes.TransportProtocolTcp},
		}
	}
	if p.cfg.LogGroup != "" {
		c.LogConfiguration = &ecstypes.LogConfiguration{
			LogDriver: ecstypes.LogDriverAwslogs,
			Options: map[string]string{
				"awslogs-group":         p.cfg.LogGroup,
				"awslogs-region":        p.cfg.Region,
				"awslogs-stream-prefix": "gateway",
			},
		}
	}
	in := &ecs.RegisterTaskDefinitionInput{
		RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
		NetworkMode:             ecstypes.NetworkModeAwsvpc,
		Cpu:                     aws.String(strconv.Itoa(size.CPU)),
		Memory:                  aws.String(strconv.Itoa(size.Memory)),
		ExecutionRoleArn:        aws.String(p.cfg.ExecutionRoleArn),
		RuntimePlatform: &ecstypes.RuntimePlatform{
			CpuArchitecture:       ecstypes.CPUArchitecture(p.cfg.CPUArchitecture),
			OperatingSystemFamily: ecstypes.OSFamilyLinux,
		},
		ContainerDefinitions: []ecstypes.ContainerDefinition{c},
		Tags: []ecstypes.Tag{
			{Key: aws.String(tagGateway), Value: aws.String(p.idTag())},
			{Key: aws.String(tagCluster), Value: aws.String(cluster)},
			{Key: aws.String(tagMember), Value: aws.String(clusterMember)},
			{Key: aws.String(tagOwner), Value: aws.String(tagValue(owner))},
		},
	}
	if p.cfg.TaskRoleArn != "" {
		in.TaskRoleArn = aws.String(p.cfg.TaskRoleArn)
	}
	return in
}

// ensureTaskDefinition returns the ARN of the task definition for one
// (image, size, roles, command shape, log settings, cluster secret),
// registering it only when no active revision of its family exists. The
// family is named after the hash of that content, so equal content maps to
// one definition however often and by whichever gateway process it is
// asked for.
//
// The cluster's secret is part of the content: ECS offers no way to give a
// task its secrets other than the definition (RunTask overrides cannot
// carry them), so each cluster has its own definitions, shared by its
// workers, and StopCluster removes them.
func (p *Provider) ensureTaskDefinition(ctx context.Context, cluster, owner, image string, role providers.Role, size taskSize, secretARN string) (string, error) {
	in := p.taskDefinition(cluster, owner, image, role, size, secretARN)
	// The whole request is hashed, so that any change to what would be
	// registered (a new image, size or command shape, or this code's next
	// version) names a new family; the old one goes with its cluster.
	content, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("fargate provider: %w", err)
	}
	family := p.familyPrefix(cluster) + shortHash(string(content), 12)
	in.Family = aws.String(family)
	p.mu.Lock()
	arn := p.taskDefs[family]
	p.mu.Unlock()
	if arn != "" {
		return arn, nil
	}
	unlock, err := p.locks.Lock(ctx, "taskdef/"+family)
	if err != nil {
		return "", err
	}
	defer unlock()
	got, err := call(ctx, p, "DescribeTaskDefinition", func(ctx context.Context) (*ecs.DescribeTaskDefinitionOutput, error) {
		return p.ecs.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(family)})
	})
	switch {
	case err == nil && got.TaskDefinition != nil && got.TaskDefinition.Status == ecstypes.TaskDefinitionStatusActive:
		arn = aws.ToString(got.TaskDefinition.TaskDefinitionArn)
	case err == nil || isNotFound(err):
		reg, err := call(ctx, p, "RegisterTaskDefinition", func(ctx context.Context) (*ecs.RegisterTaskDefinitionOutput, error) {
			return p.ecs.RegisterTaskDefinition(ctx, in)
		})
		if err != nil {
			return "", fmt.Errorf("fargate provider: register task definition %s (%s, %s): %w", family, role, size, err)
		}
		arn = aws.ToString(reg.TaskDefinition.TaskDefinitionArn)
		p.log.Info("registered task definition", "cluster", cluster, "role", role, "size", size.String(), "arn", arn)
		crashpoint.Hit(ctx, pointTaskDefRegistered)
	default:
		return "", fmt.Errorf("fargate provider: look up task definition %s: %w", family, err)
	}
	p.mu.Lock()
	p.taskDefs[family] = arn
	p.mu.Unlock()
	return arn, nil
}
