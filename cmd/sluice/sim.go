package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/article"
)

// runSim is `sluice sim`: every selected scenario under every selected
// policy, in parallel, printed in a fixed order.
func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenarios := fs.String("scenario", "", "comma-separated scenarios to run (default: all)")
	policies := fs.String("policy", "", "comma-separated policies to run (default: all)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same results")
	seeds := fs.Int("seeds", 1, "run seeds seed … seed+N−1 and print each pair's pass count, median and worst")
	list := fs.Bool("list", false, "list the scenarios and policies and exit")
	asJSON := fs.Bool("json", false, "print JSON Lines, one object per scenario × policy")
	out := fs.String("out", "", "also write report.md and a figure per scenario (SVG and PNG) into this directory")
	explain := fs.String("explain", "", "run one scenario under every policy and print each of its targets in words against each policy")
	targets := fs.Bool("targets", false, "print every scenario's targets in words and exit")
	fs.Usage = func() { fmt.Fprint(fs.Output(), simUsage); fs.PrintDefaults() }
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout) // asked for: the usage is the output
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice sim: unexpected argument %q (flags come before nothing else; see sluice sim -h)\n", fs.Arg(0))
		return 2
	}
	allSc, allPol := sim.Scenarios(), append(sim.BuiltinPolicies(), sim.ExtraPolicies()...)
	if *targets {
		printTargets(stdout, allSc)
		return 0
	}
	if *list {
		printList(stdout, allSc, allPol)
		return 0
	}
	scs, pols := allSc, sim.BuiltinPolicies()
	seedScs := article.Scenarios() // seed-* scenarios: seeds.go
	var err error
	if *explain != "" {
		if *scenarios != "" {
			fmt.Fprintln(stderr, "sluice sim: -explain names its scenario; drop -scenario")
			return 2
		}
		*scenarios = *explain
	}
	if *scenarios != "" {
		names := strings.Split(*scenarios, ",")
		if names, seedScs, err = splitSeedScenarios(names); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if scs, err = sim.FindScenarios(allSc, names); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *policies != "" {
		if pols, err = sim.FindPolicies(allPol, strings.Split(*policies, ",")); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}

	if *seeds < 1 {
		fmt.Fprintln(stderr, "sluice sim: -seeds must be at least 1")
		return 2
	}
	if len(scs) == 0 { // only seed-* scenarios: seeds.go
		if *out != "" {
			fmt.Fprintln(stderr, "sluice sim: -out reports the policy scenarios; there is none to report")
		}
		return runSeedScenarios(stdout, stderr, seedScs, *seed, *seeds, *asJSON, false)
	}
	g := runGrid(stderr, scs, pols, *seed, *seeds)
	var sh *sim.Grid // with the default policies, the priority shedders on the scenarios with priorities
	if shScs, shPols := sim.PriorityShedders(scs); *policies == "" && len(shScs) > 0 {
		sh = runGrid(stderr, shScs, shPols, *seed, *seeds)
	}

	code := 0
	switch {
	case *asJSON:
		for k := range *seeds {
			code = max(code, printJSON(stdout, stderr, g, k))
			if sh != nil {
				code = max(code, printJSON(stdout, stderr, sh, k))
			}
		}
	case *seeds > 1:
		code = printSeeds(stdout, g)
		if sh != nil {
			fmt.Fprintln(stdout, "\nThe priority shedders on the scenarios with priorities:")
			code = max(code, printSeeds(stdout, sh))
		}
	default:
		names, res, rerrs := byName(g, sh)
		if *explain != "" && len(scs) == 1 {
			code = printExplain(stdout, scs[0], names, res, rerrs)
		} else {
			code = printExplained(stdout, *seed, scs, names, res, rerrs)
		}
	}
	code = max(code, runSeedScenarios(stdout, stderr, seedScs, *seed, *seeds, *asJSON, true)) // seeds.go
	if *out != "" {
		// The shedders' runs join the report of their scenarios.
		if err := writeReport(*out, append([]string{"sim"}, args...), g.Join(sh)); err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 1
		}
	}
	return code
}

// printList is `sluice sim -list`: the scenarios (the seed-* ones
// included) and the policies, with their descriptions.
func printList(stdout io.Writer, scs []sim.Scenario, pols []sim.PolicySpec) {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION")
	for _, s := range scs {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
	}
	listSeedScenarios(tw) // seed-* scenarios: seeds.go
	fmt.Fprintln(tw, "\nPOLICY\tDESCRIPTION")
	for _, p := range pols {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Description)
	}
	tw.Flush()
}

// byName indexes the first seed's runs of the grids (nil ones skipped) by
// scenario and policy name, for the explained tables, and returns the
// policies' names in the order the grids have them.
func byName(grids ...*sim.Grid) (names []string, res map[[2]string]*sim.Result, errs map[[2]string]error) {
	res, errs = map[[2]string]*sim.Result{}, map[[2]string]error{}
	for _, g := range grids {
		if g == nil {
			continue
		}
		for j, p := range g.Policies {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
			for i, s := range g.Scenarios {
				res[[2]string{s.Name, p.Name}], errs[[2]string{s.Name, p.Name}] = g.Results[0][i][j], g.Errs[0][i][j]
			}
		}
	}
	return names, res, errs
}

// runGrid is sim.RunGrid with progress on stderr when it is a terminal and
// the runs take longer than a second.
func runGrid(stderr io.Writer, scs []sim.Scenario, pols []sim.PolicySpec, seed uint64, seeds int) *sim.Grid {
	tty := isTerminal(stderr) // progress rewrites one line: only on a terminal, never in a log
	start := time.Now()
	g := sim.RunGrid(scs, pols, seed, seeds, func(done, total int) {
		if el := time.Since(start); tty && el > time.Second {
			fmt.Fprintf(stderr, "\rsluice sim: %d/%d runs, %.0fs", done, total, el.Seconds())
		}
	})
	if tty && time.Since(start) > time.Second {
		fmt.Fprintln(stderr)
	}
	return g
}

const simUsage = `usage: sluice sim [flags]

Replays overload scenarios (a 5x surge, a capacity drop, a slow dependency,
retry storms, ...) in virtual time against the real limiter code and prints,
for each scenario, whether the recommended policy met every target and the
number that decided it, then every policy side by side and a legend.

examples:
  sluice sim                                   every scenario, default policies (~15 s)
  sluice sim -explain capacity-drop            one scenario: each target in words, each policy's value
  sluice sim -scenario step-5x -policy none,gradient -out out
                                               one scenario, two policies; report.md and figures in out/
  sluice sim -seeds 5                          five seeds: pass counts, median and worst
  sluice sim -json | jq .goodput_ratio         machine-readable results, one object per run
  sluice sim -list                             the scenarios and policies
  sluice sim -targets                          every scenario's targets in words

flags:
`

// printJSON prints the results of seed g.Seed+k as JSON Lines, one object
// per scenario × policy, and each error on stderr.
func printJSON(stdout, stderr io.Writer, g *sim.Grid, k int) int {
	code := 0
	enc := json.NewEncoder(stdout)
	for i := range g.Scenarios {
		for j := range g.Policies {
			if err := g.Errs[k][i][j]; err != nil {
				fmt.Fprintln(stderr, err)
				code = 1
				continue
			}
			if err := enc.Encode(g.Results[k][i][j]); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
		}
	}
	return code
}

// printSeeds prints, per scenario × policy, how many seeds passed every
// target, and the median and worst of the headline figures across seeds
// (worst: lowest goodput, highest p99 and rejections).
func printSeeds(stdout io.Writer, g *sim.Grid) int {
	seed, scs, pols, all, allErrs := g.Seed, g.Scenarios, g.Policies, g.Results, g.Errs
	code := 0
	var tw alignedRows
	tw.add("scenario", "policy", "passed", "goodput %", "after the change %", "p99 ms", "refused %")
	for i, s := range scs {
		for j, p := range pols {
			var rs []*sim.Result
			for k := range all {
				if allErrs[k][i][j] != nil {
					code = 1
					continue
				}
				rs = append(rs, all[k][i][j])
			}
			if len(rs) == 0 {
				tw.add(s.Name, p.Name, "error")
				continue
			}
			passed := 0
			missed := map[string]int{}
			var order []string
			for _, r := range rs {
				if r.Pass {
					passed++
				}
				for k, t := range r.Targets {
					if !t.Pass && k < len(s.Targets) {
						f := figureOf(s.Targets[k].Metric).short + " " + bound(s, r.SLOms, s.Targets[k])
						if missed[f] == 0 {
							order = append(order, f)
						}
						missed[f]++
					}
				}
			}
			var miss []string
			for _, t := range order {
				miss = append(miss, fmt.Sprintf("%s (%d)", t, missed[t]))
			}
			stat := func(f func(*sim.Result) float64, worstIsMax bool) (med, worst float64) {
				xs := make([]float64, len(rs))
				for k, r := range rs {
					xs[k] = f(r)
				}
				slices.Sort(xs)
				med = xs[len(xs)/2]
				if len(xs)%2 == 0 {
					med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
				}
				worst = xs[0]
				if worstIsMax {
					worst = xs[len(xs)-1]
				}
				return med, worst
			}
			gm, gw := stat(func(r *sim.Result) float64 { return 100 * r.GoodputRatio }, false)
			pm, pw := stat(func(r *sim.Result) float64 { return 100 * r.PhaseGoodput }, false)
			lm, lw := stat(func(r *sim.Result) float64 { return r.P99ms }, true)
			rm, rw := stat(func(r *sim.Result) float64 { return 100 * r.RejectRatio }, true)
			phase := "-"
			if s.Change > 0 {
				phase = fmt.Sprintf("%.1f / %.1f", pm, pw)
			}
			tw.add(s.Name, p.Name, fmt.Sprintf("%d/%d", passed, len(rs)), fmt.Sprintf("%.1f / %.1f", gm, gw), phase,
				fmt.Sprintf("%.1f / %.1f", lm, lw), fmt.Sprintf("%.2f / %.2f", rm, rw))
			if len(miss) > 0 {
				tw.note(wrapWords("missed (seeds): "+strings.Join(miss, "; "), 112))
			}
		}
	}
	tw.write(stdout)
	fmt.Fprintf(stdout, "\nseeds %d…%d; median / worst of the seeds (worst: least goodput, most p99 and refusals).\n", seed, seed+uint64(len(all))-1)
	fmt.Fprintln(stdout, "goodput: completions within the SLO, % of nominal capacity; after the change: during the surge, ramp or drop.")
	fmt.Fprintln(stdout, "The targets in words: sluice sim -explain SCENARIO.")
	return code
}

// alignedRows is a table whose columns are aligned across its rows, with
// notes (indented free text) between rows that do not widen any column.
type alignedRows struct {
	rows   [][]string // a note is one cell
	isNote []bool
}

func (t *alignedRows) add(cells ...string) {
	t.rows = append(t.rows, cells)
	t.isNote = append(t.isNote, false)
}

// note adds free text, indented, under the last row.
func (t *alignedRows) note(text string) {
	t.rows = append(t.rows, []string{text})
	t.isNote = append(t.isNote, true)
}

func (t *alignedRows) write(w io.Writer) {
	var width []int
	for i, r := range t.rows {
		if t.isNote[i] {
			continue
		}
		for j, c := range r {
			if j >= len(width) {
				width = append(width, 0)
			}
			width[j] = max(width[j], len([]rune(c)))
		}
	}
	for i, r := range t.rows {
		if t.isNote[i] {
			for _, l := range strings.Split(r[0], "\n") {
				fmt.Fprintln(w, "    "+l)
			}
			continue
		}
		var b strings.Builder
		for j, c := range r {
			b.WriteString(c)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[j]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
