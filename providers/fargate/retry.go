package fargate

import (
	"context"
	"fmt"
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
		*b = backoff.NewBudget(ReadRate, ReadBurst, nil, func(ctx context.Context, d time.Duration) error { return p.cfg.Sleep(ctx, d) })
	}
	return *b
}

// call runs one AWS request, retrying what is worth retrying (throttling,
// AWS's own failures, a connection that failed under the request) with exponential
// backoff and full jitter, at most Retry.MaxAttempts times. Every request
// the provider makes is safe to repeat: reads, creations that are
// idempotent by name or client token, and deletions that treat "not found"
// as done. Reads first take their turn in their service's budget; a
// throttled call waits at least half the backoff window, and a throttled
// read pauses its budget for every cluster.
func call[T any](ctx context.Context, p *Provider, op string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	budget := p.budgetFor(op)
	paused := false // the retry after a throttled call: it has waited the pause
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		if !paused {
			if err := budget.Wait(ctx); err != nil {
				return zero, err
			}
		}
		out, err := fn(ctx)
		if err == nil {
			return out, nil
		}
		if !awsutil.Retryable(err) || ctx.Err() != nil {
			return zero, err
		}
		if attempt >= p.cfg.Retry.MaxAttempts {
			return zero, fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		wait := p.backoff(attempt)
		if awsutil.Throttled(err) {
			wait = max(wait, backoff.Window(attempt, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay)/2)
		}
		p.log.Warn("AWS request failed; retrying", "op", op, "attempt", attempt, "wait", wait, "err", err)
		// Everyone else sharing the budget keeps the pause too.
		paused = awsutil.Throttled(err)
		if paused {
			budget.Throttled(wait)
		}
		if serr := p.cfg.Sleep(ctx, wait); serr != nil {
			return zero, fmt.Errorf("%w (while waiting to retry %s after: %v)", serr, op, err)
		}
	}
}

// StartPoll implements the scheduler's start pacing: a Fargate task takes
// tens of seconds to pull and start, so its cluster is polled from once a
// second, not ten times.
func (p *Provider) StartPoll() time.Duration { return time.Second }

// backoff is the wait after the given failed attempt: full jitter over an
// exponentially growing, capped window.
func (p *Provider) backoff(attempt int) time.Duration {
	window := backoff.Window(attempt, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay)
	return min(max(p.cfg.Retry.Jitter(window), 0), window)
}

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
