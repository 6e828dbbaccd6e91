// Package report reads the usage ledger and the audit log the way the
// gateway's admins see them: the usage report (per user, per cluster, per
// group, per day) and its CSV, the dates and windows the admin routes
// take, the audit log's filter and each entry's change. The API, the CLI
// and the console share it, so that they report the same figures with
// the same words.
package report

import (
	"fmt"
	"time"

	"github.com/gatewayhq/gateway/quota"
)

// ParseDate reads 2026-12-01 (UTC midnight) or an RFC 3339 time; "" is
// the zero time.
func ParseDate(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date like 2026-12-01 or a time like 2026-12-01T15:04:05Z", s)
	}
	return t, nil
}

// Window reads a usage report's window: since defaults to the start of
// now's month (UTC), until (exclusive) to now, and never lies beyond it.
func Window(sinceText, untilText string, now time.Time) (since, until time.Time, err error) {
	if since, err = ParseDate(sinceText); err != nil {
		return since, until, fmt.Errorf("since: %w", err)
	}
	if since.IsZero() {
		since = quota.MonthStart(now)
	}
	if until, err = ParseDate(untilText); err != nil {
		return since, until, fmt.Errorf("until: %w", err)
	}
	if until.IsZero() || until.After(now) {
		until = now
	}
	if !since.Before(until) {
		return since, until, fmt.Errorf("since (%s) must be before until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return since, until, nil
}
