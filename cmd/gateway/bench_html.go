package main

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/stats"
)

// The HTML report is one file with its style and charts inline (SVG drawn
// here): it opens offline, from a mail attachment or a CI artifact, and
// loads nothing.

var envColors = map[string]string{"A": "#4e79a7", "B": "#e15759", "A2": "#76b7b2"}

var seriesColors = []string{"#4e79a7", "#e15759", "#59a14f", "#edc948", "#b07aa1", "#76b7b2", "#ff9da7", "#9c755f"}

const (
	barW, barH     = 360.0, 220.0 // bar chart size
	histW, histH   = 560.0, 220.0 // history chart size
	padL, padR     = 56.0, 12.0
	padT, padB     = 12.0, 36.0
	maxHistoryRuns = 200 // points per series drawn, the newest
)

type svgBar struct {
	Env, Label, Color      string
	X, Y, W, H             float64
	ErrX, ErrY1, ErrY2     float64 // error bar: mean ± sd
	CapX1, CapX2           float64
	Dots                   []svgPoint
	Mean, SD, Median       float64
	TitleText, ValueText   string
	LabelX, LabelY, ValueY float64
}

type svgPoint struct{ X, Y float64 }

type svgTick struct {
	Y, X  float64
	Label string
}

type svgSeries struct {
	Name, Color string
	Points      string // polyline points
	Dots        []svgDot
	LegendY     float64
}

type svgDot struct {
	X, Y  float64
	Title string
}

type htmlTest struct {
	benchTestReport
	Index         int
	VerdictClass  string
	Bars          []svgBar
	YTicks        []svgTick
	Series        []svgSeries
	HistTicks     []svgTick
	HistXTicks    []svgTick
	HasHistory    bool
	BarW, BarH    float64
	HistW, HistH  float64
	PlotBottom    float64
	PlotLeft      float64
	HistPlotRight float64
	BarPlotRight  float64
}

type htmlReport struct {
	benchReportJSON
	Tests     []htmlTest
	Generated string
	Shape     string
	Options   string
	Rule      string
}

func verdictClass(v string) string {
	switch v {
	case stats.Faster:
		return "faster"
	case stats.Slower:
		return "slower"
	case stats.NoChange:
		return "same"
	case stats.TooNoisy:
		return "noisy"
	}
	return "none"
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

func ticks(top, bottomY, topY, x float64) []svgTick {
	var out []svgTick
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		out = append(out, svgTick{Y: bottomY - (bottomY-topY)*float64(i)/4, X: x, Label: seconds(v)})
	}
	return out
}

func barChart(t *htmlTest) {
	labels := []string{"A", "B", "A2"}
	var top float64
	for _, l := range labels {
		for _, v := range t.values[l] {
			top = math.Max(top, v)
		}
		if d := stats.Describe(t.values[l]); d.N > 1 {
			top = math.Max(top, d.Mean+d.SD)
		}
	}
	top = niceMax(top * 1.05)
	bottom, plotTop := barH-padB, padT
	scale := func(v float64) float64 { return bottom - (bottom-plotTop)*v/top }
	var present []string
	for _, l := range labels {
		if len(t.values[l]) > 0 {
			present = append(present, l)
		}
	}
	slot := (barW - padL - padR) / math.Max(1, float64(len(present)))
	for i, l := range present {
		vals := t.values[l]
		d := stats.Describe(vals)
		sd := d.SD
		if math.IsNaN(sd) {
			sd = 0
		}
		w := slot * 0.5
		x := padL + slot*float64(i) + (slot-w)/2
		cx := x + w/2
		b := svgBar{Env: l, Label: l, Color: envColors[l], X: x, W: w, Y: scale(d.Mean), H: bottom - scale(d.Mean),
			ErrX: cx, ErrY1: scale(math.Max(0, d.Mean-sd)), ErrY2: scale(d.Mean + sd), CapX1: cx - w/6, CapX2: cx + w/6,
			Mean: d.Mean, SD: sd, Median: d.Median, LabelX: cx, LabelY: bottom + 16, ValueY: bottom + 30}
		b.TitleText = fmt.Sprintf("%s: mean %s ± %s, median %s, n=%d", l, seconds(d.Mean), seconds(sd), seconds(d.Median), d.N)
		b.ValueText = seconds(d.Mean)
		for j, v := range vals {
			// Spread the dots across the bar so that equal values stay visible.
			off := (float64(j)/math.Max(1, float64(len(vals)-1)) - 0.5) * w * 0.6
			b.Dots = append(b.Dots, svgPoint{X: cx + off, Y: scale(v)})
		}
		t.Bars = append(t.Bars, b)
	}
	t.YTicks = ticks(top, bottom, plotTop, padL-6)
}

// historyChart draws one line per environment: the median of each run's
// successful samples, by the run's start.
func historyChart(t *htmlTest, pts []apitype.BenchPointJSON) {
	type key struct{ env, run string }
	vals := map[key][]float64{}
	starts := map[key]time.Time{}
	for _, p := range pts {
		if p.Status != "ok" {
			continue
		}
		name := p.EnvName
		if name == "" && len(p.EnvHash) >= 12 {
			name = p.EnvHash[:12]
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
		return
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
	if len(names) > len(seriesColors) {
		names = names[:len(seriesColors)]
	}
	top = niceMax(top * 1.05)
	bottom, plotTop, right := histH-padB, padT, histW-padR-110 // room for the legend
	span := last.Sub(first)
	xOf := func(at time.Time) float64 {
		if span <= 0 {
			return (padL + right) / 2
		}
		return padL + (right-padL)*float64(at.Sub(first))/float64(span)
	}
	yOf := func(v float64) float64 { return bottom - (bottom-plotTop)*v/top }
	for i, n := range names {
		s := svgSeries{Name: n, Color: seriesColors[i], LegendY: plotTop + 8 + 16*float64(i)}
		var buf bytes.Buffer
		for _, p := range byEnv[n] {
			x, y := xOf(p.at), yOf(p.med)
			fmt.Fprintf(&buf, "%.1f,%.1f ", x, y)
			s.Dots = append(s.Dots, svgDot{X: x, Y: y, Title: fmt.Sprintf("%s %s: median %s (n=%d), run %s", n, p.at.UTC().Format("2006-01-02 15:04"), seconds(p.med), p.n, p.run)})
		}
		s.Points = buf.String()
		t.Series = append(t.Series, s)
	}
	t.HasHistory = true
	t.HistTicks = ticks(top, bottom, plotTop, padL-6)
	t.HistXTicks = []svgTick{{X: padL, Y: bottom + 16, Label: first.UTC().Format("2006-01-02")}}
	if span > 0 {
		t.HistXTicks = append(t.HistXTicks, svgTick{X: right, Y: bottom + 16, Label: last.UTC().Format("2006-01-02")})
	}
}

func writeHTMLReport(path string, rep benchReportJSON, history map[string][]apitype.BenchPointJSON) error {
	r := htmlReport{benchReportJSON: rep, Generated: time.Now().UTC().Format(time.RFC3339), Shape: string(rep.Run.Shape),
		Options: string(rep.Run.Options), Rule: verdictRule}
	for i, t := range rep.Tests {
		ht := htmlTest{benchTestReport: t, Index: i, VerdictClass: verdictClass(t.Verdict), BarW: barW, BarH: barH, HistW: histW, HistH: histH,
			PlotBottom: barH - padB, PlotLeft: padL, BarPlotRight: barW - padR, HistPlotRight: histW - padR - 110}
		barChart(&ht)
		historyChart(&ht, history[t.Test])
		r.Tests = append(r.Tests, ht)
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, r); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return nil
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"seconds": seconds, "pct": pct, "pval": pval, "short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"packages": packageList,
	"band": func(v *float64) string {
		if v == nil {
			return "not measured"
		}
		return fmt.Sprintf("±%.1f%%", *v*100)
	},
	"summary": summary,
	"f":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pctOf":   func(v float64) float64 { return v * 100 },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Benchmark report {{.Run.ID}} — {{.Run.Suite}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
h2 { font-size: 1.15rem; margin: 0 0 .5rem; }
code { font-size: .9em; }
.meta { color: #555; margin: .25rem 0; }
table { border-collapse: collapse; margin: 1rem 0; font-size: .9rem; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; }
.verdict { display: inline-block; padding: .05rem .5rem; border-radius: .8rem; font-size: .85rem; font-weight: 600; }
.verdict.slower { background: #fde0df; color: #a31515; }
.verdict.faster { background: #dff3e0; color: #1c6b24; }
.verdict.same { background: #eceff3; color: #333; }
.verdict.noisy { background: #fff3cd; color: #7a5a00; }
.verdict.none { background: #eee; color: #666; }
section.test { border: 1px solid #ddd; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
svg { background: #fff; font-size: 11px; }
svg .axis { stroke: #888; stroke-width: 1; }
svg .grid { stroke: #eee; stroke-width: 1; }
svg .errorbar { stroke: #222; stroke-width: 1.5; }
svg .sample { fill: #222; fill-opacity: .55; }
svg .series { fill: none; stroke-width: 2; }
.errors { color: #a31515; font-size: .85rem; }
.rule { color: #555; font-size: .85rem; white-space: pre-line; }
</style>
</head>
<body>
<h1>Benchmark report <code>{{.Run.ID}}</code></h1>
<p class="meta">Suite <strong>{{.Run.Suite}}</strong>, {{.Run.Status}}{{if .Run.Error}} ({{.Run.Error}}){{end}}; started {{.Run.StartedAt.UTC.Format "2006-01-02 15:04 MST"}}{{with .Run.FinishedAt}}, finished {{.UTC.Format "2006-01-02 15:04 MST"}}{{end}}.</p>
<p class="meta">Clusters: {{.Run.Provider}} {{.Run.Region}} <code>{{.Shape}}</code>; options <code>{{.Options}}</code>; gateway {{.Run.GatewayVersion}}; owner {{.Run.OwnerName}}.</p>
<table class="envs">
<tr><th>Label</th><th>Environment</th><th>Hash</th><th>Key packages</th></tr>
{{range .Run.Envs}}<tr><td>{{.Label}}</td><td>{{.Name}}</td><td><code>{{short .Hash}}</code></td><td>{{packages .Packages}}</td></tr>
{{end}}</table>

<h2>Summary</h2>
<table id="summary">
<tr><th>Test</th><th>A median ± sd</th><th>{{if .Candidate}}{{.Candidate}}{{else}}–{{end}} median ± sd</th><th>Change</th><th>95% interval</th><th>p</th><th>A/A band</th><th>Verdict</th><th>Failed</th></tr>
{{range .Tests}}<tr data-test="{{.Test}}"><td><a href="#test-{{.Index}}">{{.Test}}</a></td><td>{{summary .A}}</td><td>{{summary .B}}</td><td>{{pct .Change}}</td>
<td>{{if and .Lo .Hi}}[{{pct .Lo}}, {{pct .Hi}}]{{else}}–{{end}}</td><td>{{pval .P}}</td><td>{{band .Noise}}</td>
<td><span class="verdict {{.VerdictClass}}">{{if .Verdict}}{{.Verdict}}{{else}}–{{end}}</span></td><td>{{.Failed}}</td></tr>
{{end}}</table>
<p class="rule">Threshold {{printf "%.0f" (pctOf .Threshold)}}%. {{.Rule}}</p>

{{range .Tests}}
<section class="test" id="test-{{.Index}}" data-test="{{.Test}}">
<h2>{{.Test}} <span class="verdict {{.VerdictClass}}">{{if .Verdict}}{{.Verdict}}{{else}}–{{end}}</span></h2>
<p class="meta">Change {{pct .Change}}{{if and .Lo .Hi}} (95% interval [{{pct .Lo}}, {{pct .Hi}}]){{end}}, p = {{pval .P}}, A/A band {{band .Noise}} — {{.Reason}}.</p>
{{if .Errors}}<ul class="errors">{{range .Errors}}<li>{{.}}</li>{{end}}</ul>{{end}}
<div class="charts">
<svg class="bars" width="{{f .BarW}}" height="{{f .BarH}}" viewBox="0 0 {{f .BarW}} {{f .BarH}}" role="img" aria-label="Wall time of {{.Test}} by environment: mean and standard deviation">
<title>Wall time by environment (bar: mean, error bar: ± standard deviation, dots: samples)</title>
{{$d := .}}{{range .YTicks}}<line class="grid" x1="{{f $d.PlotLeft}}" x2="{{f $d.BarPlotRight}}" y1="{{f .Y}}" y2="{{f .Y}}"/><text x="{{f .X}}" y="{{f .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{f .PlotLeft}}" x2="{{f .PlotLeft}}" y1="12" y2="{{f .PlotBottom}}"/><line class="axis" x1="{{f .PlotLeft}}" x2="{{f .BarPlotRight}}" y1="{{f .PlotBottom}}" y2="{{f .PlotBottom}}"/>
{{range .Bars}}<g class="env" data-env="{{.Env}}">
<rect class="bar" data-env="{{.Env}}" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}" fill="{{.Color}}" fill-opacity="0.8"><title>{{.TitleText}}</title></rect>
<line class="errorbar" x1="{{f .ErrX}}" x2="{{f .ErrX}}" y1="{{f .ErrY1}}" y2="{{f .ErrY2}}"/>
<line class="errorbar cap" x1="{{f .CapX1}}" x2="{{f .CapX2}}" y1="{{f .ErrY1}}" y2="{{f .ErrY1}}"/>
<line class="errorbar cap" x1="{{f .CapX1}}" x2="{{f .CapX2}}" y1="{{f .ErrY2}}" y2="{{f .ErrY2}}"/>
{{range .Dots}}<circle class="sample" cx="{{f .X}}" cy="{{f .Y}}" r="2.5"/>{{end}}
<text x="{{f .LabelX}}" y="{{f .LabelY}}" text-anchor="middle" font-weight="600">{{.Label}}</text>
<text x="{{f .LabelX}}" y="{{f .ValueY}}" text-anchor="middle">{{.ValueText}}</text>
</g>
{{end}}</svg>
{{if .HasHistory}}<svg class="history" width="{{f .HistW}}" height="{{f .HistH}}" viewBox="0 0 {{f .HistW}} {{f .HistH}}" role="img" aria-label="History of {{.Test}}: median wall time per run">
<title>History: median wall time of each run, by environment</title>
{{range .HistTicks}}<line class="grid" x1="{{f $d.PlotLeft}}" x2="{{f $d.HistPlotRight}}" y1="{{f .Y}}" y2="{{f .Y}}"/><text x="{{f .X}}" y="{{f .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{f .PlotLeft}}" x2="{{f .PlotLeft}}" y1="12" y2="{{f .PlotBottom}}"/><line class="axis" x1="{{f .PlotLeft}}" x2="{{f .HistPlotRight}}" y1="{{f .PlotBottom}}" y2="{{f .PlotBottom}}"/>
{{range .HistXTicks}}<text x="{{f .X}}" y="{{f .Y}}" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .Series}}<g class="env-series" data-env="{{.Name}}">
<polyline class="series" data-env="{{.Name}}" points="{{.Points}}" stroke="{{.Color}}"/>
{{$c := .Color}}{{range .Dots}}<circle class="run" cx="{{f .X}}" cy="{{f .Y}}" r="3" fill="{{$c}}"><title>{{.Title}}</title></circle>{{end}}
<rect x="{{f $d.HistPlotRight}}" dx="8" y="{{f .LegendY}}" width="10" height="10" fill="{{.Color}}" transform="translate(8,-8)"/><text x="{{f $d.HistPlotRight}}" y="{{f .LegendY}}" transform="translate(24,0)">{{.Name}}</text>
</g>
{{end}}</svg>{{else}}<p class="meta">No history of this test yet.</p>{{end}}
</div>
</section>
{{end}}
<p class="meta">Generated {{.Generated}} by gateway bench report.</p>
</body>
</html>
`))
