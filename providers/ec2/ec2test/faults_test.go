package ec2test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) pass(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func runOne(t *testing.T, c *awsec2.Client, token, group string) (*awsec2.RunInstancesOutput, error) {
	t.Helper()
	in := &awsec2.RunInstancesInput{
		ImageId: aws.String("ami-0123456789abcdef0"), InstanceType: "m6i.large",
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String("subnet-0a000000000000001"),
	}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	if group != "" {
		in.SecurityGroupIds = []string{group}
	}
	return c.RunInstances(context.Background(), in)
}

// TestDetachDelay: a group stays in use (DependencyViolation) while its
// instance's interface detaches, for the delay after the instance is
// reported terminated, then it can be deleted.
func TestDetachDelay(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	f.SetClock(clock.now)
	f.SetDetachDelay(30 * time.Second)
	c := ec2Client(f)
	ctx := context.Background()
	g, err := c.CreateSecurityGroup(ctx, &awsec2.CreateSecurityGroupInput{GroupName: aws.String("g"), Description: aws.String("d"), VpcId: aws.String("vpc-0c000000000000001")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runOne(t, c, "", aws.ToString(g.GroupId))
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	del := func() error {
		_, err := c.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: g.GroupId})
		return err
	}
	if err := del(); code(err) != "DependencyViolation" {
		t.Fatalf("delete while running: %v", err)
	}
	f.Terminate(id)
	clock.pass(29 * time.Second)
	if err := del(); code(err) != "DependencyViolation" {
		t.Fatalf("delete 29s after termination: %v", err)
	}
	clock.pass(time.Second)
	if err := del(); err != nil {
		t.Fatalf("delete after the interface detached: %v", err)
	}
}

// TestTerminatedListing: a terminated instance is listed for an hour,
// then forgotten.
func TestTerminatedListing(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	f.SetClock(clock.now)
	c := ec2Client(f)
	ctx := context.Background()
	out, err := runOne(t, c, "", "")
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	f.Terminate(id)
	clock.pass(59 * time.Minute)
	d, err := c.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(d.Reservations) != 1 || d.Reservations[0].Instances[0].State.Name != types.InstanceStateNameTerminated {
		t.Fatalf("59 minutes after: %+v, %v", d, err)
	}
	clock.pass(time.Minute)
	if _, err := c.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{InstanceIds: []string{id}}); code(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("an hour after: %v", err)
	}
}

// TestThrottleAndLostAnswers: a throttling burst refuses every action for
// n calls; a lost answer acts first, so the repeated RunInstances with
// the same client token returns the same instance.
func TestThrottleAndLostAnswers(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	ctx := context.Background()
	f.Throttle(2)
	if _, err := c.DescribeSubnets(ctx, &awsec2.DescribeSubnetsInput{}); code(err) != "RequestLimitExceeded" {
		t.Fatalf("first call: %v", err)
	}
	if _, err := runOne(t, c, "tok", ""); code(err) != "RequestLimitExceeded" {
		t.Fatalf("second call: %v", err)
	}
	if f.Injected("RequestLimitExceeded") != 2 || len(f.Instances()) != 0 {
		t.Fatalf("throttled calls acted or were not counted: %d instances", len(f.Instances()))
	}

	f.LoseAnswers("RunInstances", 1, "")
	if _, err := runOne(t, c, "tok", ""); err == nil || code(err) != "" {
		t.Fatalf("lost answer: %v", err)
	}
	f.LoseAnswers("RunInstances", 1, "InternalError")
	if _, err := runOne(t, c, "tok", ""); code(err) != "InternalError" {
		t.Fatalf("lost answer with 500: %v", err)
	}
	out, err := runOne(t, c, "tok", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Instances()); n != 1 || f.Instances()[0].ID != aws.ToString(out.Instances[0].InstanceId) {
		t.Fatalf("%d instances after three calls with one token", n)
	}
	// Another token is another instance.
	if _, err := runOne(t, c, "tok2", ""); err != nil || len(f.Instances()) != 2 {
		t.Fatalf("second token: %v, %d instances", err, len(f.Instances()))
	}
}

// TestClientTokenLimits: EC2 takes up to 64 ASCII characters.
func TestClientTokenLimits(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	for _, tok := range []string{strings.Repeat("a", 65), "tøken"} {
		if _, err := runOne(t, c, tok, ""); code(err) != "InvalidParameterValue" {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	if _, err := runOne(t, c, strings.Repeat("a", 64), ""); err != nil {
		t.Errorf("64 characters: %v", err)
	}
}

// TestGroupReferencedByAnother: a group another group's rule names as its
// source is a dependent object; its own self-reference is not.
func TestGroupReferencedByAnother(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	ctx := context.Background()
	mk := func(name string) string {
		g, err := c.CreateSecurityGroup(ctx, &awsec2.CreateSecurityGroupInput{GroupName: aws.String(name), Description: aws.String("d"), VpcId: aws.String("vpc-0c000000000000001")})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(g.GroupId)
	}
	a, b := mk("a"), mk("b")
	allow := func(to, from string) {
		if _, err := c.AuthorizeSecurityGroupIngress(ctx, &awsec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(to), IpPermissions: []types.IpPermission{{
			IpProtocol: aws.String("tcp"), FromPort: aws.Int32(1), ToPort: aws.Int32(2), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(from)}},
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	allow(a, a)
	allow(b, a)
	if _, err := c.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: aws.String(a)}); code(err) != "DependencyViolation" {
		t.Fatalf("delete of a group b's rule names: %v", err)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: aws.String(b)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &awsec2.DeleteSecurityGroupInput{GroupId: aws.String(a)}); err != nil {
		t.Fatalf("delete once only its own rule names it: %v", err)
	}
}

// TestTagLimits: EC2's tag restrictions on RunInstances.
func TestTagLimits(t *testing.T) {
	f := NewEC2(t, "eu-west-1")
	c := ec2Client(f)
	tests := []struct {
		key, value, code string
	}{
		{strings.Repeat("k", 129), "v", "InvalidParameterValue"},
		{"aws:owner", "v", "InvalidParameterValue"},
		{"k", strings.Repeat("v", 257), "InvalidParameterValue"},
		{strings.Repeat("k", 128), strings.Repeat("v", 256), ""},
	}
	for _, tc := range tests {
		_, err := c.RunInstances(context.Background(), &awsec2.RunInstancesInput{
			ImageId: aws.String("ami-0123456789abcdef0"), InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			SubnetId:          aws.String("subnet-0a000000000000001"),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String(tc.key), Value: aws.String(tc.value)}}}},
		})
		if code(err) != tc.code {
			t.Errorf("tag %.12s…=%.12s…: %v, want %q", tc.key, tc.value, err, tc.code)
		}
	}
}
