package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/stats"
)

// Page is a report as Template draws it: every number formatted and
// every chart laid out here, so that the template calls no function and
// joins any template set (the CLI's file, the console's pages).
type Page struct {
	Run               apitype.BenchRunJSON
	Started, Finished string
	Shape, Options    string
	Envs              []EnvRow
	Candidate         string // "–" when the run has one environment
	Threshold         string // in percent
	Rule              string
	Tests             []Section
	// HistoryPath, when set, is the page of a test's history, which
	// each test links to (?test=NAME): the console's; the CLI's file
	// stands alone.
	HistoryPath string
}

// EnvRow is one environment of the run, as the report lists it.
type EnvRow struct {
	Label, Name, Hash, Packages string
}

// Section is one test's part of the page: its comparison and charts.
type Section struct {
	Test, Verdict, VerdictClass, Reason string
	Index, Failed                       int
	Errors                              []string // each with its count
	A, B                                string   // median (IQR, n)
	Change, Interval, P, Band           string

	Bars    []Bar
	YTicks  []Tick
	History *History // nil: no history of the test yet
	BarW    float64
	BarH    float64
	// The plot's edges, for the axes.
	PlotLeft, PlotBottom, BarPlotRight float64
}

// Bar is one environment's box plot: the box spans the quartiles, a line
// marks the median, whiskers reach the smallest and largest sample, and
// every sample is a dot beside it (a strip).
type Bar struct {
	Env                    string  // A, B or A2: the styles color it
	X, Y, W, H             float64 // the box: Y is the third quartile, Y+H the first
	MedianY, BoxX2         float64 // the median's line, across the box
	ErrX, ErrY1, ErrY2     float64 // the whisker: from the minimum (ErrY1) to the maximum
	CapX1, CapX2           float64
	Dots                   []Point
	TitleText, ValueText   string
	LabelX, LabelY, ValueY float64
}

// Point is a point of a chart.
type Point struct{ X, Y float64 }

// Tick is an axis label and where it goes.
type Tick struct {
	X, Y   float64
	Label  string
	Anchor string // text-anchor: start, middle or end
}

// History is a test's history chart: one line per set of an environment
// (its name and label: base (A), base (A2), candidate (B)), the median of
// each run's successful samples by the run's start, dated on the axis
// and on each point.
type History struct {
	Test          string
	Series        []Series
	YTicks        []Tick
	XTicks        []Tick
	W, H          float64
	PlotLeft      float64
	PlotRight     float64
	PlotBottom    float64
	LegendX       float64
	LegendSwatchX float64
}

// Series is one environment's line; Index picks its color (0 to 7).
type Series struct {
	Name    string
	Index   int
	Points  string // the polyline's
	Dots    []Dot
	LegendY float64
}

// Dot is one run on a history line.
type Dot struct {
	X, Y  float64
	Title string
}

// SeriesColors is how many history lines are drawn, each with a color of
// its own; the styles color them by index.
const SeriesColors = 8

const (
	barW, barH     = 360.0, 220.0 // bar chart size
	histW, histH   = 560.0, 220.0 // history chart size
	padL, padR     = 56.0, 12.0
	padT, padB     = 12.0, 36.0
	legendW        = 110.0
	maxHistoryRuns = 200 // points per series drawn, the newest
)

// NewPage lays out a report with each test's history (by test name).
func NewPage(rep Report, history map[string][]apitype.BenchPointJSON) Page {
	p := Page{Run: rep.Run, Started: rep.Run.StartedAt.UTC().Format("2006-01-02 15:04 MST"), Shape: string(rep.Run.Shape),
		Options: string(rep.Run.Options), Candidate: orDash(rep.Candidate), Threshold: fmt.Sprintf("%.0f", rep.Threshold*100), Rule: Rule}
	if f := rep.Run.FinishedAt; f != nil {
		p.Finished = f.UTC().Format("2006-01-02 15:04 MST")
	}
	for _, e := range rep.Run.Envs {
		p.Envs = append(p.Envs, EnvRow{Label: e.Label, Name: e.Name, Hash: short(e.Hash), Packages: Packages(e.Packages)})
	}
	for i, t := range rep.Tests {
		var errs []string
		for _, e := range t.Errors {
			errs = append(errs, e.String())
		}
		s := Section{Test: t.Test, Verdict: orDash(t.Verdict), VerdictClass: VerdictClass(t.Verdict), Reason: t.Reason, Index: i,
			Failed: t.Failed, Errors: errs, A: Summary(t.A), B: Summary(t.B), Change: Pct(t.Change), Interval: "–", P: PValue(t.P), Band: Band(t.Noise),
			BarW: barW, BarH: barH, PlotLeft: padL, PlotBottom: barH - padB, BarPlotRight: barW - padR}
		if t.Lo != nil && t.Hi != nil {
			s.Interval = fmt.Sprintf("[%s, %s]", Pct(t.Lo), Pct(t.Hi))
		}
		s.Bars, s.YTicks = bars(t.values)
		s.History = NewHistory(t.Test, history[t.Test])
		p.Tests = append(p.Tests, s)
	}
	return p
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func ticks(top, bottomY, topY, x float64) []Tick {
	var out []Tick
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		out = append(out, Tick{Y: bottomY - (bottomY-topY)*float64(i)/4, X: x, Label: Seconds(v)})
	}
	return out
}

// bars draws a box plot per environment, with its samples as dots.
func bars(values map[string][]float64) ([]Bar, []Tick) {
	labels := []string{"A", "B", "A2"}
	var top float64
	for _, l := range labels {
		for _, v := range values[l] {
			top = math.Max(top, v)
		}
	}
	top = niceMax(top * 1.05)
	bottom, plotTop := barH-padB, padT
	scale := func(v float64) float64 { return bottom - (bottom-plotTop)*v/top }
	var present []string
	for _, l := range labels {
		if len(values[l]) > 0 {
			present = append(present, l)
		}
	}
	var out []Bar
	slot := (barW - padL - padR) / math.Max(1, float64(len(present)))
	for i, l := range present {
		vals := values[l]
		d := describe(vals)
		w := slot * 0.4
		x := padL + slot*float64(i) + (slot-w)/2 - slot*0.1
		cx := x + w/2
		b := Bar{Env: l, X: x, W: w, Y: scale(d.Q3), H: math.Max(1.5, scale(d.Q1)-scale(d.Q3)), MedianY: scale(d.Median), BoxX2: x + w,
			ErrX: cx, ErrY1: scale(d.Min), ErrY2: scale(d.Max), CapX1: cx - w/6, CapX2: cx + w/6,
			LabelX: cx, LabelY: bottom + 16, ValueY: bottom + 30}
		b.TitleText = fmt.Sprintf("%s: median %s, quartiles %s–%s, range %s–%s, n=%d", l, Seconds(d.Median), Seconds(d.Q1), Seconds(d.Q3),
			Seconds(d.Min), Seconds(d.Max), d.N)
		b.ValueText = Seconds(d.Median)
		// The strip: each sample beside its box, spread so that equal
		// values stay visible.
		stripX := x + w + slot*0.12
		for j, v := range vals {
			off := (float64(j)/math.Max(1, float64(len(vals)-1)) - 0.5) * slot * 0.12
			b.Dots = append(b.Dots, Point{X: stripX + off, Y: scale(v)})
		}
		out = append(out, b)
	}
	return out, ticks(top, bottom, plotTop, padL-6)
}

// NewHistory lays out a test's history from its points (any order): one
// line per environment (by name, else the start of its hash), the newest
// maxHistoryRuns runs of each. Nil when no run has a successful sample.
func NewHistory(test string, pts []apitype.BenchPointJSON) *History {
	type key struct{ env, run string }
	vals := map[key][]float64{}
	starts := map[key]time.Time{}
	for _, p := range pts {
		if p.Status != "ok" {
			continue
		}
		name := p.EnvName
		if name == "" {
			name = short(p.EnvHash)
		}
		if p.Env != "" {
			// A and A2 run the same environment but are sets of their own.
			name += " (" + p.Env + ")"
		}
		k := key{name, p.RunID}
		vals[k] = append(vals[k], p.WallSeconds)
		starts[k] = p.RunStartedAt
	}
	type point struct {
		at  time.Time
		med float64
		run string
		n   int
	}
	byEnv := map[string][]point{}
	for k, v := range vals {
		byEnv[k.env] = append(byEnv[k.env], point{starts[k], stats.Median(v), k.run, len(v)})
	}
	if len(byEnv) == 0 {
		return nil
	}
	names := make([]string, 0, len(byEnv))
	var first, last time.Time
	var top float64
	for n, ps := range byEnv {
		sort.Slice(ps, func(i, j int) bool { return ps[i].at.Before(ps[j].at) })
		if len(ps) > maxHistoryRuns {
			ps = ps[len(ps)-maxHistoryRuns:]
		}
		byEnv[n] = ps
		names = append(names, n)
		for _, p := range ps {
			if first.IsZero() || p.at.Before(first) {
				first = p.at
			}
			if p.at.After(last) {
				last = p.at
			}
			top = math.Max(top, p.med)
		}
	}
	sort.Strings(names)
	if len(names) > SeriesColors {
		names = names[:SeriesColors]
	}
	top = niceMax(top * 1.05)
	bottom, plotTop, right := histH-padB, padT, histW-padR-legendW
	h := &History{Test: test, W: histW, H: histH, PlotLeft: padL, PlotRight: right, PlotBottom: bottom, LegendX: right + 24, LegendSwatchX: right + 8}
	span := last.Sub(first)
	xOf := func(at time.Time) float64 {
		if span <= 0 {
			return (padL + right) / 2
		}
		return padL + (right-padL)*float64(at.Sub(first))/float64(span)
	}
	yOf := func(v float64) float64 { return bottom - (bottom-plotTop)*v/top }
	for i, n := range names {
		s := Series{Name: n, Index: i, LegendY: plotTop + 8 + 16*float64(i)}
		var buf bytes.Buffer
		for _, p := range byEnv[n] {
			x, y := xOf(p.at), yOf(p.med)
			fmt.Fprintf(&buf, "%.1f,%.1f ", x, y)
			s.Dots = append(s.Dots, Dot{X: x, Y: y, Title: fmt.Sprintf("%s %s: median %s (n=%d), run %s", n, p.at.UTC().Format("2006-01-02 15:04:05 MST"), Seconds(p.med), p.n, p.run)})
		}
		s.Points = buf.String()
		h.Series = append(h.Series, s)
	}
	h.YTicks = ticks(top, bottom, plotTop, padL-6)
	const stamp = "2006-01-02 15:04 MST"
	if span <= 0 {
		h.XTicks = []Tick{{X: (padL + right) / 2, Y: bottom + 16, Label: first.UTC().Format(stamp), Anchor: "middle"}}
	} else {
		mid := first.Add(span / 2)
		h.XTicks = []Tick{{X: padL, Y: bottom + 16, Label: first.UTC().Format(stamp), Anchor: "start"},
			{X: xOf(mid), Y: bottom + 30, Label: mid.UTC().Format(stamp), Anchor: "middle"},
			{X: right, Y: bottom + 16, Label: last.UTC().Format(stamp), Anchor: "end"}}
	}
	return h
}
