package main

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/sim"
)

// summaryHeader and summaryCells are the columns of the summary table, shared
// by the terminal table and report.md.
var summaryHeader = []string{"scenario", "policy", "goodput %", "phase goodput %", "p99 ms", "SLO ms",
	"rejected %", "settle", "limit CoV", "verdict", "failed targets"}

func summaryCells(s sim.Scenario, r *sim.Result) []string {
	// Settling is shown where a target judges it (the steps): elsewhere
	// goodput at the phase's end is too noisy to stay within ±5% for two
	// seconds, and the figure would read as a failure it is not.
	settle := "-"
	for i, t := range s.Targets {
		if t.Metric == "settle_intervals" && i < len(r.Targets) {
			settle = figureOf(t.Metric).format(s, r.SLOms, r.Targets[i].Value)
		}
	}
	phase := "-"
	if s.Change > 0 {
		phase = fmt.Sprintf("%.1f", 100*r.PhaseGoodput)
	}
	verdict := "pass"
	if !r.Pass {
		verdict = "FAIL"
	}
	return []string{s.Name, r.Policy, fmt.Sprintf("%.1f", 100*r.GoodputRatio), phase,
		fmt.Sprintf("%.1f", r.P99ms), fmt.Sprintf("%.0f", r.SLOms), fmt.Sprintf("%.2f", 100*r.RejectRatio),
		settle, fmt.Sprintf("%.3f", r.LimitCoV), verdict, strings.Join(failedTargets(r), "; ")}
}

func failedTargets(r *sim.Result) []string {
	var failed []string
	for _, t := range r.Targets {
		if !t.Pass {
			failed = append(failed, t.Target)
		}
	}
	return failed
}

const summaryNote = `goodput = completions within SLO per second, as % of nominal capacity; phase goodput: during the change
(surge, capacity drop, ...); settle: time until p99 and goodput settle, where a target judges it. Targets are the
adaptive targets of each scenario; the baselines (none, static, aimd) are expected to fail some of them.`

// writeReport writes report.md and one figure per scenario (SVG and PNG)
// into dir, from the runs of g's first seed; args is the command line after
// "sluice". The output depends only on g and args: the same seed gives the
// same bytes.
func writeReport(dir string, args []string, g *sim.Grid) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The figures are independent: draw them in parallel.
	errs := make([]error, len(g.Scenarios))
	var wg sync.WaitGroup
	for i := range g.Scenarios {
		if !hasResults(g.Results[0][i]) {
			continue
		}
		wg.Go(func() { errs[i] = writeFigure(dir, g.Scenarios[i], g.Policies, g.Results[0][i]) })
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	var b bytes.Buffer
	writeMarkdown(&b, args, g)
	return os.WriteFile(filepath.Join(dir, "report.md"), b.Bytes(), 0o644)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func hasResults(rs []*sim.Result) bool {
	return slices.ContainsFunc(rs, func(r *sim.Result) bool { return r != nil })
}

// ---- report.md ----

func writeMarkdown(w io.Writer, args []string, g *sim.Grid) {
	fmt.Fprintf(w, "# sluice sim report\n\n")
	fmt.Fprintf(w, "Command: `%s`  \nSeed: %d\n\n", commandLine(args), g.Seed)
	fmt.Fprintf(w, "Every scenario below ran under every policy with the real limiter code, in virtual time; the same seed gives the same report.\n\n")
	fmt.Fprintf(w, "## Summary\n\n")
	mdRow(w, summaryHeader...)
	mdAlign(w, summaryAlign)
	for i, s := range g.Scenarios {
		for j, p := range g.Policies {
			if err := g.Errs[0][i][j]; err != nil {
				mdRow(w, append([]string{s.Name, p.Name, "error: " + err.Error()}, make([]string, len(summaryHeader)-3)...)...)
				continue
			}
			if g.Results[0][i][j] == nil {
				continue // a policy that runs only on some scenarios (the shedders)
			}
			mdRow(w, summaryCells(s, g.Results[0][i][j])...)
		}
	}
	fmt.Fprintf(w, "\n%s\n\n", strings.ReplaceAll(summaryNote, "\n", " "))
	fmt.Fprintf(w, "Policies:\n\n")
	for _, p := range g.Policies {
		fmt.Fprintf(w, "- `%s`: %s\n", p.Name, p.Description)
	}
	fmt.Fprintln(w)
	for i, s := range g.Scenarios {
		writeScenario(w, s, g.Policies, g.Results[0][i], g.Errs[0][i])
	}
}

func writeScenario(w io.Writer, s sim.Scenario, pols []sim.PolicySpec, results []*sim.Result, errs []error) {
	fmt.Fprintf(w, "## %s\n\n%s.\n\n", s.Name, capitalize(strings.TrimSuffix(s.Description, ".")))
	var ref *sim.Result
	for _, r := range results {
		if r != nil {
			ref = r
			break
		}
	}
	if ref != nil {
		fmt.Fprintf(w, "Capacity %.0f requests/s, SLO %g ms, %s simulated (the first %s are warm-up and not scored).\n\n",
			ref.CapacityRPS, ref.SLOms, fmtSeconds(s.Duration), fmtSeconds(s.Warmup))
	}
	if evs := s.Events(); len(evs) > 0 {
		fmt.Fprintf(w, "What happens:\n\n")
		for _, e := range evs {
			fmt.Fprintf(w, "- at %s: %s\n", fmtSeconds(e.At), e.Description)
		}
		fmt.Fprintln(w)
	}
	if s.Bursts != nil {
		fmt.Fprintf(w, "Bursts: load %g× capacity for about %s, about every %s.\n\n",
			s.Bursts.Load, fmtSeconds(s.Bursts.Length), fmtSeconds(s.Bursts.Period))
	}

	mdRow(w, summaryHeader[1:]...)
	mdAlign(w, summaryAlign[1:])
	for j, p := range pols {
		if errs[j] != nil {
			mdRow(w, append([]string{p.Name, "error: " + errs[j].Error()}, make([]string, len(summaryHeader)-3)...)...)
			continue
		}
		if results[j] == nil {
			continue
		}
		mdRow(w, summaryCells(s, results[j])[1:]...)
	}
	fmt.Fprintln(w)

	if ref != nil && len(ref.Targets) > 0 {
		fmt.Fprintf(w, "Targets (value measured, ✓ met, ✗ missed):\n\n")
		head := []string{"target"}
		var ok []int
		for j, p := range pols {
			if results[j] != nil {
				head = append(head, p.Name)
				ok = append(ok, j)
			}
		}
		mdRow(w, head...)
		mdAlign(w, "l"+strings.Repeat("r", len(head)-1))
		for k, t := range ref.Targets {
			row := []string{t.Target}
			for _, j := range ok {
				tr := results[j].Targets[k]
				mark := "✓"
				if !tr.Pass {
					mark = "✗"
				}
				row = append(row, fmtValue(tr.Value)+" "+mark)
			}
			mdRow(w, row...)
		}
		fmt.Fprintln(w)
		for _, j := range ok {
			r := results[j]
			if failed := failedTargets(r); len(failed) > 0 {
				fmt.Fprintf(w, "- `%s` failed %d of %d targets: %s.\n", r.Policy, len(failed), len(r.Targets), strings.Join(failed, "; "))
			} else {
				fmt.Fprintf(w, "- `%s` met every target.\n", r.Policy)
			}
		}
		fmt.Fprintln(w)
	}

	if len(s.Classes) > 1 && ref != nil {
		writePriorities(w, s, pols, results, ref)
	}

	if ref == nil {
		return
	}
	alt := "limit and in-flight, p99 latency, goodput and rejections over time"
	if len(s.Classes) > 1 {
		alt = "limit and in-flight, p99 latency, goodput and rejections, success per priority over time"
	}
	fmt.Fprintf(w, "![%s: %s](%s.png)\n\n", s.Name, alt, s.Name)
	fmt.Fprintf(w, "%s ([SVG](%s.svg))\n\n", howToRead(s, ref), s.Name)
}

// writePriorities writes the per-priority table of a scenario with several
// priority classes: a row per policy; for each priority the share of its
// requests that succeeded in time and of its attempts the policy rejected;
// and the policy's priority inversions.
func writePriorities(w io.Writer, s sim.Scenario, pols []sim.PolicySpec, results []*sim.Result, ref *sim.Result) {
	prios := s.Priorities()
	var offered []string
	for _, p := range prios {
		for _, pr := range ref.PerPriority {
			if pr.Priority == p {
				offered = append(offered, fmt.Sprintf("%s %.0f/s", priorityName(p), pr.Offered))
			}
		}
	}
	fmt.Fprintf(w, "Per priority, after warm-up (0 is the most important; offered requests: %s). "+
		"pK success: the requests of priority K that eventually succeeded within the SLO, retries included; "+
		"pK reject: the attempts of priority K the policy refused; "+
		"inversions: refusals within a tenth of a control interval of admitting lower-priority work, of all attempts.\n\n",
		strings.Join(offered, ", "))
	head := []string{"policy"}
	for _, p := range prios {
		head = append(head, fmt.Sprintf("p%d success %%", p), fmt.Sprintf("p%d reject %%", p))
	}
	head = append(head, "inversions %")
	mdRow(w, head...)
	mdAlign(w, "l"+strings.Repeat("r", len(head)-1))
	for j, r := range results {
		if r == nil {
			continue
		}
		row := []string{pols[j].Name}
		for _, p := range prios {
			i := slices.IndexFunc(r.PerPriority, func(pr sim.PriorityResult) bool { return pr.Priority == p })
			if i < 0 {
				row = append(row, "-", "-")
				continue
			}
			pr := r.PerPriority[i]
			row = append(row, fmt.Sprintf("%.1f", 100*pr.SuccessRatio), fmt.Sprintf("%.1f", 100*pr.RejectRatio))
		}
		row = append(row, fmt.Sprintf("%.2f", 100*r.InversionRatio))
		mdRow(w, row...)
	}
	fmt.Fprintln(w)
}

// priorityName is "0 critical_plus" for priority 0, and so on.
func priorityName(p int) string {
	return fmt.Sprintf("%d %s", p, shed.Priority(p))
}

func howToRead(s sim.Scenario, ref *sim.Result) string {
	var b strings.Builder
	b.WriteString("How to read the figure: the panels share the time axis (seconds); ")
	if s.Warmup > 0 {
		b.WriteString("the grey band is the warm-up, ")
	}
	if len(s.Events()) > 0 {
		b.WriteString("dotted vertical lines mark the moments listed above (labelled above the panels), ")
	}
	fmt.Fprintf(&b, "each policy keeps its colour and marker in every panel, the recommended ones drawn thicker and on top, "+
		"and every line is a mean over %s. ", fmtSeconds(smoothing))
	b.WriteString("Top: requests in flight (solid) and the policy's concurrency limit (dashed; `none` has no limit). ")
	fmt.Fprintf(&b, "Middle: p99 latency of the requests completed in each %s interval against the SLO (black dash-dot, %g ms); "+
		"values above %g ms (%d× SLO) are drawn at the top edge. ",
		fmtSeconds(seriesInterval(s, ref)), ref.SLOms, p99CapFactor*ref.SLOms, p99CapFactor)
	b.WriteString("Third: goodput, the completions within the SLO per second (solid, upwards), and rejections per second " +
		"(dotted, drawn downwards from zero so they never hide goodput), against the capacity actually available " +
		"(black dash-dot: it drops when the server slows down) and the offered load (grey; with retrying clients, each policy's attempts in its own colour, light). ")
	if len(s.Classes) > 1 {
		b.WriteString("Bottom: one panel per priority (0 is the most important): each policy's goodput of that priority as a share of " +
			"the priority's demand (the first attempts the scenario schedules for it). A priority shedder keeps the important " +
			"priorities near 100% and sheds from the least important up; a request the clients' own throttle never sent counts as not served. ")
	}
	b.WriteString("A policy that holds up keeps goodput close to the lesser of offered load and capacity and p99 under the SLO, " +
		"rejecting only the excess; a collapse shows as in-flight climbing, p99 pinned at the top and goodput falling towards zero.")
	return b.String()
}

// capitalize upper-cases a leading ASCII letter (not a symbol such as ρ).
func capitalize(s string) string {
	if s != "" && 'a' <= s[0] && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

func commandLine(args []string) string {
	parts := []string{"sluice"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func mdRow(w io.Writer, cells ...string) {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		c = strings.ReplaceAll(c, "|", `\|`)
		c = strings.ReplaceAll(c, "\n", " ")
		b.WriteString(" " + c + " |")
	}
	fmt.Fprintln(w, b.String())
}

// mdAlign writes the header separator: one letter per column, l for left-
// and r for right-aligned.
func mdAlign(w io.Writer, align string) {
	var b strings.Builder
	b.WriteString("|")
	for _, a := range align {
		if a == 'r' {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	fmt.Fprintln(w, b.String())
}

// summaryAlign aligns summaryHeader's columns.
const summaryAlign = "llrrrrrrrll"

func fmtValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "never"
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// seriesInterval is the bucket of the run's time series.
func seriesInterval(s sim.Scenario, r *sim.Result) time.Duration {
	if len(r.Series) > 0 {
		return r.Series[0].T
	}
	return cmp.Or(s.Interval, 100*time.Millisecond)
}

func fmtSeconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%g ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// ---- the figure ----

const p99CapFactor = 5 // the p99 panel is clipped at this multiple of the SLO

// smoothing is the window over which the figure averages the 100 ms
// intervals of a run, so that policies a few percent apart can be told
// apart through the Poisson noise.
const smoothing = time.Second

// Figure geometry.
var (
	figW       = 10 * vg.Inch
	figH       = 11 * vg.Inch // three panels
	prioH      = 5 * vg.Inch  // the panels per priority, two by two
	headerH    = 1.25 * vg.Inch
	eventStrip = vg.Points(16) // the labels of the moments, above the panels
	keyRowH    = vg.Points(20) // a row of the key
	figDPI     = 110
	colorGrey  = color.Gray{Y: 140}
	colorBand  = color.Gray{Y: 235}
)

// policyLook is how a policy is drawn in every panel: a colour of the
// colour-blind-safe Okabe-Ito palette, a marker shape repeated along its
// lines (so policies can be told apart without colour, and a line lying on
// an axis stays visible), and a rank: baselines are drawn first, the
// recommended policies last, on top.
type policyLook struct {
	color color.Color
	glyph draw.GlyphDrawer
	rank  int
	bold  bool // a recommended policy: a thicker line
}

var (
	okVermillion = color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}
	okBlue       = color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}
	okGreen      = color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}
	okPurple     = color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}
	okOrange     = color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}
	okSky        = color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}
	okBlack      = color.RGBA{A: 0xFF}
)

var policyLooks = map[string]policyLook{
	"none":             {okVermillion, draw.CrossGlyph{}, 0, false},
	"static":           {okSky, draw.SquareGlyph{}, 1, false},
	"aimd":             {okPurple, draw.TriangleGlyph{}, 2, false},
	"gradient-default": {color.Gray{Y: 110}, draw.PlusGlyph{}, 3, false},
	"vegas-default":    {color.RGBA{R: 0x88, G: 0x66, B: 0x22, A: 0xFF}, draw.PyramidGlyph{}, 3, false},
	"vegas":            {okGreen, draw.BoxGlyph{}, 4, false},
	"gradient":         {okBlue, draw.CircleGlyph{}, 5, true},
	"shed-vegas":       {okOrange, draw.RingGlyph{}, 6, false},
	"shed-gradient":    {okBlack, draw.CircleGlyph{}, 7, true},
}

// fallbackLooks serve policies without a look of their own, in order.
var fallbackLooks = []policyLook{
	{okBlue, draw.CircleGlyph{}, 5, false}, {okVermillion, draw.CrossGlyph{}, 5, false},
	{okGreen, draw.BoxGlyph{}, 5, false}, {okPurple, draw.TriangleGlyph{}, 5, false},
	{okOrange, draw.RingGlyph{}, 5, false}, {okSky, draw.SquareGlyph{}, 5, false}, {okBlack, draw.PlusGlyph{}, 5, false},
}

func lookOf(name string, i int) policyLook {
	if l, ok := policyLooks[name]; ok {
		return l
	}
	return fallbackLooks[i%len(fallbackLooks)]
}

// Line styles: the semantics of a line (what it measures) is its dash
// pattern, the policy its colour and marker.
var (
	dashed  = []vg.Length{vg.Points(6), vg.Points(3)}                             // a policy's limit
	dotted  = []vg.Length{vg.Points(1.5), vg.Points(2)}                           // rejections
	dashDot = []vg.Length{vg.Points(9), vg.Points(3), vg.Points(2), vg.Points(3)} // an objective: SLO, capacity
)

// objectiveStyle draws the SLO and the capacity available: black, thicker,
// dash-dot, never a policy's colour or pattern.
var objectiveStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1.6), Dashes: dashDot}

func sans(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: sans(size), XAlign: draw.XLeft, YAlign: draw.YCenter,
		Handler: plot.DefaultTextHandler}
}

// writeFigure draws the scenario's figure and writes it as NAME.svg and
// NAME.png.
func writeFigure(dir string, s sim.Scenario, pols []sim.PolicySpec, results []*sim.Result) error {
	h := figH
	if len(s.Classes) > 1 {
		h += prioH + keyRowH
	}
	svg := vgsvg.New(figW, h)
	drawFigure(draw.New(svg), s, pols, results)
	png := vgimg.NewWith(vgimg.UseWH(figW, h), vgimg.UseDPI(figDPI))
	drawFigure(draw.New(png), s, pols, results)
	for _, f := range []struct {
		ext string
		w   io.WriterTo
	}{{"svg", svg}, {"png", vgimg.PngCanvas{Canvas: png}}} {
		var b bytes.Buffer
		if _, err := f.w.WriteTo(&b); err != nil {
			return fmt.Errorf("sluice sim: %s.%s: %w", s.Name, f.ext, err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name+"."+f.ext), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// series is one policy's run as drawn.
type series struct {
	name  string
	look  policyLook
	phase float64 // where along the time axis its markers start, as a share of their spacing
	r     *sim.Result
}

// width is the line width of the series' main lines.
func (sr series) width() vg.Length {
	if sr.look.bold {
		return vg.Points(2.2)
	}
	return vg.Points(1.4)
}

func drawFigure(dc draw.Canvas, s sim.Scenario, pols []sim.PolicySpec, results []*sim.Result) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	var ss []series
	for j, r := range results {
		if r != nil && len(r.Series) > 0 {
			ss = append(ss, series{name: pols[j].Name, look: lookOf(pols[j].Name, j), r: r})
		}
	}
	if len(ss) == 0 {
		return
	}
	for i := range ss {
		ss[i].phase = (float64(i) + 0.5) / float64(len(ss))
	}
	key := slices.Clone(ss) // the key in the order the policies were selected
	slices.SortStableFunc(ss, func(a, b series) int { return cmp.Compare(a.look.rank, b.look.rank) })
	xmax := s.Duration.Seconds()
	evs := s.Events()

	// Header: title and the key.
	left := dc.Min.X + vg.Points(14)
	y := dc.Max.Y - vg.Points(16)
	title := textStyle(15)
	dc.FillText(title, vg.Point{X: left, Y: y}, s.Name)
	desc := textStyle(11)
	desc.Color = color.Gray{Y: 50}
	tx := left + title.Width(s.Name) + vg.Points(12)
	for _, line := range wrap(desc, capitalize(s.Description), dc.Max.X-tx-vg.Points(14)) {
		dc.FillText(desc, vg.Point{X: tx, Y: y}, line)
		y -= vg.Points(14)
	}
	var prios []int
	header := headerH
	if len(s.Classes) > 1 {
		prios = s.Priorities()
		header += keyRowH
	}
	drawKey(dc, min(y, dc.Max.Y-vg.Points(30))-vg.Points(10), key, prios, xmax)

	body := draw.Crop(dc, 0, 0, 0, -header-eventStrip)
	var grid draw.Canvas
	if len(prios) > 0 {
		grid = draw.Crop(body, 0, 0, 0, -(body.Max.Y - body.Min.Y - prioH))
		body = draw.Crop(body, 0, 0, prioH, 0)
	}
	panels := [][]*plot.Plot{{concurrencyPanel(s, ss)}, {latencyPanel(s, ss)}, {ratePanel(s, ss)}}
	last := len(panels) - 1
	for i, row := range panels {
		p := row[0]
		p.X.Min, p.X.Max = 0, xmax
		p.Add(eventLines{evs})
		p.X.Tick.Marker = timeTicks(xmax, i < last)
		if i == last {
			p.X.Label.Text = "time (s)"
		}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(10), PadLeft: vg.Points(8), PadRight: vg.Points(18), PadBottom: vg.Points(6)}
	cs := plot.Align(panels, tiles, body)
	for i := range panels {
		panels[i][0].Draw(cs[i][0])
	}
	// The moments' labels sit in a strip of their own above the panels,
	// where they cannot cover data.
	drawEventLabels(cs[0][0], panels[0][0], evs, body.Max.Y+eventStrip/2)

	if len(prios) > 0 {
		drawPrioGrid(grid, s, ss, prios, evs, xmax)
	}
}

// drawEventLabels writes each moment's label at height y, over its line.
func drawEventLabels(c draw.Canvas, p *plot.Plot, evs []sim.Event, y vg.Length) {
	trX, _ := p.Transforms(&c)
	st := textStyle(10)
	st.Color = color.Gray{Y: 20}
	prevEnd := vg.Length(math.Inf(-1))
	for _, ev := range evs {
		x := trX(ev.At.Seconds())
		w := st.Width(ev.Label)
		st.XAlign = draw.XCenter
		lx := x
		if lx+w/2 > c.Max.X {
			st.XAlign, lx = draw.XRight, x
		}
		if lx-w/2 < prevEnd { // crowded: the next label steps right
			lx = prevEnd + w/2 + vg.Points(4)
		}
		c.FillText(st, vg.Point{X: lx, Y: y}, ev.Label)
		prevEnd = lx + w/2
	}
}

// wrap breaks txt into lines no wider than w.
func wrap(st text.Style, txt string, w vg.Length) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(txt) {
		if line != "" && st.Width(line+" "+word) > w {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// drawKey draws the legend shared by the panels: each policy's colour and
// marker, and what each line style means.
func drawKey(dc draw.Canvas, y vg.Length, ss []series, prios []int, xmax float64) {
	st := textStyle(11)
	x := dc.Min.X + vg.Points(14)
	sw := vg.Points(30)
	item := func(ls draw.LineStyle, g draw.GlyphDrawer, label string) {
		dc.StrokeLine2(ls, x, y, x+sw, y)
		if g != nil {
			dc.DrawGlyph(draw.GlyphStyle{Color: ls.Color, Radius: vg.Points(3.5), Shape: g}, vg.Point{X: x + sw/2, Y: y})
		}
		x += sw + vg.Points(5)
		dc.FillText(st, vg.Point{X: x, Y: y}, label)
		x += st.Width(label) + vg.Points(16)
	}
	for _, s := range ss {
		item(draw.LineStyle{Color: s.look.color, Width: s.width()}, s.look.glyph, s.name)
	}
	y -= keyRowH
	x = dc.Min.X + vg.Points(14)
	grey := color.Gray{Y: 60}
	item(draw.LineStyle{Color: grey, Width: vg.Points(1.5)}, nil, "in flight / goodput")
	item(draw.LineStyle{Color: grey, Width: vg.Points(1.5), Dashes: dashed}, nil, "limit")
	item(draw.LineStyle{Color: grey, Width: vg.Points(1.5), Dashes: dotted}, nil, "rejections")
	item(draw.LineStyle{Color: colorGrey, Width: vg.Points(1)}, nil, "offered")
	item(objectiveStyle, nil, "SLO / capacity available")
	dc.FillPolygon(colorBand, []vg.Point{{X: x, Y: y - vg.Points(6)}, {X: x + sw, Y: y - vg.Points(6)},
		{X: x + sw, Y: y + vg.Points(6)}, {X: x, Y: y + vg.Points(6)}})
	x += sw + vg.Points(5)
	dc.FillText(st, vg.Point{X: x, Y: y}, "warm-up")
	y -= keyRowH
	x = dc.Min.X + vg.Points(14)
	note := fmt.Sprintf("Lines are means over %s; policies in colour and marker; the moments are dotted lines, labelled above.", fmtSeconds(smoothing))
	if len(prios) > 0 {
		note += " Bottom: one panel per priority."
	}
	st.Color = color.Gray{Y: 60}
	dc.FillText(st, vg.Point{X: x, Y: y}, note)
}

// newPanel makes a panel with the warm-up band and a grid underneath what
// is added next.
func newPanel(s sim.Scenario, title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(11)
	p.Title.Padding = vg.Points(4)
	p.X.Label.TextStyle.Font = sans(11)
	p.Y.Label.TextStyle.Font = sans(11)
	p.X.Tick.Label.Font = sans(10)
	p.Y.Tick.Label.Font = sans(10)
	p.Y.Label.Text = ylabel
	p.Y.Tick.Marker = plainTicks{}
	if s.Warmup > 0 {
		p.Add(band{0, s.Warmup.Seconds()})
	}
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	return p
}

// smooth returns f over the series as means over windows of smoothing,
// centred on each point; points where f has no value (ok false) are
// skipped, and a window without values gives no point.
func smooth(s sim.Scenario, r *sim.Result, f func(sim.Point) (float64, bool)) plotter.XYs {
	pts := r.Series
	w := max(1, int(smoothing/seriesInterval(s, r)))
	var xy plotter.XYs
	for i, pt := range pts {
		lo, hi := max(0, i-w/2), min(len(pts), i-w/2+w)
		var sum float64
		n := 0
		for _, o := range pts[lo:hi] {
			if v, ok := f(o); ok {
				sum += v
				n++
			}
		}
		if n > 0 {
			xy = append(xy, plotter.XY{X: pt.T.Seconds(), Y: sum / float64(n)})
		}
	}
	return xy
}

// addSeries draws a policy's line with its markers, spaced so that about
// ten sit along the time axis, shifted per policy so that they do not
// coincide.
func addSeries(p *plot.Plot, sr series, xy plotter.XYs, ls draw.LineStyle, xmax float64) {
	addLine(p, xy, ls)
	if sr.look.glyph == nil || len(xy) == 0 {
		return
	}
	step := xmax / 10
	var marks plotter.XYs
	next := step * sr.phase
	for _, pt := range xy {
		if pt.X >= next {
			marks = append(marks, pt)
			next += step
		}
	}
	if sc, err := plotter.NewScatter(marks); err == nil {
		sc.GlyphStyle = draw.GlyphStyle{Color: ls.Color, Radius: vg.Points(3.5), Shape: sr.look.glyph}
		p.Add(sc)
	}
}

// concurrencyPanel: in-flight (solid) and limit (dashed) per policy. When an
// unbounded policy's in-flight count dwarfs the bounded ones, the axis is
// logarithmic so that both stay readable.
func concurrencyPanel(s sim.Scenario, ss []series) *plot.Plot {
	var maxAll, maxBounded float64
	for _, sr := range ss {
		for _, pt := range sr.r.Series {
			maxAll = max(maxAll, float64(pt.InFlight), float64(pt.Limit))
			if pt.Limit >= 0 {
				maxBounded = max(maxBounded, float64(pt.InFlight), float64(pt.Limit))
			}
		}
	}
	logY := maxBounded > 0 && maxAll > 10*maxBounded
	title := "requests in flight (solid) and the policy's concurrency limit (dashed)"
	if logY {
		title += ", log scale"
	}
	p := newPanel(s, title, "requests")
	floor := 0.0
	if logY {
		floor = 1
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	xmax := s.Duration.Seconds()
	maxAll = 0 // the frame fits what is drawn: smoothed in-flight, limits
	for _, sr := range ss {
		inf := smooth(s, sr.r, func(pt sim.Point) (float64, bool) { return max(float64(pt.InFlight), floor), true })
		for _, pt := range inf {
			maxAll = max(maxAll, pt.Y)
		}
		for _, pt := range sr.r.Series {
			maxAll = max(maxAll, float64(pt.Limit))
		}
		var lim plotter.XYs
		for _, pt := range sr.r.Series {
			if pt.Limit >= 0 {
				lim = append(lim, plotter.XY{X: pt.T.Seconds(), Y: max(float64(pt.Limit), floor)})
			}
		}
		addSeries(p, sr, inf, draw.LineStyle{Color: sr.look.color, Width: sr.width()}, xmax)
		if len(lim) > 0 {
			addLine(p, lim, draw.LineStyle{Color: sr.look.color, Width: vg.Points(1.6), Dashes: dashed})
		}
	}
	if logY {
		p.Y.Min, p.Y.Max = 1, maxAll*1.5
	} else {
		p.Y.Min, p.Y.Max = 0, max(maxAll*1.05, 1)
	}
	return p
}

// latencyPanel: p99 per interval per policy, averaged over the smoothing
// window, against the SLO; clipped at p99CapFactor × SLO.
func latencyPanel(s sim.Scenario, ss []series) *plot.Plot {
	slo := ss[0].r.SLOms
	limit := p99CapFactor * slo
	var top float64
	lines := make([]plotter.XYs, len(ss))
	for i, sr := range ss {
		lines[i] = smooth(s, sr.r, func(pt sim.Point) (float64, bool) {
			return min(float64(pt.P99)/1e6, limit), pt.Completed > 0 // an interval without completions has no p99
		})
		for _, pt := range lines[i] {
			top = max(top, pt.Y)
		}
	}
	title := fmt.Sprintf("p99 latency per %s, mean over %s, against the SLO (dash-dot, %.3g ms)",
		fmtSeconds(seriesInterval(s, ss[0].r)), fmtSeconds(smoothing), slo)
	clipped := top >= limit
	if clipped {
		title += fmt.Sprintf("; above %d× SLO drawn at the top", p99CapFactor)
	}
	p := newPanel(s, title, "p99 (ms)")
	xmax := s.Duration.Seconds()
	for i, sr := range ss {
		addSeries(p, sr, lines[i], draw.LineStyle{Color: sr.look.color, Width: sr.width()}, xmax)
	}
	p.Add(hline{slo, objectiveStyle})
	p.Y.Min = 0
	if clipped {
		p.Y.Max = limit * 1.04
	} else {
		p.Y.Max = max(top, slo) * 1.1
	}
	return p
}

// ratePanel: goodput (solid) and rejections (dotted) per second per policy,
// the offered load, and the capacity actually available over time.
// Goodput against capacity is the point: a surge's offered load and
// rejections many times the capacity would flatten it, so the frame stops
// at twice the capacity and what lies beyond is drawn at the edge.
func ratePanel(s sim.Scenario, ss []series) *plot.Plot {
	retries := s.Retry.Attempts > 1
	title := "per second: goodput (solid, upwards), rejections (dotted, downwards), offered (grey), capacity available (dash-dot)"
	if retries {
		title = "per second: goodput (solid, up), rejections (dotted, down), attempts (thin), capacity available (dash-dot)"
	}
	capacity := capacityLine(ss[0].r)
	var ceiling float64
	for _, pt := range capacity {
		ceiling = max(ceiling, pt.Y)
	}
	frame := 2 * ceiling
	clipped := false
	clip := func(xy plotter.XYs) plotter.XYs {
		for i := range xy {
			if y := max(min(xy[i].Y, frame), -frame); y != xy[i].Y {
				xy[i].Y, clipped = y, true
			}
		}
		return xy
	}
	p := newPanel(s, title, "requests/s")
	p.Y.Tick.Marker = plainTicks{abs: true}
	xmax := s.Duration.Seconds()
	top, bottom := ceiling, 0.0
	p.Add(hline{0, draw.LineStyle{Color: color.Gray{Y: 170}, Width: vg.Points(0.6)}})
	// The offered load, underneath: the same arrivals for every policy
	// unless clients retry, when each policy's attempts are its own.
	for i, sr := range ss {
		if !retries && i > 0 {
			break
		}
		off := clip(smooth(s, sr.r, func(pt sim.Point) (float64, bool) { return pt.Offered, true }))
		for _, pt := range off {
			top = max(top, pt.Y)
		}
		c := color.Color(colorGrey)
		if retries {
			r, g, b, _ := sr.look.color.RGBA()
			c = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 0x70}
		}
		addLine(p, off, draw.LineStyle{Color: c, Width: vg.Points(1)})
	}
	for _, sr := range ss {
		good := clip(smooth(s, sr.r, func(pt sim.Point) (float64, bool) { return pt.Goodput, true }))
		rej := clip(smooth(s, sr.r, func(pt sim.Point) (float64, bool) { return -pt.Rejected, true }))
		anyRej := false
		for i := range good {
			top = max(top, good[i].Y)
			bottom = max(bottom, -rej[i].Y)
			anyRej = anyRej || rej[i].Y < 0
		}
		addSeries(p, sr, good, draw.LineStyle{Color: sr.look.color, Width: sr.width()}, xmax)
		if anyRej {
			addLine(p, rej, draw.LineStyle{Color: sr.look.color, Width: vg.Points(1.6), Dashes: dotted})
		}
	}
	// The capacity actually available, on top: what goodput is judged against.
	addLine(p, capacity, objectiveStyle)
	if clipped {
		p.Title.Text += fmt.Sprintf("; beyond %.0f/s at the edge", frame)
	}
	p.Y.Min, p.Y.Max = -max(bottom, 0.1*top)*1.08, top*1.08
	return p
}

// capacityLine is the server's true capacity over the run, requests per
// second, as the simulator measured it per interval (sim.Point.Capacity),
// drawn as steps.
func capacityLine(r *sim.Result) plotter.XYs {
	var xy plotter.XYs
	start := 0.0 // where the interval of the point begins
	for _, pt := range r.Series {
		c := pt.Capacity
		if c <= 0 {
			c = r.CapacityRPS
		}
		if n := len(xy); n == 0 {
			xy = append(xy, plotter.XY{X: start, Y: c})
		} else if c != xy[n-1].Y {
			xy = append(xy, plotter.XY{X: start, Y: xy[n-1].Y}, plotter.XY{X: start, Y: c})
		}
		start = pt.T.Seconds()
	}
	if n := len(xy); n > 0 {
		xy = append(xy, plotter.XY{X: start, Y: xy[n-1].Y})
	}
	return xy
}

// drawPrioGrid draws one panel per priority, two by two: each policy's
// goodput of that priority as a share of the priority's demand.
func drawPrioGrid(c draw.Canvas, s sim.Scenario, ss []series, prios []int, evs []sim.Event, xmax float64) {
	cols := 2
	rows := (len(prios) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for k, q := range prios {
		p := newPanel(s, fmt.Sprintf("priority %s: goodput ÷ demand, %%", priorityName(q)), "")
		if k%cols == 0 {
			p.Y.Label.Text = "served %"
		}
		p.X.Min, p.X.Max = 0, xmax
		p.Add(eventLines{evs})
		p.X.Tick.Marker = timeTicks(xmax, k/cols < rows-1)
		if k/cols == rows-1 {
			p.X.Label.Text = "time (s)"
		}
		for _, sr := range ss {
			addSeries(p, sr, prioServed(s, sr.r, q), draw.LineStyle{Color: sr.look.color, Width: sr.width()}, xmax)
		}
		p.Add(hline{100, draw.LineStyle{Color: color.Gray{Y: 170}, Width: vg.Points(0.6)}})
		p.Y.Min, p.Y.Max = 0, 108
		grid[k/cols][k%cols] = p
	}
	for k := len(prios); k < rows*cols; k++ { // an empty cell
		grid[k/cols][k%cols] = nil
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(10), PadTop: vg.Points(14),
		PadLeft: vg.Points(8), PadRight: vg.Points(18), PadBottom: vg.Points(6)}
	cs := plot.Align(grid, tiles, c)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(cs[i][j])
			}
		}
	}
}

// prioServed is priority q's goodput as a percentage of its demand — the
// first attempts the scenario schedules for it (load × nominal capacity ×
// its share of the classes) — over windows of smoothing, clipped at 100%.
// Unlike goodput ÷ attempts, it does not rise when clients stop sending
// (their throttle refusing locally): a request never served counts against
// the policy that caused it.
func prioServed(s sim.Scenario, r *sim.Result, q int) plotter.XYs {
	pts := r.Series
	iv := seriesInterval(s, r)
	w := max(1, int(smoothing/iv))
	var xy plotter.XYs
	for i, pt := range pts {
		lo, hi := max(0, i-w/2), min(len(pts), i-w/2+w)
		var good, demand float64
		for _, o := range pts[lo:hi] {
			good += o.Prio[q].Goodput
			demand += s.Demand(q, o.T-iv/2, r.CapacityRPS)
		}
		if demand > 0 {
			xy = append(xy, plotter.XY{X: pt.T.Seconds(), Y: min(100*good/demand, 100)})
		}
	}
	return xy
}

func addLine(p *plot.Plot, xy plotter.XYs, ls draw.LineStyle) {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return // no finite points: nothing to draw
	}
	l.LineStyle = ls
	p.Add(l)
}

// timeTicks marks the time axis of a run of xmax seconds every 10 or 20
// seconds (or finer for short runs), with minor ticks in between. Hidden
// labels keep the ticks and the grid but not the numbers: the panels above
// the bottom one share its axis.
func timeTicks(xmax float64, hidden bool) plot.Ticker {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 20, 50, 100, 200, 500} {
		step = s
		if xmax/s <= 12 {
			break
		}
	}
	return timeTicker{step, hidden}
}

type timeTicker struct {
	step   float64
	hidden bool
}

func (t timeTicker) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	minor := t.step / 2
	for k := math.Ceil(lo / minor); k*minor <= hi; k++ {
		v := k * minor
		tk := plot.Tick{Value: v}
		if math.Mod(k, 2) == 0 {
			tk.Label = strconv.FormatFloat(v, 'f', -1, 64)
			if t.hidden {
				tk.Label = " "
			}
		}
		ts = append(ts, tk)
	}
	return ts
}

// plainTicks marks a linear axis at a round step (1, 2 or 5 × 10^k) that
// gives four to ten labelled ticks, with a minor tick between them. With
// abs, labels show absolute values (for quantities drawn below zero).
type plainTicks struct{ abs bool }

func (t plainTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	mag := math.Pow(10, math.Floor(math.Log10(hi-lo)))
	step := mag
	for _, f := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10} {
		step = f * mag
		if (hi-lo)/step <= 10 {
			break
		}
	}
	var ts []plot.Tick
	minor := step / 2
	for k := math.Ceil(lo / minor); k*minor <= hi; k++ {
		v := k * minor
		tk := plot.Tick{Value: v}
		if math.Mod(k, 2) == 0 {
			l := v
			if t.abs {
				l = math.Abs(v)
			}
			tk.Label = strconv.FormatFloat(l, 'g', 10, 64)
		}
		ts = append(ts, tk)
	}
	return ts
}

// hline is a horizontal reference line across the panel.
type hline struct {
	y  float64
	ls draw.LineStyle
}

func (h hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	if c.ContainsY(y) {
		c.StrokeLine2(h.ls, c.Min.X, y, c.Max.X, y)
	}
}

// band shades the time range [from, to] (the warm-up).
type band struct{ from, to float64 }

func (b band) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0, x1 := trX(b.from), trX(b.to)
	c.FillPolygon(colorBand, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
}

// eventLines draws a dotted vertical line at each moment of the scenario
// (its label is drawn above the panels: drawEventLabels).
type eventLines struct {
	evs []sim.Event
}

func (e eventLines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	ls := draw.LineStyle{Color: color.Gray{Y: 40}, Width: vg.Points(1.2), Dashes: dotted}
	for _, ev := range e.evs {
		x := trX(ev.At.Seconds())
		c.StrokeLine2(ls, x, c.Min.Y, x, c.Max.Y)
	}
}
