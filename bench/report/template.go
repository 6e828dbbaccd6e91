package report

// Template defines "report", a run's report as HTML (its data is a
// Page), and "report-history", one test's history chart (a *History):
// the CLI's self-contained file and the console's pages parse it into
// their own template sets (html/template). It calls no function, so it
// joins any set; it has no style of its own: the charts' colors come
// from the page's styles, by class and by data-env (A, B, A2) and
// data-series (0 to SeriesColors-1) attributes.
const Template = `{{define "report"}}<h1>Benchmark report <code>{{.Run.ID}}</code></h1>
<p class="meta">Suite <strong>{{.Run.Suite}}</strong>, {{.Run.Status}}{{if .Run.Error}} ({{.Run.Error}}){{end}}; started {{.Started}}{{with .Finished}}, finished {{.}}{{end}}.</p>
<p class="meta">Clusters: {{.Run.Provider}} {{.Run.Region}} <code>{{.Shape}}</code>; options <code>{{.Options}}</code>; gateway {{.Run.GatewayVersion}}; owner {{.Run.OwnerName}}.</p>
<table class="envs">
<tr><th scope="col">Label</th><th scope="col">Environment</th><th scope="col">Hash</th><th scope="col">Key packages</th></tr>
{{range .Envs}}<tr><td>{{.Label}}</td><td>{{.Name}}</td><td><code>{{.Hash}}</code></td><td>{{.Packages}}</td></tr>
{{end}}</table>

<h2>Summary</h2>
<table id="summary">
<tr><th scope="col">Test</th><th scope="col">A median (IQR, n)</th><th scope="col">{{.Candidate}} median (IQR, n)</th><th scope="col">Change of medians</th><th scope="col">95% interval</th><th scope="col">p</th><th scope="col">A/A band</th><th scope="col">Verdict</th><th scope="col">Failed</th></tr>
{{range .Tests}}<tr data-test="{{.Test}}"><td><a href="#test-{{.Index}}">{{.Test}}</a></td><td>{{.A}}</td><td>{{.B}}</td><td>{{.Change}}</td>
<td>{{.Interval}}</td><td>{{.P}}</td><td>{{.Band}}</td>
<td><span class="verdict {{.VerdictClass}}">{{.Verdict}}</span></td><td>{{.Failed}}</td></tr>
{{end}}</table>
<p class="rule">Threshold {{.Threshold}}%. {{.Rule}}</p>
{{$history := .HistoryPath}}
{{range .Tests}}
<section class="test" id="test-{{.Index}}" data-test="{{.Test}}">
<h2>{{.Test}} <span class="verdict {{.VerdictClass}}">{{.Verdict}}</span></h2>
<p class="meta">Change {{.Change}}{{if ne .Interval "–"}} (95% interval {{.Interval}}){{end}}, p = {{.P}}, A/A band {{.Band}} — {{.Reason}}.{{if $history}} <a href="{{$history}}?test={{.Test}}">Every run of {{.Test}}</a>{{end}}</p>
{{if .Errors}}<ul class="errors">{{range .Errors}}<li>{{.}}</li>{{end}}</ul>{{end}}
<div class="charts">
<svg class="bars" width="{{printf "%.1f" .BarW}}" height="{{printf "%.1f" .BarH}}" viewBox="0 0 {{printf "%.1f" .BarW}} {{printf "%.1f" .BarH}}" role="img" aria-label="Wall time of {{.Test}} by environment: median, quartiles and every sample">
<title>Wall time by environment (box: quartiles, line: median, whiskers: smallest and largest sample, dots: every sample)</title>
{{$d := .}}{{range .YTicks}}<line class="grid" x1="{{printf "%.1f" $d.PlotLeft}}" x2="{{printf "%.1f" $d.BarPlotRight}}" y1="{{printf "%.1f" .Y}}" y2="{{printf "%.1f" .Y}}"/><text x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{printf "%.1f" .PlotLeft}}" x2="{{printf "%.1f" .PlotLeft}}" y1="12" y2="{{printf "%.1f" .PlotBottom}}"/><line class="axis" x1="{{printf "%.1f" .PlotLeft}}" x2="{{printf "%.1f" .BarPlotRight}}" y1="{{printf "%.1f" .PlotBottom}}" y2="{{printf "%.1f" .PlotBottom}}"/>
{{range .Bars}}<g class="env" data-env="{{.Env}}">
<line class="whisker" x1="{{printf "%.1f" .ErrX}}" x2="{{printf "%.1f" .ErrX}}" y1="{{printf "%.1f" .ErrY1}}" y2="{{printf "%.1f" .ErrY2}}"/>
<rect class="box" data-env="{{.Env}}" x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" width="{{printf "%.1f" .W}}" height="{{printf "%.1f" .H}}"><title>{{.TitleText}}</title></rect>
<line class="median" x1="{{printf "%.1f" .X}}" x2="{{printf "%.1f" .BoxX2}}" y1="{{printf "%.1f" .MedianY}}" y2="{{printf "%.1f" .MedianY}}"/>
<line class="whisker cap" x1="{{printf "%.1f" .CapX1}}" x2="{{printf "%.1f" .CapX2}}" y1="{{printf "%.1f" .ErrY1}}" y2="{{printf "%.1f" .ErrY1}}"/>
<line class="whisker cap" x1="{{printf "%.1f" .CapX1}}" x2="{{printf "%.1f" .CapX2}}" y1="{{printf "%.1f" .ErrY2}}" y2="{{printf "%.1f" .ErrY2}}"/>
{{range .Dots}}<circle class="sample" cx="{{printf "%.1f" .X}}" cy="{{printf "%.1f" .Y}}" r="2.5"/>{{end}}
<text class="label" x="{{printf "%.1f" .LabelX}}" y="{{printf "%.1f" .LabelY}}" text-anchor="middle">{{.Env}}</text>
<text x="{{printf "%.1f" .LabelX}}" y="{{printf "%.1f" .ValueY}}" text-anchor="middle">{{.ValueText}}</text>
</g>
{{end}}</svg>
{{with .History}}{{template "report-history" .}}{{else}}<p class="meta">No history of this test yet.</p>{{end}}
</div>
</section>
{{end}}{{end}}

{{define "report-history"}}<svg class="history" width="{{printf "%.1f" .W}}" height="{{printf "%.1f" .H}}" viewBox="0 0 {{printf "%.1f" .W}} {{printf "%.1f" .H}}" role="img" aria-label="History of {{.Test}}: median wall time per run">
<title>History: median wall time of each run, by environment and set</title>
{{$h := .}}{{range .YTicks}}<line class="grid" x1="{{printf "%.1f" $h.PlotLeft}}" x2="{{printf "%.1f" $h.PlotRight}}" y1="{{printf "%.1f" .Y}}" y2="{{printf "%.1f" .Y}}"/><text x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{printf "%.1f" .PlotLeft}}" x2="{{printf "%.1f" .PlotLeft}}" y1="12" y2="{{printf "%.1f" .PlotBottom}}"/><line class="axis" x1="{{printf "%.1f" .PlotLeft}}" x2="{{printf "%.1f" .PlotRight}}" y1="{{printf "%.1f" .PlotBottom}}" y2="{{printf "%.1f" .PlotBottom}}"/>
{{range .XTicks}}<text class="xtick" x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" text-anchor="{{.Anchor}}">{{.Label}}</text>{{end}}
{{range .Series}}<g class="env-series" data-env="{{.Name}}" data-series="{{.Index}}">
<polyline class="series" data-env="{{.Name}}" points="{{.Points}}"/>
{{range .Dots}}<circle class="run" cx="{{printf "%.1f" .X}}" cy="{{printf "%.1f" .Y}}" r="3"><title>{{.Title}}</title></circle>{{end}}
<rect class="swatch" x="{{printf "%.1f" $h.LegendSwatchX}}" y="{{printf "%.1f" .LegendY}}" width="10" height="10" transform="translate(0,-8)"/><text x="{{printf "%.1f" $h.LegendX}}" y="{{printf "%.1f" .LegendY}}">{{.Name}}</text>
</g>
{{end}}</svg>{{end}}
`
