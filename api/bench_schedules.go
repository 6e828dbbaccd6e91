package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/store"
)

// BenchSchedules is the store of benchmark schedules.
type BenchSchedules interface {
	CreateBenchSchedule(ctx context.Context, b *store.BenchSchedule) error
	GetBenchSchedule(ctx context.Context, id string) (*store.BenchSchedule, error)
	ListBenchSchedules(ctx context.Context, owner string) ([]*store.BenchSchedule, error)
	DeleteBenchSchedule(ctx context.Context, id, owner string) error
}

// SetBenchSchedules turns on the schedule routes (gateway bench schedule).
func (s *Server) SetBenchSchedules(b BenchSchedules, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.schedules, s.schedulesNow = b, now
}

// SetBenchSchedulesReady makes the schedule routes ask ready first: an
// error (the Python that would run scheduled suites cannot, say) refuses
// the request with its message, so that no schedule is stored that could
// never run.
func (s *Server) SetBenchSchedulesReady(ready func(ctx context.Context) error) {
	s.schedulesReady = ready
}

func benchScheduleJSON(b *store.BenchSchedule) apitype.BenchScheduleJSON {
	o, _ := schedspec.Decode(b.Options)
	out := apitype.BenchScheduleJSON{ID: b.ID, Owner: b.Owner, OwnerName: b.OwnerName, Suite: b.Suite, Envs: b.Envs, Cron: b.Cron,
		Options: o, NextRun: b.NextRun, LastRunID: b.LastRunID, LastError: b.LastError, CreatedAt: b.CreatedAt}
	if !b.LastRun.IsZero() {
		t := b.LastRun
		out.LastRun = &t
	}
	return out
}

func (s *Server) benchScheduleRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/bench/schedules", s.authed(s.schedulesOn(s.createBenchSchedule)))
	m.HandleFunc("GET /api/v1/bench/schedules", s.authed(s.schedulesOn(s.listBenchSchedules)))
	m.HandleFunc("DELETE /api/v1/bench/schedules/{id}", s.authed(s.schedulesOn(s.deleteBenchSchedule)))
}

func (s *Server) schedulesOn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.schedules == nil {
			WriteError(w, http.StatusNotFound, "not_found", "this gateway runs no benchmark schedules; run gateway bench run and gateway bench check from cron or CI instead")
			return
		}
		if s.schedulesReady != nil {
			if err := s.schedulesReady(r.Context()); err != nil {
				WriteError(w, http.StatusNotFound, "not_found", "this gateway runs no benchmark schedules: "+err.Error())
				return
			}
		}
		h(w, r)
	}
}

func (s *Server) createBenchSchedule(w http.ResponseWriter, r *http.Request) {
	var req apitype.BenchScheduleRequest
	if !decodeLimit(w, r, &req, 4<<20, "request body over 4 MiB: a schedule keeps a suite of at most 1 MiB of Python") {
		return
	}
	if req.Suite == "" {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "suite: give the suite's name")
		return
	}
	if _, err := schedspec.SuiteFiles(req.Archive); err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "suite_archive: "+err.Error())
		return
	}
	if err := req.Options.Check(); err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "options: "+err.Error())
		return
	}
	next, err := schedspec.Next(req.Cron, s.schedulesNow())
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	opts, err := req.Options.Encode()
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "options: "+err.Error())
		return
	}
	u := UserFrom(r.Context())
	var names []string
	for _, e := range req.Options.Envs {
		names = append(names, e.Name)
	}
	b := &store.BenchSchedule{Owner: u.Owner(), OwnerName: u.Name, OwnerGroups: u.Groups, Suite: req.Suite,
		SuiteArchive: req.Archive, Envs: names, Options: opts, Cron: req.Cron, NextRun: next}
	if err := s.schedules.CreateBenchSchedule(r.Context(), b); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("bench schedule created", "id", b.ID, "owner", b.OwnerName, "suite", b.Suite, "cron", b.Cron, "next_run", b.NextRun)
	writeJSON(w, http.StatusCreated, benchScheduleJSON(b))
}

func (s *Server) listBenchSchedules(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	owner := u.Owner()
	if u.Admin && queryFlag(r, "all") {
		owner = ""
	}
	list, err := s.schedules.ListBenchSchedules(r.Context(), owner)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.BenchScheduleJSON, 0, len(list))
	for _, b := range list {
		out = append(out, benchScheduleJSON(b))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteBenchSchedule(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	owner := u.Owner()
	if u.Admin {
		owner = ""
	}
	err := s.schedules.DeleteBenchSchedule(r.Context(), r.PathValue("id"), owner)
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", "no such schedule of yours: "+r.PathValue("id"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("bench schedule deleted", "id", r.PathValue("id"), "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}
