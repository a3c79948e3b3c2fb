package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/sim/article"
)

// The seed-* scenarios of `sluice sim` replay the rate-limiting article's
// simulations against the ratelimit package (article.Scenarios). They have
// no server and no policy, so they run apart from the policy scenarios and
// print their own table, one row per figure, after the main one.

const seedNote = `seed-* scenarios replay the rate-limiting article's simulations against the real ratelimit code in virtual time
(no server, no policy: -policy does not apply); article: the article's figure; "x of n": x admitted (or flipped) of n.`

// splitSeedScenarios separates the seed-* names from names and returns the
// other names and the named seed scenarios.
func splitSeedScenarios(names []string) ([]string, []article.Scenario, error) {
	var rest, seedNames []string
	for _, n := range names {
		if article.IsScenario(n) {
			seedNames = append(seedNames, n)
		} else {
			rest = append(rest, n)
		}
	}
	scs, err := article.Find(article.Scenarios(), seedNames)
	return rest, scs, err
}

// listSeedScenarios adds the seed scenarios to the -list table.
func listSeedScenarios(tw io.Writer) {
	for _, s := range article.Scenarios() {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
	}
}

// runSeedScenarios runs the seed scenarios for seeds seed … seed+seeds−1 and
// prints them: JSON Lines (one object per scenario × seed), the figures of
// one seed, or each figure's median and range over the seeds. after: a
// table has been printed before, leave a blank line.
func runSeedScenarios(stdout, stderr io.Writer, scs []article.Scenario, seed uint64, seeds int, asJSON, after bool) int {
	if len(scs) == 0 {
		return 0
	}
	code := 0
	all, errs := article.RunSeeds(scs, seed, seeds) // [scenario][seed], nil: error
	for _, err := range errs {
		fmt.Fprintln(stderr, err)
		code = 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for k := range seeds { // seed by seed, as the policy scenarios
			for _, rs := range all {
				if rs[k] == nil {
					continue
				}
				if err := enc.Encode(rs[k]); err != nil {
					fmt.Fprintln(stderr, err)
					return 1
				}
			}
		}
		return code
	}
	if after {
		fmt.Fprintln(stdout)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	if seeds == 1 {
		fmt.Fprintln(tw, "scenario\tfigure\tsluice\tarticle\ttarget\tverdict\t")
		for i, rs := range all {
			if rs[0] == nil {
				fmt.Fprintf(tw, "%s\terror\t\n", scs[i].Name)
				continue
			}
			for _, r := range rs {
				for _, f := range r.Figures {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, f.Metric, fmtFigure(f.Value, f.Of),
						dash(f.Article), dash(f.Target), seedVerdict(f))
				}
			}
		}
		tw.Flush()
		fmt.Fprintf(stdout, "\nseed %d; %s\n", seed, seedNote)
		return code
	}
	fmt.Fprintln(tw, "scenario\tfigure\tmedian\tmin\tmax\tarticle\ttarget\tpassed\t")
	for i, rs := range all {
		rs = slices.DeleteFunc(rs, func(r *article.Result) bool { return r == nil })
		if len(rs) == 0 {
			fmt.Fprintf(tw, "%s\terror\t\n", scs[i].Name)
			continue
		}
		for j, f := range rs[0].Figures {
			xs := make([]float64, len(rs))
			passed := 0
			for k, r := range rs {
				xs[k] = r.Figures[j].Value
				if r.Figures[j].Pass {
					passed++
				}
			}
			slices.Sort(xs)
			med := xs[len(xs)/2]
			if len(xs)%2 == 0 {
				med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
			}
			pass := "-"
			if f.Target != "" {
				pass = fmt.Sprintf("%d/%d", passed, len(rs))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", scs[i].Name, f.Metric,
				fmtFigure(med, 0), fmtFigure(xs[0], 0), fmtFigure(xs[len(xs)-1], 0), dash(f.Article), dash(f.Target), pass)
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nseeds %d…%d; %s\n", seed, seed+uint64(seeds)-1, seedNote)
	return code
}

// fmtFigure prints a count as an integer ("x of n" when of > 0) and
// anything else with two decimals.
func fmtFigure(v, of float64) string {
	s := fmt.Sprintf("%.2f", v)
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		s = fmt.Sprintf("%.0f", v)
	}
	if of > 0 {
		s += fmt.Sprintf(" of %.0f", of)
	}
	return s
}

func seedVerdict(f article.Figure) string {
	switch {
	case f.Target == "":
		return "-"
	case f.Pass:
		return "pass"
	}
	return "FAIL"
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
