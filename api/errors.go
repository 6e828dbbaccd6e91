package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/envs"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// errorRule is one row of the mapping from domain errors to answers.
type errorRule struct {
	// is is the domain error the rule answers (errors.Is); match, when
	// set, decides instead.
	is    []error
	match func(error) bool

	status int
	code   string
	// message is the answer's text from the error, the sentinel of is
	// that it wraps (nil for match) and the request (for the name of what
	// was not found).
	message func(r *http.Request, err, sentinel error) string
	// retryAfter, when set, is the Retry-After header's value.
	retryAfter string
	// logLevel and logMsg log the error when logMsg is set: what the
	// caller cannot fix (a service down) is the operator's to see.
	logLevel slog.Level
	logMsg   string
}

// errorRules is every domain error the API answers, first match first.
// The order matters where an error wraps two (quota.ErrUnreadable wraps
// quota.ErrInvalid: the stored entry is at fault, not the request).
// store.ErrNotFound reaches the mapping only from the benchmark run
// routes: the core turns its own into scheduler.ErrNotFound, and the
// token and session routes answer theirs before.
func errorRules() []errorRule {
	whole := func(_ *http.Request, err, _ error) string { return err.Error() }
	return []errorRule{
		{is: []error{scheduler.ErrNotFound}, status: http.StatusNotFound, code: apitype.CodeClusterNotFound,
			message: func(r *http.Request, _, _ error) string { return "cluster " + r.PathValue("name") + " not found" }},
		{is: []error{scheduler.ErrInvalid}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: stripped(detail)},
		{is: []error{scheduler.ErrForbidden}, status: http.StatusForbidden, code: apitype.CodeForbidden, message: stripped(detail)},
		{is: []error{quota.ErrUnreadable}, status: http.StatusServiceUnavailable, code: apitype.CodeQuotaUnavailable,
			message: func(_ *http.Request, err, _ error) string {
				return "quotas cannot be checked right now: " + err.Error()
			},
			logLevel: slog.LevelError, logMsg: "quota entries unreadable"},
		{is: []error{scheduler.ErrEnvMismatch}, status: http.StatusConflict, code: apitype.CodeEnvMismatch, message: whole},
		{is: []error{scheduler.ErrUnavailable, envs.ErrUnavailable}, status: http.StatusServiceUnavailable, code: apitype.CodeUnavailable,
			message:  func(_ *http.Request, err, sentinel error) string { return detail(err, sentinel) + " (try again)" },
			logLevel: slog.LevelWarn, logMsg: "request failed on an unavailable service"},
		// A cap on builds at once: the same request succeeds once one of
		// the user's builds ends, hence 429 rather than the 403 of a
		// cluster over its quota.
		{match: isBuildsCap, status: http.StatusTooManyRequests, code: apitype.CodeQuotaExceeded, message: quotaExceeded},
		{is: []error{quota.ErrExceeded}, status: http.StatusForbidden, code: apitype.CodeQuotaExceeded, message: quotaExceeded},
		{is: []error{scheduler.ErrConflict}, status: http.StatusConflict, code: apitype.CodeConflict, message: stripped(detail)},
		{is: []error{quota.ErrInvalid}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: stripped(detail)},
		{is: []error{auth.ErrTokenRequest}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: stripped(detail)},
		{is: []error{quota.ErrNoEntry}, status: http.StatusNotFound, code: apitype.CodeNotFound, message: whole},
		{is: []error{store.ErrNotFound}, status: http.StatusNotFound, code: apitype.CodeBenchRunNotFound,
			message: func(r *http.Request, _, _ error) string { return "benchmark run " + r.PathValue("id") + " not found" }},
		{is: []error{store.ErrBenchInvalid}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: stripped(storeMessage)},
		{is: []error{store.ErrBenchFinished}, status: http.StatusConflict, code: apitype.CodeBenchRunFinished, message: stripped(storeMessage)},
		{is: []error{envs.ErrNotFound}, status: http.StatusNotFound, code: apitype.CodeEnvNotFound, message: whole},
		{is: []error{envs.ErrCodeRequired}, status: http.StatusConflict, code: apitype.CodeCodeRequired, message: whole},
		{is: []error{images.ErrInvalidSpec}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: whole},
		// The package index or a registry could not be reached: the same
		// request may succeed later.
		{is: []error{images.ErrUnavailable}, status: http.StatusServiceUnavailable, code: apitype.CodeUnavailable, message: whole, retryAfter: "30"},
		{is: []error{envs.ErrNoBuilder}, status: http.StatusNotImplemented, code: apitype.CodeNoBuilder, message: whole},
		{is: []error{envs.ErrInvalid}, status: http.StatusUnprocessableEntity, code: apitype.CodeInvalidRequest, message: stripped(detail)},
		{is: []error{envs.ErrConflict}, status: http.StatusConflict, code: apitype.CodeConflict, message: stripped(detail)},
	}
}

// fail answers a request that failed with err: the database's outage
// first (every route reads or writes it), then the first rule of
// errorRules that err matches; a client that went away gets nothing, and
// anything else is an internal error whose details stay in the log.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if s.databaseDown(w, r, err) {
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	for _, rule := range errorRules() {
		sentinel, ok := rule.matches(err)
		if !ok {
			continue
		}
		if rule.logMsg != "" {
			s.log.Log(r.Context(), rule.logLevel, rule.logMsg, "method", r.Method, "path", r.URL.Path, "err", err)
		}
		if rule.retryAfter != "" {
			w.Header().Set("Retry-After", rule.retryAfter)
		}
		WriteError(w, rule.status, rule.code, rule.message(r, err, sentinel))
		return
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	WriteError(w, http.StatusInternalServerError, apitype.CodeInternal, "internal error; the gateway's log has the details")
}

// Explain is the answer the API gives for err (its status and message),
// for the gateway's other pages (the console) that answer the same
// domain errors: one mapping for all. An error no rule knows is an
// internal error, whose details stay in the caller's log; ok is false
// for a client that went away (no answer).
func Explain(r *http.Request, err error) (status int, message string, ok bool) {
	if errors.Is(err, context.Canceled) {
		return 0, "", false
	}
	if errors.Is(err, store.ErrUnavailable) {
		return http.StatusServiceUnavailable, "the gateway's database cannot be reached right now; try again in a moment", true
	}
	for _, rule := range errorRules() {
		if sentinel, ok := rule.matches(err); ok {
			return rule.status, rule.message(r, err, sentinel), true
		}
	}
	return http.StatusInternalServerError, "internal error; the gateway's log has the details", true
}

// matches reports whether the rule answers err, and with which of its
// sentinels.
func (rule errorRule) matches(err error) (sentinel error, ok bool) {
	if rule.match != nil {
		return nil, rule.match(err)
	}
	for _, e := range rule.is {
		if errors.Is(err, e) {
			return e, true
		}
	}
	return nil, false
}

// stripped is a rule's message without the text of the sentinel that
// classifies the error (the status and code say that already).
func stripped(strip func(err, sentinel error) string) func(*http.Request, error, error) string {
	return func(_ *http.Request, err, sentinel error) string { return strip(err, sentinel) }
}

func quotaExceeded(_ *http.Request, err, _ error) string { return "quota exceeded: " + err.Error() }

// isBuildsCap reports whether err is the quota's cap on a user's builds
// at once (envs returns it as max_builds).
func isBuildsCap(err error) bool {
	var qe *quota.ExceededError
	return errors.As(err, &qe) && qe.Limit == "max_builds"
}
