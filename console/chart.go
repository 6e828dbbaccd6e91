package console

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Charts are drawn on the server, as SVG in the page (templates/_charts.html):
// no script and no library, they print and work without JavaScript. Each
// bar carries its label and value as a <title> (a tooltip, and what
// screen readers say), and every chart comes with a table of the same
// figures.

// chart is one bar chart, laid out in its own coordinates (the SVG's
// viewBox; the browser scales it to the page's width).
type chart struct {
	ID, Title     string
	Width, Height float64
	Bars          []chartBar
	Ticks         []chartTick // the horizontal axis's labels (columns)
	Max           string      // the value axis's top (columns)
	MaxY, BaseY   float64
	AxisX         float64
}

// chartBar is one bar with its label and value.
type chartBar struct {
	Label, Short, Value string
	X, Y, W, H          float64
	TextX, TextY        float64 // the label's place (rows)
	ValueX              float64 // the value's place (rows)
}

type chartTick struct {
	Label string
	X, Y  float64
}

// chartPoint is one labelled value to draw.
type chartPoint struct {
	Label string
	Value float64
}

const (
	chartWidth = 720.0
	rowHeight  = 22.0
	labelWidth = 170.0
	valueWidth = 90.0
	maxLabel   = 24 // runes of a row's label drawn; the <title> has it whole
)

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// rowsChart draws one horizontal bar per point, in the order given.
func rowsChart(id, title string, points []chartPoint, format func(float64) string) chart {
	c := chart{ID: id, Title: title, Width: chartWidth, Height: rowHeight*float64(len(points)) + 8}
	top := maxOf(points)
	span := chartWidth - labelWidth - valueWidth
	for i, p := range points {
		y := 4 + rowHeight*float64(i)
		w := 0.0
		if top > 0 {
			w = span * p.Value / top
		}
		c.Bars = append(c.Bars, chartBar{Label: p.Label, Short: shorten(p.Label), Value: format(p.Value),
			X: labelWidth, Y: y + 3, W: round1(w), H: rowHeight - 6,
			TextX: labelWidth - 6, TextY: y + rowHeight - 7, ValueX: round1(labelWidth + w + 6)})
	}
	return c
}

// columnsChart draws one vertical bar per point (days), with some of the
// labels under them and the top value on the side.
func columnsChart(id, title string, points []chartPoint, format func(float64) string) chart {
	const height, left, right, top, bottom = 220.0, 64.0, 8.0, 12.0, 28.0
	c := chart{ID: id, Title: title, Width: chartWidth, Height: height, MaxY: top + 4, BaseY: height - bottom, AxisX: left - 6}
	peak := maxOf(points)
	c.Max = format(peak)
	if len(points) == 0 {
		return c
	}
	plot := height - top - bottom
	step := (chartWidth - left - right) / float64(len(points))
	every := int(math.Ceil(float64(len(points)) / 8))
	for i, p := range points {
		h := 0.0
		if peak > 0 {
			h = plot * p.Value / peak
		}
		x := left + step*float64(i)
		c.Bars = append(c.Bars, chartBar{Label: p.Label, Value: format(p.Value),
			X: round1(x + step*0.1), Y: round1(height - bottom - h), W: round1(step * 0.8), H: round1(h)})
		if i%every == 0 {
			c.Ticks = append(c.Ticks, chartTick{Label: p.Label, X: round1(x + step/2), Y: height - 8})
		}
	}
	return c
}

func maxOf(points []chartPoint) float64 {
	m := 0.0
	for _, p := range points {
		m = max(m, p.Value)
	}
	return m
}

// shorten cuts a label to what fits beside its bar.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= maxLabel {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:maxLabel-1])) + "…"
}

func hours(v float64) string { return fmt.Sprintf("%.2f", v) }
