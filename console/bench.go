package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/store"
)

// BenchStore is what the benchmarks section needs of the store of
// benchmark results and schedules (the *store.DB the API keeps them in).
type BenchStore interface {
	GetBenchRun(ctx context.Context, id string) (*store.BenchRun, error)
	ListBenchRuns(ctx context.Context, f store.BenchRunFilter) ([]*store.BenchRun, error)
	BenchSamples(ctx context.Context, runID string) ([]store.BenchSample, error)
	BenchHistory(ctx context.Context, f store.BenchHistoryFilter) ([]store.BenchPoint, error)
	ListBenchSchedules(ctx context.Context, owner string) ([]*store.BenchSchedule, error)
	DeleteBenchSchedule(ctx context.Context, id, owner string) error
}

// benchDeps is what this section needs of the rest of the gateway.
type benchDeps struct {
	store BenchStore
}

// benchPages are the section's pages that draw package report's
// template (the run's report, a test's history).
var benchPages = []string{"bench_run", "bench_history"}

// SetBench adds the benchmarks section: the user's runs, each run's A/B
// report with its charts (what gateway bench report --html draws), a
// benchmark's history, and the schedules.
func (s *Server) SetBench(b BenchStore) error {
	for _, p := range benchPages {
		t := s.pages[p]
		if t == nil {
			return fmt.Errorf("console: no template %s.html", p)
		}
		if _, err := t.Parse(report.Template); err != nil {
			return fmt.Errorf("console: the report's template: %w", err)
		}
	}
	s.bench.store = b
	s.section(navItem{Key: "benchmarks", Title: "Benchmarks", Path: "/benchmarks"}, func(m *http.ServeMux) {
		m.HandleFunc("GET /benchmarks", s.page(s.benchPage))
		m.HandleFunc("GET /benchmarks/runs/{id}", s.page(s.benchRunPage))
		m.HandleFunc("GET /benchmarks/history", s.page(s.benchHistoryPage))
		m.HandleFunc("POST /benchmarks/schedules/{id}/delete", s.action(s.deleteSchedule))
	})
	return nil
}

const (
	// benchRuns is how many of the user's runs the section lists.
	benchRuns = 50
	// historyPoints bounds the samples a chart of history reads (the
	// CLI's report reads as many); historyRows, those listed.
	historyPoints = 5000
	historyRows   = 200
)

// runRow is a run as the list shows it.
type runRow struct {
	ID, Suite, Status, Error, ScheduleID string
	Envs                                 []string // "A base"
	Tests                                int
	Started                              time.Time
	Took                                 string
}

func runRowOf(r *store.BenchRun, now time.Time) runRow {
	row := runRow{ID: r.ID, Suite: r.Suite, Status: r.Status, Error: report.Shorten(r.Error, 160), ScheduleID: r.ScheduleID,
		Tests: len(r.Tests), Started: r.StartedAt}
	for _, e := range r.Envs {
		name := e.Name
		if name == "" && len(e.Hash) >= 12 {
			name = e.Hash[:12]
		}
		row.Envs = append(row.Envs, strings.TrimSpace(e.Label+" "+name))
	}
	switch {
	case !r.FinishedAt.IsZero():
		row.Took = humanDuration(r.FinishedAt.Sub(r.StartedAt))
	case r.Status == store.BenchRunning:
		row.Took = humanDuration(now.Sub(r.StartedAt))
	}
	return row
}

// scheduleRow is a schedule as the list shows it.
type scheduleRow struct {
	ID, Suite, Cron, LastRunID, LastError string
	Envs                                  []string
	NextRun, LastRun                      time.Time
}

type benchData struct {
	Runs      []runRow
	Tests     []string // every test of the runs listed, by name
	Schedules []scheduleRow
	ReadOnly  bool
}

func (s *Server) benchPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	runs, err := s.bench.store.ListBenchRuns(r.Context(), store.BenchRunFilter{Owner: u.Owner(), Limit: benchRuns})
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	scheds, err := s.bench.store.ListBenchSchedules(r.Context(), u.Owner())
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	d := benchData{ReadOnly: u.ReadOnly}
	now := time.Now()
	for _, run := range runs {
		if run.Owner != u.Owner() {
			continue // never another user's, whatever the store returned
		}
		d.Runs = append(d.Runs, runRowOf(run, now))
		for _, t := range run.Tests {
			if !slices.Contains(d.Tests, t) {
				d.Tests = append(d.Tests, t)
			}
		}
	}
	slices.Sort(d.Tests)
	for _, sc := range scheds {
		if sc.Owner != u.Owner() {
			continue
		}
		d.Schedules = append(d.Schedules, scheduleRow{ID: sc.ID, Suite: sc.Suite, Cron: sc.Cron, LastRunID: sc.LastRunID,
			LastError: report.Shorten(sc.LastError, 160), Envs: sc.Envs, NextRun: sc.NextRun, LastRun: sc.LastRun})
	}
	s.render(w, r, http.StatusOK, "benchmarks", view{Title: "Benchmarks", User: u, Nav: "benchmarks", Data: d})
}

// ownRun is the user's run of the path; another user's is not found, as
// one that does not exist.
func (s *Server) ownRun(ctx context.Context, u *auth.User, id string) (*store.BenchRun, error) {
	run, err := s.bench.store.GetBenchRun(ctx, id)
	if err == nil && run.Owner != u.Owner() {
		err = fmt.Errorf("console: bench run %s: %w", id, store.ErrNotFound)
	}
	return run, err
}

func (s *Server) benchRunPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	run, err := s.ownRun(r.Context(), u, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	samples, err := s.bench.store.BenchSamples(r.Context(), run.ID)
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	rep := report.Build(report.RunOf(run, samples), report.DefaultThreshold)
	history := map[string][]apitype.BenchPointJSON{}
	for _, t := range rep.Tests {
		pts, err := s.bench.store.BenchHistory(r.Context(), store.BenchHistoryFilter{Owner: run.Owner, Test: t.Test, Limit: historyPoints})
		if err != nil {
			s.fail(w, r, u, err)
			return
		}
		history[t.Test] = points(pts)
	}
	page := report.NewPage(rep, history)
	page.HistoryPath = "/benchmarks/history"
	s.render(w, r, http.StatusOK, "bench_run", view{Title: "Run " + run.ID, User: u, Nav: "benchmarks", Data: page})
}

func points(pts []store.BenchPoint) []apitype.BenchPointJSON {
	out := make([]apitype.BenchPointJSON, len(pts))
	for i, p := range pts {
		out[i] = report.PointOf(p)
	}
	return out
}

// historyRow is one sample of a test's history, as the page lists it.
type historyRow struct {
	RunID, Env, Status, Wall, Memory, Error string
	Repeat                                  int // from 1, as a run's progress counts
	Started                                 time.Time
}

type historyData struct {
	Test    string
	Chart   *report.History
	Rows    []historyRow
	Samples int // in all; Rows are the newest
}

func (s *Server) benchHistoryPage(w http.ResponseWriter, r *http.Request, u *auth.User) {
	test := r.URL.Query().Get("test")
	if test == "" {
		s.errorPage(w, r, u, http.StatusBadRequest, "Which benchmark?", "Give the benchmark's name (?test=NAME), as a run's report shows it.")
		return
	}
	pts, err := s.bench.store.BenchHistory(r.Context(), store.BenchHistoryFilter{Owner: u.Owner(), Test: test, Limit: historyPoints})
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	all := points(pts)
	d := historyData{Test: test, Chart: report.NewHistory(test, all), Samples: len(all)}
	// Oldest first from the store: the table shows the newest first.
	for i := len(all) - 1; i >= 0 && len(d.Rows) < historyRows; i-- {
		p := all[i]
		env := p.EnvName
		if env == "" && len(p.EnvHash) >= 12 {
			env = p.EnvHash[:12]
		}
		d.Rows = append(d.Rows, historyRow{RunID: p.RunID, Env: strings.TrimSpace(env + " (" + p.Env + ")"), Status: p.Status, Repeat: p.Repeat + 1,
			Wall: report.Seconds(p.WallSeconds), Memory: report.Bytes(p.PeakManaged + p.PeakUnmanaged), Error: report.Shorten(p.Error, 160), Started: p.RunStartedAt})
	}
	s.render(w, r, http.StatusOK, "bench_history", view{Title: "History of " + test, User: u, Nav: "benchmarks", Data: d})
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, u *auth.User) {
	id := r.PathValue("id")
	err := s.bench.store.DeleteBenchSchedule(r.Context(), id, u.Owner())
	if errors.Is(err, store.ErrNotFound) {
		s.notFound(w, r, "No schedule "+id+" of yours.")
		return
	}
	if err != nil {
		s.fail(w, r, u, err)
		return
	}
	s.log.Info("bench schedule deleted", "id", id, "by", u.Name, "from", "console")
	redirect(w, r, "/benchmarks", "Schedule "+id+" deleted: it runs no more.")
}
