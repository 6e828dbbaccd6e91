package ec2

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/gatewayhq/gateway/internal/backoff"
)

// errorCode is the AWS error code of err ("InsufficientInstanceCapacity"),
// or "" when err is not an API error (a network failure, a canceled
// context).
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// errorMessage is the API's own message for err, without the SDK's
// "operation error ... https response error ..." prefix, for messages users
// read.
func errorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return err.Error()
}

// httpStatus is the HTTP status of the response that carried err, or 0.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

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

// retryable reports whether a call that failed with err may succeed if
// made again unchanged: throttling, the service's own failures, and
// networks that dropped the connection. Every call the provider retries is
// idempotent (RunInstances through its client token), so a retry never
// does anything twice.
func retryable(err error) bool {
	switch errorCode(err) {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
		"RequestThrottledException", "TooManyRequestsException", "ProvisionedThroughputExceededException",
		"InternalError", "InternalFailure", "InternalServerError", "ServiceUnavailable", "Unavailable",
		"RequestTimeout", "RequestTimeoutException", "EC2ThrottledException":
		return true
	case codeInsufficientCapacity, "InsufficientCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "InsufficientAddressCapacity":
		// Server errors (5xx) that the same call will meet again: the
		// caller moves on to another subnet or type instead.
		return false
	case "":
	default:
		if s := httpStatus(err); s >= 500 {
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if s := httpStatus(err); s >= 500 || s == 429 {
		return true
	}
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe)
}

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

// throttled reports whether err is the service refusing a call for its
// request rate (as opposed to failing it).
func throttled(err error) bool {
	switch errorCode(err) {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
		"RequestThrottledException", "TooManyRequestsException", "EC2ThrottledException":
		return true
	}
	return httpStatus(err) == 429
}

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
		if !retryable(err) {
			return zero, err
		}
		if attempt >= p.cfg.MaxAttempts {
			// The caller names the operation.
			return zero, fmt.Errorf("still failing after %d attempts (%s): %w", attempt, orDefault(errorCode(err), "network error"), err)
		}
		d := p.backoff(attempt)
		if throttled(err) {
			d = max(d, backoff.Window(attempt, p.cfg.BaseDelay, p.cfg.MaxDelay)/2)
		}
		p.log.Debug("retrying AWS call", "op", op, "attempt", attempt, "code", errorCode(err), "wait", d, "err", err)
		// Everyone else sharing the budget keeps the pause too.
		paused = throttled(err)
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
