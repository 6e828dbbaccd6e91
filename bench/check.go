package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/stats"
	"github.com/gatewayhq/gateway/store"
)

// ParseWindow reads a length of time as Go writes it (36h, 90m) or in
// days or weeks (7d, 2w).
func ParseWindow(v string) (time.Duration, error) {
	bad := fmt.Errorf("window %q: want a length of time such as 7d, 2w or 36h", v)
	v = strings.TrimSpace(v)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(v, suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || f <= 0 || f > 3660 {
				return 0, bad
			}
			return time.Duration(f * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

// ParseThreshold reads a relative change as a percentage (10%) or a
// fraction (0.1).
func ParseThreshold(v string) (float64, error) {
	t := strings.TrimSpace(v)
	pct := strings.HasSuffix(t, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if pct {
		f /= 100
	}
	if err != nil || math.IsNaN(f) || f <= 0 || f > 100 {
		return 0, fmt.Errorf("threshold %q: want a positive percentage such as 10%% (or a fraction such as 0.1)", v)
	}
	return f, nil
}

// HistorySource reads benchmark history (a *store.DB).
type HistorySource interface {
	BenchHistory(ctx context.Context, f store.BenchHistoryFilter) ([]store.BenchPoint, error)
}

// Alpha is the significance level of regression checks.
const Alpha = 0.05

// Check checks an owner's history of an environment (name or hash)
// for regressions: each test's latest run against the runs of that
// environment that started within window before it, each run one
// observation (stats.FindRegressions on the wall time of successful
// samples; tests of different suites are kept apart; a run's A2 set
// gives its within-run A/A). A scheduled run calls it after it finishes to decide on an
// alert.
func Check(ctx context.Context, src HistorySource, owner, env string, window time.Duration, threshold float64) (apitype.BenchCheckJSON, error) {
	out := apitype.BenchCheckJSON{Env: env, Window: window.String(), Threshold: threshold, Alpha: Alpha, Findings: []apitype.BenchFindingJSON{}}
	newest, err := src.BenchHistory(ctx, store.BenchHistoryFilter{Owner: owner, Env: env, Limit: 1, Baseline: true})
	if err != nil || len(newest) == 0 {
		return out, err
	}
	// Samples are taken after their run starts: every sample of a run that
	// started in the window is at or after its start.
	points, err := src.BenchHistory(ctx, store.BenchHistoryFilter{Owner: owner, Env: env, Since: newest[0].StartedAt.Add(-window), Baseline: true})
	if err != nil {
		return out, err
	}
	var obs []stats.Obs
	for _, p := range points {
		if p.Status != store.SampleOK {
			continue
		}
		obs = append(obs, stats.Obs{Test: p.Suite + "\x00" + p.Test, Run: p.RunID, At: p.StartedAt, Value: p.WallSeconds, Set: p.Env})
	}
	for _, f := range stats.FindRegressions(obs, window, threshold, Alpha) {
		suite, test, _ := strings.Cut(f.Test, "\x00")
		j := apitype.BenchFindingJSON{Suite: suite, Test: test, Run: f.Run, RunStartedAt: f.At.UTC(), Baseline: f.Baseline, BaselineRuns: f.BaselineRuns,
			Latest: f.Latest, BaselineMedian: finite(f.BaselineMedian), LatestMedian: finite(f.LatestMedian), Change: finite(f.Change), P: finite(f.P),
			Spread: finite(f.Spread), Method: f.Method, MethodText: f.MethodText(), Regressed: f.Regressed, Note: f.Reason}
		if f.Regressed {
			out.Regressions++
		}
		out.Findings = append(out.Findings, j)
	}
	return out, nil
}

// finite makes NaN (no value) JSON's null.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
