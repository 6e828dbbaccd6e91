package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/report"
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
	q := r.URL.Query()
	f, err := report.AuditFilter(q.Get("since"), q.Get("target"), q.Get("actor"), q.Get("limit"))
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
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

func usageWindow(r *http.Request, now time.Time) (since, until time.Time, err error) {
	return report.Window(r.URL.Query().Get("since"), r.URL.Query().Get("until"), now)
}

func (s *Server) adminUsage(w http.ResponseWriter, r *http.Request) {
	since, until, err := usageWindow(r, time.Now())
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	by, err := report.ParseBy(r.URL.Query().Get("by"))
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
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
	rep := report.Report(ivs, since, until, by)
	if format == "csv" {
		writeCSV(w, rep)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func writeCSV(w http.ResponseWriter, rep apitype.UsageReport) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = report.WriteCSV(w, rep)
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
	total := report.Report(ivs, since, until, "user")
	perCluster := report.Report(ivs, since, until, "cluster")
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
