package fargatetest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
)

func sdkConfig() aws.Config {
	return aws.Config{
		Region:      DefaultRegion,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
}

type clients struct {
	ecs *ecs.Client
	ec2 *ec2.Client
	sm  *secretsmanager.Client
}

func newClients(s *Server) clients {
	cfg := sdkConfig()
	return clients{
		ecs: ecs.NewFromConfig(cfg, func(o *ecs.Options) { o.BaseEndpoint = aws.String(s.ECS.URL) }),
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(s.EC2.URL) }),
		sm:  secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(s.SecretsManager.URL) }),
	}
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) pass(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// runOne registers a task definition and runs one task in a new group;
// it returns the task's ARN and the group.
func runOne(t *testing.T, c clients, token string) (string, string) {
	t.Helper()
	ctx := context.Background()
	g, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("g-" + token), Description: aws.String("d"), VpcId: aws.String(DefaultVPC)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("fam"), Cpu: aws.String("256"), Memory: aws.String("512"), NetworkMode: ecstypes.NetworkModeAwsvpc,
		RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
		ContainerDefinitions:    []ecstypes.ContainerDefinition{{Name: aws.String("dask"), Image: aws.String("img"), Essential: aws.Bool(true)}},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ecs.RunTask(ctx, &ecs.RunTaskInput{
		Cluster: aws.String(DefaultCluster), TaskDefinition: aws.String("fam"), LaunchType: ecstypes.LaunchTypeFargate, ClientToken: aws.String(token),
		NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{SubnetA}, SecurityGroups: []string{aws.ToString(g.GroupId)}}},
	})
	if err != nil || len(out.Tasks) != 1 {
		t.Fatalf("RunTask: %+v, %v", out, err)
	}
	return aws.ToString(out.Tasks[0].TaskArn), aws.ToString(g.GroupId)
}

// TestDetachDelayAndStoppedListing: a group stays in use for the detach
// delay after its task is STOPPED; a stopped task is MISSING an hour on.
func TestDetachDelayAndStoppedListing(t *testing.T) {
	s := New(t)
	c := newClients(s)
	ck := &clock{t: time.Unix(1e9, 0)}
	s.SetClock(ck.now)
	s.SetDetachDelay(30 * time.Second)
	ctx := context.Background()
	arn, group := runOne(t, c, "tok-1")
	del := func() error {
		_, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(group)})
		return err
	}
	if _, err := c.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(DefaultCluster), Task: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(arn, 10); err != nil {
		t.Fatal(err)
	}
	if err := del(); code(err) != "DependencyViolation" {
		t.Fatalf("delete at once after STOPPED: %v", err)
	}
	ck.pass(30 * time.Second)
	if err := del(); err != nil {
		t.Fatalf("delete after the interface detached: %v", err)
	}
	describe := func() (int, int) {
		out, err := c.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(DefaultCluster), Tasks: []string{arn}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Tasks), len(out.Failures)
	}
	if n, _ := describe(); n != 1 {
		t.Fatal("a task stopped 30s ago is not described")
	}
	ck.pass(time.Hour)
	if _, f := describe(); f != 1 {
		t.Fatal("a task stopped an hour ago is still described")
	}
}

// TestDescribeLag: a new task is MISSING to DescribeTasks and "not found"
// to StopTask for the lag, then known.
func TestDescribeLag(t *testing.T) {
	s := New(t)
	c := newClients(s)
	ctx := context.Background()
	s.SetDescribeLag(2)
	arn, _ := runOne(t, c, "tok-2")
	out, err := c.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(DefaultCluster), Tasks: []string{arn}})
	if err != nil || len(out.Failures) != 1 || aws.ToString(out.Failures[0].Reason) != "MISSING" {
		t.Fatalf("first describe: %+v, %v", out, err)
	}
	if _, err := c.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(DefaultCluster), Task: aws.String(arn)}); code(err) != "InvalidParameterException" {
		t.Fatalf("first stop: %v", err)
	}
	if _, err := c.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(DefaultCluster), Task: aws.String(arn)}); err != nil {
		t.Fatalf("stop after the lag: %v", err)
	}
}

// TestFaults: a throttling burst spans services; a lost RunTask answer's
// repeat with the same token finds the first task; a lost CreateSecret
// answer's repeat with the same token and value succeeds.
func TestFaults(t *testing.T) {
	s := New(t)
	c := newClients(s)
	ctx := context.Background()
	s.ThrottleAll(2)
	if _, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); code(err) != "RequestLimitExceeded" {
		t.Errorf("ec2: %v", err)
	}
	if _, err := c.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(DefaultCluster)}); code(err) != "ThrottlingException" {
		t.Errorf("ecs: %v", err)
	}
	if _, err := c.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(DefaultCluster)}); err != nil {
		t.Errorf("after the burst: %v", err)
	}

	s.LoseAnswers("ecs:RunTask", 1)
	s.LoseAnswersWith("ecs:RunTask", 1, http.StatusInternalServerError, "ServerException")
	for i := range 2 {
		_, err := c.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(DefaultCluster), TaskDefinition: aws.String("none"), LaunchType: ecstypes.LaunchTypeFargate})
		if err == nil {
			t.Fatalf("lost answer %d came", i)
		}
	}
	first, _ := runOne(t, c, "tok-3") // the faults were taken by the calls above
	s.LoseAnswers("ecs:RunTask", 1)
	in := &ecs.RunTaskInput{
		Cluster: aws.String(DefaultCluster), TaskDefinition: aws.String("fam"), LaunchType: ecstypes.LaunchTypeFargate, ClientToken: aws.String("tok-4"),
		NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{SubnetA}}},
	}
	if _, err := c.ecs.RunTask(ctx, in); err == nil {
		t.Fatal("lost answer came")
	}
	out, err := c.ecs.RunTask(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Tasks()); n != 2 || aws.ToString(out.Tasks[0].TaskArn) == first {
		t.Errorf("%d tasks after a lost answer and its repeat; want 2", n)
	}
	if _, err := c.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(DefaultCluster), TaskDefinition: aws.String("fam"), ClientToken: aws.String("bad token")}); code(err) != "InvalidParameterException" {
		t.Errorf("a token with a space: %v", err)
	}

	tok := strings.Repeat("a", 32)
	s.LoseAnswers("secretsmanager:CreateSecret", 1)
	mk := func(value string) error {
		_, err := c.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("gateway/x"), SecretString: aws.String(value), ClientRequestToken: aws.String(tok)})
		return err
	}
	if err := mk("v"); err == nil {
		t.Fatal("lost answer came")
	}
	if err := mk("v"); err != nil {
		t.Errorf("repeat with the same token and value: %v", err)
	}
	if err := mk("other"); code(err) != "ResourceExistsException" {
		t.Errorf("same token, other value: %v", err)
	}
	if n := s.Injected(""); n != 3 {
		t.Errorf("Injected(\"\") = %d, want 3", n)
	}
}
