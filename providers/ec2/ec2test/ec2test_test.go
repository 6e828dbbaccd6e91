package ec2test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) {
	// Nothing here may reach instance metadata: the clients below have
	// static credentials and a region, and this turns the SDK's metadata
	// client off should anything ask for it.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	os.Exit(m.Run())
}

func sdkConfig() aws.Config {
	return aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
}

func ec2Client(f *EC2) *awsec2.Client {
	return awsec2.NewFromConfig(sdkConfig(), func(o *awsec2.Options) { o.BaseEndpoint = aws.String(f.URL) })
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestUnsignedAndMalformedRequests(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	tests := []struct {
		name, body string
		header     map[string]string
		status     int
		code       string
	}{
		{"unsigned", "Action=DescribeInstances&Version=2016-11-15", nil, 401, "AuthFailure"},
		{"wrong version", "Action=DescribeInstances&Version=2014-01-01", map[string]string{
			"Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/ec2/aws4_request, SignedHeaders=host, Signature=00", "X-Amz-Date": "20260101T000000Z"}, 400, "InvalidParameterValue"},
		{"wrong service", "Action=DescribeInstances&Version=2016-11-15", map[string]string{
			"Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/s3/aws4_request, SignedHeaders=host, Signature=00", "X-Amz-Date": "20260101T000000Z"}, 401, "AuthFailure"},
		{"unknown action", "Action=RebootInstances&Version=2016-11-15", map[string]string{
			"Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/ec2/aws4_request, SignedHeaders=host, Signature=00", "X-Amz-Date": "20260101T000000Z"}, 400, "InvalidAction"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, f.URL, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), "<Response><Errors><Error><Code>"+tc.code+"</Code>") || !strings.Contains(string(b), "<RequestID>") {
				t.Errorf("status %d, body %s", resp.StatusCode, b)
			}
		})
	}
}

func TestSDKReadsAnswersAndErrors(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	ctx := context.Background()

	out, err := c.DescribeSubnets(ctx, &awsec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("availability-zone"), Values: []string{"eu-west-1*"}}}})
	if err != nil || len(out.Subnets) != 2 || aws.ToString(out.Subnets[1].AvailabilityZone) != "eu-west-1b" {
		t.Fatalf("DescribeSubnets = %+v, %v", out, err)
	}
	_, err = c.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("no-such-filter"), Values: []string{"x"}}}})
	if code(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v", err)
	}
	_, err = c.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000dead"}})
	if code(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("unknown instance: %v", err)
	}

	// Faults by instance type and subnet; the HTTP status EC2 uses.
	f.Fail(Fault{Action: "RunInstances", Code: "InsufficientInstanceCapacity", InstanceType: "m6i.large", Subnet: "subnet-0a000000000000001"})
	sg, err := c.CreateSecurityGroup(ctx, &awsec2.CreateSecurityGroupInput{GroupName: aws.String("g"), Description: aws.String("d"), VpcId: aws.String("vpc-0c000000000000001")})
	if err != nil {
		t.Fatal(err)
	}
	run := func(subnet, token string) (*awsec2.RunInstancesOutput, error) {
		return c.RunInstances(ctx, &awsec2.RunInstancesInput{
			ImageId: aws.String(DefaultImages()[0].ID), InstanceType: types.InstanceTypeM6iLarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			SubnetId: aws.String(subnet), SecurityGroupIds: []string{aws.ToString(sg.GroupId)}, ClientToken: aws.String(token),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
		})
	}
	_, err = run("subnet-0b000000000000002", "t1")
	if err != nil {
		t.Fatalf("RunInstances in the other subnet: %v", err)
	}
	_, err = run("subnet-0a000000000000001", "t2")
	var re interface{ HTTPStatusCode() int }
	if code(err) != "InsufficientInstanceCapacity" || !errors.As(err, &re) || re.HTTPStatusCode() != 500 {
		t.Errorf("injected capacity error: %v", err)
	}
	// Client tokens: same parameters, same instance; other parameters, an error.
	a, err := run("subnet-0a000000000000001", "t3")
	if err != nil {
		t.Fatal(err)
	}
	b, err := run("subnet-0a000000000000001", "t3")
	if err != nil || aws.ToString(b.Instances[0].InstanceId) != aws.ToString(a.Instances[0].InstanceId) {
		t.Errorf("repeat with the same token: %v, %v", b, err)
	}
	if _, err := run("subnet-0b000000000000002", "t3"); code(err) != "IdempotentParameterMismatch" {
		t.Errorf("token reused with other parameters: %v", err)
	}
	in := a.Instances[0]
	if in.State.Name != types.InstanceStateNameRunning || !strings.HasPrefix(aws.ToString(in.PrivateIpAddress), "10.0.1.") || aws.ToTime(in.LaunchTime).IsZero() || len(in.Tags) != 1 {
		t.Errorf("instance = %+v", in)
	}
	// Security group in use.
	if _, err := c.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); code(err) != "DependencyViolation" {
		t.Errorf("deleting a group in use: %v", err)
	}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &awsec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: []types.IpPermission{{
		IpProtocol: aws.String("tcp"), FromPort: aws.Int32(1), ToPort: aws.Int32(2), IpRanges: []types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}}}}); err != nil {
		t.Fatal(err)
	}
	groups, err := c.DescribeSecurityGroups(ctx, &awsec2.DescribeSecurityGroupsInput{GroupIds: []string{aws.ToString(sg.GroupId)}})
	if err != nil || len(groups.SecurityGroups) != 1 || len(groups.SecurityGroups[0].IpPermissions) != 1 ||
		aws.ToString(groups.SecurityGroups[0].IpPermissions[0].IpRanges[0].CidrIp) != "10.0.0.0/8" ||
		aws.ToString(groups.SecurityGroups[0].IpPermissionsEgress[0].IpRanges[0].CidrIp) != "0.0.0.0/0" {
		t.Errorf("DescribeSecurityGroups = %+v, %v", groups, err)
	}
}

func TestSSM(t *testing.T) {
	s := NewSSM(t, "eu-west-1")
	c := ssm.NewFromConfig(sdkConfig(), func(o *ssm.Options) { o.BaseEndpoint = aws.String(s.URL) })
	ctx := context.Background()
	name := aws.String("/gateway/x/c/tls")
	if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: name, Value: aws.String("secret"), Type: ssmtypes.ParameterTypeSecureString,
		Tags: []ssmtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: name, Value: aws.String("secret2"), Type: ssmtypes.ParameterTypeSecureString})
	var exists *ssmtypes.ParameterAlreadyExists
	if !errors.As(err, &exists) {
		t.Errorf("put over an existing parameter: %v", err)
	}
	if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: name, Value: aws.String("x"), Overwrite: aws.Bool(true),
		Tags: []ssmtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); code(err) != "ValidationException" {
		t.Errorf("tags with overwrite: %v", err)
	}
	got, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: name})
	if err != nil || aws.ToString(got.Parameter.Value) == "secret" {
		t.Errorf("a SecureString read without decryption: %+v, %v", got, err)
	}
	got, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: name, WithDecryption: aws.Bool(true)})
	if err != nil || aws.ToString(got.Parameter.Value) != "secret" {
		t.Errorf("GetParameter = %+v, %v", got, err)
	}
	if p, _ := s.Parameter(*name); p.Tags["k"] != "v" || p.KeyID != "alias/aws/ssm" {
		t.Errorf("parameter = %+v", p)
	}
	if _, err := c.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: name}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: name})
	var nf *ssmtypes.ParameterNotFound
	if !errors.As(err, &nf) {
		t.Errorf("deleting a missing parameter: %v", err)
	}
	for _, r := range s.Requests("") {
		if r.AccessKey != "AKIDFAKE" || r.Service != "ssm" {
			t.Errorf("request %+v", r)
		}
	}
}

func TestHelpers(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{{"a*", "abc", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"*", "", true}, {"x", "y", false}} {
		if wildcard(tc.p, tc.s) != tc.ok {
			t.Errorf("wildcard(%q, %q) != %v", tc.p, tc.s, tc.ok)
		}
	}
	items := []int{1, 2, 3, 4, 5}
	pg, next, err := page(items, "", 2)
	if err != nil || len(pg) != 2 || next != "page-2" {
		t.Errorf("page 1 = %v %q %v", pg, next, err)
	}
	pg, next, _ = page(items, "page-4", 2)
	if len(pg) != 1 || next != "" {
		t.Errorf("last page = %v %q", pg, next)
	}
	if _, _, err := page(items, "bogus", 2); err == nil {
		t.Error("a bogus token was accepted")
	}
	v := url.Values{"Filter.2.Name": {"b"}, "Filter.1.Name": {"a"}, "Filter.1.Value.2": {"y"}, "Filter.1.Value.1": {"x"}}
	f := parseFilters(v)
	if len(f) != 2 || strings.Join(f["a"], ",") != "x,y" {
		t.Errorf("filters = %v", f)
	}
}

// TestSourceGroupRules: UserIdGroupPairs as EC2 documents them. A rule may
// name a group of the same VPC by id (the group itself included); a group
// elsewhere or unknown is InvalidGroup.NotFound; a rule that exists is
// InvalidPermission.Duplicate and the whole request is refused; the rules
// come back in DescribeSecurityGroups as pairs.
func TestSourceGroupRules(t *testing.T) {
	ctx := context.Background()
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	f.AddSecurityGroup(SecurityGroup{ID: "sg-0e000000000000001", Name: "gw", Description: "gateway", VPC: "vpc-0c000000000000001"})
	f.AddSecurityGroup(SecurityGroup{ID: "sg-0e000000000000002", Name: "other", Description: "elsewhere", VPC: "vpc-0ffffffffffffffff"})
	sg, err := c.CreateSecurityGroup(ctx, &awsec2.CreateSecurityGroupInput{GroupName: aws.String("c1"), Description: aws.String("c1"), VpcId: aws.String("vpc-0c000000000000001")})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(sg.GroupId)
	pair := func(src string) []types.IpPermission {
		return []types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(8786), ToPort: aws.Int32(8787),
			UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(src), Description: aws.String("from " + src)}}}}
	}
	authorize := func(perms []types.IpPermission) error {
		_, err := c.AuthorizeSecurityGroupIngress(ctx, &awsec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms})
		return err
	}
	if err := authorize(pair("sg-0e000000000000001")); err != nil {
		t.Fatalf("gateway group: %v", err)
	}
	if err := authorize(pair(id)); err != nil {
		t.Fatalf("self reference: %v", err)
	}
	if err := authorize(pair("sg-0e000000000000002")); code(err) != "InvalidGroup.NotFound" || !strings.Contains(err.Error(), "vpc-0c000000000000001") {
		t.Errorf("group in another VPC: %v", err)
	}
	if err := authorize(pair("sg-0e000000000000999")); code(err) != "InvalidGroup.NotFound" {
		t.Errorf("unknown group: %v", err)
	}
	// One new rule and one existing one: nothing is added.
	both := append(pair("sg-0e000000000000001"), types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(1), ToPort: aws.Int32(2),
		UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}})
	if err := authorize(both); code(err) != "InvalidPermission.Duplicate" {
		t.Errorf("duplicate rule: %v", err)
	}
	out, err := c.DescribeSecurityGroups(ctx, &awsec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Fatalf("describe: %+v, %v", out, err)
	}
	var srcs []string
	for _, p := range out.SecurityGroups[0].IpPermissions {
		if aws.ToInt32(p.FromPort) != 8786 || aws.ToInt32(p.ToPort) != 8787 || len(p.IpRanges)+len(p.Ipv6Ranges) != 0 {
			t.Errorf("permission %+v", p)
		}
		for _, g := range p.UserIdGroupPairs {
			srcs = append(srcs, aws.ToString(g.GroupId))
		}
	}
	if strings.Join(srcs, ",") != "sg-0e000000000000001,"+id {
		t.Errorf("sources = %v", srcs)
	}
	// Revoking: every rule named must exist, else nothing is removed.
	revoke := func(perms []types.IpPermission) error {
		_, err := c.RevokeSecurityGroupIngress(ctx, &awsec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms})
		return err
	}
	missing := types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(1), ToPort: aws.Int32(2), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}}
	if err := revoke(append(pair(id), missing)); code(err) != "InvalidPermission.NotFound" {
		t.Errorf("revoking a rule that does not exist: %v", err)
	}
	if err := revoke(pair(id)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	out, err = c.DescribeSecurityGroups(ctx, &awsec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil || len(out.SecurityGroups[0].IpPermissions) != 1 || len(out.SecurityGroups[0].IpPermissions[0].UserIdGroupPairs) != 1 ||
		aws.ToString(out.SecurityGroups[0].IpPermissions[0].UserIdGroupPairs[0].GroupId) != "sg-0e000000000000001" {
		t.Errorf("after revoke: %+v, %v", out, err)
	}
}
