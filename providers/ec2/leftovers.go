package ec2

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// maxLeftoverPages bounds each listing of leftovers.
const maxLeftoverPages = 100

// ListLeftovers lists this gateway's security groups and TLS parameters,
// found by their tags rather than through instances: EC2 forgets
// terminated instances after about an hour, and a cluster whose instances
// are gone would otherwise leave them for the operator. Each is checked
// exactly: the gateway-id tag and a name the provider would have given it
// for the cluster its tags or name say.
func (p *Provider) ListLeftovers(ctx context.Context) ([]providers.Leftover, error) {
	groups, err := p.leftoverGroups(ctx)
	if err != nil {
		return nil, err
	}
	params, err := p.leftoverParameters(ctx)
	if err != nil {
		return nil, err
	}
	return append(groups, params...), nil
}

// leftoverGroups lists the security groups tagged gateway-id = this
// gateway (EC2's tag:<key> filter matches the value exactly).
func (p *Provider) leftoverGroups(ctx context.Context) ([]providers.Leftover, error) {
	in := &awsec2.DescribeSecurityGroupsInput{Filters: []types.Filter{filter("tag:"+tagGateway, p.cfg.GatewayID)}}
	var out []providers.Leftover
	for range maxLeftoverPages {
		page, err := call(ctx, p, "DescribeSecurityGroups", func(ctx context.Context) (*awsec2.DescribeSecurityGroupsOutput, error) {
			return p.ec2.DescribeSecurityGroups(ctx, in)
		})
		if err != nil {
			return nil, p.apiError("DescribeSecurityGroups", err)
		}
		for _, g := range page.SecurityGroups {
			cluster := tagValue(g.Tags, tagCluster)
			if tagValue(g.Tags, tagGateway) != p.cfg.GatewayID || cluster == "" || aws.ToString(g.GroupName) != p.groupName(cluster) {
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

// leftoverParameters lists the parameters under /gateway/<gateway-id>/
// that are tagged as this gateway's. DescribeParameters reads names and
// dates only, never a value; its Path filter follows the hierarchy (so
// /gateway/gw-1 does not take in /gateway/gw-10) and its tag filter
// matches exactly.
func (p *Provider) leftoverParameters(ctx context.Context) ([]providers.Leftover, error) {
	root := "/gateway/" + p.cfg.GatewayID
	in := &ssm.DescribeParametersInput{
		ParameterFilters: []ssmtypes.ParameterStringFilter{
			{Key: aws.String("Path"), Option: aws.String("Recursive"), Values: []string{root}},
			{Key: aws.String("tag:" + tagGateway), Option: aws.String("Equals"), Values: []string{p.cfg.GatewayID}},
		},
		MaxResults: aws.Int32(50),
	}
	var out []providers.Leftover
	for range maxLeftoverPages {
		page, err := call(ctx, p, "DescribeParameters", func(ctx context.Context) (*ssm.DescribeParametersOutput, error) {
			return p.ssm.DescribeParameters(ctx, in)
		})
		if err != nil {
			return nil, p.apiError("DescribeParameters", err)
		}
		for _, m := range page.Parameters {
			name := aws.ToString(m.Name)
			cluster, ok := strings.CutPrefix(name, root+"/")
			if cluster, ok = strings.CutSuffix(cluster, "/tls"); !ok || cluster == "" || strings.Contains(cluster, "/") || p.parameterName(cluster) != name {
				continue
			}
			out = append(out, providers.Leftover{Kind: providers.LeftoverParameter, ID: name, Cluster: cluster, Created: aws.ToTime(m.LastModifiedDate)})
		}
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			break
		}
	}
	return out, nil
}

// DeleteLeftover removes a security group or parameter ListLeftovers
// found; one already gone is success. A group still held by an interface
// (DependencyViolation) is an error: the reaper tries again next pass.
func (p *Provider) DeleteLeftover(ctx context.Context, l providers.Leftover) error {
	switch l.Kind {
	case providers.LeftoverSecurityGroup:
		_, err := call(ctx, p, "DeleteSecurityGroup", func(ctx context.Context) (*awsec2.DeleteSecurityGroupOutput, error) {
			return p.ec2.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: aws.String(l.ID)})
		})
		if err != nil && awsutil.ErrorCode(err) != codeGroupNotFound {
			return p.apiError("DeleteSecurityGroup "+l.ID, err)
		}
		crashpoint.Hit(ctx, pointLeftoverGroupDeleted)
	case providers.LeftoverParameter:
		_, err := call(ctx, p, "DeleteParameter", func(ctx context.Context) (*ssm.DeleteParameterOutput, error) {
			return p.ssm.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(l.ID)})
		})
		if err != nil && awsutil.ErrorCode(err) != codeParameterNotFound {
			return p.apiError("DeleteParameter "+l.ID, err)
		}
		crashpoint.Hit(ctx, pointLeftoverParameterDeleted)
	default:
		return fmt.Errorf("ec2 provider: no leftover of kind %q", l.Kind)
	}
	p.forget(l.Cluster) // nothing of it is cached any more
	return nil
}
