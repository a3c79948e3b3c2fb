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

// runSet is the outcome of one `sluice sim` invocation: every selected
// scenario under every selected policy.
type runSet struct {
	args    []string // the command line after "sluice"
	seed    uint64
	scs     []sim.Scenario
	pols    []sim.PolicySpec
	results [][]*sim.Result // [scenario][policy]
	errs    [][]error
}

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
// into dir. The output depends only on the run set: the same seed gives the
// same bytes.
func writeReport(dir string, rs *runSet) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The figures are independent: draw them in parallel.
	errs := make([]error, len(rs.scs))
	var wg sync.WaitGroup
	for i := range rs.scs {
		if !hasResults(rs.results[i]) {
			continue
		}
		wg.Go(func() { errs[i] = writeFigure(dir, rs.scs[i], rs.pols, rs.results[i]) })
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	var b bytes.Buffer
	writeMarkdown(&b, rs)
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

func writeMarkdown(w io.Writer, rs *runSet) {
	fmt.Fprintf(w, "# sluice sim report\n\n")
	fmt.Fprintf(w, "Command: `%s`  \nSeed: %d\n\n", commandLine(rs.args), rs.seed)
	fmt.Fprintf(w, "Every scenario below ran under every policy with the real limiter code, in virtual time; the same seed gives the same report.\n\n")
	fmt.Fprintf(w, "## Summary\n\n")
	mdRow(w, summaryHeader...)
	mdAlign(w, summaryAlign)
	for i, s := range rs.scs {
		for j, p := range rs.pols {
			if err := rs.errs[i][j]; err != nil {
				mdRow(w, append([]string{s.Name, p.Name, "error: " + err.Error()}, make([]string, len(summaryHeader)-3)...)...)
				continue
			}
			mdRow(w, summaryCells(s, rs.results[i][j])...)
		}
	}
	fmt.Fprintf(w, "\n%s\n\n", strings.ReplaceAll(summaryNote, "\n", " "))
	fmt.Fprintf(w, "Policies:\n\n")
	for _, p := range rs.pols {
		fmt.Fprintf(w, "- `%s`: %s\n", p.Name, p.Description)
	}
	fmt.Fprintln(w)
	for i, s := range rs.scs {
		writeScenario(w, s, rs.pols, rs.results[i], rs.errs[i])
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
	if evs := scenarioEvents(s); len(evs) > 0 {
		fmt.Fprintf(w, "What happens:\n\n")
		for _, e := range evs {
			fmt.Fprintf(w, "- at %s: %s\n", fmtSeconds(e.at), e.long)
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
	prios := classPriorities(s)
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

// classPriorities returns the distinct priorities of the scenario's
// classes, most important first.
func classPriorities(s sim.Scenario) []int {
	var ps []int
	for _, c := range s.Classes {
		ps = append(ps, c.Priority)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// priorityName is "0 critical_plus" for priority 0, and so on.
func priorityName(p int) string {
	return fmt.Sprintf("%d %s", p, shed.Priority(p))
}

func howToRead(s sim.Scenario, ref *sim.Result) string {
	var b strings.Builder
	if len(s.Classes) > 1 {
		b.WriteString("How to read the figure: the four panels share the time axis (seconds); ")
	} else {
		b.WriteString("How to read the figure: the three panels share the time axis (seconds); ")
	}
	if s.Warmup > 0 {
		b.WriteString("the grey band is the warm-up, ")
	}
	if len(scenarioEvents(s)) > 0 {
		b.WriteString("dotted vertical lines mark the moments listed above, ")
	}
	b.WriteString("and each policy keeps its colour in every panel. ")
	b.WriteString("Top: requests in flight (solid) and the policy's concurrency limit (dashed; `none` has no limit). ")
	second, third := "Middle", "Bottom"
	if len(s.Classes) > 1 {
		second, third = "Second", "Third"
	}
	fmt.Fprintf(&b, "%s: p99 latency of the requests completed in each %s interval (one dot per interval) against the SLO (black dashed, %g ms); "+
		"values above %g ms (%d× SLO) are drawn at the top edge. ",
		second, fmtSeconds(seriesInterval(s, ref)), ref.SLOms, p99CapFactor*ref.SLOms, p99CapFactor)
	b.WriteString(third + ": goodput, the completions within the SLO per second (solid, upwards), and rejections per second " +
		"(dotted, drawn downwards from zero so they never hide goodput), against the server's capacity (black dashed) " +
		"and the offered load (grey). ")
	if len(s.Classes) > 1 {
		fmt.Fprintf(&b, "Bottom: for each priority (one line style each, named in the key; 0 is the most important), "+
			"the share of its attempts that succeeded within the SLO, pooled over %s windows; "+
			"a priority shedder keeps the important lines near 100%% and sheds from the least important up; "+
			"a line below 100%% while the offered load is under capacity means work refused that the server could have taken, "+
			"or a priority whose requests are too slow for the SLO; a line that stops: no attempts of that priority reached the server "+
			"(the clients' throttle refused them all locally). ",
			fmtSeconds(max(1, successWindow/seriesInterval(s, ref))*seriesInterval(s, ref)))
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

// ---- what happens in a scenario ----

// event is a moment at which a scenario changes: a load step, the end of a
// ramp, a change of the server.
type event struct {
	at    time.Duration
	short string // label in the figure
	long  string // sentence in report.md
}

func scenarioEvents(s sim.Scenario) []event {
	var evs []event
	add := func(at time.Duration, short, long string) {
		for i := range evs {
			if evs[i].at == at {
				evs[i].short += ", " + short
				evs[i].long += "; " + long
				return
			}
		}
		evs = append(evs, event{at, short, long})
	}
	for i := 1; i < len(s.Load); i++ {
		prev, ph := s.Load[i-1], s.Load[i]
		switch {
		case ph.Ramp && ph.Load != prev.Load:
			add(prev.At, fmt.Sprintf("ramp to %g×", ph.Load),
				fmt.Sprintf("the offered load starts ramping from %g× to %g× capacity", prev.Load, ph.Load))
			add(ph.At, fmt.Sprintf("%g× reached", ph.Load), fmt.Sprintf("the ramp reaches %g× capacity and the load holds", ph.Load))
		case !ph.Ramp && ph.Load != prev.Load:
			add(ph.At, fmt.Sprintf("load %g×", ph.Load), fmt.Sprintf("the offered load steps to %g× capacity", ph.Load))
		}
	}
	svc, wait := 1.0, 1.0
	for _, c := range s.Server.Changes {
		if c.ServiceFactor != svc {
			if c.ServiceFactor == 1 {
				add(c.At, "service ×1", "the service time is back to nominal")
			} else {
				add(c.At, fmt.Sprintf("service ×%g", c.ServiceFactor),
					fmt.Sprintf("the service time is multiplied by %g (capacity %.3g× nominal)", c.ServiceFactor, 1/c.ServiceFactor))
			}
			svc = c.ServiceFactor
		}
		wf := cmp.Or(c.WaitFactor, 1)
		if wf != wait {
			who := ""
			if len(c.WaitPriorities) > 0 {
				ps := make([]string, len(c.WaitPriorities))
				for i, p := range c.WaitPriorities {
					ps[i] = fmt.Sprint(p)
				}
				who = " of priority " + strings.Join(ps, ", ")
			}
			if wf == 1 {
				add(c.At, "wait ×1", "the dependency wait is back to nominal")
			} else {
				add(c.At, fmt.Sprintf("wait ×%.3g", wf),
					fmt.Sprintf("the dependency wait%s is multiplied by %.3g", who, wf))
			}
			wait = wf
		}
	}
	if s.Change > 0 && !slices.ContainsFunc(evs, func(e event) bool { return e.at == s.Change }) {
		add(s.Change, "change", "settling time is measured from here")
	}
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return evs
}

// ---- the figure ----

const p99CapFactor = 5 // the p99 panel is clipped at this multiple of the SLO

// Figure geometry.
var (
	figW      = 10 * vg.Inch
	figH      = 11 * vg.Inch // three panels
	prioH     = 3 * vg.Inch  // the fourth panel, with several priorities
	headerH   = 1.25 * vg.Inch
	keyRowH   = vg.Points(20) // a row of the key
	figDPI    = 110
	colorGrey = color.Gray{Y: 140}
	colorBand = color.Gray{Y: 235}
)

// policyColors is a colour-blind-safe palette (Okabe and Ito), one colour
// per policy in the order the policies were selected.
var policyColors = []color.Color{
	color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}, // vermillion
	color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}, // blue
	color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}, // bluish green
	color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}, // reddish purple
	color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}, // orange
	color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}, // sky blue
	color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 0xFF}, // black
}

func policyColor(i int) color.Color { return policyColors[i%len(policyColors)] }

var (
	dashed = []vg.Length{vg.Points(6), vg.Points(3)}
	dotted = []vg.Length{vg.Points(1.5), vg.Points(2)}
)

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

// series is one policy's run as drawn: its colour and points.
type series struct {
	name  string
	color color.Color
	r     *sim.Result
}

func drawFigure(dc draw.Canvas, s sim.Scenario, pols []sim.PolicySpec, results []*sim.Result) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	var ss []series
	for j, r := range results {
		if r != nil && len(r.Series) > 0 {
			ss = append(ss, series{pols[j].Name, policyColor(j), r})
		}
	}
	if len(ss) == 0 {
		return
	}
	xmax := s.Duration.Seconds()
	evs := scenarioEvents(s)

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
		prios = classPriorities(s)
		header += keyRowH
	}
	drawKey(dc, min(y, dc.Max.Y-vg.Points(30))-vg.Points(10), ss, prios)

	body := draw.Crop(dc, 0, 0, 0, -header)
	panels := [][]*plot.Plot{{concurrencyPanel(s, ss)}, {latencyPanel(s, ss)}, {ratePanel(s, ss)}}
	if len(prios) > 0 {
		panels = append(panels, []*plot.Plot{prioPanel(s, ss, prios)})
	}
	for i, row := range panels {
		p := row[0]
		p.X.Min, p.X.Max = 0, xmax
		p.Add(eventLines{evs, i == 0})
		p.X.Tick.Marker = timeTicks(xmax, i < len(panels)-1)
		if i == len(panels)-1 {
			p.X.Label.Text = "time (s)"
		}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(10), PadLeft: vg.Points(8), PadRight: vg.Points(18), PadBottom: vg.Points(6)}
	cs := plot.Align(panels, tiles, body)
	for i := range panels {
		panels[i][0].Draw(cs[i][0])
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

// drawKey draws the legend shared by the panels: a colour per policy and
// what each line style means; with prios, a row for the line style of each
// priority in the success panel.
func drawKey(dc draw.Canvas, y vg.Length, ss []series, prios []int) {
	st := textStyle(11)
	x := dc.Min.X + vg.Points(14)
	sw := vg.Points(26)
	item := func(ls draw.LineStyle, label string) {
		dc.StrokeLine2(ls, x, y, x+sw, y)
		x += sw + vg.Points(5)
		dc.FillText(st, vg.Point{X: x, Y: y}, label)
		x += st.Width(label) + vg.Points(16)
	}
	for _, s := range ss {
		item(draw.LineStyle{Color: s.color, Width: vg.Points(2.5)}, s.name)
	}
	y -= keyRowH
	x = dc.Min.X + vg.Points(14)
	black := color.Black
	item(draw.LineStyle{Color: black, Width: vg.Points(1.5)}, "in flight / goodput")
	item(draw.LineStyle{Color: black, Width: vg.Points(1.5), Dashes: dashed}, "limit")
	item(draw.LineStyle{Color: black, Width: vg.Points(1.5), Dashes: dotted}, "rejections")
	item(draw.LineStyle{Color: colorGrey, Width: vg.Points(1.5)}, "offered load")
	item(draw.LineStyle{Color: black, Width: vg.Points(1), Dashes: dashed}, "SLO / capacity")
	dc.FillPolygon(colorBand, []vg.Point{{X: x, Y: y - vg.Points(6)}, {X: x + sw, Y: y - vg.Points(6)},
		{X: x + sw, Y: y + vg.Points(6)}, {X: x, Y: y + vg.Points(6)}})
	x += sw + vg.Points(5)
	dc.FillText(st, vg.Point{X: x, Y: y}, "warm-up")
	if len(prios) == 0 {
		return
	}
	y -= keyRowH
	x = dc.Min.X + vg.Points(14)
	lead := "success by priority (bottom panel):"
	dc.FillText(st, vg.Point{X: x, Y: y}, lead)
	x += st.Width(lead) + vg.Points(10)
	for _, p := range prios {
		item(prioStyle(p, black), priorityName(p))
	}
}

// prioDashes gives each priority its line style in the success panel:
// solid for 0, the most important, then ever sparser dashes.
var prioDashes = [sim.MaxPriorities][]vg.Length{
	nil,
	{vg.Points(7), vg.Points(3)},
	{vg.Points(2), vg.Points(2.5)},
	{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
}

func prioStyle(p int, c color.Color) draw.LineStyle {
	return draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: prioDashes[p%len(prioDashes)]}
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
	title := "requests in flight (solid) and concurrency limit (dashed)"
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
	for _, sr := range ss {
		var inf, lim plotter.XYs
		for _, pt := range sr.r.Series {
			x := pt.T.Seconds()
			inf = append(inf, plotter.XY{X: x, Y: max(float64(pt.InFlight), floor)})
			if pt.Limit >= 0 {
				lim = append(lim, plotter.XY{X: x, Y: max(float64(pt.Limit), floor)})
			}
		}
		addLine(p, inf, draw.LineStyle{Color: sr.color, Width: vg.Points(1.2)})
		if len(lim) > 0 {
			addLine(p, lim, draw.LineStyle{Color: sr.color, Width: vg.Points(1.8), Dashes: dashed})
		}
	}
	if logY {
		p.Y.Min, p.Y.Max = 1, maxAll*3 // room for the event labels
	} else {
		p.Y.Min, p.Y.Max = 0, max(maxAll*1.15, 1) // room for the event labels
	}
	return p
}

// latencyPanel: p99 per interval per policy, the SLO, clipped at
// p99CapFactor × SLO.
func latencyPanel(s sim.Scenario, ss []series) *plot.Plot {
	slo := ss[0].r.SLOms
	limit := p99CapFactor * slo
	var top float64
	for _, sr := range ss {
		for _, pt := range sr.r.Series {
			top = max(top, float64(pt.P99)/1e6)
		}
	}
	title := fmt.Sprintf("p99 latency, one dot per %s (SLO %g ms)", fmtSeconds(seriesInterval(s, ss[0].r)), slo)
	clipped := top > limit
	if clipped {
		title += fmt.Sprintf("; clipped at %d× SLO = %g ms, higher values drawn at the top", p99CapFactor, limit)
	}
	p := newPanel(s, title, "p99 (ms)")
	for _, sr := range ss {
		// One dot per interval: p99 per 100 ms jumps between levels (a slow
		// request completed in the interval or not), which lines would turn
		// into a solid block. An interval without completions has no p99.
		var xy plotter.XYs
		for _, pt := range sr.r.Series {
			if pt.Completed > 0 {
				xy = append(xy, plotter.XY{X: pt.T.Seconds(), Y: min(float64(pt.P99)/1e6, limit)})
			}
		}
		if len(xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			continue
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: sr.color, Radius: vg.Points(1.3), Shape: draw.CircleGlyph{}}
		p.Add(sc)
	}
	p.Add(hline{slo, draw.LineStyle{Color: color.Black, Width: vg.Points(1), Dashes: dashed}})
	p.Y.Min = 0
	if clipped {
		p.Y.Max = limit * 1.03
	} else {
		p.Y.Max = max(top, slo) * 1.15
	}
	return p
}

// ratePanel: goodput (solid) and rejections (dotted) per second per policy,
// the offered load (grey), and the server's capacity over time.
func ratePanel(s sim.Scenario, ss []series) *plot.Plot {
	p := newPanel(s, "per second: goodput (solid) above 0, rejections (dotted) below 0; offered load grey, capacity black dashed",
		"requests/s")
	p.Y.Tick.Marker = plainTicks{abs: true}
	var top, bottom float64
	// Offered load first, underneath. With retries it differs per policy.
	for _, sr := range ss {
		var off plotter.XYs
		for _, pt := range sr.r.Series {
			off = append(off, plotter.XY{X: pt.T.Seconds(), Y: pt.Offered})
			top = max(top, pt.Offered)
		}
		addLine(p, off, draw.LineStyle{Color: colorGrey, Width: vg.Points(1)})
	}
	capacity := capacitySteps(s, ss[0].r.CapacityRPS)
	addLine(p, capacity, draw.LineStyle{Color: color.Black, Width: vg.Points(1), Dashes: dashed})
	// Rejections are drawn downwards, so that they never hide goodput (at a
	// 2× surge both are near capacity).
	for _, sr := range ss {
		var good, rej plotter.XYs
		anyRej := false
		for _, pt := range sr.r.Series {
			x := pt.T.Seconds()
			good = append(good, plotter.XY{X: x, Y: pt.Goodput})
			rej = append(rej, plotter.XY{X: x, Y: -pt.Rejected})
			anyRej = anyRej || pt.Rejected > 0
			top = max(top, pt.Goodput)
			bottom = max(bottom, pt.Rejected)
		}
		addLine(p, good, draw.LineStyle{Color: sr.color, Width: vg.Points(1.4)})
		if anyRej {
			addLine(p, rej, draw.LineStyle{Color: sr.color, Width: vg.Points(1.6), Dashes: dotted})
		}
	}
	p.Add(hline{0, draw.LineStyle{Color: color.Black, Width: vg.Points(0.8)}})
	top = max(top, ss[0].r.CapacityRPS)
	p.Y.Min, p.Y.Max = -max(bottom, 0.1*top)*1.1, top*1.1
	p.Add(corner{"goodput, offered", true}, corner{"rejections", false})
	return p
}

// successWindow is the span over which prioPanel pools an interval with its
// neighbours: a priority with a tenth of the traffic has only a few dozen
// attempts per 100 ms interval.
const successWindow = time.Second

// prioPanel: per policy (colour) and priority (line style), the success
// of the priority's attempts: goodput ÷ attempts over a centred window of
// successWindow, in percent.
func prioPanel(s sim.Scenario, ss []series, prios []int) *plot.Plot {
	iv := seriesInterval(s, ss[0].r)
	w := max(1, int(successWindow/iv))
	p := newPanel(s, fmt.Sprintf("success by priority: goodput ÷ attempts (retries included), %s windows; "+
		"priorities by line style", fmtSeconds(time.Duration(w)*iv)), "success %")
	for _, sr := range ss {
		for _, q := range prios {
			addLine(p, prioSuccess(sr.r.Series, q, w), prioStyle(q, sr.color))
		}
	}
	p.Y.Min, p.Y.Max = 0, 105
	return p
}

// prioSuccess is priority q's success in percent at each point of pts:
// goodput ÷ attempts summed over the w points around it (from i−w/2, cut
// at the ends). Points without attempts in their window are left out.
func prioSuccess(pts []sim.Point, q, w int) plotter.XYs {
	var xy plotter.XYs
	for i, pt := range pts {
		lo, hi := max(0, i-w/2), min(len(pts), i-w/2+w)
		var good, off float64
		for _, o := range pts[lo:hi] {
			good += o.Prio[q].Goodput
			off += o.Prio[q].Offered
		}
		if off > 0 {
			// Goodput lags the attempts it answers: clip the overshoot of
			// a window with more completions than attempts.
			xy = append(xy, plotter.XY{X: pt.T.Seconds(), Y: min(100*good/off, 100)})
		}
	}
	return xy
}

// capacitySteps is the server's capacity over time: nominal, divided by the
// service factor of the server changes in force.
func capacitySteps(s sim.Scenario, nominal float64) plotter.XYs {
	xy := plotter.XYs{{X: 0, Y: nominal}}
	cur := nominal
	for _, c := range s.Server.Changes {
		next := nominal / c.ServiceFactor
		if next == cur {
			continue
		}
		x := c.At.Seconds()
		xy = append(xy, plotter.XY{X: x, Y: cur}, plotter.XY{X: x, Y: next})
		cur = next
	}
	return append(xy, plotter.XY{X: s.Duration.Seconds(), Y: cur})
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

// corner labels the top (or bottom) right corner of a panel.
type corner struct {
	text string
	top  bool
}

func (k corner) Plot(c draw.Canvas, _ *plot.Plot) {
	st := textStyle(9)
	st.Color = color.Gray{Y: 40}
	st.XAlign = draw.XRight
	pt := vg.Point{X: c.Max.X - vg.Points(4), Y: c.Min.Y + vg.Points(4)}
	st.YAlign = draw.YBottom
	if k.top {
		pt.Y = c.Max.Y - vg.Points(4)
		st.YAlign = draw.YTop
	}
	// A white backing keeps the label legible over the reference lines.
	w, h := st.Width(k.text)+vg.Points(4), st.Height(k.text)+vg.Points(2)
	y0 := pt.Y - vg.Points(1)
	if k.top {
		y0 = pt.Y - h + vg.Points(1)
	}
	x0 := pt.X - w + vg.Points(2)
	c.FillPolygon(color.White, []vg.Point{{X: x0, Y: y0}, {X: x0 + w, Y: y0}, {X: x0 + w, Y: y0 + h}, {X: x0, Y: y0 + h}})
	c.FillText(st, pt, k.text)
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

// eventLines draws a dotted vertical line at each event, labelled when
// label is set.
type eventLines struct {
	evs   []event
	label bool
}

func (e eventLines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	ls := draw.LineStyle{Color: color.Gray{Y: 60}, Width: vg.Points(1), Dashes: dotted}
	st := textStyle(9)
	st.YAlign = draw.YTop
	st.Color = color.Gray{Y: 40}
	for _, ev := range e.evs {
		x := trX(ev.at.Seconds())
		c.StrokeLine2(ls, x, c.Min.Y, x, c.Max.Y)
		if e.label {
			lx := x + vg.Points(3)
			if w := st.Width(ev.short); lx+w > c.Max.X {
				st.XAlign = draw.XRight
				lx = x - vg.Points(3)
			} else {
				st.XAlign = draw.XLeft
			}
			c.FillText(st, vg.Point{X: lx, Y: c.Max.Y - vg.Points(3)}, ev.short)
		}
	}
}
