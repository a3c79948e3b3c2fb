package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// A figure is how `sluice sim` names a target's metric in words: short for
// the tables, long for the legend, and how its values read.
type figure struct {
	short string
	long  string
	unit  unit
}

// unit says how a metric's values are printed.
type unit int

const (
	unitPlain     unit = iota // a number as it is
	unitShare                 // a ratio, printed as a percentage
	unitPoints                // a difference of ratios, printed in percentage points
	unitSLO                   // a multiple of the SLO, printed in ms
	unitIntervals             // control intervals, printed in seconds
	unitSeconds               // seconds
	unitLoad                  // a multiple of capacity
	unitCount                 // a count of requests
)

// figures names every metric a scenario's target may use (sim.Target.Metric).
var figures = map[string]figure{
	"goodput_ratio":          {"goodput", "completions within the SLO, as a share of the server's capacity", unitShare},
	"phase_goodput_ratio":    {"goodput after the change", "goodput from the change (surge, ramp, drop) to the next load change, share of capacity", unitShare},
	"served_ratio":           {"served of what could be", "goodput as a share of what the server could serve: min(offered, capacity)", unitShare},
	"throughput_ratio":       {"completed in time", "share of requests completed before the client's deadline", unitShare},
	"reject_ratio":           {"refused", "share of attempts the policy refused", unitShare},
	"late_reject_ratio":      {"refused after recovery", "share of attempts refused once the load is back to normal (a limit must let go)", unitShare},
	"p99_ms":                 {"p99", "99th percentile latency of admitted requests", unitPlain},
	"p99_over_slo":           {"p99", "99th percentile latency of admitted requests, against the latency objective (SLO)", unitSLO},
	"peak_p99_over_slo":      {"worst 100 ms p99", "the worst p99 of any 100 ms interval after the change, against the SLO", unitSLO},
	"settle_intervals":       {"time to settle", "from the change until p99 stays within the SLO and goodput within ±5% of its steady state", unitIntervals},
	"limit_cov":              {"limit's wobble", "coefficient of variation of the limit on the plateau (how much it wobbles)", unitPlain},
	"shed_start_load":        {"load when refusals began", "the load (× capacity) at which the policy began refusing: within ±5% of capacity", unitLoad},
	"limit_reach_s":          {"time to the new optimum", "from the capacity drop until the limit is within ±20% of the new optimum (the core count)", unitSeconds},
	"cap_hits":               {"memory-cap failures", "requests the server failed because its memory for requests in flight was full", unitCount},
	"loss_over_bound":        {"loss above the least", "share refused or late, above the least any policy must lose on these arrivals", unitPoints},
	"inversion_ratio":        {"priority inversions", "refusals within 10 ms of an admission of lower priority, as a share of attempts", unitShare},
	"jain":                   {"fairness across users", "Jain's index of the users' success ratios (1: every user served alike)", unitPlain},
	"retry_amplification":    {"attempts per request", "attempts sent per request, retries included (retry amplification)", unitPlain},
	"floor_error":            {"floor estimate's error", "relative error of the policy's estimate of the service's no-load latency", unitShare},
	"early_goodput_ratio":    {"goodput right after", "goodput in the first seconds after the incident, share of the capacity of the moment", unitShare},
	"early_p99_over_slo":     {"p99 right after", "p99 of successes in the first seconds after the incident, against the SLO", unitSLO},
	"incident_goodput_ratio": {"goodput in the incident", "goodput once the incident settled, as a share of the capacity of the moment", unitShare},
	"incident_p99_over_slo":  {"p99 in the incident", "p99 of successes once the incident settled, against the SLO", unitSLO},
	"incident_served_ratio":  {"served in the incident", "goodput once the incident settled, as a share of what could be served", unitShare},
}

// figureOf returns the words for metric; "p<k>_success" is priority k's
// success ratio.
func figureOf(metric string) figure {
	if f, ok := figures[metric]; ok {
		return f
	}
	var k int
	if n, _ := fmt.Sscanf(metric, "p%d_success", &k); n == 1 {
		return figure{fmt.Sprintf("P%d success", k), fmt.Sprintf("share of priority-%d requests (%s) served in time, retries included", k, prioName(k)), unitShare}
	}
	return figure{metric, metric, unitPlain}
}

func prioName(k int) string {
	names := []string{"critical plus", "critical", "sheddable plus", "sheddable"}
	if k >= 0 && k < len(names) {
		return names[k]
	}
	return "priority " + fmt.Sprint(k)
}

// format prints v, a value of metric in s's run, in its unit.
func (f figure) format(s sim.Scenario, slo float64, v float64) string {
	if math.IsInf(v, 1) {
		return "never"
	}
	if math.IsNaN(v) {
		return "n/a"
	}
	switch f.unit {
	case unitShare:
		return shareString(v)
	case unitPoints:
		return fmt.Sprintf("%+.1f points", 100*v)
	case unitSLO:
		if slo <= 0 { // not run: the SLO is the scenario's
			return fmt.Sprintf("%g× SLO", v)
		}
		return msString(v * slo)
	case unitIntervals:
		iv := s.Interval
		if iv == 0 {
			iv = 100 * time.Millisecond // the simulator's default
		}
		return fmt.Sprintf("%.1f s", v*iv.Seconds())
	case unitSeconds:
		return fmt.Sprintf("%.1f s", v)
	case unitLoad:
		return fmt.Sprintf("%.2f× capacity", v)
	case unitCount:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// shareString prints a ratio as a percentage with the digits that tell
// it from its bound: 99.97%, 0.039%, 45.7%.
func shareString(v float64) string {
	p := 100 * v
	switch a := math.Abs(p); {
	case a == 0 || a == 100:
		return fmt.Sprintf("%.0f%%", p)
	case a < 0.1:
		return fmt.Sprintf("%.3f%%", p)
	case a < 1 || a > 99 && a < 100:
		return fmt.Sprintf("%.2f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

// msString prints a latency in milliseconds, in seconds from 10 s on.
func msString(ms float64) string {
	if ms >= 10000 {
		return fmt.Sprintf("%.0f s", ms/1000)
	}
	if ms >= 100 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// bound prints the target's bound(s) in the metric's unit: "≥ 95%".
func bound(s sim.Scenario, slo float64, t sim.Target) string {
	f := figureOf(t.Metric)
	switch {
	case t.Min != nil && t.Max != nil:
		return f.format(s, slo, *t.Min) + " to " + f.format(s, slo, *t.Max)
	case t.Min != nil:
		return "≥ " + f.format(s, slo, *t.Min)
	case t.Max != nil:
		return "≤ " + f.format(s, slo, *t.Max)
	}
	return ""
}

// margin is how far v is inside the target (negative: outside), relative
// to the bound.
func margin(t sim.Target, v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	rel := func(d, b float64) float64 {
		if b == 0 {
			b = 1
		}
		return d / math.Abs(b)
	}
	m := math.Inf(1)
	if t.Min != nil {
		m = min(m, rel(v-*t.Min, *t.Min))
	}
	if t.Max != nil {
		m = min(m, rel(*t.Max-v, *t.Max))
	}
	if math.IsNaN(m) {
		return math.Inf(-1)
	}
	return m
}

// decider returns the index of the target that decided r's verdict: of the
// missed targets the one missed by most, else the one met by the least
// margin (-1 without targets).
func decider(s sim.Scenario, r *sim.Result) int {
	best, bestM := -1, math.Inf(1)
	// A target met at a bound of zero (none refused, no failures) is never
	// the closest call: it is considered only when no other target is.
	for round := range 2 {
		for i, tr := range r.Targets {
			if i >= len(s.Targets) || tr.NA || !r.Pass && tr.Pass {
				continue
			}
			if r.Pass && round == 0 && zeroBound(s.Targets[i]) {
				continue
			}
			if m := margin(s.Targets[i], tr.Value); best < 0 || m < bestM {
				best, bestM = i, m
			}
		}
		if best >= 0 {
			break
		}
	}
	return best
}

// zeroBound reports whether t's only bound is zero (none refused, no
// failures): its relative margin means nothing.
func zeroBound(t sim.Target) bool {
	return (t.Min == nil || *t.Min == 0) && (t.Max == nil || *t.Max == 0)
}

// verdict is "pass 5/5" or "FAIL 3/5": targets met of the scenario's.
func verdict(r *sim.Result) string {
	met, all := 0, 0
	for _, t := range r.Targets {
		all++
		if t.Pass {
			met++
		}
	}
	v := "pass"
	if !r.Pass {
		v = "FAIL"
	}
	return fmt.Sprintf("%s %d/%d", v, met, all)
}

// decidingText says in words which number decided r's verdict and against
// what: "p99 29.0 ms (needs ≤ 50 ms)".
func decidingText(s sim.Scenario, r *sim.Result) string {
	i := decider(s, r)
	if i < 0 {
		return ""
	}
	t, tr := s.Targets[i], r.Targets[i]
	f := figureOf(t.Metric)
	txt := fmt.Sprintf("%s %s (needs %s)", f.short, f.format(s, r.SLOms, tr.Value), bound(s, r.SLOms, t))
	if r.Pass {
		return "closest: " + txt
	}
	more := 0
	for _, x := range r.Targets {
		if !x.Pass {
			more++
		}
	}
	if more > 1 {
		txt += fmt.Sprintf(" and %d more", more-1)
	}
	return "missed: " + txt
}

// recommended names the policy sluice recommends for s among those run:
// the gradient gate, behind the priority shedder where s has priorities.
func recommended(s sim.Scenario, pols []string) []string {
	want := "gradient"
	if len(s.Classes) > 1 {
		want = "shed-gradient"
	}
	for _, p := range pols {
		if p == want {
			return []string{want}
		}
	}
	return pols // another selection: every policy run is featured
}

// printExplained prints the run in three parts, each within 120 columns:
// the recommended policy's verdict per scenario with the number that
// decided it, every policy side by side, and a legend of the targets.
func printExplained(out io.Writer, seed uint64, scs []sim.Scenario, polNames []string, res map[[2]string]*sim.Result, errs map[[2]string]error) int {
	code := 0
	w := &trimmed{w: out}
	defer w.flush()
	fmt.Fprintf(w, "The recommended policy on each scenario (seed %d):\n\n", seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tpolicy\tverdict\tthe number that decided it")
	for _, s := range scs {
		for _, p := range recommended(s, namesRun(s, polNames, res, errs)) {
			k := [2]string{s.Name, p}
			if err := errs[k]; err != nil {
				fmt.Fprintf(tw, "%s\t%s\terror\t%v\n", s.Name, p, err)
				code = 1
				continue
			}
			r := res[k]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, p, verdict(r), decidingText(s, r))
		}
	}
	tw.Flush()

	// The shedders sit under the gate they front, on a row of their own.
	var cols []string
	under := map[string]string{} // shed-gradient → gradient
	for _, p := range polNames {
		if g, ok := strings.CutPrefix(p, "shed-"); ok && slices.Contains(polNames, g) {
			under[p] = g
			continue
		}
		cols = append(cols, p)
	}
	fmt.Fprintf(w, "\nEvery policy: verdict, goodput (%% of capacity), p99 latency (SLO %s):\n\n", sloNote(scs, res))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "scenario")
	for _, p := range cols {
		fmt.Fprintf(tw, "\t%s", p)
	}
	fmt.Fprintln(tw)
	cell := func(k [2]string) string {
		switch r := res[k]; {
		case errs[k] != nil:
			code = 1
			return "error"
		case r == nil:
			return "·"
		default:
			v := "pass"
			if !r.Pass {
				v = "FAIL"
			}
			return fmt.Sprintf("%s %.0f%% %s", v, 100*r.GoodputRatio, shortMs(r.P99ms))
		}
	}
	for _, s := range scs {
		fmt.Fprint(tw, s.Name)
		for _, p := range cols {
			fmt.Fprint(tw, "\t"+cell([2]string{s.Name, p}))
		}
		fmt.Fprintln(tw)
		var shedRow []string
		for _, p := range cols {
			c := ""
			for sh, g := range under {
				if k := [2]string{s.Name, sh}; g == p && (res[k] != nil || errs[k] != nil) {
					c = cell(k)
				}
			}
			shedRow = append(shedRow, c)
		}
		if strings.Join(shedRow, "") != "" {
			fmt.Fprintln(tw, "  + shedder\t"+strings.Join(shedRow, "\t"))
		}
	}
	tw.Flush()
	if len(under) > 0 {
		fmt.Fprintln(w, "+ shedder: the priority shedder (shed) in front of the gate of that column.")
	}
	fmt.Fprintln(w)
	printLegend(w, scs, polNames)
	return code
}

// trimmed writes what it is given with the spaces at the ends of lines
// removed (tabwriter pads empty trailing cells), on flush.
type trimmed struct {
	w   io.Writer
	buf strings.Builder
}

func (t *trimmed) Write(p []byte) (int, error) { return t.buf.Write(p) }

func (t *trimmed) flush() {
	lines := strings.Split(t.buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	io.WriteString(t.w, strings.Join(lines, "\n"))
}

// namesRun returns the policies of pols that ran on s.
func namesRun(s sim.Scenario, pols []string, res map[[2]string]*sim.Result, errs map[[2]string]error) []string {
	var out []string
	for _, p := range pols {
		k := [2]string{s.Name, p}
		if res[k] != nil || errs[k] != nil {
			out = append(out, p)
		}
	}
	return out
}

// shortMs prints a latency compactly for the comparison's cells.
func shortMs(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.0fs", ms/1000)
	}
	return fmt.Sprintf("%.0fms", ms)
}

// sloNote names the scenarios' SLOs: "50 ms; dependency-spike 100 ms".
func sloNote(scs []sim.Scenario, res map[[2]string]*sim.Result) string {
	count := map[time.Duration]int{}
	for _, s := range scs {
		count[sloOf(s, res)]++
	}
	var common time.Duration
	for d, n := range count {
		if n > count[common] || n == count[common] && d < common {
			common = d
		}
	}
	parts := []string{durString(common)}
	for _, s := range scs {
		if d := sloOf(s, res); d != common {
			parts = append(parts, fmt.Sprintf("%s %s", s.Name, durString(d)))
		}
	}
	return strings.Join(parts, "; ")
}

// durString prints a latency objective in ms, to three digits.
func durString(d time.Duration) string {
	return fmt.Sprintf("%.3g ms", float64(d)/1e6)
}

// sloOf is the scenario's latency objective, as its runs in res report it.
func sloOf(s sim.Scenario, res map[[2]string]*sim.Result) time.Duration {
	if s.SLO > 0 {
		return s.SLO
	}
	for k, r := range res {
		if k[0] == s.Name && r != nil {
			return time.Duration(r.SLOms * 1e6)
		}
	}
	return 0
}

// printLegend names in words every target of scs, and the baselines.
func printLegend(w io.Writer, scs []sim.Scenario, pols []string) {
	fmt.Fprintln(w, "A run passes when it meets every target of its scenario (sluice sim -explain SCENARIO lists them):")
	seen := map[string]bool{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range scs {
		for _, t := range s.Targets {
			f := figureOf(t.Metric)
			if seen[f.short] {
				continue
			}
			seen[f.short] = true
			fmt.Fprintf(tw, "  %s\t%s\n", f.short, f.long)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "goodput: completions within the SLO, as a share of the server's nominal capacity, over the run.")
	var base []string
	for _, p := range pols {
		switch p {
		case "none":
			base = append(base, "none admits everything")
		case "static":
			base = append(base, "static is a fixed limit tuned for nominal load")
		case "aimd":
			base = append(base, "aimd is the classic additive-increase, multiplicative-decrease limit")
		}
	}
	if len(base) > 0 {
		fmt.Fprintln(w, wrapWords("Baselines, for comparison (they are expected to fail): "+strings.Join(base, "; ")+".", 120))
	}
}

// wrapWords breaks s into lines of at most width columns.
func wrapWords(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		l := len([]rune(word))
		if i > 0 {
			if n+1+l > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += l
	}
	return b.String()
}

// printExplain is `sluice sim -explain SCENARIO`: what the scenario does,
// each target in words, and every policy's value against each target.
func printExplain(w io.Writer, s sim.Scenario, polNames []string, res map[[2]string]*sim.Result, errs map[[2]string]error) int {
	code := 0
	fmt.Fprintf(w, "%s: %s\n", s.Name, wrapWords(s.Description, 110))
	fmt.Fprintf(w, "SLO %s; a run passes when it meets every target:\n\n", durString(sloOf(s, res)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "target\tneeds")
	for _, p := range polNames {
		fmt.Fprintf(tw, "\t%s", p)
	}
	fmt.Fprintln(tw)
	slo := float64(sloOf(s, res)) / 1e6
	for i, t := range s.Targets {
		f := figureOf(t.Metric)
		fmt.Fprintf(tw, "%s\t%s", f.short, bound(s, slo, t))
		for _, p := range polNames {
			k := [2]string{s.Name, p}
			r := res[k]
			switch {
			case errs[k] != nil:
				fmt.Fprint(tw, "\terror")
				code = 1
			case r == nil || i >= len(r.Targets):
				fmt.Fprint(tw, "\t·")
			default:
				mark := ""
				if !r.Targets[i].Pass {
					mark = " ✗"
				}
				fmt.Fprintf(tw, "\t%s%s", f.format(s, r.SLOms, r.Targets[i].Value), mark)
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "verdict\t")
	for _, p := range polNames {
		if r := res[[2]string{s.Name, p}]; r != nil {
			fmt.Fprintf(tw, "\t%s", verdict(r))
		} else {
			fmt.Fprint(tw, "\t·")
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintln(w, "\n✗: target missed. What each target means:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	seen := map[string]bool{}
	for _, t := range s.Targets {
		if f := figureOf(t.Metric); !seen[f.short] {
			seen[f.short] = true
			fmt.Fprintf(tw, "  %s\t%s\n", f.short, f.long)
		}
	}
	tw.Flush()
	return code
}

// printTargets is `sluice sim -targets`: every scenario and its targets in
// words, without running anything (latency targets as multiples of the
// scenario's SLO).
func printTargets(w io.Writer, scs []sim.Scenario) {
	for i, s := range scs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, wrapWords(s.Name+": "+s.Description, 120))
		for _, t := range s.Targets {
			f := figureOf(t.Metric)
			line := wrapWords(fmt.Sprintf("%s %s: %s", f.short, bound(s, 0, t), f.long), 116)
			fmt.Fprintln(w, "  "+strings.ReplaceAll(line, "\n", "\n    "))
		}
	}
}
