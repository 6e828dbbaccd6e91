package ec2

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// network is what the provider knows of its subnets.
type network struct {
	vpc   string
	zones map[string]string // subnet id -> Availability Zone
}

// network looks the subnets up once: their VPC is where security groups
// are made, their zones name what was tried in capacity errors.
func (p *Provider) network(ctx context.Context) (*network, error) {
	p.mu.Lock()
	n := p.net
	p.mu.Unlock()
	if n != nil {
		return n, nil
	}
	var subnets []types.Subnet
	var token *string
	for {
		out, err := call(ctx, p, "DescribeSubnets", func(ctx context.Context) (*awsec2.DescribeSubnetsOutput, error) {
			return p.ec2.DescribeSubnets(ctx, &awsec2.DescribeSubnetsInput{SubnetIds: p.cfg.Subnets, NextToken: token})
		})
		if err != nil {
			if strings.HasPrefix(awsutil.ErrorCode(err), "InvalidSubnetID") {
				return nil, fmt.Errorf("ec2 provider: the subnets %s are not all in %s: %s; fix the subnets setting: %w", strings.Join(p.cfg.Subnets, ", "), p.cfg.Region, awsutil.ErrorMessage(err), err)
			}
			return nil, p.apiError("DescribeSubnets", err)
		}
		subnets = append(subnets, out.Subnets...)
		if token = out.NextToken; aws.ToString(token) == "" {
			break
		}
	}
	n = &network{zones: map[string]string{}}
	vpcs := map[string][]string{}
	for _, s := range subnets {
		id := aws.ToString(s.SubnetId)
		n.zones[id] = aws.ToString(s.AvailabilityZone)
		vpcs[aws.ToString(s.VpcId)] = append(vpcs[aws.ToString(s.VpcId)], id)
	}
	for _, id := range p.cfg.Subnets {
		if _, ok := n.zones[id]; !ok {
			return nil, fmt.Errorf("ec2 provider: subnet %s was not found in %s; fix the subnets setting", id, p.cfg.Region)
		}
	}
	if len(vpcs) > 1 {
		var parts []string
		for vpc, ids := range vpcs {
			parts = append(parts, fmt.Sprintf("%s in %s", strings.Join(ids, ", "), vpc))
		}
		slices.Sort(parts)
		return nil, fmt.Errorf("ec2 provider: the subnets are in %d VPCs (%s); a cluster's members share one security group, so list subnets of a single VPC", len(vpcs), strings.Join(parts, "; "))
	}
	n.vpc = aws.ToString(subnets[0].VpcId)
	p.mu.Lock()
	p.net = n
	p.mu.Unlock()
	return n, nil
}

// ensureGroup returns the cluster's security group, making it on the first
// start: TLS and dashboard ports from the gateway's security group, and all
// TCP between the cluster's own members. It is found by its tags
// afterwards, so a crash between creating it and using it loses nothing;
// rules missing after such a crash (or wanted since a configuration
// change) are added, and rules no longer wanted are removed.
func (p *Provider) ensureGroup(ctx context.Context, cluster, owner string, n *network) (string, error) {
	p.mu.Lock()
	id := p.groups[cluster]
	p.mu.Unlock()
	if id != "" {
		return id, nil
	}
	l := p.groupLock(cluster)
	l.Lock()
	defer l.Unlock()
	p.mu.Lock()
	id = p.groups[cluster]
	p.mu.Unlock()
	if id != "" {
		return id, nil
	}

	sg, err := p.findGroup(ctx, cluster, n.vpc)
	if err != nil {
		return "", err
	}
	if sg == nil {
		out, err := call(ctx, p, "CreateSecurityGroup", func(ctx context.Context) (*awsec2.CreateSecurityGroupOutput, error) {
			return p.ec2.CreateSecurityGroup(ctx, &awsec2.CreateSecurityGroupInput{
				GroupName: aws.String(p.groupName(cluster)),
				// EC2 accepts only ASCII letters, digits, spaces and ._-:/()#,@[]+=&;{}!$* here.
				Description:       aws.String(fmt.Sprintf("Dask cluster %s of gateway %s", cluster, p.cfg.GatewayID)),
				VpcId:             aws.String(n.vpc),
				TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup, Tags: ec2Tags(p.memberTags(cluster, "", owner))}},
			})
		})
		switch {
		case awsutil.ErrorCode(err) == codeGroupDuplicate:
			// Another gateway process made it first, or someone else has a
			// group of that name.
			found, ferr := p.findGroup(ctx, cluster, n.vpc)
			if ferr != nil {
				return "", ferr
			}
			if found == nil {
				return "", fmt.Errorf("ec2 provider: a security group named %s exists in %s but is not tagged as this gateway's (or not listed yet); if it is not the gateway's, delete or rename it: %w",
					p.groupName(cluster), n.vpc, err)
			}
			sg = found
		case err != nil:
			return "", p.apiError("CreateSecurityGroup", err)
		default:
			sg = &types.SecurityGroup{GroupId: out.GroupId}
			p.log.Info("created security group", "cluster", cluster, "group", aws.ToString(out.GroupId))
			crashpoint.Hit(ctx, pointGroupCreated)
		}
	}
	id = aws.ToString(sg.GroupId)
	if missing := awsutil.Missing(p.ingress().Rules(id), sg.IpPermissions); len(missing) > 0 {
		_, err := call(ctx, p, "AuthorizeSecurityGroupIngress", func(ctx context.Context) (*awsec2.AuthorizeSecurityGroupIngressOutput, error) {
			return p.ec2.AuthorizeSecurityGroupIngress(ctx, &awsec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: missing})
		})
		// A duplicate means another process added the rules meanwhile.
		switch {
		case err != nil && awsutil.ErrorCode(err) == codeGroupNotFound && p.cfg.GatewaySecurityGroup != "":
			return "", fmt.Errorf("ec2 provider: the gateway's security group %s is not in %s, the subnets' VPC (%s); set gateway_security_group to the group of the gateway's tasks or instances in that VPC: %w",
				p.cfg.GatewaySecurityGroup, n.vpc, awsutil.ErrorMessage(err), err)
		case err != nil && awsutil.ErrorCode(err) != codePermissionDuplicate:
			return "", p.apiError("AuthorizeSecurityGroupIngress", err)
		}
		crashpoint.Hit(ctx, pointGroupAuthorized)
	}
	if stale := awsutil.Stale(p.ingress().Rules(id), sg.IpPermissions); len(stale) > 0 {
		// A group made under an earlier configuration (gateway_cidrs, or
		// another gateway group) keeps no source that is no longer wanted.
		_, err := call(ctx, p, "RevokeSecurityGroupIngress", func(ctx context.Context) (*awsec2.RevokeSecurityGroupIngressOutput, error) {
			return p.ec2.RevokeSecurityGroupIngress(ctx, &awsec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: stale})
		})
		// Not found means another process removed them meanwhile.
		if err != nil && awsutil.ErrorCode(err) != codePermissionNotFound {
			return "", p.apiError("RevokeSecurityGroupIngress", err)
		}
		p.log.Info("removed ingress rules no longer wanted", "cluster", cluster, "group", id, "rules", len(stale))
	}
	p.mu.Lock()
	p.groups[cluster] = id
	p.mu.Unlock()
	return id, nil
}

// findGroup finds the cluster's security group by its tags in the VPC, or
// nil. Tags rather than the name alone, so that a group of the same name
// made by someone else is never opened to the gateway.
func (p *Provider) findGroup(ctx context.Context, cluster, vpc string) (*types.SecurityGroup, error) {
	filters := []types.Filter{
		filter("tag:"+tagGateway, p.cfg.GatewayID),
		filter("tag:"+tagCluster, cluster),
	}
	if vpc != "" {
		filters = append(filters, filter("vpc-id", vpc))
	}
	var found []types.SecurityGroup
	var token *string
	for {
		out, err := call(ctx, p, "DescribeSecurityGroups", func(ctx context.Context) (*awsec2.DescribeSecurityGroupsOutput, error) {
			return p.ec2.DescribeSecurityGroups(ctx, &awsec2.DescribeSecurityGroupsInput{Filters: filters, NextToken: token})
		})
		if err != nil {
			return nil, p.apiError("DescribeSecurityGroups", err)
		}
		// Checked again here, exactly (describe): another gateway's group
		// of the same cluster name is never this gateway's to open or
		// delete.
		for _, g := range out.SecurityGroups {
			if tagValue(g.Tags, tagGateway) == p.cfg.GatewayID && tagsMatch(g.Tags, filters) && aws.ToString(g.GroupName) == p.groupName(cluster) {
				found = append(found, g)
			}
		}
		if token = out.NextToken; aws.ToString(token) == "" {
			break
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	return &found[0], nil
}

// ingress is what a cluster's security group admits (awsutil.Ingress).
func (p *Provider) ingress() awsutil.Ingress {
	return awsutil.Ingress{GatewayGroup: p.cfg.GatewaySecurityGroup, GatewayCIDRs: p.cfg.GatewayCIDRs, FromPort: schedulerPort, ToPort: dashboardPort}
}

// deleteGroup deletes the cluster's security group once nothing uses it.
// Terminated instances release their network interfaces some time after
// they are reported terminated, so DependencyViolation is retried while
// the wait budget lasts.
func (p *Provider) deleteGroup(ctx context.Context, cluster string, b *budget) error {
	sg, err := p.findGroup(ctx, cluster, "")
	if err != nil || sg == nil {
		return err
	}
	id := aws.ToString(sg.GroupId)
	for attempt := 1; ; attempt++ {
		_, err := call(ctx, p, "DeleteSecurityGroup", func(ctx context.Context) (*awsec2.DeleteSecurityGroupOutput, error) {
			return p.ec2.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
		})
		switch code := awsutil.ErrorCode(err); {
		case err == nil:
			p.log.Info("deleted security group", "cluster", cluster, "group", id)
			crashpoint.Hit(ctx, pointClusterGroupDeleted)
			return nil
		case code == codeGroupNotFound:
			return nil
		case code == codeDependencyViolation:
			wait := max(p.backoff(attempt), p.cfg.PollInterval/2)
			if !b.spend(wait) {
				return fmt.Errorf("ec2 provider: security group %s of cluster %s is still in use after %s (DependencyViolation: %s); StopCluster will try again: %w",
					id, cluster, p.cfg.StopTimeout, awsutil.ErrorMessage(err), err)
			}
			p.log.Debug("security group still in use; waiting", "cluster", cluster, "group", id, "wait", wait)
			if err := p.cfg.Sleep(ctx, wait); err != nil {
				return fmt.Errorf("ec2 provider: delete security group %s: %w", id, err)
			}
		default:
			return p.apiError("DeleteSecurityGroup", err)
		}
	}
}

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

// ec2Tags turns a map into EC2 tags, sorted so that requests are
// deterministic (RunInstances' client token requires identical
// parameters on a repeat).
func ec2Tags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// apiError wraps an AWS error with what to do about the usual set-up
// mistakes.
func (p *Provider) apiError(op string, err error) error {
	switch code := awsutil.ErrorCode(err); code {
	case "UnauthorizedOperation", "AccessDenied", "AccessDeniedException":
		return fmt.Errorf("ec2 provider: %s: the gateway's AWS identity is not allowed to call it (%s); grant it the permissions listed in the ec2 provider's documentation: %w", op, code, err)
	case "AuthFailure", "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException":
		return fmt.Errorf("ec2 provider: %s: AWS did not accept the gateway's credentials (%s); check them: %w", op, code, err)
	}
	return fmt.Errorf("ec2 provider: %s: %w", op, err)
}

// budget bounds the time StopCluster spends waiting. It counts the waits
// themselves rather than the clock, so that a test's instant Sleep still
// meets the bound.
type budget struct{ left time.Duration }

// spend takes d from the budget, reporting false when it is used up.
func (b *budget) spend(d time.Duration) bool {
	if d > b.left {
		return false
	}
	b.left -= d
	return true
}
