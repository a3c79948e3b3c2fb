package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
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
	list := fs.Bool("list", false, "list the scenarios and policies and exit")
	asJSON := fs.Bool("json", false, "print JSON Lines, one object per scenario × policy")
	out := fs.String("out", "", "also write report.md and a figure per scenario (SVG and PNG) into this directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	allSc, allPol := sim.Scenarios(), sim.BuiltinPolicies()
	if *list {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION")
		for _, s := range allSc {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
		}
		fmt.Fprintln(tw, "\nPOLICY\tDESCRIPTION")
		for _, p := range allPol {
			fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Description)
		}
		tw.Flush()
		return 0
	}
	scs, pols := allSc, allPol
	var err error
	if *scenarios != "" {
		if scs, err = sim.FindScenarios(allSc, strings.Split(*scenarios, ",")); err != nil {
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

	type job struct{ i, j int }
	results := make([][]*sim.Result, len(scs))
	errs := make([][]error, len(scs))
	for i := range scs {
		results[i] = make([]*sim.Result, len(pols))
		errs[i] = make([]error, len(pols))
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, total := 0, len(scs)*len(pols)
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for jb := range jobs {
				r, err := sim.Run(scs[jb.i], pols[jb.j], *seed)
				mu.Lock()
				results[jb.i][jb.j], errs[jb.i][jb.j] = r, err
				done++
				if el := time.Since(start); el > time.Second {
					fmt.Fprintf(stderr, "\rsluice sim: %d/%d runs, %.0fs", done, total, el.Seconds())
				}
				mu.Unlock()
			}
		})
	}
	for i := range scs {
		for j := range pols {
			jobs <- job{i, j}
		}
	}
	close(jobs)
	wg.Wait()
	if time.Since(start) > time.Second {
		fmt.Fprintln(stderr)
	}

	code := 0
	if *asJSON {
		code = printJSON(stdout, stderr, scs, pols, results, errs)
	} else {
		code = printTable(stdout, *seed, scs, pols, results, errs)
	}
	if *out != "" {
		rs := &runSet{args: append([]string{"sim"}, args...), seed: *seed, scs: scs, pols: pols, results: results, errs: errs}
		if err := writeReport(*out, rs); err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 1
		}
	}
	return code
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
