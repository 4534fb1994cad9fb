package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers png
	_ "gonum.org/v1/plot/vg/vgsvg" // registers svg
)

// series is one line of a chart panel.
type series struct {
	Name   string
	Points []point
}

type point struct{ X, Y float64 }

// panel is one chart of a figure.
type panel struct {
	Title, XLabel, YLabel string
	LogX                  bool // log2 x axis with a tick at every x used
	Series                []series
}

// saveFigure draws panels side by side into path; the format follows the
// extension (.svg or .png). One figure with both panels keeps prefill
// and decode of the same run together, which is how they are read.
func saveFigure(path string, panels []panel) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if format != "svg" && format != "png" {
		return fmt.Errorf("chart %s: use a .svg or .png file name", path)
	}
	var plots []*plot.Plot
	for _, pn := range panels {
		p, err := buildPlot(pn)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	w, h := vg.Length(len(panels))*5.5*vg.Inch, 4.2*vg.Inch
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func buildPlot(pn panel) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.Title
	p.X.Label.Text = pn.XLabel
	p.Y.Label.Text = pn.YLabel
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	var xs []float64
	ymax := 0.0
	for i, s := range pn.Series {
		if len(s.Points) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.Points))
		for j, q := range s.Points {
			pts[j].X, pts[j].Y = q.X, q.Y
			xs = append(xs, q.X)
			ymax = max(ymax, q.Y)
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(0)
		l.Width = vg.Points(1.5)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
	}
	if len(xs) == 0 {
		// Nothing measured (every row skipped or failed): an empty,
		// labelled panel says so more clearly than no file.
		p.Title.Text += " (no data)"
		return p, nil
	}
	p.Y.Max = ymax * 1.15 // room for the legend above the highest line
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if pn.LogX && xs[0] > 0 {
		p.X.Scale = plot.LogScale{}
		var ticks []plot.Tick
		for _, x := range xs {
			// One label, the larger, for points a hair apart (a model
			// capped at 32704 beside 32768): two would print over each other.
			t := plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)}
			if n := len(ticks); n > 0 && x < ticks[n-1].Value*1.02 {
				ticks[n-1] = t
				continue
			}
			ticks = append(ticks, t)
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		// Half a step of margin either side so end points are not on the
		// frame.
		p.X.Min, p.X.Max = xs[0]/math.Sqrt2, xs[len(xs)-1]*math.Sqrt2
	} else {
		var ticks []plot.Tick
		for _, x := range xs {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		pad := max((xs[len(xs)-1]-xs[0])*0.05, 0.5)
		p.X.Min, p.X.Max = xs[0]-pad, xs[len(xs)-1]+pad
	}
	return p, nil
}

// plainTicks are the default ticks labelled without trailing zeros
// ("5000", not "5000.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
