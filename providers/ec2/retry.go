package ec2

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// call runs f until it succeeds, fails for good, or MaxAttempts calls have
// been throttled or met server errors, waiting between attempts with
// exponential backoff and full jitter (a random wait up to the exponential
// bound), which spreads many gateways' retries apart.
func call[T any](ctx context.Context, p *Provider, op string, f func(context.Context) (T, error)) (T, error) {
	var zero T
	for attempt := 1; ; attempt++ {
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
		p.log.Debug("retrying AWS call", "op", op, "attempt", attempt, "code", errorCode(err), "wait", d)
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
