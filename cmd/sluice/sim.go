package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/sim"
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	allSc, allPol := sim.Scenarios(), append(sim.BuiltinPolicies(), sim.ExtraPolicies()...)
	if *list {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION")
		for _, s := range allSc {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
		}
		listSeedScenarios(tw) // seed-* scenarios: seeds.go
		fmt.Fprintln(tw, "\nPOLICY\tDESCRIPTION")
		for _, p := range allPol {
			fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Description)
		}
		tw.Flush()
		return 0
	}
	scs, pols := allSc, sim.BuiltinPolicies()
	seedScs := sim.SeedScenarios() // seed-* scenarios: seeds.go
	var err error
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
	all, allErrs := runGrid(stderr, scs, pols, *seed, *seeds)
	results, errs := all[0], allErrs[0]
	// With the default policies, the priority shedders also run on the
	// scenarios with priorities: there the gates alone cannot meet the
	// per-priority targets, and the shedder is what a service would use
	// (on one priority it is the gate alone, figure for figure).
	var shScs []sim.Scenario
	var shPols []sim.PolicySpec
	if *policies == "" {
		for _, sc := range scs {
			if len(sc.Classes) > 1 {
				shScs = append(shScs, sc)
			}
		}
		if len(shScs) > 0 {
			shPols = sim.ExtraPolicies()
		}
	}
	var shAll [][][]*sim.Result
	var shErrs [][][]error
	if len(shScs) > 0 {
		shAll, shErrs = runGrid(stderr, shScs, shPols, *seed, *seeds)
	}

	code := 0
	switch {
	case *asJSON:
		for k := range all {
			code = max(code, printJSON(stdout, stderr, scs, pols, all[k], allErrs[k]))
			if len(shScs) > 0 {
				code = max(code, printJSON(stdout, stderr, shScs, shPols, shAll[k], shErrs[k]))
			}
		}
	case *seeds > 1:
		code = printSeeds(stdout, *seed, scs, pols, all, allErrs)
		if len(shScs) > 0 {
			fmt.Fprintln(stdout, "\nThe priority shedders on the scenarios with priorities:")
			code = max(code, printSeeds(stdout, *seed, shScs, shPols, shAll, shErrs))
		}
	default:
		code = printTable(stdout, *seed, scs, pols, results, errs)
		if len(shScs) > 0 {
			fmt.Fprintln(stdout, "\nThe priority shedders on the scenarios with priorities:")
			code = max(code, printTable(stdout, *seed, shScs, shPols, shAll[0], shErrs[0]))
		}
	}
	code = max(code, runSeedScenarios(stdout, stderr, seedScs, *seed, *seeds, *asJSON, true)) // seeds.go
	if *out != "" {
		rs := &runSet{args: append([]string{"sim"}, args...), seed: *seed, scs: scs, pols: pols, results: results, errs: errs}
		if err := writeReport(*out, rs); err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 1
		}
	}
	return code
}

// runGrid runs every scenario of scs under every policy of pols for seeds
// seed … seed+seeds−1, in parallel; all[k][i][j] is the result of seed+k,
// scenario i, policy j. Progress goes to stderr when a run takes longer
// than a second.
func runGrid(stderr io.Writer, scs []sim.Scenario, pols []sim.PolicySpec, seed uint64, seeds int) (all [][][]*sim.Result, allErrs [][][]error) {
	type job struct{ k, i, j int }
	all = make([][][]*sim.Result, seeds)
	allErrs = make([][][]error, seeds)
	for k := range all {
		all[k] = make([][]*sim.Result, len(scs))
		allErrs[k] = make([][]error, len(scs))
		for i := range scs {
			all[k][i] = make([]*sim.Result, len(pols))
			allErrs[k][i] = make([]error, len(pols))
		}
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, total := 0, seeds*len(scs)*len(pols)
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for jb := range jobs {
				r, err := sim.Run(scs[jb.i], pols[jb.j], seed+uint64(jb.k))
				mu.Lock()
				all[jb.k][jb.i][jb.j], allErrs[jb.k][jb.i][jb.j] = r, err
				done++
				if el := time.Since(start); el > time.Second {
					fmt.Fprintf(stderr, "\rsluice sim: %d/%d runs, %.0fs", done, total, el.Seconds())
				}
				mu.Unlock()
			}
		})
	}
	for k := range all {
		for i := range scs {
			for j := range pols {
				jobs <- job{k, i, j}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if time.Since(start) > time.Second {
		fmt.Fprintln(stderr)
	}
	return all, allErrs
}

func printJSON(stdout, stderr io.Writer, scs []sim.Scenario, pols []sim.PolicySpec, results [][]*sim.Result, errs [][]error) int {
	code := 0
	enc := json.NewEncoder(stdout)
	for i := range scs {
		for j := range pols {
			if errs[i][j] != nil {
				fmt.Fprintln(stderr, errs[i][j])
				code = 1
				continue
			}
			if err := enc.Encode(results[i][j]); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
		}
	}
	return code
}

func printTable(stdout io.Writer, seed uint64, scs []sim.Scenario, pols []sim.PolicySpec, results [][]*sim.Result, errs [][]error) int {
	code := 0
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(summaryHeader, "\t")+"\t")
	for i, s := range scs {
		for j, p := range pols {
			if errs[i][j] != nil {
				fmt.Fprintf(tw, "%s\t%s\terror: %v\t\n", s.Name, p.Name, errs[i][j])
				code = 1
				continue
			}
			fmt.Fprintln(tw, strings.Join(summaryCells(s, results[i][j]), "\t")+"\t")
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nseed %d; %s\n", seed, summaryNote)
	return code
}

// printSeeds prints, per scenario × policy, how many seeds passed every
// target, and the median and worst of the headline figures across seeds
// (worst: lowest goodput, highest p99 and rejections).
func printSeeds(stdout io.Writer, seed uint64, scs []sim.Scenario, pols []sim.PolicySpec, all [][][]*sim.Result, allErrs [][][]error) int {
	code := 0
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tpolicy\tpassed\tgoodput % med\tworst\tphase goodput % med\tworst\tp99 ms med\tworst\trejected % med\tworst\ttargets missed (seeds)\t")
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
				fmt.Fprintf(tw, "%s\t%s\terror\t\n", s.Name, p.Name)
				continue
			}
			passed := 0
			missed := map[string]int{}
			var order []string
			for _, r := range rs {
				if r.Pass {
					passed++
				}
				for _, t := range r.Targets {
					if !t.Pass {
						if missed[t.Target] == 0 {
							order = append(order, t.Target)
						}
						missed[t.Target]++
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
			phase := [2]string{"-", "-"}
			if s.Change > 0 {
				phase = [2]string{fmt.Sprintf("%.1f", pm), fmt.Sprintf("%.1f", pw)}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.1f\t%.1f\t%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%s\t\n",
				s.Name, p.Name, passed, len(rs), gm, gw, phase[0], phase[1], lm, lw, rm, rw, strings.Join(miss, "; "))
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nseeds %d…%d; %s\n", seed, seed+uint64(len(all))-1, summaryNote)
	return code
}
