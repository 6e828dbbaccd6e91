package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// Quotas is what the API needs of the quota service.
type Quotas interface {
	Effective(ctx context.Context, who quota.Who) (quota.Effective, error)
	List(ctx context.Context) ([]quota.Entry, error)
	Entry(ctx context.Context, s quota.Subject) (quota.Entry, error)
	Set(ctx context.Context, by store.Actor, s quota.Subject, patch quota.Limits) (quota.Entry, error)
	Unset(ctx context.Context, by store.Actor, s quota.Subject, fields []string) (quota.Entry, error)
}

// Records is what the API reads of the usage ledger and the audit log.
type Records interface {
	Intervals(ctx context.Context, f store.LedgerFilter) ([]store.Interval, error)
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
	LastGroups(ctx context.Context, ownerName string) ([]string, time.Time, error)
}

// SetAdmin enables quotas, usage and the admin API.
func (s *Server) SetAdmin(q Quotas, r Records) { s.quotas, s.records = q, r }

func (s *Server) adminRoutes() {
	a := http.NewServeMux()
	a.HandleFunc("GET /api/v1/admin/quotas", s.adminListQuotas)
	a.HandleFunc("GET /api/v1/admin/quotas/{subject...}", s.adminGetQuota)
	a.HandleFunc("PATCH /api/v1/admin/quotas/{subject...}", s.adminSetQuota)
	a.HandleFunc("DELETE /api/v1/admin/quotas/{subject...}", s.adminUnsetQuota)
	a.HandleFunc("GET /api/v1/admin/clusters", s.adminClusters)
	a.HandleFunc("DELETE /api/v1/admin/clusters/{name}", s.adminStop)
	a.HandleFunc("GET /api/v1/admin/usage", s.adminUsage)
	a.HandleFunc("GET /api/v1/admin/audit", s.adminAudit)
	a.HandleFunc("PUT /api/v1/admin/envs/{name}", s.adminPublishEnv)
	a.HandleFunc("DELETE /api/v1/admin/envs/{name}", s.adminUnpublishEnv)
	a.HandleFunc("/api/v1/admin/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no admin route %s %s", r.Method, r.URL.Path))
	})
	// Every admin path, known or not, is refused to non-admins first, so
	// that the answer does not tell them which routes exist.
	s.mux.HandleFunc("/api/v1/admin/", s.authed(func(w http.ResponseWriter, r *http.Request) {
		if u := UserFrom(r.Context()); !u.Admin {
			s.log.Info("admin route refused", "user", u.Name, "method", r.Method, "path", r.URL.Path)
			WriteError(w, http.StatusForbidden, "forbidden", "admin only: your account is not an admin of this gateway")
			return
		}
		if s.quotas == nil || s.records == nil {
			WriteError(w, http.StatusNotFound, "not_found", "this gateway has no admin API")
			return
		}
		a.ServeHTTP(w, r)
	}))
	s.mux.HandleFunc("GET /api/v1/quota", s.authed(s.myQuota))
	s.mux.HandleFunc("GET /api/v1/usage", s.authed(s.myUsage))
}

func actorOf(r *http.Request) store.Actor {
	u := UserFrom(r.Context())
	return store.Actor{ID: u.Owner(), Name: u.Name}
}

func whoOf(r *http.Request) quota.Who {
	u := UserFrom(r.Context())
	return quota.Who{ID: u.Owner(), Name: u.Name, Groups: u.Groups}
}

func entryJSON(e quota.Entry) apitype.QuotaEntryJSON {
	out := apitype.QuotaEntryJSON{Subject: string(e.Subject), Limits: e.Limits(), Sources: e.Origins(), Builtin: e.Builtin, Config: e.Config, Stored: e.Stored, UpdatedBy: e.UpdatedBy}
	if !e.UpdatedAt.IsZero() {
		t := e.UpdatedAt.UTC()
		out.UpdatedAt = &t
	}
	return out
}

func (s *Server) adminListQuotas(w http.ResponseWriter, r *http.Request) {
	entries, err := s.quotas.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.QuotaEntryJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, entryJSON(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out, "limits": quota.FieldDocs()})
}

func subjectOf(w http.ResponseWriter, r *http.Request) (quota.Subject, bool) {
	subj, err := quota.ParseSubject(r.PathValue("subject"))
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", detail(err, quota.ErrInvalid))
		return "", false
	}
	return subj, true
}

// adminGetQuota answers a subject's entry and, for a user, the effective
// limits: for the groups given in ?groups=, or else the groups the user
// had at their latest cluster.
func (s *Server) adminGetQuota(w http.ResponseWriter, r *http.Request) {
	subj, ok := subjectOf(w, r)
	if !ok {
		return
	}
	e, err := s.quotas.Entry(r.Context(), subj)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := map[string]any{"entry": entryJSON(e)}
	if name, isUser := strings.CutPrefix(string(subj), "user:"); isUser {
		groups, from := []string{}, "none known: the user has made no cluster; pass ?groups=a,b"
		if q := r.URL.Query().Get("groups"); q != "" {
			groups, from = splitList(q), "the request"
		} else if g, at, err := s.records.LastGroups(r.Context(), name); err != nil {
			s.fail(w, r, err)
			return
		} else if !at.IsZero() {
			groups, from = g, "the user's latest cluster ("+at.UTC().Format(time.RFC3339)+")"
		}
		eff, err := s.quotas.Effective(r.Context(), quota.Who{Name: name, Groups: groups})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out["effective"] = eff
		out["groups"] = groups
		out["groups_from"] = from
	}
	writeJSON(w, http.StatusOK, out)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) adminSetQuota(w http.ResponseWriter, r *http.Request) {
	subj, ok := subjectOf(w, r)
	if !ok {
		return
	}
	var raw json.RawMessage
	if !decode(w, r, &raw) {
		return
	}
	patch, err := quota.ParseLimits(raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := s.quotas.Set(r.Context(), actorOf(r), subj, patch)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("quota set", "admin", actorOf(r).Name, "subject", subj)
	writeJSON(w, http.StatusOK, entryJSON(e))
}

func (s *Server) adminUnsetQuota(w http.ResponseWriter, r *http.Request) {
	subj, ok := subjectOf(w, r)
	if !ok {
		return
	}
	e, err := s.quotas.Unset(r.Context(), actorOf(r), subj, splitList(r.URL.Query().Get("fields")))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("quota unset", "admin", actorOf(r).Name, "subject", subj)
	writeJSON(w, http.StatusOK, entryJSON(e))
}

// statusesOf reads ?status= (default: pending, starting, running; "all").
func statusesOf(r *http.Request) ([]store.Status, error) {
	statuses := []store.Status{store.Pending, store.Starting, store.Running}
	q := r.URL.Query().Get("status")
	if q == "" {
		return statuses, nil
	}
	statuses = nil
	for _, part := range strings.Split(q, ",") {
		if strings.EqualFold(strings.TrimSpace(part), "all") {
			return nil, nil
		}
		st, err := store.ParseStatus(part)
		if err != nil {
			return nil, err
		}
		statuses = append(statuses, st)
		if st == store.Pending {
			statuses = append(statuses, store.Starting) // the client's PENDING covers our STARTING
		}
	}
	return statuses, nil
}

func (s *Server) adminClusters(w http.ResponseWriter, r *http.Request) {
	statuses, err := statusesOf(r)
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	cls, err := s.core.ListAll(r.Context(), statuses)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]any, 0, len(cls))
	for _, c := range cls {
		// Never another user's TLS key: it is their cluster's credential.
		out = append(out, s.clusterJSON(c, true, true, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminStop(w http.ResponseWriter, r *http.Request) {
	if err := s.core.AdminStop(r.Context(), actorOf(r), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request) {
	f := store.AuditFilter{Target: r.URL.Query().Get("target"), Actor: r.URL.Query().Get("actor")}
	var err error
	if f.Since, err = parseDate(r.URL.Query().Get("since")); err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "since: "+err.Error())
		return
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		if f.Limit, err = strconv.Atoi(l); err != nil || f.Limit <= 0 || f.Limit > 10000 {
			WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "limit must be a whole number from 1 to 10000")
			return
		}
	}
	entries, err := s.records.AuditLog(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.AuditJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, apitype.AuditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, ActorID: e.ActorID, Action: e.Action, Target: e.Target,
			Before: rawOrNull(e.Before), After: rawOrNull(e.After)})
	}
	writeJSON(w, http.StatusOK, out)
}

func rawOrNull(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// parseDate reads 2026-12-01 (UTC midnight) or an RFC 3339 time; "" is zero.
func parseDate(s string) (time.Time, error) {
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

func usageWindow(r *http.Request, now time.Time) (since, until time.Time, err error) {
	if since, err = parseDate(r.URL.Query().Get("since")); err != nil {
		return since, until, fmt.Errorf("since: %w", err)
	}
	if since.IsZero() {
		since = quota.MonthStart(now)
	}
	if until, err = parseDate(r.URL.Query().Get("until")); err != nil {
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

func buildReport(ivs []store.Interval, since, until time.Time, by string) apitype.UsageReport {
	rows := map[string]*apitype.UsageRow{}
	clusters := map[string]map[string]bool{}
	var keys []string
	for _, iv := range ivs {
		key := iv.Owner
		if by == "cluster" {
			key = iv.Cluster
		}
		row := rows[key]
		if row == nil {
			row = &apitype.UsageRow{User: iv.OwnerName, UserID: iv.Owner, GPUHoursByType: map[string]float64{}}
			if by == "cluster" {
				row.Cluster = iv.Cluster
			}
			rows[key], clusters[key] = row, map[string]bool{}
			keys = append(keys, key)
		}
		clusters[key][iv.Cluster] = true
		row.Clusters = len(clusters[key])
		row.Running = row.Running || iv.Open
		var t store.Totals
		t.Add(iv)
		row.VCPUHours += t.VCPUSeconds / 3600
		row.MemoryGiBHours += t.MemoryGiBSeconds / 3600
		row.GPUHours += t.GPUSeconds / 3600
		for k, v := range t.GPUSecondsByType {
			row.GPUHoursByType[k] += v / 3600
		}
		row.CostUSD += t.Cost
	}
	out := apitype.UsageReport{Since: since.UTC(), Until: until.UTC(), By: by, Rows: []apitype.UsageRow{}}
	for _, k := range keys {
		out.Rows = append(out.Rows, *rows[k])
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		a, b := out.Rows[i], out.Rows[j]
		if a.User != b.User {
			return a.User < b.User
		}
		return a.Cluster < b.Cluster
	})
	return out
}

func (s *Server) adminUsage(w http.ResponseWriter, r *http.Request) {
	since, until, err := usageWindow(r, time.Now())
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "user"
	}
	if by != "user" && by != "cluster" {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", fmt.Sprintf("by must be user or cluster, got %q", by))
		return
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "csv" {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", fmt.Sprintf("format must be json or csv, got %q", format))
		return
	}
	ivs, err := s.records.Intervals(r.Context(), store.LedgerFilter{OwnerName: r.URL.Query().Get("user"), Since: since, Until: until})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep := buildReport(ivs, since, until, by)
	if format == "csv" {
		writeCSV(w, rep)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func writeCSV(w http.ResponseWriter, rep apitype.UsageReport) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	head := []string{"user", "user_id", "clusters", "vcpu_hours", "memory_gib_hours", "gpu_hours", "gpu_hours_by_type", "estimated_cost_usd", "running", "since", "until"}
	if rep.By == "cluster" {
		head = append([]string{"cluster"}, head...)
	}
	_ = cw.Write(head)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, row := range rep.Rows {
		var types []string
		for k, v := range row.GPUHoursByType {
			types = append(types, csvSafe(k)+"="+f(v))
		}
		sort.Strings(types)
		rec := []string{csvSafe(row.User), csvSafe(row.UserID), strconv.Itoa(row.Clusters), f(row.VCPUHours), f(row.MemoryGiBHours), f(row.GPUHours),
			strings.Join(types, ";"), f(row.CostUSD), strconv.FormatBool(row.Running), rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339)}
		if rep.By == "cluster" {
			rec = append([]string{csvSafe(row.Cluster)}, rec...)
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
}

// csvSafe keeps a cell from being read as a formula by spreadsheets
// (names and ids come from the identity provider, not from us).
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// myQuota answers the caller's effective limits and what they use now.
func (s *Server) myQuota(w http.ResponseWriter, r *http.Request) {
	if s.quotas == nil {
		WriteError(w, http.StatusNotFound, "not_found", "this gateway has no quotas")
		return
	}
	who := whoOf(r)
	eff, err := s.quotas.Effective(r.Context(), who)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	live, err := s.core.List(r.Context(), who.ID, store.LiveStatuses)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	use := scheduler.InUse(live)
	writeJSON(w, http.StatusOK, map[string]any{"limits": eff.Limits, "sources": eff.Sources, "in_use": map[string]any{
		"clusters": use.Clusters, "vcpus": use.VCPUs, "memory_gib": use.MemoryGiB, "gpus": use.GPUs, "gpus_by_type": nonNilMap(use.GPUsByType),
	}, "on_exceed": s.cfg.OnExceed})
}

func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// myUsage answers the caller's month-to-date use against their budgets.
func (s *Server) myUsage(w http.ResponseWriter, r *http.Request) {
	if s.quotas == nil || s.records == nil {
		WriteError(w, http.StatusNotFound, "not_found", "this gateway has no usage accounting")
		return
	}
	who := whoOf(r)
	since, until, err := usageWindow(r, time.Now())
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	ivs, err := s.records.Intervals(r.Context(), store.LedgerFilter{Owner: who.ID, Since: since, Until: until})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	eff, err := s.quotas.Effective(r.Context(), who)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	total := buildReport(ivs, since, until, "user")
	perCluster := buildReport(ivs, since, until, "cluster")
	out := map[string]any{"since": total.Since, "until": total.Until, "clusters": perCluster.Rows}
	if len(total.Rows) > 0 {
		out["total"] = total.Rows[0]
	} else {
		out["total"] = apitype.UsageRow{User: who.Name, UserID: who.ID, GPUHoursByType: map[string]float64{}}
	}
	budgets := map[string]any{}
	if b := eff.Limits.MonthlyVCPUHours; b != nil {
		budgets["monthly_vcpu_hours"] = map[string]any{"limit": *b, "source": eff.Source("monthly_vcpu_hours")}
	}
	if b := eff.Limits.MonthlyGPUHours; b != nil {
		budgets["monthly_gpu_hours"] = map[string]any{"limit": *b, "source": eff.Source("monthly_gpu_hours")}
	}
	out["budgets"] = budgets
	writeJSON(w, http.StatusOK, out)
}
