package ec2

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/internal/backoff"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

// Error codes the provider acts on.
const (
	codeInsufficientCapacity = "InsufficientInstanceCapacity"
	codeUnsupported          = "Unsupported"
	codeInstanceLimit        = "InstanceLimitExceeded"
	codeVCPULimit            = "VcpuLimitExceeded"
	codeSpotPriceTooLow      = "SpotMaxPriceTooLow"
	codeMaxSpotCount         = "MaxSpotInstanceCountExceeded"
	codeFreeAddresses        = "InsufficientFreeAddressesInSubnet"
	codeIdempotentMismatch   = "IdempotentParameterMismatch"
	codeDependencyViolation  = "DependencyViolation"
	codeGroupDuplicate       = "InvalidGroup.Duplicate"
	codeGroupNotFound        = "InvalidGroup.NotFound"
	codePermissionNotFound   = "InvalidPermission.NotFound"
	codePermissionDuplicate  = "InvalidPermission.Duplicate"
	codeInstanceNotFound     = "InvalidInstanceID.NotFound"
	codeParameterNotFound    = "ParameterNotFound"
	codeParameterExists      = "ParameterAlreadyExists"
)

// The budget of EC2's non-mutating (Describe*) calls that one gateway
// keeps to. EC2 limits them per account and region with a token bucket
// (documented as 100 calls at once, refilled at 20 a second) and throttles
// every caller in the account beyond it: the gateway takes half the
// refill, so that the console, Terraform and other tools keep the rest,
// and every cluster's polls share it.
const (
	DescribeRate  = 10.0
	DescribeBurst = 20
)

// rateBudget is the shared rate budget's type, named here so that the
// Provider struct needs no import of its own for it.
type rateBudget = backoff.Budget

// describeBudget is the rate budget of the provider's Describe* calls,
// made on first use.
func (p *Provider) describeBudget() *backoff.Budget {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.describes == nil {
		// Through cfg.Sleep as it is at each wait, as the retries do.
		p.describes = backoff.NewBudget(DescribeRate, DescribeBurst, nil, func(ctx context.Context, d time.Duration) error { return p.cfg.Sleep(ctx, d) })
	}
	return p.describes
}

// call runs f until it succeeds, fails for good, or MaxAttempts calls have
// been throttled or met server errors, waiting between attempts with
// exponential backoff and full jitter (a random wait up to the exponential
// bound), which spreads many gateways' retries apart. Describe* calls
// first take their turn in the provider's budget; a throttled one pauses
// the budget for everyone and waits at least half the bound, so that a
// throttled account is not retried at once.
func call[T any](ctx context.Context, p *Provider, op string, f func(context.Context) (T, error)) (T, error) {
	var zero T
	var budget *backoff.Budget
	if strings.HasPrefix(op, "Describe") {
		budget = p.describeBudget()
	}
	paused := false // the retry after a throttled call: it has waited the pause
	for attempt := 1; ; attempt++ {
		if !paused {
			if err := budget.Wait(ctx); err != nil {
				return zero, err
			}
		}
		out, err := f(ctx)
		if err == nil {
			return out, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return zero, ctxErr
		}
		if !awsutil.Retryable(err) {
			return zero, err
		}
		if attempt >= p.cfg.MaxAttempts {
			// The caller names the operation.
			return zero, fmt.Errorf("still failing after %d attempts (%s): %w", attempt, orDefault(awsutil.ErrorCode(err), "network error"), err)
		}
		d := p.backoff(attempt)
		if awsutil.Throttled(err) {
			d = max(d, backoff.Window(attempt, p.cfg.BaseDelay, p.cfg.MaxDelay)/2)
		}
		p.log.Debug("retrying AWS call", "op", op, "attempt", attempt, "code", awsutil.ErrorCode(err), "wait", d, "err", err)
		// Everyone else sharing the budget keeps the pause too.
		paused = awsutil.Throttled(err)
		if paused {
			budget.Throttled(d)
		}
		if err := p.cfg.Sleep(ctx, d); err != nil {
			return zero, err
		}
	}
}

// backoff is the wait before attempt+1: uniform in [0, min(MaxDelay,
// BaseDelay*2^(attempt-1))].
func (p *Provider) backoff(attempt int) time.Duration {
	bound := backoff.Window(attempt, p.cfg.BaseDelay, p.cfg.MaxDelay)
	if bound <= 0 {
		return 0
	}
	return rand.N(bound + 1)
}

// dialProbe is the default ProbeScheduler: a TCP connection that is closed
// at once (the scheduler speaks TLS; that it listens is what matters).
func dialProbe(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	return c.Close()
}

// StartPoll implements the scheduler's start pacing: an instance takes a
// minute or more to boot and pull its image, so its cluster is polled from
// once a second, not ten times.
func (p *Provider) StartPoll() time.Duration { return time.Second }
