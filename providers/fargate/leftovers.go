package fargate

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
)

// ListLeftovers lists this gateway's security groups, TLS secrets and task
// definition families by their tags, not through tasks: ECS lists running
// tasks only (and forgets stopped ones within about an hour), so a cluster
// whose tasks have all ended leaves nothing that leads to them. Each is
// checked exactly: the gateway-id tag and the name the provider gives it
// for the cluster its gateway-cluster tag names.
func (p *Provider) ListLeftovers(ctx context.Context) ([]providers.Leftover, error) {
	groups, err := p.leftoverGroups(ctx)
	if err != nil {
		return nil, err
	}
	secrets, err := p.leftoverSecrets(ctx)
	if err != nil {
		return nil, err
	}
	families, err := p.leftoverFamilies(ctx)
	if err != nil {
		return nil, err
	}
	return append(append(groups, secrets...), families...), nil
}

// leftoverGroups: EC2's tag:<key> filter matches the value exactly.
func (p *Provider) leftoverGroups(ctx context.Context) ([]providers.Leftover, error) {
	in := &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:" + tagGateway), Values: []string{p.idTag()}}}}
	var out []providers.Leftover
	for range maxPages {
		page, err := call(ctx, p, "DescribeSecurityGroups", func(ctx context.Context) (*ec2.DescribeSecurityGroupsOutput, error) {
			return p.ec2.DescribeSecurityGroups(ctx, in)
		})
		if err != nil {
			return nil, fmt.Errorf("fargate provider: list the gateway's security groups: %w", err)
		}
		for _, g := range page.SecurityGroups {
			cluster := ec2Tag(g.Tags, tagCluster)
			if ec2Tag(g.Tags, tagGateway) != p.idTag() || !validName(cluster) || aws.ToString(g.GroupName) != p.groupName(cluster) {
				continue
			}
			out = append(out, providers.Leftover{Kind: providers.LeftoverSecurityGroup, ID: aws.ToString(g.GroupId), Cluster: cluster})
		}
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			break
		}
	}
	return out, nil
}

// leftoverSecrets lists the secrets under gateway/<key>/ with a gateway-id
// tag. ListSecrets' filters match prefixes (of the name, of any tag key,
// of any tag value, each on its own), so the tags that came back are what
// decides: gateway-id must be this gateway's exactly.
func (p *Provider) leftoverSecrets(ctx context.Context) ([]providers.Leftover, error) {
	in := &secretsmanager.ListSecretsInput{
		Filters: []smtypes.Filter{
			{Key: smtypes.FilterNameStringTypeName, Values: []string{"gateway/" + p.gwKey + "/"}},
			{Key: smtypes.FilterNameStringTypeTagKey, Values: []string{tagGateway}},
		},
		MaxResults: aws.Int32(100),
	}
	var out []providers.Leftover
	for range maxPages {
		page, err := call(ctx, p, "ListSecrets", func(ctx context.Context) (*secretsmanager.ListSecretsOutput, error) {
			return p.sm.ListSecrets(ctx, in)
		})
		if err != nil {
			return nil, fmt.Errorf("fargate provider: list the gateway's secrets: %w", err)
		}
		for _, s := range page.SecretList {
			tags := map[string]string{}
			for _, t := range s.Tags {
				tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
			cluster := tags[tagCluster]
			if tags[tagGateway] != p.idTag() || !validName(cluster) || aws.ToString(s.Name) != p.secretName(cluster) || s.DeletedDate != nil {
				continue
			}
			out = append(out, providers.Leftover{Kind: providers.LeftoverSecret, ID: aws.ToString(s.ARN), Cluster: cluster, Created: aws.ToTime(s.CreatedDate)})
		}
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			break
		}
	}
	return out, nil
}

// leftoverFamilies lists the task definition families named for this
// gateway (ListTaskDefinitionFamilies matches the prefix), takes the
// cluster from the name, and checks the tags of a revision: the 8-digit
// key in the name could be another gateway's too. A family whose
// revisions are all being deleted is not listed.
func (p *Provider) leftoverFamilies(ctx context.Context) ([]providers.Leftover, error) {
	prefix := "gateway-" + p.gwKey + "-"
	in := &ecs.ListTaskDefinitionFamiliesInput{FamilyPrefix: aws.String(prefix), Status: ecstypes.TaskDefinitionFamilyStatusAll}
	var families []string
	for range maxPages {
		page, err := call(ctx, p, "ListTaskDefinitionFamilies", func(ctx context.Context) (*ecs.ListTaskDefinitionFamiliesOutput, error) {
			return p.ecs.ListTaskDefinitionFamilies(ctx, in)
		})
		if err != nil {
			return nil, fmt.Errorf("fargate provider: list the gateway's task definition families: %w", err)
		}
		families = append(families, page.Families...)
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			break
		}
	}
	var out []providers.Leftover
	for _, family := range families {
		rest := strings.TrimPrefix(family, prefix)
		if len(rest) < 14 || rest[len(rest)-13] != '-' {
			continue
		}
		cluster := rest[:len(rest)-13]
		if !validName(cluster) || !p.ownFamily(family, cluster) {
			continue
		}
		var arn string
		for _, status := range []ecstypes.TaskDefinitionStatus{ecstypes.TaskDefinitionStatusActive, ecstypes.TaskDefinitionStatusInactive} {
			arns, err := p.listTaskDefinitions(ctx, family, status)
			if err != nil {
				return nil, fmt.Errorf("fargate provider: list task definitions of %s: %w", family, err)
			}
			if len(arns) > 0 {
				arn = arns[0]
				break
			}
		}
		if arn == "" {
			continue // every revision is being deleted already
		}
		d, err := call(ctx, p, "DescribeTaskDefinition", func(ctx context.Context) (*ecs.DescribeTaskDefinitionOutput, error) {
			return p.ecs.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(arn), Include: []ecstypes.TaskDefinitionField{ecstypes.TaskDefinitionFieldTags}})
		})
		if isNotFound(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("fargate provider: describe task definition %s: %w", arn, err)
		}
		tags := map[string]string{}
		for _, t := range d.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if tags[tagGateway] != p.idTag() || tags[tagCluster] != cluster {
			continue
		}
		l := providers.Leftover{Kind: providers.LeftoverTaskDefFamily, ID: family, Cluster: cluster}
		if d.TaskDefinition != nil {
			l.Created = aws.ToTime(d.TaskDefinition.RegisteredAt)
		}
		out = append(out, l)
	}
	return out, nil
}

// DeleteLeftover removes a security group, secret or task definition
// family ListLeftovers found; one already gone is success. A group still
// held by a stopped task's interface (DependencyViolation) is an error:
// the reaper tries again on its next pass.
func (p *Provider) DeleteLeftover(ctx context.Context, l providers.Leftover) error {
	switch l.Kind {
	case providers.LeftoverSecurityGroup:
		_, err := call(ctx, p, "DeleteSecurityGroup", func(ctx context.Context) (*ec2.DeleteSecurityGroupOutput, error) {
			return p.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(l.ID)})
		})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("fargate provider: delete security group %s of %s: %w", l.ID, l.Cluster, err)
		}
		crashpoint.Hit(ctx, pointLeftoverGroupDeleted)
	case providers.LeftoverSecret:
		_, err := call(ctx, p, "DeleteSecret", func(ctx context.Context) (*secretsmanager.DeleteSecretOutput, error) {
			return p.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(l.ID), ForceDeleteWithoutRecovery: aws.Bool(true)})
		})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("fargate provider: delete secret %s of %s: %w", l.ID, l.Cluster, err)
		}
		crashpoint.Hit(ctx, pointLeftoverSecretDeleted)
	case providers.LeftoverTaskDefFamily:
		if !p.ownFamily(l.ID, l.Cluster) {
			return fmt.Errorf("fargate provider: %s is not a task definition family of cluster %s", l.ID, l.Cluster)
		}
		if err := p.deleteFamilies(ctx, l.Cluster, []string{l.ID}); err != nil {
			return err
		}
		crashpoint.Hit(ctx, pointLeftoverFamiliesDeleted)
	default:
		return fmt.Errorf("fargate provider: no leftover of kind %q", l.Kind)
	}
	p.mu.Lock()
	switch l.Kind {
	case providers.LeftoverSecurityGroup:
		delete(p.groups, l.Cluster)
	case providers.LeftoverSecret:
		delete(p.secrets, l.Cluster)
	case providers.LeftoverTaskDefFamily:
		delete(p.taskDefs, l.ID)
	}
	p.mu.Unlock()
	return nil
}
