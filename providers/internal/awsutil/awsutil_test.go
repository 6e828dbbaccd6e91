package awsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// apiErr is an API error as the SDK returns it: an operation error around
// AWS's HTTP response error around the service's code and message.
func apiErr(code, msg string, status int) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: "X", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: msg}},
	}}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"throttled", apiErr("RequestLimitExceeded", "m", 503), true},
		{"SSM throttled", apiErr("ThrottlingException", "m", 400), true},
		{"ECS throttled", apiErr("ThrottlingException", "Rate exceeded", 400), true},
		{"429 whatever the code", apiErr("SomethingNew", "m", 429), true},
		{"internal", apiErr("InternalError", "m", 500), true},
		{"ECS server exception", apiErr("ServerException", "m", 500), true},
		{"unknown 5xx", apiErr("SomethingNew", "m", 502), true},
		{"capacity is not retried in place", apiErr("InsufficientInstanceCapacity", "m", 500), false},
		{"client error", apiErr("InvalidParameterValue", "m", 400), false},
		{"denied", apiErr("UnauthorizedOperation", "m", 403), false},
		{"connection refused", &smithy.OperationError{Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}, true},
		{"request not sent", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: errors.New("reset")}}, true},
		{"answer cut short", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"plain", errors.New("boom"), false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("%s: Retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestThrottled(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apiErr("RequestLimitExceeded", "m", 503), true},
		{apiErr("ThrottlingException", "m", 400), true},
		{apiErr("SlowDown", "m", 503), true},
		{apiErr("Other", "m", 429), true},
		{apiErr("InternalError", "m", 500), false},
		{errors.New("boom"), false},
	} {
		if got := Throttled(tc.err); got != tc.want {
			t.Errorf("Throttled(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestErrorHelpers: the code and the message of an API error; a message
// always says something (the EC2 backend quoted err's text where the
// Fargate one quoted nothing).
func TestErrorHelpers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		err           error
		code, message string
		status        int
	}{
		{"API error", apiErr("X", "m", 400), "X", "m", 400},
		{"API error without a message", apiErr("X", "", 418), "X", apiErr("X", "", 418).Error(), 418},
		{"not an API error", errors.New("e"), "", "e", 0},
	} {
		if c, m, s := ErrorCode(tc.err), ErrorMessage(tc.err), HTTPStatus(tc.err); c != tc.code || m != tc.message || s != tc.status {
			t.Errorf("%s: code %q, message %q, status %d; want %q, %q, %d", tc.name, c, m, s, tc.code, tc.message, tc.status)
		}
	}
}

func perm(from, to int32, cidrs []string, groups ...string) types.IpPermission {
	p := types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(from), ToPort: aws.Int32(to)}
	for _, c := range cidrs {
		p.IpRanges = append(p.IpRanges, types.IpRange{CidrIp: aws.String(c)})
	}
	for _, g := range groups {
		p.UserIdGroupPairs = append(p.UserIdGroupPairs, types.UserIdGroupPair{GroupId: aws.String(g)})
	}
	return p
}

// TestIngress: the wanted rules admit the scheduler's ports from the
// gateway only and every port from the group itself; Missing sends only
// what the group lacks (EC2 refuses a whole call for one existing rule),
// with descriptions, and Stale revokes only what no wanted rule has,
// whatever the descriptions.
func TestIngress(t *testing.T) {
	in := Ingress{GatewayGroup: "sg-gw", GatewayCIDRs: []string{"10.0.0.0/24", "fd00::/56"}, FromPort: 8786, ToPort: 8787}
	want := in.Rules("sg-self")
	if len(want) != 2 || len(want[0].IpRanges) != 1 || len(want[0].Ipv6Ranges) != 1 || aws.ToString(want[0].UserIdGroupPairs[0].GroupId) != "sg-gw" ||
		aws.ToInt32(want[0].FromPort) != 8786 || aws.ToInt32(want[0].ToPort) != 8787 ||
		aws.ToString(want[1].UserIdGroupPairs[0].GroupId) != "sg-self" || aws.ToInt32(want[1].ToPort) != 65535 {
		t.Fatalf("rules: %+v", want)
	}
	for _, p := range want {
		for _, r := range p.IpRanges {
			if aws.ToString(r.CidrIp) == "0.0.0.0/0" || aws.ToString(r.Description) == "" {
				t.Errorf("rule %+v: open to everyone, or without a description", r)
			}
		}
	}
	if m := Missing(want, nil); !reflect.DeepEqual(m, want) {
		t.Errorf("Missing from an empty group: %+v, want every rule", m)
	}
	if m := Missing(want, want); len(m) != 0 {
		t.Errorf("Missing from a complete group: %+v", m)
	}
	// The group has the gateway's IPv4 range (without a description) and
	// an old range on the same ports, and itself on other ports.
	have := []types.IpPermission{perm(8786, 8787, []string{"10.0.0.0/24", "192.0.2.0/24"}), perm(0, 100, nil, "sg-self")}
	missing := Missing(want, have)
	if len(missing) != 2 || len(missing[0].IpRanges) != 0 || len(missing[0].Ipv6Ranges) != 1 || len(missing[0].UserIdGroupPairs) != 1 ||
		len(missing[1].UserIdGroupPairs) != 1 || aws.ToString(missing[0].Ipv6Ranges[0].Description) == "" {
		t.Errorf("Missing: %+v; want the IPv6 range and the gateway's group, with descriptions, and the group itself on every port", missing)
	}
	stale := Stale(want, have)
	wantStale := []types.IpPermission{perm(8786, 8787, []string{"192.0.2.0/24"}), perm(0, 100, nil, "sg-self")}
	if !reflect.DeepEqual(stale, wantStale) {
		t.Errorf("Stale: %+v, want %+v", stale, wantStale)
	}
}

// TestBackoff: full jitter stays within the exponentially growing window,
// capped at MaxDelay, and varies; a Jitter beyond the window is held to it.
func TestBackoff(t *testing.T) {
	r := Retry{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for attempt := 1; attempt <= 70; attempt++ {
		window := min(100*time.Millisecond<<min(attempt-1, 20), time.Second)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := r.Backoff(attempt)
			if d < 0 || d > window {
				t.Fatalf("attempt %d: wait %s outside [0, %s]", attempt, d, window)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("attempt %d: only %d distinct waits: no jitter?", attempt, len(seen))
		}
	}
	r.Jitter = func(w time.Duration) time.Duration { return 2 * w }
	if d := r.Backoff(1); d != 100*time.Millisecond {
		t.Errorf("a jitter of twice the window waits %s, want the window, 100ms", d)
	}
}

// TestCall: throttled and failed calls are repeated, waiting at least half
// the window after throttling, up to MaxAttempts; a client error is not.
func TestCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errs    []error // the answers before a success
		calls   int
		errHas  string
		minWait []time.Duration
	}{
		{name: "success", calls: 1},
		{name: "throttled then success", errs: []error{apiErr("Throttling", "slow", 400), apiErr("InternalError", "m", 500)}, calls: 3,
			minWait: []time.Duration{50 * time.Millisecond, 0}},
		{name: "client error", errs: []error{apiErr("InvalidParameterValue", "bad", 400)}, calls: 1, errHas: "bad"},
		{name: "gives up", errs: []error{apiErr("Throttling", "m", 400), apiErr("Throttling", "m", 400), apiErr("Throttling", "m", 400)}, calls: 3,
			errHas: "still failing after 3 attempts (Throttling)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waits []time.Duration
			r := Retry{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: func(time.Duration) time.Duration { return 0 },
				Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
				Log:   slog.New(slog.DiscardHandler)}
			calls := 0
			out, err := Call(t.Context(), r, nil, "DescribeX", func(context.Context) (string, error) {
				calls++
				if calls <= len(tc.errs) {
					return "", tc.errs[calls-1]
				}
				return "ok", nil
			})
			if calls != tc.calls {
				t.Errorf("%d calls, want %d", calls, tc.calls)
			}
			if tc.errHas == "" && (err != nil || out != "ok") {
				t.Errorf("Call = %q, %v; want ok", out, err)
			}
			if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Errorf("err = %v, want one saying %q", err, tc.errHas)
			}
			for i, w := range tc.minWait {
				if i >= len(waits) || waits[i] < w {
					t.Errorf("waits %v: wait %d is under %s", waits, i+1, w)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Call(ctx, Retry{MaxAttempts: 3}, nil, "X", func(context.Context) (int, error) { t.Fatal("called"); return 0, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Call with a cancelled context: %v", err)
	}
}
