package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/store"
)

// BenchStore is what the API needs to keep benchmark results (a
// *store.DB).
type BenchStore interface {
	CreateBenchRun(ctx context.Context, r *store.BenchRun) error
	AddBenchSamples(ctx context.Context, runID string, samples []*store.BenchSample) error
	FinishBenchRun(ctx context.Context, id, status, errMsg string) error
	GetBenchRun(ctx context.Context, id string) (*store.BenchRun, error)
	ListBenchRuns(ctx context.Context, f store.BenchRunFilter) ([]*store.BenchRun, error)
	BenchSamples(ctx context.Context, runID string) ([]store.BenchSample, error)
	BenchHistory(ctx context.Context, f store.BenchHistoryFilter) ([]store.BenchPoint, error)
}

// SetBench enables the benchmark results API.
func (s *Server) SetBench(b BenchStore) { s.bench = b }

// maxBenchSamples bounds the samples of one request.
const maxBenchSamples = 1000

func (s *Server) benchRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/bench/runs", s.authed(s.benchEnabled(s.createBenchRun)))
	m.HandleFunc("GET /api/v1/bench/runs", s.authed(s.benchEnabled(s.listBenchRuns)))
	m.HandleFunc("GET /api/v1/bench/runs/{id}", s.authed(s.benchEnabled(s.getBenchRun)))
	m.HandleFunc("POST /api/v1/bench/runs/{id}/samples", s.authed(s.benchEnabled(s.addBenchSamples)))
	m.HandleFunc("POST /api/v1/bench/runs/{id}/finish", s.authed(s.benchEnabled(s.finishBenchRun)))
	m.HandleFunc("GET /api/v1/bench/history", s.authed(s.benchEnabled(s.benchHistory)))
	m.HandleFunc("GET /api/v1/bench/check", s.authed(s.benchEnabled(s.benchCheck)))
	m.HandleFunc("POST /api/v1/bench/price", s.authed(s.benchPrice))
}

func (s *Server) benchEnabled(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.bench == nil {
			WriteError(w, http.StatusNotFound, "bench_disabled", "this gateway keeps no benchmark results")
			return
		}
		h(w, r)
	}
}

// benchRunJSON is a run as the API answers it, without its samples.
func benchRunJSON(r *store.BenchRun) apitype.BenchRunJSON { return report.RunOf(r, nil) }

// storeMessage is a store error's message without its package prefix and
// the sentinel that classifies it (the status code says that).
func storeMessage(err, sentinel error) string {
	return strings.TrimSuffix(strings.TrimPrefix(err.Error(), "store: "), ": "+sentinel.Error())
}

// visibleRun returns the run of the path when the caller may see it:
// its owner, or an admin when read is true. Others get 404, as for a run
// that does not exist.
func (s *Server) visibleRun(w http.ResponseWriter, r *http.Request, read bool) (*store.BenchRun, bool) {
	u := UserFrom(r.Context())
	run, err := s.bench.GetBenchRun(r.Context(), r.PathValue("id"))
	if err == nil && run.Owner != u.Owner() && !(read && u.Admin) {
		err = store.ErrNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return run, true
}

func (s *Server) createBenchRun(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	var req apitype.BenchRunJSON
	if !decode(w, r, &req) {
		return
	}
	run := &store.BenchRun{Owner: u.Owner(), OwnerName: u.Name, Suite: req.Suite, Tests: req.Tests, Shape: string(req.Shape),
		Provider: req.Provider, Region: req.Region, GatewayVersion: req.GatewayVersion, Options: string(req.Options), ScheduleID: req.ScheduleID}
	if run.GatewayVersion == "" {
		run.GatewayVersion = s.cfg.Version
	}
	// The clusters run on this gateway's backend, whatever the client says.
	if s.cfg.Provider != "" {
		run.Provider, run.Region = s.cfg.Provider, s.cfg.Region
	}
	for _, e := range req.Envs {
		run.Envs = append(run.Envs, store.BenchEnv(e))
	}
	if err := s.bench.CreateBenchRun(r.Context(), run); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, benchRunJSON(run))
}

func (s *Server) addBenchSamples(w http.ResponseWriter, r *http.Request) {
	run, ok := s.visibleRun(w, r, false)
	if !ok {
		return
	}
	var req apitype.BenchSamplesRequest
	if !decodeLimit(w, r, &req, 4<<20, "request body over 4 MiB; send samples in smaller batches") {
		return
	}
	if len(req.Samples) == 0 {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", `no samples: send {"samples": [...]}`)
		return
	}
	if len(req.Samples) > maxBenchSamples {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", fmt.Sprintf("%d samples in one request; send at most %d", len(req.Samples), maxBenchSamples))
		return
	}
	samples := make([]*store.BenchSample, len(req.Samples))
	for i, m := range req.Samples {
		samples[i] = &store.BenchSample{Test: m.Test, Env: m.Env, Repeat: m.Repeat, WallSeconds: m.WallSeconds,
			PeakManaged: m.PeakManaged, PeakUnmanaged: m.PeakUnmanaged, AvgManaged: m.AvgManaged, AvgUnmanaged: m.AvgUnmanaged,
			Spilled: m.Spilled, Transferred: m.Transferred, CPUSeconds: m.CPUSeconds, Status: m.Status, Error: m.Error}
	}
	if err := s.bench.AddBenchSamples(r.Context(), run.ID, samples); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) finishBenchRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.visibleRun(w, r, false)
	if !ok {
		return
	}
	var req apitype.BenchFinishRequest
	if !decode(w, r, &req) {
		return
	}
	if err := s.bench.FinishBenchRun(r.Context(), run.ID, req.Status, req.Error); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.bench.GetBenchRun(r.Context(), run.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, benchRunJSON(run))
}

func (s *Server) getBenchRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.visibleRun(w, r, true)
	if !ok {
		return
	}
	samples, err := s.bench.BenchSamples(r.Context(), run.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, report.RunOf(run, samples))
}

// benchOwner is whose results a read covers: the caller's own; an admin
// sees everyone's, or one owner's with ?owner=.
func benchOwner(r *http.Request) (string, error) {
	u := UserFrom(r.Context())
	q := r.URL.Query().Get("owner")
	switch {
	case u.Admin:
		return q, nil
	case q != "" && q != u.Owner():
		return "", errors.New("only admins may read another user's results (drop owner=)")
	}
	return u.Owner(), nil
}

func queryLimit(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("limit %q: want a whole number from 1 to %d", v, most)
	}
	return n, nil
}

func (s *Server) listBenchRuns(w http.ResponseWriter, r *http.Request) {
	owner, err := benchOwner(r)
	if err != nil {
		WriteError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	runs, err := s.bench.ListBenchRuns(r.Context(), store.BenchRunFilter{Owner: owner, Suite: r.URL.Query().Get("suite"), Limit: limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.BenchRunJSON, 0, len(runs))
	for _, run := range runs {
		out = append(out, benchRunJSON(run))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) benchHistory(w http.ResponseWriter, r *http.Request) {
	owner, err := benchOwner(r)
	if err != nil {
		WriteError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	q := r.URL.Query()
	f := store.BenchHistoryFilter{Owner: owner, Test: q.Get("test"), Env: q.Get("env")}
	if f.Limit, err = queryLimit(r, 10000, 100000); err != nil {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
		return
	}
	if v := q.Get("since"); v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else if d, err := bench.ParseWindow(v); err == nil {
			f.Since = time.Now().Add(-d)
		} else {
			WriteError(w, http.StatusUnprocessableEntity, "invalid_request", fmt.Sprintf("since %q: want an RFC 3339 time or a length of time such as 30d", v))
			return
		}
	}
	points, err := s.bench.BenchHistory(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]apitype.BenchPointJSON, 0, len(points))
	for _, p := range points {
		out = append(out, report.PointOf(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) benchCheck(w http.ResponseWriter, r *http.Request) {
	u := UserFrom(r.Context())
	q := r.URL.Query()
	owner := u.Owner()
	if o := q.Get("owner"); o != "" && o != owner {
		if !u.Admin {
			WriteError(w, http.StatusForbidden, "forbidden", "only admins may check another user's results (drop owner=)")
			return
		}
		owner = o
	}
	env := q.Get("env")
	if env == "" {
		WriteError(w, http.StatusUnprocessableEntity, "invalid_request", "env is required: the environment (name or hash) whose history to check")
		return
	}
	window, threshold := 7*24*time.Hour, 0.10
	var err error
	if v := q.Get("window"); v != "" {
		if window, err = bench.ParseWindow(v); err != nil {
			WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
			return
		}
	}
	if v := q.Get("threshold"); v != "" {
		if threshold, err = bench.ParseThreshold(v); err != nil {
			WriteError(w, http.StatusUnprocessableEntity, "invalid_request", err.Error())
			return
		}
	}
	res, err := bench.Check(r.Context(), s.bench, owner, env, window, threshold)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.Window = q.Get("window")
	if res.Window == "" {
		res.Window = "7d"
	}
	writeJSON(w, http.StatusOK, res)
}
