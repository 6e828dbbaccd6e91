package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

// A test's history draws one line per environment, the first
// SeriesColors of them by name, one point per run (its median), and
// nothing when no run has a successful sample.
func TestNewHistory(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var pts []apitype.BenchPointJSON
	for e := range SeriesColors + 2 {
		for run := range 3 {
			for range 2 {
				pts = append(pts, apitype.BenchPointJSON{BenchSampleJSON: apitype.BenchSampleJSON{RunID: fmt.Sprintf("r%d-%d", e, run), Status: "ok",
					WallSeconds: float64(run + 1)}, EnvName: fmt.Sprintf("env%02d", e), RunStartedAt: at.Add(time.Duration(run) * time.Hour)})
			}
		}
	}
	h := NewHistory("bench_x", pts)
	if h == nil || len(h.Series) != SeriesColors {
		t.Fatalf("history: %+v", h)
	}
	for i, s := range h.Series {
		if s.Index != i || s.Name != fmt.Sprintf("env%02d", i) || len(s.Dots) != 3 || len(strings.Fields(s.Points)) != 3 {
			t.Errorf("series %d: %+v", i, s)
		}
		// Later runs are further right, and higher (slower) ones higher up.
		if d := s.Dots; !(d[0].X < d[1].X && d[1].X < d[2].X && d[0].Y > d[1].Y && d[1].Y > d[2].Y) {
			t.Errorf("series %d's dots: %+v", i, d)
		}
	}
	// The axis dates its points to the minute, first, middle and last.
	if len(h.XTicks) != 3 || h.XTicks[0].Label != "2026-12-01 00:00 UTC" || h.XTicks[1].Label != "2026-12-01 01:00 UTC" || h.XTicks[2].Label != "2026-12-01 02:00 UTC" {
		t.Errorf("x ticks: %+v", h.XTicks)
	}
	if !strings.Contains(h.Series[0].Dots[1].Title, "2026-12-01 01:00:00 UTC") {
		t.Errorf("a point's title %q does not date it", h.Series[0].Dots[1].Title)
	}
	failed := []apitype.BenchPointJSON{{BenchSampleJSON: apitype.BenchSampleJSON{RunID: "r", Status: "failed"}, EnvName: "a"}}
	if h := NewHistory("bench_x", failed); h != nil {
		t.Errorf("history of failed samples only: %+v", h)
	}
	// An environment without a name is its hash's start.
	noName := []apitype.BenchPointJSON{{BenchSampleJSON: apitype.BenchSampleJSON{RunID: "r", Status: "ok", WallSeconds: 1}, EnvHash: strings.Repeat("c", 64)}}
	if h := NewHistory("bench_x", noName); h == nil || h.Series[0].Name != strings.Repeat("c", 12) {
		t.Errorf("history of an unnamed environment: %+v", h)
	}
}

// A run of one environment has nothing to compare: the page says so
// with dashes, and draws one bar per test.
func TestNewPageOneEnvironment(t *testing.T) {
	run := apitype.BenchRunJSON{ID: "br-1", Suite: "s", Envs: []apitype.BenchEnvJSON{{Label: "A", Name: "base", Hash: strings.Repeat("a", 64)}},
		StartedAt: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	for i := range 3 {
		run.Samples = append(run.Samples, apitype.BenchSampleJSON{Test: "bench_x", Env: "A", Repeat: i, WallSeconds: 1, Status: "ok"})
	}
	p := NewPage(Build(run, DefaultThreshold), nil)
	if p.Candidate != "–" || p.Threshold != "10" || p.Started != "2026-12-01 03:00 UTC" || p.Finished != "" || p.Envs[0].Hash != strings.Repeat("a", 12) {
		t.Errorf("page: %+v", p)
	}
	if len(p.Tests) != 1 || p.Tests[0].Verdict != "–" || p.Tests[0].Interval != "–" || p.Tests[0].B != "–" || len(p.Tests[0].Bars) != 1 || p.Tests[0].History != nil {
		t.Errorf("test: %+v", p.Tests)
	}
}
