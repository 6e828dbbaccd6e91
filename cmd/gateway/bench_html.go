package main

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench/report"
)

// The HTML report is one file with its style and charts inline (SVG laid
// out by package report, drawn by its template, which the console's run
// page draws too): it opens offline, from a mail attachment or a CI
// artifact, and loads nothing.

type htmlReport struct {
	report.Page
	Generated string
}

func writeHTMLReport(path string, rep report.Report, history map[string][]apitype.BenchPointJSON) error {
	r := htmlReport{Page: report.NewPage(rep, history), Generated: time.Now().UTC().Format(time.RFC3339)}
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

var reportTemplate = template.Must(template.Must(template.New("file").Parse(report.Template)).Parse(`<!DOCTYPE html>
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
/* The summary fits the page: its cells wrap (test ids and figures can be long). */
#summary { width: 100%; table-layout: fixed; font-size: .85rem; }
#summary th, #summary td { overflow-wrap: anywhere; padding: .3rem .35rem; }
#summary th:first-child { width: 22%; }
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
svg .whisker { stroke: #222; stroke-width: 1.5; }
svg .median { stroke: #111; stroke-width: 2.5; }
svg .sample { fill: #222; fill-opacity: .55; }
svg .label { font-weight: 600; }
svg .box { fill-opacity: .8; stroke: #222; stroke-width: 1; }
svg .box[data-env="A"] { fill: #4e79a7; } svg .box[data-env="B"] { fill: #e15759; } svg .box[data-env="A2"] { fill: #76b7b2; }
svg .series { fill: none; stroke-width: 2; }
[data-series="0"] { fill: #4e79a7; stroke: #4e79a7; } [data-series="1"] { fill: #e15759; stroke: #e15759; }
[data-series="2"] { fill: #59a14f; stroke: #59a14f; } [data-series="3"] { fill: #edc948; stroke: #edc948; }
[data-series="4"] { fill: #b07aa1; stroke: #b07aa1; } [data-series="5"] { fill: #76b7b2; stroke: #76b7b2; }
[data-series="6"] { fill: #ff9da7; stroke: #ff9da7; } [data-series="7"] { fill: #9c755f; stroke: #9c755f; }
svg g[data-series] text { fill: #222; stroke: none; }
.errors { color: #a31515; font-size: .85rem; }
.rule { color: #555; font-size: .85rem; white-space: pre-line; }
</style>
</head>
<body>
{{template "report" .Page}}
<p class="meta">Generated {{.Generated}} by gateway bench report.</p>
</body>
</html>
`))
