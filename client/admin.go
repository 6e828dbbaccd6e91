package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/quota"
)

// QuotaList is every quota entry the gateway has, with the meaning of each
// limit (name, doc) in display order.
type QuotaList struct {
	Entries []apitype.QuotaEntryJSON `json:"entries"`
	Limits  [][2]string              `json:"limits"`
}

// QuotaDetail is one subject's entry and, for a user subject, the limits
// that apply to the user, the groups they were resolved with and where
// those groups came from.
type QuotaDetail struct {
	Entry      apitype.QuotaEntryJSON `json:"entry"`
	Effective  *quota.Effective       `json:"effective,omitempty"`
	Groups     []string               `json:"groups,omitempty"`
	GroupsFrom string                 `json:"groups_from,omitempty"`
}

// MarshalJSON writes the detail as the server does: a user's groups are
// always there, [] when none are known.
func (d QuotaDetail) MarshalJSON() ([]byte, error) {
	type plain QuotaDetail
	if d.Effective == nil {
		return json.Marshal(plain(d))
	}
	groups := d.Groups
	if groups == nil {
		groups = []string{}
	}
	return json.Marshal(struct {
		plain
		Groups []string `json:"groups"`
	}{plain(d), groups})
}

// InUse is what the caller's live clusters hold.
type InUse struct {
	Clusters   int            `json:"clusters"`
	VCPUs      float64        `json:"vcpus"`
	MemoryGiB  float64        `json:"memory_gib"`
	GPUs       int            `json:"gpus"`
	GPUsByType map[string]int `json:"gpus_by_type"`
}

// MyQuotaInfo is the caller's effective limits, where each came from, and
// what the caller's live clusters hold.
type MyQuotaInfo struct {
	Limits   quota.Limits      `json:"limits"`
	Sources  map[string]string `json:"sources"`
	InUse    InUse             `json:"in_use"`
	OnExceed string            `json:"on_exceed"`
}

// Budget is one monthly budget of the caller and where it came from.
type Budget struct {
	Limit  quota.Amount `json:"limit"`
	Source string       `json:"source"`
}

// MyUsageInfo is the caller's use over a window (by default the calendar
// month so far), in total and per cluster, with their monthly budgets
// (keyed by limit name: monthly_vcpu_hours, monthly_gpu_hours).
type MyUsageInfo struct {
	Since    time.Time          `json:"since"`
	Until    time.Time          `json:"until"`
	Total    apitype.UsageRow   `json:"total"`
	Clusters []apitype.UsageRow `json:"clusters"`
	Budgets  map[string]Budget  `json:"budgets"`
}

// UsageFilter selects a usage report. Dates are 2026-12-01 (UTC midnight)
// or RFC 3339 times; empty fields are the server's defaults (all users,
// the current month, by user).
type UsageFilter struct {
	User  string
	Since string
	Until string
	By    string // user or cluster
}

func (f UsageFilter) query(format string) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"user": f.User, "since": f.Since, "until": f.Until, "by": f.By, "format": format} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// AuditFilter selects audit entries; empty fields select everything.
type AuditFilter struct {
	Since  string // a date or an RFC 3339 time
	Target string // exact: "user:ann", "group:gpu", "default", "cluster:<name>"
	Actor  string // the admin's user name
	Limit  int    // newest first; 0: the server's default
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// quotaPath is the admin path of a subject. The subject is escaped as one
// path segment, so that a group name holding "/" reaches the server whole.
func quotaPath(subject string) string {
	return "/api/v1/admin/quotas/" + url.PathEscape(subject)
}

// AdminQuotas lists every quota entry (admins only).
func (c *Client) AdminQuotas(ctx context.Context) (*QuotaList, error) {
	var v QuotaList
	if err := c.do(ctx, http.MethodGet, "/api/v1/admin/quotas", nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// AdminQuota returns one subject's entry; for a user subject also their
// effective limits, resolved with groups when given, or else with the
// groups the user had at their latest cluster (admins only).
func (c *Client) AdminQuota(ctx context.Context, subject string, groups []string) (*QuotaDetail, error) {
	q := url.Values{}
	if len(groups) > 0 {
		q.Set("groups", strings.Join(groups, ","))
	}
	var v QuotaDetail
	if err := c.do(ctx, http.MethodGet, withQuery(quotaPath(subject), q), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// AdminSetQuota stores the limits patch sets for subject, merged into what
// is stored already, and returns the subject's entry after (admins only).
func (c *Client) AdminSetQuota(ctx context.Context, subject string, patch quota.Limits) (*apitype.QuotaEntryJSON, error) {
	if patch.Empty() {
		return nil, fmt.Errorf("nothing to set for %s: the patch sets no limit", subject)
	}
	var v apitype.QuotaEntryJSON
	if err := c.do(ctx, http.MethodPatch, quotaPath(subject), patch, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// AdminUnsetQuota removes the named limits from subject's stored entry, or
// the whole stored entry when fields is empty, and returns the subject's
// entry after (admins only). The configuration file's entry is untouched.
func (c *Client) AdminUnsetQuota(ctx context.Context, subject string, fields []string) (*apitype.QuotaEntryJSON, error) {
	q := url.Values{}
	if len(fields) > 0 {
		q.Set("fields", strings.Join(fields, ","))
	}
	var v apitype.QuotaEntryJSON
	if err := c.do(ctx, http.MethodDelete, withQuery(quotaPath(subject), q), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// AdminClusters lists every user's clusters with the given statuses; none
// means the active ones, "all" every one (admins only).
func (c *Client) AdminClusters(ctx context.Context, statuses []string) ([]apitype.ClusterDetail, error) {
	q := url.Values{}
	if len(statuses) > 0 {
		q.Set("status", strings.Join(statuses, ","))
	}
	var v []apitype.ClusterDetail
	if err := c.do(ctx, http.MethodGet, withQuery("/api/v1/admin/clusters", q), nil, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// AdminStop stops any user's cluster (admins only); the stop is audited.
func (c *Client) AdminStop(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/admin/clusters/"+url.PathEscape(name), nil, nil)
}

// AdminUsage returns a usage report (admins only).
func (c *Client) AdminUsage(ctx context.Context, f UsageFilter) (*apitype.UsageReport, error) {
	var v apitype.UsageReport
	if err := c.do(ctx, http.MethodGet, withQuery("/api/v1/admin/usage", f.query("json")), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// AdminUsageRaw returns a usage report as the server writes it, in format
// "json" or "csv" (admins only).
func (c *Client) AdminUsageRaw(ctx context.Context, f UsageFilter, format string) ([]byte, error) {
	if format != "json" && format != "csv" {
		return nil, fmt.Errorf("usage report format %q: use json or csv", format)
	}
	var s string
	if err := c.do(ctx, http.MethodGet, withQuery("/api/v1/admin/usage", f.query(format)), nil, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// AdminAudit returns audit log entries, newest first (admins only).
func (c *Client) AdminAudit(ctx context.Context, f AuditFilter) ([]apitype.AuditJSON, error) {
	q := url.Values{}
	for k, v := range map[string]string{"since": f.Since, "target": f.Target, "actor": f.Actor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var v []apitype.AuditJSON
	if err := c.do(ctx, http.MethodGet, withQuery("/api/v1/admin/audit", q), nil, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// MyQuota returns the caller's effective limits and what they use now.
func (c *Client) MyQuota(ctx context.Context) (*MyQuotaInfo, error) {
	var v MyQuotaInfo
	if err := c.do(ctx, http.MethodGet, "/api/v1/quota", nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// MyUsage returns the caller's use between since and until (dates or
// RFC 3339 times; empty: the calendar month so far) and their budgets.
func (c *Client) MyUsage(ctx context.Context, since, until string) (*MyUsageInfo, error) {
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if until != "" {
		q.Set("until", until)
	}
	var v MyUsageInfo
	if err := c.do(ctx, http.MethodGet, withQuery("/api/v1/usage", q), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
