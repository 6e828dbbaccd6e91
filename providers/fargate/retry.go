package fargate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/gatewayhq/gateway/internal/backoff"
)

// call runs one AWS request, retrying what is worth retrying (throttling,
// AWS's own failures, a connection that failed under the request) with exponential
// backoff and full jitter, at most Retry.MaxAttempts times. Every request
// the provider makes is safe to repeat: reads, creations that are
// idempotent by name or client token, and deletions that treat "not found"
// as done.
func call[T any](ctx context.Context, p *Provider, op string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		out, err := fn(ctx)
		if err == nil {
			return out, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return zero, err
		}
		if attempt >= p.cfg.Retry.MaxAttempts {
			return zero, fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		wait := p.backoff(attempt)
		p.log.Warn("AWS request failed; retrying", "op", op, "attempt", attempt, "wait", wait, "err", err)
		if serr := p.cfg.Sleep(ctx, wait); serr != nil {
			return zero, fmt.Errorf("%w (while waiting to retry %s after: %v)", serr, op, err)
		}
	}
}

// backoff is the wait after the given failed attempt: full jitter over an
// exponentially growing, capped window.
func (p *Provider) backoff(attempt int) time.Duration {
	window := backoff.Window(attempt, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay)
	return min(max(p.cfg.Retry.Jitter(window), 0), window)
}

// errorCode is the AWS error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func errorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}

// retryable reports whether a failed request may succeed if sent again.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch errorCode(err) {
	case "ThrottlingException", "Throttling", "ThrottledException", "RequestLimitExceeded",
		"TooManyRequestsException", "RequestThrottled", "RequestThrottledException",
		"EC2ThrottledException", "PriorRequestNotComplete", "SlowDown",
		"ServerException", "InternalServiceError", "InternalServiceErrorException",
		"InternalFailure", "InternalError", "ServiceUnavailable", "ServiceUnavailableException", "Unavailable":
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		if c := re.HTTPStatusCode(); c >= 500 || c == http.StatusTooManyRequests {
			return true
		}
	}
	// Connections that fail, reset or close under a request or its answer
	// (the SDK's own classification; it includes a Go transport race that
	// closes a connection while a 200 answer is read, aws-sdk-go-v2#2737).
	if (retry.RetryableConnectionError{}).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var se *smithyhttp.RequestSendError
	return errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isNotFound reports errors that mean the thing is already gone.
func isNotFound(err error) bool {
	switch errorCode(err) {
	case "ResourceNotFoundException", "InvalidGroup.NotFound", "InvalidGroupId.NotFound":
		return true
	case "InvalidParameterException", "ClientException":
		m := strings.ToLower(errorMessage(err))
		return strings.Contains(m, "not found") || strings.Contains(m, "does not exist") || strings.Contains(m, "unable to describe")
	}
	return false
}
