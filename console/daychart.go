package console

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// chart is a bar chart by day drawn by the server as SVG: no script, no
// library. The template draws what is here; every number is computed
// in Go and every text is escaped by html/template.
type dayChartView struct {
	Width, Height int
	Title, Desc   string
	Bars          []dayBar
	Ticks         []dayTick // the value axis: gridlines and their labels
	Labels        []dayTick // the day axis
	AxisY         string    // the baseline's y
	PlotLeft      int
	PlotRight     int
	GPU           bool // GPU-hours are drawn beside vCPU-hours
}

// bar is one rectangle with what it shows (its title, for pointers and
// screen readers).
type dayBar struct {
	X, Y, W, H, Class, Title string
}

// tick is a label at a place on an axis.
type dayTick struct {
	At, Label string
}

const (
	dayChartWidth, dayChartHeight              = 720, 240
	dayLeft, dayRight, dayTop, dayBottomMargin = 64, 8, 12, 32
)

// dayChart draws vCPU-hours by day (and GPU-hours, when there are any)
// from since, one slot per day.
func dayChart(days []store.Totals, since time.Time) dayChartView {
	c := dayChartView{Width: dayChartWidth, Height: dayChartHeight, PlotLeft: dayLeft, PlotRight: dayChartWidth - dayRight}
	bottom := float64(dayChartHeight - dayBottomMargin)
	c.AxisY = coord(bottom)
	peak, busiest := 0.0, 0
	for i, t := range days {
		if v := t.VCPUSeconds / 3600; v > peak {
			peak, busiest = v, i
		}
		c.GPU = c.GPU || t.GPUSeconds > 0
	}
	top := 0.0
	for _, t := range days {
		top = max(top, t.VCPUSeconds/3600, t.GPUSeconds/3600)
	}
	top, steps := niceCeil(top)
	height := bottom - dayTop
	y := func(v float64) float64 { return bottom - height*v/top }
	for i := 0; i <= steps; i++ {
		v := top * float64(i) / float64(steps)
		c.Ticks = append(c.Ticks, dayTick{At: coord(y(v)), Label: strconv.FormatFloat(v, 'g', 3, 64)})
	}
	slot := float64(c.PlotRight-c.PlotLeft) / float64(len(days))
	every := 1
	if len(days) > 10 {
		every = 5
	}
	for i, t := range days {
		day := since.AddDate(0, 0, i)
		x := float64(c.PlotLeft) + slot*float64(i)
		series := []daySeries{{"bar-vcpu", "vCPU-hours", t.VCPUSeconds / 3600}}
		if c.GPU {
			series = append(series, daySeries{"bar-gpu", "GPU-hours", t.GPUSeconds / 3600})
		}
		w := slot * 0.7 / float64(len(series))
		for k, s := range series {
			bx := x + slot*0.15 + w*float64(k)
			c.Bars = append(c.Bars, dayBar{X: coord(bx), Y: coord(y(s.v)), W: coord(w), H: coord(bottom - y(s.v)), Class: s.class,
				Title: fmt.Sprintf("%s: %.2f %s", day.Format("2 Jan"), s.v, s.unit)})
		}
		if day.Day() == 1 || day.Day()%every == 0 {
			c.Labels = append(c.Labels, dayTick{At: coord(x + slot/2), Label: strconv.Itoa(day.Day())})
		}
	}
	month := since.Format("January 2006")
	c.Title = "vCPU-hours by day, " + month + " (UTC)"
	if c.GPU {
		c.Title = "vCPU-hours and GPU-hours by day, " + month + " (UTC)"
	}
	last := since.AddDate(0, 0, len(days)-1)
	c.Desc = fmt.Sprintf("One bar a day from %s to %s.", since.Format("2 January"), last.Format("2 January"))
	if peak > 0 {
		c.Desc += fmt.Sprintf(" The busiest day is %s, with %.2f vCPU-hours.", since.AddDate(0, 0, busiest).Format("2 January"), peak)
	} else {
		c.Desc += " No use yet this month."
	}
	c.Desc += " The table below the chart has every day's figures."
	return c
}

// daySeries is one bar of a day's slot.
type daySeries struct {
	class, unit string
	v           float64
}

// niceCeil is v rounded up to 1, 2 or 5 times a power of ten (1 for
// 0), with how many steps of a round size divide it.
func niceCeil(v float64) (top float64, steps int) {
	if v <= 0 {
		return 1, 4
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []struct {
		times float64
		steps int
	}{{1, 5}, {2, 4}, {5, 5}} {
		if v <= m.times*p*(1+1e-9) {
			return m.times * p, m.steps
		}
	}
	return 10 * p, 5
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
