package fargate

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// The budget of read calls that one gateway keeps to, per service (ECS;
// EC2), shared by every cluster: both services meter them per account and
// region and throttle every caller in the account beyond that, so the
// gateway stays well below (EC2 documents 20 a second for its Describe
// calls) and leaves the rest to the console and other tools.
const (
	ReadRate  = 10.0
	ReadBurst = 20
)

// budgets are the provider's rate budgets, one per service, made on first
// use.
type budgets struct {
	mu       sync.Mutex
	ecs, ec2 *backoff.Budget
}

// budgetFor is the budget that op's calls take their turn in, or nil for
// calls that are not metered here (writes, which follow users' actions,
// and Secrets Manager's few reads).
func (p *Provider) budgetFor(op string) *backoff.Budget {
	var b **backoff.Budget
	switch op {
	case "DescribeTasks", "ListTasks", "DescribeTaskDefinition", "ListTaskDefinitions", "ListTaskDefinitionFamilies":
		b = &p.budgets.ecs
	case "DescribeSubnets", "DescribeSecurityGroups":
		b = &p.budgets.ec2
	default:
		return nil
	}
	p.budgets.mu.Lock()
	defer p.budgets.mu.Unlock()
	if *b == nil {
		// Through cfg.Sleep as it is at each wait, as the retries do.
		*b = backoff.NewBudget(ReadRate, ReadBurst, p.cfg.Now, func(ctx context.Context, d time.Duration) error { return p.cfg.Sleep(ctx, d) })
	}
	return *b
}

// retry is how the provider repeats its calls (awsutil.Call), through
// cfg.Sleep as it is at each wait.
func (p *Provider) retry() awsutil.Retry {
	r := p.cfg.Retry
	return awsutil.Retry{MaxAttempts: r.MaxAttempts, BaseDelay: r.BaseDelay, MaxDelay: r.MaxDelay, Jitter: r.Jitter, Log: p.log,
		Sleep: func(ctx context.Context, d time.Duration) error { return p.cfg.Sleep(ctx, d) }}
}

// call runs one AWS request with awsutil.Call's retries; reads first take
// their turn in their service's budget.
func call[T any](ctx context.Context, p *Provider, op string, fn func(context.Context) (T, error)) (T, error) {
	return awsutil.Call(ctx, p.retry(), p.budgetFor(op), op, fn)
}

// StartPoll implements the scheduler's start pacing: a Fargate task takes
// tens of seconds to pull and start, so its cluster is polled from once a
// second, not ten times.
func (p *Provider) StartPoll() time.Duration { return time.Second }

// isNotFound reports errors that mean the thing is already gone.
func isNotFound(err error) bool {
	switch awsutil.ErrorCode(err) {
	case "ResourceNotFoundException", "InvalidGroup.NotFound", "InvalidGroupId.NotFound":
		return true
	case "InvalidParameterException", "ClientException":
		m := strings.ToLower(awsutil.ErrorMessage(err))
		return strings.Contains(m, "not found") || strings.Contains(m, "does not exist") || strings.Contains(m, "unable to describe")
	}
	return false
}
