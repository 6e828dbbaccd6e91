package ec2

import (
	"context"
	"reflect"

	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/gatewayhq/gateway/internal/perms"
)

// ec2API is every EC2 operation the provider calls. IAMActions derives the
// gateway's permissions from it: a call not listed here does not compile.
type ec2API interface {
	AuthorizeSecurityGroupIngress(ctx context.Context, in *awsec2.AuthorizeSecurityGroupIngressInput, opts ...func(*awsec2.Options)) (*awsec2.AuthorizeSecurityGroupIngressOutput, error)
	CreateSecurityGroup(ctx context.Context, in *awsec2.CreateSecurityGroupInput, opts ...func(*awsec2.Options)) (*awsec2.CreateSecurityGroupOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *awsec2.DeleteSecurityGroupInput, opts ...func(*awsec2.Options)) (*awsec2.DeleteSecurityGroupOutput, error)
	DescribeImages(ctx context.Context, in *awsec2.DescribeImagesInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeImagesOutput, error)
	DescribeInstanceTypes(ctx context.Context, in *awsec2.DescribeInstanceTypesInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeInstanceTypesOutput, error)
	DescribeInstances(ctx context.Context, in *awsec2.DescribeInstancesInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeInstancesOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *awsec2.DescribeSecurityGroupsInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeSecurityGroupsOutput, error)
	DescribeSpotInstanceRequests(ctx context.Context, in *awsec2.DescribeSpotInstanceRequestsInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeSpotInstanceRequestsOutput, error)
	DescribeSubnets(ctx context.Context, in *awsec2.DescribeSubnetsInput, opts ...func(*awsec2.Options)) (*awsec2.DescribeSubnetsOutput, error)
	GetConsoleOutput(ctx context.Context, in *awsec2.GetConsoleOutputInput, opts ...func(*awsec2.Options)) (*awsec2.GetConsoleOutputOutput, error)
	RevokeSecurityGroupIngress(ctx context.Context, in *awsec2.RevokeSecurityGroupIngressInput, opts ...func(*awsec2.Options)) (*awsec2.RevokeSecurityGroupIngressOutput, error)
	RunInstances(ctx context.Context, in *awsec2.RunInstancesInput, opts ...func(*awsec2.Options)) (*awsec2.RunInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *awsec2.TerminateInstancesInput, opts ...func(*awsec2.Options)) (*awsec2.TerminateInstancesOutput, error)
}

// ssmAPI is every SSM operation the provider calls (the TLS parameters and
// the public AMI parameters).
type ssmAPI interface {
	DeleteParameter(ctx context.Context, in *ssm.DeleteParameterInput, opts ...func(*ssm.Options)) (*ssm.DeleteParameterOutput, error)
	DescribeParameters(ctx context.Context, in *ssm.DescribeParametersInput, opts ...func(*ssm.Options)) (*ssm.DescribeParametersOutput, error)
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, opts ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

// IAMActions returns the IAM actions the gateway's role needs for this
// provider: every operation it calls, plus ec2:CreateTags (instances,
// volumes and security groups are tagged as they are created),
// ssm:AddTagsToResource (parameters are tagged when put) and iam:PassRole
// (instances run with the members' instance profile). The members' own
// role is another matter (see Config.InstanceProfile).
func IAMActions() []string {
	return perms.AWS(map[string]reflect.Type{
		"ec2": reflect.TypeFor[ec2API](),
		"ssm": reflect.TypeFor[ssmAPI](),
	}, "ec2:CreateTags", "ssm:AddTagsToResource", "iam:PassRole")
}
