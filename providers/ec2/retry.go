package ec2

import (
	"context"
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

// retry is how the provider repeats its calls (awsutil.Call), through
// cfg.Sleep as it is at each wait.
func (p *Provider) retry() awsutil.Retry {
	return awsutil.Retry{MaxAttempts: p.cfg.MaxAttempts, BaseDelay: p.cfg.BaseDelay, MaxDelay: p.cfg.MaxDelay, Log: p.log,
		Sleep: func(ctx context.Context, d time.Duration) error { return p.cfg.Sleep(ctx, d) }}
}

// call runs f with awsutil.Call's retries; Describe* calls first take
// their turn in the provider's budget.
func call[T any](ctx context.Context, p *Provider, op string, f func(context.Context) (T, error)) (T, error) {
	var budget *backoff.Budget
	if strings.HasPrefix(op, "Describe") {
		budget = p.describeBudget()
	}
	return awsutil.Call(ctx, p.retry(), budget, op, f)
}

// backoff is the wait before attempt+1: uniform in [0, min(MaxDelay,
// BaseDelay*2^(attempt-1))].
func (p *Provider) backoff(attempt int) time.Duration { return p.retry().Backoff(attempt) }

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
