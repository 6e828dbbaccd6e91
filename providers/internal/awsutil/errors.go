// Package awsutil is what the EC2 and Fargate backends share of AWS:
// reading the SDK's errors, telling which failures are worth a retry and
// which are throttling, the ingress rules of a cluster's security group,
// and the region (the configured one, else the SDK's settings'). One copy,
// so that the two backends cannot drift apart.
package awsutil

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrorCode is the AWS error code of err ("InsufficientInstanceCapacity"),
// or "" when err is not an API error (a network failure, a canceled
// context).
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// ErrorMessage is the API's own message for err, without the SDK's
// "operation error ... https response error ..." prefix, for messages
// users read; when there is none (not an API error, or an API error
// without a message), err's whole text, so that a message never says
// nothing.
func ErrorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorMessage() != "" {
		return ae.ErrorMessage()
	}
	return err.Error()
}

// HTTPStatus is the HTTP status of the response that carried err, or 0.
func HTTPStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// throttleCode reports the services' ways of refusing a call for the
// account's request rate (EC2, SSM, ECS, Secrets Manager, CloudWatch Logs).
func throttleCode(code string) bool {
	switch code {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException",
		"RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
		"ProvisionedThroughputExceededException", "EC2ThrottledException", "SlowDown":
		return true
	}
	return false
}

// serverCode reports the services' own failures, which the same call may
// not meet again.
func serverCode(code string) bool {
	switch code {
	case "InternalError", "InternalFailure", "InternalServerError", "ServerException",
		"InternalServiceError", "InternalServiceErrorException", "ServiceUnavailable",
		"ServiceUnavailableException", "Unavailable", "RequestTimeout", "RequestTimeoutException",
		"PriorRequestNotComplete":
		return true
	}
	return false
}

// capacityCode reports server errors (5xx) that the same call will meet
// again: the caller moves on to another subnet or type instead.
func capacityCode(code string) bool {
	switch code {
	case "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "InsufficientAddressCapacity":
		return true
	}
	return false
}

// Throttled reports whether err is the service refusing a call for its
// request rate (as opposed to failing it).
func Throttled(err error) bool {
	return throttleCode(ErrorCode(err)) || HTTPStatus(err) == http.StatusTooManyRequests
}

// Retryable reports whether a call that failed with err may succeed if
// made again unchanged: throttling, the service's own failures, and
// connections that failed under the request or its answer. A canceled
// or expired context, a client error and a lack of capacity are not.
func Retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code := ErrorCode(err)
	switch {
	case Throttled(err), serverCode(code):
		return true
	case capacityCode(code):
		return false
	case HTTPStatus(err) >= 500:
		return true
	case code != "":
		return false
	}
	// The SDK's own classification of broken connections includes a Go
	// transport race that closes a connection while a 200 answer is read
	// (aws-sdk-go-v2#2737).
	if (retry.RetryableConnectionError{}).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var se *smithyhttp.RequestSendError
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &se) || errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF)
}
