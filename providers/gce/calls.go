package gce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/gatewayhq/gateway/internal/backoff"
	"google.golang.org/api/googleapi"
)

// The budget of Compute Engine read calls (lists, gets, guest attributes)
// that one gateway keeps to, shared by every cluster: Compute Engine
// meters reads per project in a per-minute quota and refuses every caller
// in the project beyond it (403 rateLimitExceeded), so the gateway stays
// well below and leaves the rest to the console and other tools.
const (
	ReadRate  = 10.0
	ReadBurst = 20
)

// computeRead reports whether the call named what is a Compute Engine
// read that the budget meters (Secret Manager is another service).
func computeRead(what string) bool {
	if strings.Contains(what, "secret") {
		return false
	}
	return strings.HasPrefix(what, "list ") || strings.HasPrefix(what, "get ") || strings.HasPrefix(what, "guest attributes")
}

// readBudgetT is the budget's type, named here so that the Provider
// struct needs no import of its own for it.
type readBudgetT = backoff.Budget

// readBudget is the budget of Compute Engine reads, made on first use.
func (p *Provider) readBudget() *backoff.Budget {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reads == nil {
		// Through Retry.Sleep as it is at each wait, as the retries do.
		p.reads = backoff.NewBudget(ReadRate, ReadBurst, nil, func(ctx context.Context, d time.Duration) error { return p.cfg.Retry.Sleep(ctx, d) })
	}
	return p.reads
}

// rateLimited reports whether err is the service refusing a call for its
// request rate (429, or 403 with a rate-limit reason).
func rateLimited(err error) bool {
	code, reasons := httpCode(err)
	return code == http.StatusTooManyRequests ||
		code == http.StatusForbidden && (slices.Contains(reasons, "rateLimitExceeded") || slices.Contains(reasons, "userRateLimitExceeded"))
}

// call runs f, retrying transient failures (see retryable) with
// exponential backoff and full jitter, at most Retry.MaxAttempts times.
// The error is f's own, so that callers can still test it for 404 or 409;
// after retries it says how many were made. Compute Engine reads first
// take their turn in the provider's budget; a rate-limited call waits at
// least half the backoff window, and a rate-limited read pauses the
// budget for every cluster.
func (p *Provider) call(ctx context.Context, what string, f func(context.Context) error) error {
	var budget *backoff.Budget
	if computeRead(what) {
		budget = p.readBudget()
	}
	paused := false // the retry after a rate-limited call: it has waited the pause
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !paused {
			if err := budget.Wait(ctx); err != nil {
				return err
			}
		}
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return err
		}
		if attempt >= p.cfg.Retry.MaxAttempts {
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, attempt, err)
		}
		d := p.backoff(attempt, err)
		if paused = rateLimited(err); paused {
			d = max(d, min(backoff.Window(attempt, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay)/2, p.cfg.Retry.MaxDelay))
			budget.Throttled(d) // everyone else sharing the budget keeps the pause too
		}
		p.log.Debug("retrying a call that failed transiently", "call", what, "attempt", attempt, "pause", d, "err", err)
		if serr := p.cfg.Retry.Sleep(ctx, d); serr != nil {
			return fmt.Errorf("%s: %w (while retrying after: %v)", what, serr, err)
		}
	}
}

// StartPoll implements the scheduler's start pacing: a VM takes a minute
// or more to boot and pull its image, so its cluster is polled from once
// a second, not ten times.
func (p *Provider) StartPoll() time.Duration { return time.Second }

// backoff is the pause before try attempt+1: uniformly random below
// min(MaxDelay, BaseDelay*2^(attempt-1)), raised to a Retry-After the
// server sent, never above MaxDelay.
func (p *Provider) backoff(attempt int, err error) time.Duration {
	limit := backoff.Window(attempt, p.cfg.Retry.BaseDelay, p.cfg.Retry.MaxDelay)
	var d time.Duration
	if limit > 0 {
		d = rand.N(limit)
	}
	if ra := retryAfter(err); ra > d {
		d = min(ra, p.cfg.Retry.MaxDelay)
	}
	return d
}

func retryAfter(err error) time.Duration {
	var h http.Header
	var gerr *googleapi.Error
	var serr *secretAPIError
	switch {
	case errors.As(err, &gerr):
		h = gerr.Header
	case errors.As(err, &serr):
		h = serr.Header
	}
	if h == nil {
		return 0
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// retryable reports failures that a later try may not meet: overload and
// rate limits (429, 403 rate-limit reasons), server errors (500, 502, 503,
// 504) and connections dropped on the way. Everything else (400, 403, 404,
// 409) is the same the next time.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code, reasons := httpCode(err)
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusForbidden:
		return slices.Contains(reasons, "rateLimitExceeded") || slices.Contains(reasons, "userRateLimitExceeded")
	case http.StatusBadRequest:
		// An instance busy with another operation (being created, or
		// already being deleted) takes a new one a moment later.
		return slices.Contains(reasons, "resourceNotReady")
	case 0:
		var ne net.Error
		return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
	}
	return false
}

// httpCode returns the HTTP status of an API error (0 for others) and its
// reasons.
func httpCode(err error) (int, []string) {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		reasons := make([]string, 0, len(gerr.Errors))
		for _, e := range gerr.Errors {
			reasons = append(reasons, e.Reason)
		}
		return gerr.Code, reasons
	}
	var serr *secretAPIError
	if errors.As(err, &serr) {
		return serr.Code, []string{serr.Status}
	}
	return 0, nil
}

func isNotFound(err error) bool {
	code, _ := httpCode(err)
	return code == http.StatusNotFound
}

func isAlreadyExists(err error) bool {
	code, reasons := httpCode(err)
	if code == http.StatusConflict {
		return true
	}
	var oerr *OperationError
	return errors.As(err, &oerr) && oerr.Has("RESOURCE_ALREADY_EXISTS") || slices.Contains(reasons, "alreadyExists")
}

// OperationError is a zonal or global operation that finished with errors
// (errors[] of the Operation resource), for example a stock-out.
type OperationError struct {
	Operation  string // operation name
	Type       string // insert, delete, ...
	Target     string // the resource's URL
	HTTPStatus int    // httpErrorStatusCode, when set
	Errors     []OperationErrorItem
}

// OperationErrorItem is one error of an operation.
type OperationErrorItem struct {
	Code    string // ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, ...
	Message string
}

func (e *OperationError) Error() string {
	parts := make([]string, 0, len(e.Errors))
	for _, it := range e.Errors {
		parts = append(parts, it.Code+": "+it.Message)
	}
	return fmt.Sprintf("operation %s (%s %s) failed: %s", e.Operation, e.Type, lastSegment(e.Target), strings.Join(parts, "; "))
}

// Has reports whether one of the errors has this code.
func (e *OperationError) Has(code string) bool {
	return slices.ContainsFunc(e.Errors, func(it OperationErrorItem) bool { return it.Code == code })
}

// opError returns the error a finished operation carries, or nil.
func opError(op *computepb.Operation) error {
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		code := op.GetHttpErrorStatusCode()
		if code == 0 || (code >= 200 && code < 300) {
			return nil
		}
		// An error status without details: keep what there is.
		errs = []*computepb.Errors{{Code: ptr("HTTP_" + strconv.Itoa(int(code))), Message: ptr(op.GetHttpErrorMessage())}}
	}
	e := &OperationError{Operation: op.GetName(), Type: op.GetOperationType(), Target: op.GetTargetLink(), HTTPStatus: int(op.GetHttpErrorStatusCode())}
	for _, it := range errs {
		e.Errors = append(e.Errors, OperationErrorItem{Code: it.GetCode(), Message: it.GetMessage()})
	}
	return e
}

// errOperationTimeout marks an operation not done within OperationTimeout.
var errOperationTimeout = errors.New("operation did not finish in time")

// waitOp waits for an operation to be DONE, within OperationTimeout, with
// the server-side wait method (which answers when the operation finishes,
// or after about two minutes), and returns the finished operation. It does
// not interpret the operation's errors: see opError.
func (p *Provider) waitOp(ctx context.Context, op *computepb.Operation, what string, wait func(context.Context, string) (*computepb.Operation, error)) (*computepb.Operation, error) {
	wctx, cancel := context.WithTimeout(ctx, p.cfg.OperationTimeout)
	defer cancel()
	for op.GetStatus() != computepb.Operation_DONE {
		var next *computepb.Operation
		err := p.call(wctx, "wait for "+what, func(ctx context.Context) error {
			var err error
			next, err = wait(ctx, op.GetName())
			return err
		})
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: %w", what, ctx.Err())
		case wctx.Err() != nil:
			return nil, fmt.Errorf("%s: %w: operation %s still %s after %s (the change may still happen; Describe and StopCluster find the result by its labels)",
				what, errOperationTimeout, op.GetName(), op.GetStatus(), p.cfg.OperationTimeout)
		case err != nil:
			return nil, fmt.Errorf("%s: wait for operation %s: %w", what, op.GetName(), err)
		}
		op = next
	}
	return op, nil
}

func (p *Provider) waitZoneOp(ctx context.Context, zone string, op *computepb.Operation, what string) (*computepb.Operation, error) {
	return p.waitOp(ctx, op, what, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return p.zoneOps.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: p.cfg.Project, Zone: zone, Operation: name})
	})
}

func (p *Provider) waitGlobalOp(ctx context.Context, op *computepb.Operation, what string) (*computepb.Operation, error) {
	return p.waitOp(ctx, op, what, func(ctx context.Context, name string) (*computepb.Operation, error) {
		return p.globalOps.Wait(ctx, &computepb.WaitGlobalOperationRequest{Project: p.cfg.Project, Operation: name})
	})
}

// Operation error codes that mean "not here, not now": the zone has no
// hardware for the request, or the project's quota is used up. Both send
// the provider to the next zone or machine type.
var capacityCodes = map[string]bool{
	"ZONE_RESOURCE_POOL_EXHAUSTED":              true,
	"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": true,
	"REGION_RESOURCE_POOL_EXHAUSTED":            true,
	"RESOURCE_POOL_EXHAUSTED":                   true,
	"RESOURCE_AVAILABILITY":                     true,
	"RESOURCE_NOT_AVAILABLE":                    true,
	"QUOTA_EXCEEDED":                            true,
}

// capacityCode classifies a failed insert: the code to report and true
// when another zone or machine type may succeed where this one did not.
func capacityCode(err error) (string, bool) {
	var oerr *OperationError
	if errors.As(err, &oerr) {
		for _, it := range oerr.Errors {
			if capacityCodes[it.Code] {
				return it.Code, true
			}
		}
		for _, it := range oerr.Errors {
			// Stock-outs of GPUs and some machine series come with other
			// codes and the same advice in the message.
			m := strings.ToLower(it.Message)
			if strings.Contains(m, "does not have enough resources available") || strings.Contains(m, "is currently unavailable in the") {
				return it.Code, true
			}
		}
		return "", false
	}
	code, reasons := httpCode(err)
	msg := strings.ToLower(err.Error())
	switch {
	case code == http.StatusForbidden && (slices.Contains(reasons, "quotaExceeded") || strings.Contains(msg, "quota")):
		return "QUOTA_EXCEEDED", true
	case code == http.StatusBadRequest && strings.Contains(msg, "does not exist in zone"):
		// Not every machine type or GPU is offered in every zone.
		if strings.Contains(msg, "accelerator") {
			return "ACCELERATOR_TYPE_NOT_IN_ZONE", true
		}
		return "MACHINE_TYPE_NOT_IN_ZONE", true
	case code == http.StatusNotFound && strings.Contains(msg, "machinetypes"):
		return "MACHINE_TYPE_NOT_IN_ZONE", true
	}
	return "", false
}

func ptr[T any](v T) *T { return &v }
